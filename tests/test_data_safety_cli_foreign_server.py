"""Every client command with something on the port that is not our gateway (issue 22): Python's
``http.server`` answering HTML (501 to POST), and a server answering JSON without our ``/health``
shape. Each command says so in one line on stderr and exits non-zero: no traceback, no foreign
page printed as if it were an answer."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["search", "咖啡"],
    ["search", "coffee", "--conversations", "--scope", "main"],
    ["memories", "list"],
    ["memories", "show", "m_1"],
    ["memories", "edit", "m_1", "--content", "新的内容"],
    ["memories", "delete", "m_1"],
    ["memories", "forget", "前男友", "--yes"],
    ["scopes"],
    ["persona"],
    ["scenes"],
    ["stop"],
    ["stop", "--force", "--drain", "1"],
]


class _JsonHandler(BaseHTTPRequestHandler):
    """Another service: JSON for every path and method, nothing like our gateway's fields."""

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        body = json.dumps({"service": "something else", "status": "running"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer


class _HtmlHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module", params=["html", "json"])
def foreign(request, tmp_path_factory) -> Iterator[int]:
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_text("<!DOCTYPE HTML><html><body>hello 你好</body></html>")

    def html(*a):
        return _HtmlHandler(*a, directory=str(root))

    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), html if request.param == "html" else _JsonHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_a_client_command_says_it_is_not_our_gateway(foreign, tmp_path: Path, command):
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))
    }
    env["TDAI_DATA_DIR"] = str(tmp_path / "data")
    run = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *command, "--port", str(foreign)],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0, run.stdout
    assert "Traceback" not in run.stderr, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run.stderr
    assert "not a memory-tencentdb gateway" in lines[0], run.stderr
    assert f"127.0.0.1:{foreign}" in lines[0]
    for foreign_text in ("DOCTYPE", "<html", "something else"):
        assert foreign_text not in run.stdout + run.stderr

"""Helpers for the Hermes offload tests and bench: the switch, a faulty gateway, what was sent.

- ``switch_offload(home, on, **settings)``: ``scripts/install-hermes.sh --offload|--no-offload``
  on the test's Hermes home, then the offload settings written into memory_tencentdb.json,
  exactly where a user's ``hermes memory setup`` writes them.
- ``FaultProxy``: in front of the real gateway; ``GET`` (``/health``) is forwarded at once, a
  ``POST`` is delayed (``slow``) or answered 500 (``error``; only the paths given), so "the
  gateway is up but slow / broken" is reproducible without touching the gateway.
- ``resume_chat``: one ``hermes chat -Q -q`` run that resumes a session (``--resume <id>``).
- ``transcript``: the rows of Hermes's ``state.db`` for a session.
- request helpers: canvas messages, stubs, tool messages of the requests the fake LLM got.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.support.tool_agent import READ_TOOL, text_of

from .harness import REPO, HermesHome, clean_env, hermes_venv

INSTALL = REPO / "scripts" / "install-hermes.sh"
CANVAS_MARK = "<current_task_context"
HISTORY_MARK = "<history_task_context"
SESSION_RE = re.compile(r"session_id:\s*(\S+)")


# --- the switch ---------------------------------------------------------------------------


def switch_offload(home: HermesHome, on: bool, **settings: Any) -> subprocess.CompletedProcess:
    """Flip the offload switch the way a user does, then set the other offload keys."""
    env = clean_env()
    r = subprocess.run(
        [
            "bash",
            str(INSTALL),
            "--offload" if on else "--no-offload",
            "--hermes-home",
            str(home.root),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    if settings:
        path = home.root / "memory_tencentdb.json"
        data = json.loads(path.read_text("utf-8")) if path.exists() else {}
        data.update(settings)
        path.write_text(json.dumps(data, indent=2), "utf-8")
    return r


def provider_settings(home: HermesHome) -> dict[str, Any]:
    path = home.root / "memory_tencentdb.json"
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


# --- running Hermes -----------------------------------------------------------------------


def chat(
    home: HermesHome, query: str, resume: str | None = None, timeout: float = 240, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``hermes chat -Q -q QUERY [--resume ID]``; returns the run and its wall time."""
    cmd = [str(hermes_venv() / "bin" / "hermes"), "chat", "-Q", "-q", query]
    if resume:
        cmd += ["--resume", resume]
    t0 = time.monotonic()
    r = subprocess.run(
        cmd,
        env=home.env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(home.root),
    )
    return r, time.monotonic() - t0


def session_of(run: subprocess.CompletedProcess[str]) -> str:
    found = SESSION_RE.findall(run.stdout + run.stderr)
    assert found, run.stdout + run.stderr
    return found[-1]


def assert_clean(run: subprocess.CompletedProcess[str], reply: str) -> None:
    """The user saw the model's answer and no exception."""
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert reply in run.stdout, out[-4000:]
    assert "Traceback" not in out, out[-4000:]


# --- what Hermes stored -------------------------------------------------------------------


def transcript(home: HermesHome, session_id: str) -> list[dict[str, Any]]:
    """The session's rows in state.db (every row, active or compacted), in order."""
    con = sqlite3.connect(str(home.root / "state.db"))
    try:
        con.row_factory = sqlite3.Row
        rows = con.execute(
            "SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        ).fetchall()
        return [dict(r) for r in rows]
    finally:
        con.close()


# --- what the fake LLM received -----------------------------------------------------------


def canvas_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        m
        for m in request.get("messages") or []
        if m.get("role") == "user" and text_of(m.get("content")).lstrip().startswith(CANVAS_MARK)
    ]


REVIEW_PROMPT = "Review the conversation above"


def is_background_review(request: dict[str, Any]) -> bool:
    """Hermes's memory/skill review fork (agent/background_review.py): after a busy turn it
    replays the conversation with its own prompt, under the parent's session id."""
    users = [m for m in request.get("messages") or [] if m.get("role") == "user"]
    return bool(users) and text_of(users[-1].get("content")).lstrip().startswith(REVIEW_PROMPT)


def is_stub(text: str) -> bool:
    """A stub names the read tool and the tool call it stands for."""
    return READ_TOOL in text and "tool_call_id" in text


def tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


# --- a gateway that is slow or broken -----------------------------------------------------


class FaultProxy:
    """Forwards to the real gateway; ``mode`` = "pass" | "slow" | "error", changeable any time."""

    def __init__(
        self,
        target: str,
        mode: str = "pass",
        delay_s: float = 6.0,
        error_paths: tuple[str, ...] = ("/offload/",),
    ) -> None:
        self.target = target.rstrip("/")
        self.mode = mode
        self.delay_s = delay_s
        self.error_paths = error_paths
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status answered)
        self.arrivals: list[tuple[str, str]] = []
        self._http = httpx.Client(timeout=120, trust_env=False)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, data: bytes, ctype: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting: that is the point of "slow"

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                mode = proxy.mode
                proxy._arrived(method, self.path)
                if method == "POST" and mode == "error" and self.path.startswith(proxy.error_paths):
                    proxy._note(method, self.path, 500)
                    self._answer(500, b'{"error":"injected failure"}', "application/json")
                    return
                if method == "POST" and mode == "slow":
                    time.sleep(proxy.delay_s)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("content-type", "authorization")
                }
                try:
                    r = proxy._http.request(
                        method, proxy.target + self.path, content=body, headers=headers
                    )
                    status, data = r.status_code, r.content
                    ctype = r.headers.get("content-type", "application/json")
                except (httpx.HTTPError, RuntimeError):  # RuntimeError: the proxy was closed
                    status, data, ctype = 502, b'{"error":"upstream down"}', "application/json"
                proxy._note(method, self.path, status)
                self._answer(status, data, ctype)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _arrived(self, method: str, path: str) -> None:
        with self._lock:
            self.arrivals.append((method, path))

    def tried(self, prefix: str = "/offload/") -> list[str]:
        """POST paths that reached the proxy (answered or still waiting), in arrival order."""
        with self._lock:
            return [p for m, p in self.arrivals if m == "POST" and p.startswith(prefix)]

    def _note(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.seen.append((method, path, status))

    def posts(self, prefix: str = "/offload/") -> list[tuple[str, str, int]]:
        with self._lock:
            return [s for s in self.seen if s[0] == "POST" and s[1].startswith(prefix)]

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._http.close()

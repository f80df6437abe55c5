"""The operations' small commands through the real CLI: logs, stop, progress bars that show on a
terminal and stay quiet in a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import httpx

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess


def cli(env, *args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def on_a_terminal(env, *args) -> str:
    """Run with stderr on a pseudo-terminal (as in a shell); returns what the terminal showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a real size
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(60)
    os.close(leader)
    return out.decode("utf-8", "replace")


def test_logs_stop_and_progress(tmp_path, scope):
    data = tmp_path / "data"
    gw = GatewayProcess(data, env=KEYWORD_ONLY).start()
    try:
        with gw.client() as c:
            for text in ("用户喜欢喝乌龙茶", "The user is learning Portuguese"):
                r = c.post(
                    "/memories",
                    json={"content": text, "type": "persona", "session_key": "s", "scope": scope},
                )
                assert r.status_code == 201
        logs = cli(gw.env(), "logs", "-n", "50")
        assert logs.returncode == 0 and "listening on http://127.0.0.1" in logs.stdout, logs
        export = cli(gw.env(), "export", "-o", str(tmp_path / "m.jsonl"))
        assert export.returncode == 0
        assert export.stderr.strip() == "exported 2 memories and 0 messages"  # no bar in a pipe
        stop = cli(gw.env(), "stop", "--drain", "5")
        assert stop.returncode == 0 and "stopped" in stop.stdout, stop
        assert gw.proc.wait(10) == 0
    finally:
        gw.stop()
    try:
        httpx.get(gw.base_url + "/health", timeout=1)
        raise AssertionError("gateway still answers after stop")
    except httpx.HTTPError:
        pass
    assert cli(gw.env(), "stop").returncode == 1  # nothing to stop: says so
    shown = on_a_terminal(gw.env(), "reindex")
    assert "reindex" in shown and "100%" in shown, shown
    quiet = cli(gw.env(), "reindex")
    assert quiet.returncode == 0 and "%|" not in quiet.stderr
    shown = on_a_terminal(gw.env(), "import", str(tmp_path / "m.jsonl"))
    assert "import" in shown and "rows" in shown, shown


def test_purge_of_a_data_directory_that_does_not_exist_creates_nothing(tmp_path):
    missing = tmp_path / "typo" / "memory-tdai"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))}
    out = cli({**env, "TDAI_DATA_DIR": str(missing)}, "purge")
    assert out.returncode == 1 and "no memory.db" in out.stderr, (out.returncode, out.stderr)
    assert not missing.exists() and not missing.parent.exists()

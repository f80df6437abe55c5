"""Start the real gateway as a child process on a free port with its own data directory.

Tests talk to it only over HTTP, exactly as a host agent does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support import postgres


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# For a gateway whose test is about something else than meaning (offload, supervision, the
# wire): no embedding model, so none of its CPU goes to the background vector fill (~60% of a
# test gateway's busy time with the default models, bench/RESULTS.md "Session 21").
KEYWORD_ONLY = {"TDAI_EMBEDDING_PROVIDER": "none"}

STARTS = {"subprocess": 0}  # reported at the session's end (tests/conftest.py)


def gateway_token(env: dict[str, str], data_dir: Path) -> str | None:
    """The key a gateway demands: the one it was given in its env, else its key file (shared by
    the process and the in-process gateways)."""
    for name in ("TDAI_GATEWAY_API_KEY", "MEMORY_TENCENTDB_GATEWAY_API_KEY"):
        if env.get(name, "").strip():
            return env[name].strip()
    try:
        return (data_dir / "gateway.key").read_text("utf-8").strip() or None
    except OSError:
        return None


class GatewayProcess:
    """A running `memory-tencentdb serve` with helpers to stop, kill and restart it."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, port: int | None = None):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"gateway-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))
        }
        env.update(
            {
                "TDAI_DATA_DIR": str(self.data_dir),
                "TDAI_GATEWAY_HOST": "127.0.0.1",
                "TDAI_GATEWAY_PORT": str(self.port),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(postgres.gateway_env(self.data_dir, self.extra_env))
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 60.0, ready: bool = True) -> GatewayProcess:
        """Start and wait for /health (and, with ``ready``, for the models to have loaded)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        STARTS["subprocess"] += 1
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memory_tencentdb", "serve"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(self.data_dir.parent),
        )
        self.wait_healthy(timeout, ready=ready)
        return self

    def wait_healthy(self, timeout: float = 60.0, ready: bool = True) -> dict:
        """Wait until /health answers (and, with ``ready``, the embedder finished loading)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = httpx.get(self.base_url + "/health", timeout=2)
                if r.status_code == 200:
                    body = r.json()
                    if not ready or body.get("ready", True):
                        return body
            except httpx.HTTPError as e:
                last = e
            time.sleep(0.1)
        raise TimeoutError(f"gateway not healthy after {timeout}s ({last}):\n{self.log()}")

    def wait_embedded(self, timeout: float = 60.0) -> None:
        """Wait until the background embedder has caught up with everything written so far."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.wait_healthy(timeout)
            emb = body.get("embedding", {})
            if emb.get("state") in ("disabled", "unavailable"):
                return
            if emb.get("state") == "ready" and emb.get("idle", True):
                return
            time.sleep(0.05)
        raise TimeoutError("background embedding did not catch up")

    def log(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, timeout: float = 60.0) -> GatewayProcess:
        self.stop()
        return self.start(timeout)

    @property
    def token(self) -> str | None:
        return gateway_token(self.env(), self.data_dir)

    @property
    def headers(self) -> dict[str, str]:
        token = self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An HTTP client with this gateway's token (pass ``token=""`` for none)."""
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

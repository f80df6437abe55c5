"""`openclaw gateway run`, a long-lived OpenClaw, and turns sent to it by `openclaw agent`
without ``--local`` (issue 24): the bridge lives in that one Gateway process across turns. The
Gateway takes a while to accept clients, so a turn is retried while it starts.

A turn through a running Gateway costs ~2 CPU-s (the client ~1.1, the Gateway ~0.5-1.2) against
15-21 CPU-s for ``openclaw agent --local``, which loads OpenClaw afresh in every turn; the Gateway
itself costs ~20 CPU-s to start (measured one after the other on the CI machine, session 25).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

from tests.openclaw.harness import OpenClawHome
from tests.support.gateway import free_port

TOKEN = "test-token"


class OpenClawGateway:
    """`openclaw gateway run` on a free port, and turns sent to it by `openclaw agent`."""

    def __init__(self, home: OpenClawHome) -> None:
        self.home = home
        self.port = free_port()
        cfg = home.read_config()
        cfg["gateway"] = {"port": self.port}  # where `openclaw agent` (no --local) finds it
        home.write_config(cfg)
        self.env = {**home.env(), "OPENCLAW_GATEWAY_TOKEN": TOKEN}
        self.log_path = home.root / "openclaw-gateway.log"
        self.log = self.log_path.open("ab")
        self.last_seconds = 0.0
        self.proc = subprocess.Popen(
            [str(home.install.node), str(home.install.entry), "gateway", "run",
             "--allow-unconfigured", "--port", str(self.port), "--auth", "token",
             "--bind", "loopback"],
            env=self.env, cwd=str(home.root), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def wait_listening(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"openclaw gateway run exited: {self.logs()[-2000:]}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"openclaw gateway run did not listen in {timeout:.0f}s")

    def send(
        self,
        message: str,
        session: str,
        *,
        asked: Callable[[], bool] = lambda: False,
        attempts: int = 40,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        """One turn through the Gateway, retried while the Gateway does not take clients yet,
        never once ``asked()`` says the turn reached the model (a retry would play it twice).
        Returns the last ``openclaw agent`` run, whatever its exit code."""
        done = None
        for _ in range(attempts):
            t0 = time.monotonic()
            done = subprocess.run(
                [str(self.home.install.node), str(self.home.install.entry), "agent",
                 "--agent", "main", "--session-key", session, "--message", message, "--json"],
                env=self.env, cwd=str(self.home.root), capture_output=True, text=True,
                timeout=timeout, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            self.last_seconds = time.monotonic() - t0
            if done.returncode == 0 or asked():
                return done
            assert self.proc.poll() is None, f"openclaw gateway run exited: {self.logs()[-2000:]}"
            time.sleep(2)
        assert done is not None
        return done

    def turn(self, message: str, session: str, attempts: int = 40) -> float:
        """One turn that must succeed; returns the seconds of its last attempt."""
        done = self.send(message, session, attempts=attempts)
        assert done.returncode == 0, f"no turn through the OpenClaw Gateway: {done.stderr[-2000:]}"
        return self.last_seconds

    def logs(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text("utf-8", "replace")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()

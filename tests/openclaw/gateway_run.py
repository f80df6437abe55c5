"""`openclaw gateway run`, a long-lived OpenClaw, and turns sent to it by `openclaw agent`
without ``--local`` (issue 24): the bridge lives in that one Gateway process across turns. The
Gateway takes a while to accept clients, so a turn is retried while it starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

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
        self.log = (home.root / "openclaw-gateway.log").open("ab")
        self.proc = subprocess.Popen(
            [str(home.install.node), str(home.install.entry), "gateway", "run",
             "--allow-unconfigured", "--port", str(self.port), "--auth", "token",
             "--bind", "loopback"],
            env=self.env, cwd=str(home.root), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def turn(self, message: str, session: str, attempts: int = 40) -> float:
        """One turn through the Gateway; retried while it still starts. Returns seconds."""
        done = None
        for _ in range(attempts):
            t0 = time.monotonic()
            done = subprocess.run(
                [str(self.home.install.node), str(self.home.install.entry), "agent",
                 "--agent", "main", "--session-key", session, "--message", message, "--json"],
                env=self.env, cwd=str(self.home.root), capture_output=True, text=True,
                timeout=180, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if done.returncode == 0:
                return time.monotonic() - t0
            assert self.proc.poll() is None, "openclaw gateway run exited"
            time.sleep(2)
        raise AssertionError(f"no turn through the OpenClaw Gateway: {done.stderr[-2000:]}")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()

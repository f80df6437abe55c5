"""Hermes gateway mode (``hermes gateway run``), a long-lived Hermes, driven without a messaging
platform (issue 24): hermes-agent 0.19.0's ``api_server`` platform (``API_SERVER_ENABLED``) serves
an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1; each request is one turn of the
session named by ``X-Hermes-Session-Id``, run by the same Hermes process (our provider is loaded
once per session and lives with it). Hermes refuses an API key under 16 characters.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx

from tests.support.gateway import free_port

from .harness import HermesHome, hermes_venv

API_KEY = "api-server-key-0123456789abcdef"  # Hermes refuses keys under 16 characters


class HermesGateway:
    """``hermes gateway run`` with the api_server platform on a free loopback port."""

    def __init__(self, home: HermesHome, **env_overrides: str) -> None:
        self.port = free_port()
        env = home.env(
            **env_overrides,
            API_SERVER_ENABLED="true",
            API_SERVER_HOST="127.0.0.1",
            API_SERVER_PORT=str(self.port),
            API_SERVER_KEY=API_KEY,
        )
        self.log = (home.root / "hermes-gateway.log").open("ab")
        self.proc = subprocess.Popen(
            [str(hermes_venv() / "bin" / "hermes"), "gateway", "run"],
            env=env, cwd=str(home.root), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "hermes gateway run exited"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError("hermes gateway run never answered /health")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def turn(self, message: str, session: str, expect: str | None = "FAKE-REPLY") -> float:
        """One turn; returns its seconds. ``expect``: the model's reply the answer must carry."""
        t0 = time.monotonic()
        r = httpx.post(
            f"{self.url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {API_KEY}", "X-Hermes-Session-Id": session},
            json={"model": "hermes-agent", "messages": [{"role": "user", "content": message}]},
            timeout=180,
        )
        assert r.status_code == 200, r.text[-2000:]
        if expect is not None:
            assert r.json()["choices"][0]["message"]["content"] == expect, r.text[-2000:]
        return time.monotonic() - t0

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()

"""Test-side helpers for driving the real Hermes (in its own venv) against our provider.

Why here and not in the plugin folder: Hermes executes every top-level ``.py`` of a plugin
folder, so test code must never live there.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
# Another copy of the provider (say, the one before a fix, to see a test fail without it).
PLUGIN_DIR = Path(os.environ.get("HERMES_TEST_PLUGIN_DIR") or REPO / "hermes_plugin")
DRIVER = Path(__file__).with_name("driver.py")
PREFIX = "@@DRIVER@@ "


def cache_dir() -> Path:
    return Path(os.environ.get("TEST_CACHE") or Path.home() / ".cache" / "memory-tencentdb-test")


def hermes_venv() -> Path:
    return cache_dir() / "hermes-venv"


def clean_env() -> dict[str, str]:
    """The test process's environment without any memory-tencentdb or Hermes settings."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_", "HERMES_"))
    }


@dataclass
class HermesHome:
    """A throwaway HERMES_HOME with our provider symlinked in and a fake-LLM config."""

    root: Path
    llm_base_url: str
    data_dir: Path
    port: int
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, tmp: Path, llm_base_url: str, port: int, *, install: bool = True) -> HermesHome:
        root = tmp / "hermes-home"
        (root / "plugins").mkdir(parents=True)
        if install:
            (root / "plugins" / "memory_tencentdb").symlink_to(PLUGIN_DIR)
        provider = "memory_tencentdb" if install else ""
        (root / "config.yaml").write_text(
            "model:\n"
            "  provider: custom\n"
            "  default: fake-model\n"
            f'  base_url: "{llm_base_url}"\n'
            "  api_key: sk-fake\n"
            "  context_length: 128000\n"
            f'memory:\n  provider: "{provider}"\n'
            # Offline and quick: no security-scanner download, no toolchain probing.
            "security:\n  tirith_enabled: false\n"
            "agent:\n  environment_probe: false\n",
            "utf-8",
        )
        return cls(root, llm_base_url, tmp / "data", port)

    @property
    def log_dir(self) -> Path:
        return self.root / "logs" / "memory_tencentdb"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    def env(self, **overrides: str) -> dict[str, str]:
        env = clean_env()
        env.update(
            {
                "HERMES_HOME": str(self.root),
                "TDAI_DATA_DIR": str(self.data_dir),
                "MEMORY_TENCENTDB_GATEWAY_PORT": str(self.port),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def chat(
        self, query: str, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """One ``hermes chat -Q -q`` run, as a user would type it."""
        return subprocess.run(
            [str(hermes_venv() / "bin" / "hermes"), "chat", "-Q", "-q", query],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(self.root),
        )

    def headers(self) -> dict[str, str]:
        """What the provider sends: the key the zero-config gateway wrote into our data dir."""
        try:
            token = (self.data_dir / "gateway.key").read_text("utf-8").strip()
        except OSError:
            return {}
        return {"Authorization": f"Bearer {token}"} if token else {}

    def default_scope(self, profile: str = "default") -> str:
        """The zero-config scope the provider derives from this (non-standard) Hermes home."""
        from hermes_plugin.ownership import default_scope

        return default_scope(self.root, profile)

    def provider_log(self) -> str:
        try:
            return (self.log_dir / "provider.log").read_text("utf-8", "replace")
        except OSError:
            return ""

    def scope(self) -> str:
        """The scope the provider used, as it logged it."""
        found = re.findall(r"scope (\S+) gateway", self.provider_log())
        assert found, self.provider_log()
        return found[-1]

    def started_gateway_pids(self) -> list[int]:
        return [int(m) for m in re.findall(r"starting gateway pid (\d+)", self.provider_log())]

    def kill_started_gateways(self) -> None:
        """Test clean-up: whatever a failed test left behind."""
        for pid in self.started_gateway_pids():
            if pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def answers(base_url: str) -> bool:
    try:
        return httpx.get(base_url + "/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


class Driver:
    """A Hermes AIAgent in a subprocess, commanded one JSON line at a time (see driver.py)."""

    def __init__(self, home: HermesHome, **env: str) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [str(hermes_venv() / "bin" / "python"), str(DRIVER), home.llm_base_url],
            env=home.env(**env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=str(home.root),
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self._next(120)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith(PREFIX):
                self.lines.put(json.loads(line[len(PREFIX) :]))

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"driver gave no answer in {timeout}s:\n{''.join(self.output)[-4000:]}"
            ) from None

    def send(self, op: str, timeout: float = 90, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        return self._next(timeout)

    def turn(self, text: str, timeout: float = 90) -> dict[str, Any]:
        out = self.send("turn", timeout, text=text)
        assert out.get("ok"), out
        return out

    def exit(self, timeout: float = 60) -> dict[str, Any]:
        out = self.send("exit", timeout)
        self.proc.wait(timeout)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message of a chat request the fake LLM received."""
    for m in reversed(request.get("messages", [])):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return "\n".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
            return str(c or "")
    return ""


def main_requests(llm: Any) -> list[dict[str, Any]]:
    """Chat requests that carry tools: the agent's own turns, not auxiliary calls."""
    return [r for r in llm.chat_requests() if r.get("tools")]

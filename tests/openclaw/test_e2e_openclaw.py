"""End to end with the real OpenClaw 2026.9.x (Node 24), the scripted fake LLM and our gateway.

A throwaway OpenClaw home with the bridge installed by scripts/install-openclaw.sh, pointed at
our gateway, which holds a preference written in the agent's scope. One turn in a new session,
in which the model calls our memory tool (through Tool Search's `tool_call`) and then answers.

A gateway that is down (the turn answered, recall skipped, the turn kept in the spool, a typo
and a wrongly typed value in the bridge config only warned of) is the "down" home of
test_e2e_openclaw_offload.py: one `agent --local` turn less.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.openclaw.harness import (
    BRIDGE_DIR,
    BRIDGE_ID,
    REPO,
    OpenClawHome,
    OpenClawInstall,
    agent_output,
    require_openclaw,
)
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

PREFERENCE = "The user wants every answer written in French."
SESSION = "agent:main:e2e-new-session"


@dataclass
class Turn:
    home: OpenClawHome
    llm: FakeLLM
    done: subprocess.CompletedProcess[str]
    seconds: float


@dataclass
class Runs:
    gateway: GatewayProcess
    install: subprocess.CompletedProcess[str]
    up: Turn


def timed_agent(home: OpenClawHome, llm: FakeLLM, message: str, session: str) -> Turn:
    started = time.monotonic()
    done = home.agent(message, session, timeout=300)
    return Turn(home, llm, done, time.monotonic() - started)


@pytest.fixture(scope="session")  # outranks the package-scoped gateway, so it runs first
def openclaw_install() -> OpenClawInstall:
    return require_openclaw()  # before the gateway starts: a skip should cost nothing


@pytest.fixture(scope="module")
def runs(
    openclaw_install: OpenClawInstall,
    tmp_path_factory: pytest.TempPathFactory,
    bridge_gateway: GatewayProcess,
) -> Iterator[Runs]:
    install = openclaw_install
    root = tmp_path_factory.mktemp("openclaw-e2e")
    with FakeLLM(default_reply="OK.") as llm_up:
        up = OpenClawHome(install, root / "up", llm_up.base_url)
        with bridge_gateway.client() as client:
            client.post(
                "/memories",
                json={
                    "content": PREFERENCE,
                    "type": "persona",
                    "session_key": "agent:main:earlier",
                    "scope": "main",
                },
            ).raise_for_status()
        llm_up.push(
            {
                "tool_calls": [
                    {
                        "name": "tool_call",
                        "arguments": {
                            "id": "memory_tencentdb_memory_search",
                            "args": {"query": "answer language"},
                        },
                    }
                ]
            },
            "Je réponds en français.",
        )
        installed = subprocess.run(
            [
                "bash", str(REPO / "scripts" / "install-openclaw.sh"),
                "--port", str(bridge_gateway.port), "--data-dir", str(bridge_gateway.data_dir),
            ],
            env={**up.env(), "OPENCLAW": up.cli_command()},
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
        turn_up = timed_agent(up, llm_up, "Which language should you answer me in?", SESSION)
        yield Runs(bridge_gateway, installed, turn_up)


def test_install_script_linked_and_granted(runs: Runs) -> None:
    config = runs.up.home.read_config()
    entry = config["plugins"]["entries"][BRIDGE_ID]
    assert entry["enabled"] is True
    assert entry["hooks"]["allowConversationAccess"] is True
    assert entry["config"]["port"] == runs.gateway.port
    assert entry["config"]["dataDir"] == str(runs.gateway.data_dir)
    assert str(BRIDGE_DIR) in config["plugins"]["load"]["paths"]


def test_turn_succeeds(runs: Runs) -> None:
    done = runs.up.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Je réponds en français." in agent_output(done)
    assert "[memory-tencentdb]" not in done.stderr, "no bridge warnings with a healthy gateway"


def test_preference_reaches_the_llm_in_a_new_session(runs: Runs) -> None:
    first = runs.up.llm.chat_requests()[0]
    messages = json.dumps(first["messages"], ensure_ascii=False)
    assert PREFERENCE in messages
    assert "<relevant-memories>" in messages
    assert "memory_tencentdb_memory_search" in messages, "the tool guide reached the system prompt"
    # recall.placement "prepend" (the default): this turn's memories ride with the user's
    # message; the system prompt holds the stable part only (what a prompt cache can keep).
    by_role: dict[str, str] = {}
    for m in first["messages"]:
        by_role[m.get("role")] = by_role.get(m.get("role"), "") + json.dumps(m, ensure_ascii=False)
    assert "<relevant-memories>" in by_role.get("user", "")
    assert "<relevant-memories>" not in by_role.get("system", "") + by_role.get("developer", "")


def test_tool_turn_is_answered_and_captured(runs: Runs) -> None:
    requests = runs.up.llm.chat_requests()
    assert len(requests) >= 2
    tool_results = [m for m in requests[1]["messages"] if m.get("role") == "tool"]
    assert tool_results and PREFERENCE in json.dumps(tool_results, ensure_ascii=False), (
        "our search tool answered inside OpenClaw"
    )
    # Search is ranked: one query per message of the turn, results united by id.
    queries = [
        "Which language should you answer me in?",
        "tool_call memory_tencentdb_memory_search answer language",
        PREFERENCE,
        "Je réponds en français.",
    ]
    items: dict[str, dict] = {}
    with runs.gateway.client() as client:
        for query in queries:
            body = {"query": query, "session_key": SESSION, "scope": "main", "limit": 20}
            for item in client.post("/search/conversations", json=body).json()["items"]:
                items[item["id"]] = item
    found = list(items.values())
    roles = sorted(item["role"] for item in found)
    assert roles == ["assistant", "assistant", "tool", "user"], found
    by_role = {item["role"]: item["content"] for item in found}
    assert "Which language should you answer me in?" in by_role["user"]
    assert PREFERENCE in by_role["tool"]

"""``recall_placement: appendSystem`` in the real Hermes (0.19.0): this turn's memories reach the
model in the system message (our ``llm_request`` middleware), not in the user message; the
default (``prepend``) is test_hermes_e2e.py's session-B check (``<memory-context>`` in the user
message)."""

from __future__ import annotations

import sys

import pytest

from .harness import Driver, HermesHome, last_user_text, main_requests

pytestmark = pytest.mark.hermes


def test_append_system_puts_this_turns_memories_in_the_system_message(home: HermesHome, llm):
    drv = Driver(
        home,
        TDAI_EMBEDDING_PROVIDER="none",
        MEMORY_TENCENTDB_RECALL_PLACEMENT="appendSystem",
        # This interpreter's gateway (a worktree has no .venv of its own for the provider to find).
        MEMORY_TENCENTDB_GATEWAY_CMD=f"{sys.executable} -m memory_tencentdb serve",
    )
    try:
        assert drv.ready["state"]["active"], drv.ready
        llm.push(
            {
                "tool_calls": [
                    {
                        "name": "memory",
                        "arguments": {
                            "action": "add",
                            "target": "user",
                            "content": "User prefers jasmine tea over coffee",
                        },
                    }
                ]
            }
        )
        drv.turn("Remember: I like jasmine tea much more than coffee.")
        drv.send("flush")
        assert drv.send("new_session")["ok"]
        before = len(main_requests(llm))
        drv.turn("Tea or coffee this afternoon?")
        req = main_requests(llm)[before]
        system = "\n".join(
            str(m.get("content")) for m in req["messages"] if m.get("role") == "system"
        )
        assert "<relevant-memories>" in system and "jasmine tea" in system, (
            last_user_text(req)[-1500:] + home.provider_log()[-3000:]
        )
        assert "<relevant-memories>" not in last_user_text(req)
        assert "relevant-memories block at the end of this system prompt" in system
        assert drv.exit()["ok"]
    finally:
        drv.kill()

"""Hermes keeps working when memory cannot: no gateway, a broken gateway command, auto start off."""

from __future__ import annotations

import pytest

from .harness import HermesHome, last_user_text, main_requests

pytestmark = pytest.mark.hermes

OUR_TOOLS = {"memory_tencentdb_memory_search", "memory_tencentdb_conversation_search"}


def tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def test_gateway_not_startable_hermes_answers_normally(home: HermesHome, llm):
    # A crashing gateway command is covered without Hermes in test_provider.py.
    r = home.chat("hello there", MEMORY_TENCENTDB_GATEWAY_CMD="/nonexistent/memory-tencentdb serve")
    assert r.returncode == 0, r.stderr
    assert "FAKE-REPLY" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    reqs = main_requests(llm)
    assert reqs, "Hermes never called the LLM"
    # The provider was active (its tools were offered) but contributed no recall.
    assert tool_names(reqs[0]) >= OUR_TOOLS
    assert "<memory-context>" not in last_user_text(reqs[0])
    assert "did not become healthy" in home.provider_log() or "cannot start" in home.provider_log()


def test_auto_start_off_and_nothing_running_leaves_hermes_alone(home: HermesHome, llm):
    r = home.chat("hello there", MEMORY_TENCENTDB_AUTO_START="0")
    assert r.returncode == 0, r.stderr
    assert "FAKE-REPLY" in r.stdout
    reqs = main_requests(llm)
    assert reqs and not (OUR_TOOLS & tool_names(reqs[0]))  # provider not activated

"""``recall_placement`` in the Hermes provider, driven directly against a real gateway it starts.

prepend (default): this turn's memories are what prefetch returns (Hermes adds them to the user
message) and the system prompt holds the stable part only. appendSystem: prefetch returns none
of them and the ``llm_request`` middleware appends them to the system message of the turn's
calls; a turn that recalls nothing leaves the system message as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from hermes_plugin import recall_placement
from hermes_plugin.config import Settings, parse_value
from hermes_plugin.provider import MemoryTencentdbProvider
from tests.support.gateway import KEYWORD_ONLY, free_port

from .test_provider import GATEWAY_CMD, started

MARKER = "Kilimanjaro-7q"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("TDAI_", "MEMORY_TENCENTDB_", "HERMES_")):
            monkeypatch.delenv(key)
    for k, v in {
        "HERMES_HOME": str(tmp_path / "hermes-home"),
        "TDAI_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_TENCENTDB_GATEWAY_PORT": str(free_port()),
        "MEMORY_TENCENTDB_GATEWAY_CMD": GATEWAY_CMD,
        **KEYWORD_ONLY,  # keyword recall: the placement is under test
    }.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "hermes-home").mkdir()
    return tmp_path / "hermes-home"


def _remember(p: MemoryTencentdbProvider) -> None:
    assert p._gw is not None
    r = httpx.post(
        p._gw.settings.base_url + "/memories",
        json={
            "content": f"The user's coffee is always {MARKER} single origin.",
            "type": "persona",
            "scope": p._scope,
            "session_key": "seed",
        },
        headers={"Authorization": "Bearer " + p._gw.client._token()},
        timeout=30,
    )
    assert r.status_code == 201, r.text


def _request(p: MemoryTencentdbProvider) -> dict:
    return {
        "messages": [
            {"role": "system", "content": p.system_prompt_block()},
            {"role": "user", "content": f"Which coffee do I drink, {MARKER}?"},
        ]
    }


def test_prepend_keeps_memories_out_of_the_system_message(home: Path):
    p = started(MemoryTencentdbProvider(), "sess-prepend", home)
    try:
        _remember(p)
        assert MARKER in p.prefetch(f"Which coffee do I drink, {MARKER}?")
        assert MARKER not in p.system_prompt_block()
        out = recall_placement.on_llm_request(session_id="sess-prepend", request=_request(p))
        assert out is None
    finally:
        p.shutdown()


def test_append_system_moves_them_into_the_system_message(home: Path, monkeypatch):
    monkeypatch.setenv("MEMORY_TENCENTDB_RECALL_PLACEMENT", "appendSystem")
    monkeypatch.setattr(recall_placement, "install", lambda: True)  # no Hermes in this process
    p = started(MemoryTencentdbProvider(), "sess-system", home)
    try:
        _remember(p)
        system = p.system_prompt_block()
        assert MARKER not in p.prefetch(f"Which coffee do I drink, {MARKER}?")
        request = _request(p)
        out = recall_placement.on_llm_request(session_id="sess-system", request=request)
        assert out is not None
        sent = out["request"]["messages"]
        assert sent[0]["content"].startswith(system), "stable part first"
        assert MARKER in sent[0]["content"].removeprefix(system)
        assert sent[1] == request["messages"][1]
        assert MARKER not in request["messages"][0]["content"], "the host's request is not edited"
        # Another session's calls and a turn that recalls nothing get nothing.
        assert recall_placement.on_llm_request(session_id="other", request=request) is None
        p.prefetch("How do I reverse a linked list?")
        assert recall_placement.on_llm_request(session_id="sess-system", request=request) is None
    finally:
        p.shutdown()


def test_a_bad_placement_is_refused_at_setup_and_the_default_used(home: Path, monkeypatch):
    with pytest.raises(ValueError, match="prepend, appendSystem"):
        parse_value("recall_placement", "system")
    monkeypatch.setenv("MEMORY_TENCENTDB_RECALL_PLACEMENT", "system")
    assert Settings.load().recall_placement == "prepend"

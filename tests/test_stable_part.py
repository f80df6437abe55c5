"""The stable system part (``append_system_context``) changes only when the persona or the scene
navigation does: not with the turn's query, not when a scope gets its first memory. Hosts put it
in the system prompt, where any change costs the prompt cache (issue 23 item 5)."""

from __future__ import annotations

import re

_BLOCKS = re.compile(r"<(user-persona|scene-navigation)>.*?</\1>", re.S)
QUERIES = [
    "好",
    "How do I reverse a linked list?",
    "推荐一家重庆火锅",
    "What should I avoid eating?",
]


def _stable(gw, scope: str, query: str) -> str:
    with gw.client() as c:
        r = c.post("/recall", json={"query": query, "session_key": "s", "scope": scope})
    assert r.status_code == 200, r.text
    return r.json()["append_system_context"]


def test_outside_persona_and_scenes_the_stable_part_never_changes(app_gateway, scope: str):
    empty = {q: _stable(app_gateway, scope, q) for q in QUERIES}
    assert len(set(empty.values())) == 1, empty  # before anything is stored, whatever is asked
    (before,) = set(empty.values())
    assert "<memory-tools-guide>" in before
    with app_gateway.client() as c:
        r = c.post(
            "/memories",
            json={
                "content": "用户完全不能吃辣。",
                "type": "persona",
                "scope": scope,
                "session_key": "s",
            },
        )
        assert r.status_code == 201, r.text
    app_gateway.wait_embedded()
    after = {q: _stable(app_gateway, scope, q) for q in QUERIES}
    assert {_BLOCKS.sub("", s).strip() for s in after.values()} == {before.strip()}, after

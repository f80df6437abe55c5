"""Issue 23, cross-language recall: a memory in the other language than the message is measured by
one model only, so the fused ranking holds it below same-language memories it should beat.
``recall.OTHER_LANGUAGE_SLOTS`` of the five go to clear other-language matches (z >=
recall.OTHER_LANGUAGE_Z) in place of the lowest same-language ones. Through a real gateway, on
session 13's first blind set (tests/fixtures/blind/recall_issue23_session13.json: measured once,
a dev set since): one user's 130 memories, zh and en.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess

SET = Path(__file__).parent / "fixtures" / "blind" / "recall_issue23_session13.json"
SCOPE = "other-language"

# Each message's memory is in the other language and ranked below five same-language memories
# that pass the floor: the slots bring it in (the first one by a slot, the second with a slot
# given to another memory). Since session 14 the query adapter (text/query_adapter.py, trained
# on this set among the dev sets) ranks session 13's first example ("我老公在哪儿上班？") first,
# so it no longer needs a slot; these two still do.
RECOVERED = {
    "周五晚上全家出去吃饭，Marco能来不？": "Marco works night shifts from Thursday to Sunday",
    "Can Hannah book a client callback for me on Thursday at 9am?": "用户每周二和周四上午做手术",
}


@pytest.fixture(scope="module")
def profile(shared_gateway: GatewayProcess) -> GatewayProcess:
    data = json.loads(SET.read_text("utf-8"))
    with shared_gateway.client(timeout=60) as c:
        for m in data["memories"]:
            r = c.post(
                "/memories",
                json={"content": m["text"], "type": "episodic", "session_key": "s", "scope": SCOPE},
            )
            assert r.status_code == 201, r.text
    shared_gateway.wait_embedded(timeout=180)
    return shared_gateway


def _recall(gw: GatewayProcess, query: str) -> dict:
    with gw.client(timeout=60) as c:
        r = c.post("/recall", json={"query": query, "session_key": "t", "scope": SCOPE})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("query", list(RECOVERED))
def test_a_clear_match_in_the_other_language_gets_a_slot(profile: GatewayProcess, query: str):
    answer = _recall(profile, query)
    got = [m["content"] for m in answer["memories"]]
    assert len(got) <= 5
    assert any(m.startswith(RECOVERED[query]) for m in got), got
    assert answer["relevance"]["other_language_slots"] >= 1


def test_the_hub_says_why_a_passing_memory_gave_its_slot_away(profile: GatewayProcess):
    query = next(iter(RECOVERED))
    with profile.client(timeout=60) as c:
        r = c.post("/hub/api/recall-explain", json={"query": query, "scope": SCOPE})
    assert r.status_code == 200, r.text
    candidates = r.json()["scopes"][0]["candidates"]
    injected = [x for x in candidates if x["verdict"] == "injected"]
    assert any(x["content"].startswith(RECOVERED[query]) for x in injected)
    # A same-language memory ranked above it passed the cut and was left out for the slot.
    gold_rank = next(x["rank"] for x in injected if x["content"].startswith(RECOVERED[query]))
    displaced = [x for x in candidates if x["rank"] < gold_rank and x["verdict"] == "over_budget"]
    assert displaced, [(x["rank"], x["verdict"]) for x in candidates[:gold_rank]]
    assert all("other language" in x["why"] for x in displaced)

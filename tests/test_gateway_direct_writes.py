"""Direct writes (``POST /memories``, issue 14 part 5): stored at once, embedded in the background.

The answer comes once the memory is durable and keyword-searchable; its vectors follow from the
background loop. A recall right after a hands-on write still finds it by meaning (it waits
briefly for those few vectors); after a bulk write the memory is keyword-searchable at once and
found by a zero-overlap paraphrase shortly after; a gateway killed mid-backlog loses nothing and
embeds the rest at its next start. zh and en throughout.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.gateway import GatewayProcess

# Zero-overlap paraphrase pairs (from tests/fixtures/recall_paraphrase_pairs.json).
PAIRS = {
    "zh": ("用户的妻子是一名儿科医生", "我老婆的职业是什么", "儿科医生"),
    "en": (
        "The user's husband is a firefighter.",
        "What does my spouse do for a living?",
        "firefighter",
    ),
}
FILLER = (
    "用户第{n}次提到周末想去爬山",
    "The user noted grocery item number {n} for the weekly list",
    "用户记录了第{n}本想读的小说",
    "The user logged workout session {n} at the gym",
)


def _write(c: httpx.Client, scope: str, content: str) -> str:
    r = c.post(
        "/memories",
        json={"content": content, "type": "persona", "scope": scope, "session_key": "s-direct"},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _search(c: httpx.Client, scope: str, query: str) -> list[str]:
    r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 5})
    assert r.status_code == 200, r.text
    return [it["id"] for it in r.json()["items"]]


def _fill(c: httpx.Client, scope: str, n: int) -> list[str]:
    return [_write(c, scope, FILLER[i % len(FILLER)].format(n=i)) for i in range(n)]


def _vectors(gw: GatewayProcess) -> dict[str, int]:
    return httpx.get(gw.base_url + "/health", timeout=10).json()["embedding"]["vectors"]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_write_then_ask_finds_it_by_meaning(shared_gateway: GatewayProcess, scope: str, lang):
    memory, paraphrase, _ = PAIRS[lang]
    with shared_gateway.client() as c:
        mid = _write(c, scope, memory)
        # No wait on our side: the query itself waits (briefly) for the new memory's vectors.
        assert mid in _search(c, scope, paraphrase)
        r = c.post("/recall", json={"query": paraphrase, "session_key": "s", "scope": scope})
        assert mid in [m["id"] for m in r.json()["memories"]], r.json()


def test_bulk_write_is_keyword_searchable_at_once_then_semantic(
    shared_gateway: GatewayProcess, scope: str
):
    with shared_gateway.client() as c:
        _fill(c, scope, 150)  # more than a query waits for: the backlog runs in the background
        ids = {lang: _write(c, scope, memory) for lang, (memory, _, _) in PAIRS.items()}
        for lang, (_, _, keyword) in PAIRS.items():
            assert ids[lang] in _search(c, scope, keyword), lang  # at once, by its words
        deadline = time.monotonic() + 300
        found: dict[str, bool] = {}
        while time.monotonic() < deadline:
            found = {lang: ids[lang] in _search(c, scope, q) for lang, (_, q, _) in PAIRS.items()}
            if all(found.values()):
                break
            time.sleep(0.5)
        assert all(found.values()), found


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_same_text_in_a_second_scope_is_found_there_by_meaning(
    shared_gateway: GatewayProcess, scope: str, lang
):
    """The vector of a text already stored elsewhere is reused; the row must still join its own
    scope's index (before, a repeated captured message never did until a restart)."""
    memory, paraphrase, _ = PAIRS[lang]
    with shared_gateway.client() as c:
        for sc in (scope + "-first", scope):
            r = c.post(
                "/capture",
                json={
                    "scope": sc,
                    "session_key": "s-dup",
                    "user_content": memory,
                    "assistant_content": "好的，记住了 / noted",
                },
            )
            assert r.status_code == 200, r.text
            shared_gateway.wait_embedded(120)
            _write(c, sc, memory)
        shared_gateway.wait_embedded(120)
        r = c.post("/search/conversations", json={"query": paraphrase, "scope": scope})
        assert memory in [it["content"] for it in r.json()["items"]], r.json()
        r = c.post("/search/memories", json={"query": paraphrase, "scope": scope, "limit": 5})
        assert memory in [it["content"] for it in r.json()["items"]], r.json()


def test_restart_mid_backlog_loses_nothing(start_gateway, scope: str):
    gw = start_gateway()
    n = 500
    with gw.client() as c:
        written = _fill(c, scope, n)
        target = _write(c, scope, PAIRS["en"][0])
    before = _vectors(gw)
    gw.kill()  # SIGKILL with the backlog still embedding
    assert min(before.values(), default=0) < n + 1, (
        f"backlog already done before the kill: {before}"
    )
    gw.start(timeout=120)
    gw.wait_embedded(timeout=300)
    after = _vectors(gw)
    assert len(after) == 2 and all(v >= n + 1 for v in after.values()), after
    with gw.client() as c:
        listed: list[str] = []
        cursor = None
        while True:
            params = {"scope": scope, "limit": 200, **({"cursor": cursor} if cursor else {})}
            page = c.get("/memories", params=params).json()
            listed += [m["id"] for m in page["items"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert set(listed) == {*written, target}
        assert target in _search(c, scope, PAIRS["en"][1])

"""Direct writes (``POST /memories``, issue 14 part 5): stored at once, embedded in the background.

The answer comes once the memory is durable and keyword-searchable; its vectors follow from the
background loop. A recall right after a hands-on write still finds it by meaning (it waits
briefly for those few vectors); after a bulk write the memory is keyword-searchable at once and
found by a zero-overlap paraphrase shortly after; a gateway killed mid-backlog loses nothing and
embeds the rest at its next start. zh and en throughout.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.support.fake_llm import FakeLLM
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


# -- Corrections (PATCH /memories/{id}) -------------------------------------------------------
#
# A correction answers once the new text is durable and keyword-searchable; the new vectors come
# from the background loop. Meanwhile the old vectors must not keep matching the old text: the
# store drops them with the change, so until the re-embedding lands the memory is found by its
# new words only. The embedding service here is the fake one (tests/support/fake_llm.py), held
# for the corrected texts so the gap lasts as long as the test needs; its vectors are a hash of
# the text, so a query of exactly the old text finds a stale vector at cosine 1.

CORRECTIONS = {
    "zh": ("最爱杭州龙井绿茶", "只喝福建浓香乌龙", "乌龙"),
    "en": ("Favourite tea: Hangzhou jasmine green", "Drinks only strong Fujian oolong", "oolong"),
}


class HeldEmbeddings:
    """The fake embedding service answers texts containing any of ``markers`` only once
    ``release`` is set (every other text at once)."""

    def __init__(self, fake: FakeLLM, markers: list[str]) -> None:
        self.markers = markers
        self.release = threading.Event()
        self.held = 0
        handler_cls = fake.server.RequestHandlerClass
        original = handler_cls._embeddings
        gate = self

        def held(handler, body):
            inputs = body.get("input") or []
            texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
            if any(m in t for m in gate.markers for t in texts) and not gate.release.is_set():
                gate.held += 1
                gate.release.wait(120)
            original(handler, body)

        handler_cls._embeddings = held

    def wait_held(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.held, "the gateway never asked to embed the corrected text"


def _fake_embedding_gateway(start_gateway, tmp_path, fake: FakeLLM, strategy: str = "hybrid"):
    config = tmp_path / f"gateway-{strategy}.json"
    config.write_text(
        json.dumps(
            {
                "memory": {
                    "embedding": {
                        "provider": "openai",
                        "baseUrl": fake.base_url,
                        "model": "fake-embed",
                        "dimensions": 32,
                        # Longer than any wait below: a PATCH embedding on the request would
                        # hold its answer for the whole time the service is held.
                        "timeoutMs": 90_000,
                    },
                    "recall": {"strategy": strategy},
                }
            }
        ),
        "utf-8",
    )
    return start_gateway(env={"TDAI_GATEWAY_CONFIG": str(config)})


def _patch(c: httpx.Client, scope: str, mid: str, content: str) -> dict:
    # The deadline is far below the embedding service's hold: the answer must not wait for it.
    r = c.patch(f"/memories/{mid}", json={"scope": scope, "content": content}, timeout=20)
    assert r.status_code == 200, r.text
    assert r.json()["content"] == content
    return r.json()


def _corrected_setup(c: httpx.Client, gw: GatewayProcess, scope: str) -> dict[str, str]:
    """Fillers (so a vector search has neighbours to rank) and the memories to correct, all
    embedded; each is the best match of its own exact text."""
    _fill(c, scope, 20)
    ids = {lang: _write(c, scope, old) for lang, (old, _, _) in CORRECTIONS.items()}
    gw.wait_embedded(120)
    for lang, (old, _, _) in CORRECTIONS.items():
        assert _found(c, scope, old)[:1] == [ids[lang]], lang
    return ids


def _found(c: httpx.Client, scope: str, query: str) -> list[str]:
    r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 5})
    assert r.status_code == 200, r.text
    return [it["id"] for it in r.json()["items"]]


def test_patch_answers_before_its_vectors_and_old_vectors_stop_matching(
    start_gateway, tmp_path, scope: str
):
    with FakeLLM() as fake:
        gw = _fake_embedding_gateway(start_gateway, tmp_path, fake)
        with gw.client() as c:
            ids = _corrected_setup(c, gw, scope)
            before = _vectors(gw)
            hold = HeldEmbeddings(fake, [new for _, new, _ in CORRECTIONS.values()])
            for lang, (_, new, _) in CORRECTIONS.items():
                _patch(c, scope, ids[lang], new)
            hold.wait_held()
            # The gap: the new text has no vector yet.
            assert _vectors(gw) == before
            for lang, (old, new, keyword) in CORRECTIONS.items():
                assert ids[lang] in _found(c, scope, keyword), (lang, "by its new words")
                assert ids[lang] not in _found(c, scope, old), (lang, "stale vector matched")
                shown = c.get(f"/memories/{ids[lang]}", params={"scope": scope}).json()
                assert shown["content"] == new
            hold.release.set()
            gw.wait_embedded(120)
            after = _vectors(gw)
            assert all(after[m] == before[m] + 2 for m in before), (before, after)
            for lang, (old, new, _) in CORRECTIONS.items():
                assert _found(c, scope, new)[0] == ids[lang], lang
                assert _found(c, scope, old)[:1] != [ids[lang]], lang


def test_patch_then_kill_before_reembedding_gets_new_vectors_after_restart(
    start_gateway, tmp_path, scope: str
):
    with FakeLLM() as fake:
        # Vector-only retrieval: what is found below is found by its vectors.
        gw = _fake_embedding_gateway(start_gateway, tmp_path, fake, strategy="embedding")
        with gw.client() as c:
            ids = _corrected_setup(c, gw, scope)
            before = _vectors(gw)
            hold = HeldEmbeddings(fake, [new for _, new, _ in CORRECTIONS.values()])
            for lang, (_, new, _) in CORRECTIONS.items():
                _patch(c, scope, ids[lang], new)
            hold.wait_held()
            for lang, (old, _, _) in CORRECTIONS.items():
                assert ids[lang] not in _found(c, scope, old), (lang, "stale vector matched")
        gw.kill()  # SIGKILL while the re-embedding is still held
        hold.release.set()
        gw.start(timeout=120)
        gw.wait_embedded(timeout=120)
        after = _vectors(gw)
        assert all(after[m] == before[m] + 2 for m in before), (before, after)
        with gw.client() as c:
            for lang, (old, new, _) in CORRECTIONS.items():
                assert _found(c, scope, new)[0] == ids[lang], (lang, "new vectors after restart")
                assert _found(c, scope, old)[:1] != [ids[lang]], lang
                shown = c.get(f"/memories/{ids[lang]}", params={"scope": scope}).json()
                assert shown["content"] == new
                assert [h["content"] for h in shown["trace"]["history"]] == [old], shown

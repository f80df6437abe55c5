"""Queries that arrive while the embedding models load (issue 8, item 1).

A one-shot session (``hermes chat -q``, cron) starts the gateway and sends its only recall at
once, while ``/health`` still says ``ready: false``. That recall must wait for the models
(within ``recall.timeoutMs``) and answer the semantic result, not keyword-only: the memories
below share no word with their queries, so keyword-only finds nothing.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.support.fake_llm import FakeLLM

# From tests/fixtures/recall_paraphrase_pairs.json: no content word in common.
PAIRS = [
    ("用户的妻子是一名儿科医生", "我老婆的职业是什么"),
    ("The user is allergic to penicillin", "Which antibiotics must I avoid taking?"),
]


WAITED = "for the embedding models to load"


def test_first_recall_and_search_wait_for_the_models(start_gateway):
    """The queries race the load, which takes ~0.4 s once the model cache is warm: when they
    reach the gateway after it (a loaded machine; seen once in a CI simulation, session 27),
    nothing was measured, and the gateway is started again, at most three times."""
    gw = start_gateway()
    scope = f"ready-{uuid.uuid4().hex[:8]}"
    with gw.client() as c:
        for memory, _ in PAIRS:
            body = {"content": memory, "type": "persona", "session_key": "s", "scope": scope}
            assert c.post("/memories", json=body).status_code == 201
    gw.wait_embedded()

    def recall(query: str) -> dict:
        with gw.client() as c:
            r = c.post("/recall", json={"query": query, "scope": scope, "session_key": "s2"})
        assert r.status_code == 200, r.text
        return r.json()

    def search(query: str) -> dict:
        with gw.client() as c:
            r = c.post("/search/memories", json={"query": query, "scope": scope})
        assert r.status_code == 200, r.text
        return r.json()

    def waits() -> int:
        return gw.log_path.read_text("utf-8", "replace").count(WAITED)

    for _attempt in range(3):
        gw.stop()
        before = waits()
        gw.start(ready=False)  # returns at the first /health answer
        if httpx.get(gw.base_url + "/health", timeout=5).json()["ready"]:
            continue  # the models loaded before the first query: nothing to measure
        with ThreadPoolExecutor(4) as pool:
            recalls = [pool.submit(recall, q) for _, q in PAIRS]
            searches = [pool.submit(search, q) for _, q in PAIRS]
            for (memory, _), rf, sf in zip(PAIRS, recalls, searches, strict=True):
                got = rf.result()
                assert got["strategy"] in ("hybrid", "embedding"), got  # the models ran
                assert got["memories"] and got["memories"][0]["content"] == memory
                assert memory in got["prepend_context"]
                found = sf.result()
                assert found["strategy"] in ("hybrid", "embedding")
                assert found["items"][0]["content"] == memory
        if waits() > before:
            return  # a query arrived during the load, waited, and got the semantic answer
    raise AssertionError(f"no query arrived while the models loaded, in 3 starts: {gw.log()}")


def test_models_slower_than_the_budget_answer_keyword_only_and_say_so(start_gateway):
    """A recall budget shorter than the model load: answered in time, keyword-only, logged.

    The load must be slower than the budget whatever the machine's load: the bundled models
    took 2-3 s in most runs and under 0.7 s in one CI run (answer "hybrid"), and with a 300 ms
    budget the keyword search beside their load missed its 90 ms (answer "timeout"). So the
    embedder here is the OpenAI-compatible one on the fake server, which answers the load's
    reference queries after 5 s while the gateway's CPU stays free for the keyword search."""
    with FakeLLM() as fake:
        gw = start_gateway(env={**fake.embedding_env(), "TDAI_RECALL_TIMEOUT_MS": "1000"})
        scope = f"ready-{uuid.uuid4().hex[:8]}"
        memory = "用户的妻子是一名儿科医生"
        with gw.client() as c:
            body = {"content": memory, "type": "persona", "session_key": "s", "scope": scope}
            assert c.post("/memories", json=body).status_code == 201
        gw.wait_embedded()
        gw.stop()
        fake.embedding_delay = 5.0
        gw.start(ready=False)
        assert httpx.get(gw.base_url + "/health", timeout=5).json()["ready"] is False
        started = time.monotonic()
        with gw.client() as c:
            r = c.post("/recall", json={"query": "儿科医生", "scope": scope, "session_key": "s"})
        took = time.monotonic() - started
        assert r.status_code == 200 and r.json()["strategy"] == "keyword", r.text
        assert memory in r.json()["context"], r.text  # keyword-only still finds its match
        assert took < 4.0, f"waited {took:.1f}s: the answer waited for the load"
        fake.embedding_delay = 0.0
        gw.wait_healthy(60)
        assert "still loading" in gw.log() and "keyword-only" in gw.log()

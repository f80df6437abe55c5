"""Fixtures for the pipeline tests: real gateways, with the scripted fake LLM or with none.

The pipeline makes one LLM call at a time and tags each with an ``X-Memory-Task`` header, so a
``TaskRouter`` can hand the scripted fake's replies out per task (extraction, arbitration,
scenes, persona) instead of in one global order.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import wait
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess

FAST = {
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MAX_INTERVAL_SECONDS": "3600",
    "TDAI_MEMORY__PERSONA__MAX_SCENES": "3",
    "TDAI_MEMORY__PERSONA__TRIGGER_EVERY_N": "3",
    "TDAI_MEMORY__PERSONA__BACKUP_COUNT": "2",
    "TDAI_MEMORY__PERSONA__SCENE_BACKUP_COUNT": "3",
}

DEFAULTS = {
    "l1-extraction": "[]",
    "l1-dedup": "[]",
    "l2-scenes": '{"actions": [], "persona_update": null}',
    "l3-persona": '{"persona": "# User profile\\n- (default test persona)"}',
}


class TaskRouter:
    """Replies per task. A reply is what ``FakeLLM.push`` takes, or ``callable(request)``."""

    def __init__(self, fake: FakeLLM) -> None:
        self.fake = fake
        self.queues: dict[str, deque[Any]] = defaultdict(deque)
        self.served: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        fake.next_reply = self.next_reply  # type: ignore[method-assign]

    def push(self, task: str, *replies: Any) -> None:
        with self.lock:
            self.queues[task].extend(replies)

    def pending(self, task: str) -> int:
        with self.lock:
            return len(self.queues[task])

    def clear(self) -> None:
        with self.lock:
            self.queues.clear()

    def next_reply(self) -> dict[str, Any]:
        with self.fake._lock:
            request = self.fake.requests[-1] if self.fake.requests else {}
        task = (request.get("_headers") or {}).get("x-memory-task", "")
        with self.lock:
            queue = self.queues[task]
            reply = queue.popleft() if queue else DEFAULTS.get(task, "OK")
            self.served[task] += 1
        if callable(reply):
            reply = reply(request)
        return {"content": reply} if isinstance(reply, str) else reply

    def requests(self, task: str) -> list[dict[str, Any]]:
        with self.fake._lock:
            return [
                r
                for r in self.fake.requests
                if (r.get("_headers") or {}).get("x-memory-task") == task
            ]


class LLMGateway:
    def __init__(self, gw: GatewayProcess, fake: FakeLLM, router: TaskRouter) -> None:
        self.gw, self.fake, self.router = gw, fake, router


def llm_env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {"TDAI_LLM_BASE_URL": fake.base_url, "TDAI_LLM_API_KEY": "x", **FAST, **extra}


@pytest.fixture(scope="session")
def _shared_gateways(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LLMGateway, GatewayProcess]]:
    """Both shared gateways, started side by side (loading the embedding model takes a while)."""
    fake = FakeLLM().start()
    router = TaskRouter(fake)
    llm_gw = GatewayProcess(tmp_path_factory.mktemp("pipeline-llm") / "data", env=llm_env(fake))
    rules_gw = GatewayProcess(tmp_path_factory.mktemp("pipeline-rules") / "data", env=dict(FAST))
    errors: list[BaseException] = []

    def boot(gw: GatewayProcess) -> None:
        try:
            gw.start()
            gw.wait_embedded()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=boot, args=(g,)) for g in (llm_gw, rules_gw)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if errors:
            raise errors[0]
        yield LLMGateway(llm_gw, fake, router), rules_gw
    finally:
        llm_gw.stop()
        rules_gw.stop()
        fake.stop()


@pytest.fixture(scope="session")
def llm_gateway(_shared_gateways: tuple[LLMGateway, GatewayProcess]) -> LLMGateway:
    """A gateway with the fake LLM and the bundled embedding model, for the whole run."""
    return _shared_gateways[0]


@pytest.fixture(scope="session")
def rules_gateway(_shared_gateways: tuple[LLMGateway, GatewayProcess]) -> GatewayProcess:
    """A gateway with no LLM at all (rule-based extraction) and the bundled embeddings."""
    return _shared_gateways[1]


# ----------------------------------------------------------------------------- helpers


def capture(
    gw: GatewayProcess, scope: str, session: str, user: str, assistant: str = "OK."
) -> None:
    with gw.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": session,
                "user_content": user,
                "assistant_content": assistant,
            },
        )
    assert r.status_code == 200, r.text
    assert r.json()["l0_recorded"] >= 1


def health(gw: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gw.base_url + "/health", timeout=10).json()


def settle(gw: GatewayProcess, timeout: float = 20.0, l2: bool = False) -> dict[str, Any]:
    """Wait until L1 has nothing pending, queued or running (and L2 too, with ``l2``)."""
    deadline = time.monotonic() + timeout
    while True:
        p = health(gw)["pipeline"]
        done = p["idle"] and p["backlog"]["l1_retrying"] == 0
        if l2:
            done = done and p["backlog"]["l2_memories"] == 0 and p["running"]["l2"] is None
        if done:
            return p
        if time.monotonic() > deadline:
            raise AssertionError(f"pipeline did not settle: {json.dumps(p, indent=1)}")
        time.sleep(0.1)


def quiet(gw: GatewayProcess, timeout: float = 10.0) -> None:
    """Wait until no L1 run is queued or running (pending messages may still wait for a timer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = health(gw)["pipeline"]
        if p["running"]["l1"] is None and p["backlog"]["l1_queued"] == 0:
            return
        time.sleep(0.05)
    raise AssertionError("L1 did not go quiet")


wait_for = partial(wait.wait_for, timeout=15.0)


def search(gw: GatewayProcess, scope: str, query: str, limit: int = 20) -> list[dict[str, Any]]:
    with gw.client() as c:
        r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": limit})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def recall(gw: GatewayProcess, scope: str, query: str) -> dict[str, Any]:
    with gw.client() as c:
        r = c.post("/recall", json={"query": query, "scope": scope, "session_key": "recall"})
    assert r.status_code == 200, r.text
    return r.json()


def memory(gw: GatewayProcess, memory_id: str, scope: str) -> dict[str, Any]:
    with gw.client() as c:
        r = c.get(f"/memories/{memory_id}", params={"scope": scope})
    assert r.status_code == 200, r.text
    return r.json()


def scope_memories(gw: GatewayProcess, scope: str) -> list[dict[str, Any]]:
    """Every L1 row of a scope (any status), read from the append-only JSONL log."""
    rows: dict[str, dict[str, Any]] = {}
    for f in sorted((gw.data_dir / "records").glob("*.jsonl")):
        for line in f.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj.get("op") == "upsert" and obj.get("scope") == scope:
                rows.setdefault(obj["id"], obj)
    return list(rows.values())


def upsert_lines(gw: GatewayProcess, scope: str) -> int:
    n = 0
    for f in sorted((gw.data_dir / "records").glob("*.jsonl")):
        for line in f.read_text("utf-8").splitlines():
            if line.strip():
                obj = json.loads(line)
                n += obj.get("op") == "upsert" and obj.get("scope") == scope
    return n


def extraction(*memories: dict[str, Any] | str, scene: str = "Test scene") -> str:
    """An L1 extraction reply: one scene holding these memories (str = an instruction)."""
    items = []
    for m in memories:
        if isinstance(m, str):
            m = {"content": m, "type": "instruction", "priority": 90}
        items.append({"source_message_ids": [], "metadata": {}, **m})
    return json.dumps([{"scene_name": scene, "message_ids": [], "memories": items}])


def scope_dir(gw: GatewayProcess, scope: str) -> Path:
    from memory_tencentdb.pipeline.layout import scope_root

    return scope_root(gw.data_dir, scope)

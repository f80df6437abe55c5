"""Store a set of memories through the real gateway, then recall a set of queries: the shared
"store all, recall all" step of the recall-quality tests (all over HTTP, as a host agent)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.support.gateway import GatewayProcess


def post_memories(http: Any, items: Iterable[dict], scope: str, session_key: str) -> dict[str, str]:
    """POST /memories every item (``{"id", "memory"}``) as a persona memory of ``scope``;
    returns item id -> stored memory id."""
    memory_ids: dict[str, str] = {}
    for item in items:
        r = http.post(
            "/memories",
            json={
                "content": item["memory"],
                "type": "persona",
                "session_key": session_key,
                "scope": scope,
            },
        )
        assert r.status_code == 201, r.text
        memory_ids[item["id"]] = r.json()["id"]
    return memory_ids


def store_and_recall(
    root: Path,
    items: Iterable[dict],
    queries: Iterable[dict],
    *,
    top: int,
    scope: str,
    session_key: str,
) -> dict[str, dict]:
    """Start a gateway in ``root`` recalling ``top`` memories, POST /memories every item
    (``{"id", "memory"}``), wait for the embedder, then POST /recall every query
    (``{"id", "query"}``). Returns ``{"recalled": query id -> recalled memory ids, best first,
    "memory_ids": item id -> stored memory id}``."""
    gateway = GatewayProcess(root / "data", env={"TDAI_MEMORY__RECALL__MAX_RESULTS": str(top)})
    gateway.start(timeout=120)
    try:
        with gateway.client(timeout=60) as http:
            memory_ids = post_memories(http, items, scope, session_key)
            gateway.wait_embedded(timeout=120)
            recalled: dict[str, list[str]] = {}
            for q in queries:
                r = http.post(
                    "/recall",
                    json={"query": q["query"], "session_key": session_key, "scope": scope},
                )
                assert r.status_code == 200, r.text
                recalled[q["id"]] = [m["id"] for m in r.json()["memories"]]
        return {"recalled": recalled, "memory_ids": memory_ids}
    finally:
        gateway.stop()


def rank(result: dict, pair_id: str) -> int | None:
    """1-based rank of the pair's own memory among those recalled for its query, else None."""
    ids = result["recalled"][pair_id]
    gold = result["memory_ids"][pair_id]
    return ids.index(gold) + 1 if gold in ids else None

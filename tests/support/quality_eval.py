"""Recall quality measured the way hosts use the gateway: over HTTP, one real gateway process per
retrieval method (``memory.recall.strategy`` keyword / embedding / hybrid) on the same data
directory, so every method answers from the same stored rows and vectors.

Two measures, both reporting aggregate figures only (a blind set can be measured unread):

- :func:`conversation_recall`: a multi-session conversation set (the schema of
  tests/fixtures/blind/conversations.json) is captured turn by turn with speaker names and
  times, then every question is asked of ``POST /search/conversations`` (limit 10) in its
  conversation's scope. Evidence R@10: share of a question's evidence turns in the top 10.
  Session R@5: share of the sessions holding its evidence that appear among the top 5.
- :func:`paraphrase_recall`: memories are stored with ``POST /memories`` and each query asked of
  ``POST /recall`` (what a host injects, relevance cut included): R@1 and R@5 of its memory.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path
from statistics import mean
from typing import Any

from tests.support.gateway import GatewayProcess
from tests.support.recall_eval import post_memories

METHODS = ("keyword", "embedding", "hybrid")


def _gateway(data_dir: Path, method: str, extra: dict[str, str] | None = None) -> GatewayProcess:
    env = {"TDAI_MEMORY__RECALL__STRATEGY": method, **(extra or {})}
    return GatewayProcess(data_dir, env=env)


def _capture_conversations(http: Any, data: dict[str, Any]) -> int:
    turns = 0
    for conv in data["conversations"]:
        roles = {s["name"]: s.get("role", "user") for s in conv.get("speakers", [])}
        for session in conv["sessions"]:
            start = datetime.fromisoformat(str(session["date"]).replace("Z", "+00:00"))
            t0 = int(start.timestamp() * 1000)
            messages = []
            for i, turn in enumerate(session["turns"]):
                role = roles.get(turn["speaker"], "user")
                messages.append(
                    {
                        "role": role if role in ("user", "assistant") else "user",
                        "content": turn["text"],
                        "speaker": turn["speaker"],
                        "timestamp": t0 + i * 60_000,
                        "id": turn["id"],
                    }
                )
            for i in range(0, len(messages), 500):
                r = http.post(
                    "/capture",
                    json={
                        "scope": f"conv-{conv['id']}",
                        "session_key": f"conv-{conv['id']}",
                        "session_id": session["id"],
                        "messages": messages[i : i + 500],
                    },
                )
                assert r.status_code == 200, r.text
            turns += len(messages)
    return turns


def conversation_recall(
    root: Path, data: dict[str, Any], methods: tuple[str, ...] = METHODS
) -> dict[str, Any]:
    """Per method: evidence R@10 and session R@5, overall, per language and per category."""
    data_dir = root / "data"
    first = _gateway(data_dir, methods[0]).start(timeout=120)
    try:
        with first.client(timeout=120) as http:
            turns = _capture_conversations(http, data)
        first.wait_embedded(timeout=900)
    finally:
        first.stop()
    session_of = {
        t["id"]: s["id"] for c in data["conversations"] for s in c["sessions"] for t in s["turns"]
    }
    out: dict[str, Any] = {"turns": turns, "questions": len(data["questions"]), "methods": {}}
    for method in methods:
        gw = _gateway(data_dir, method).start(timeout=120)
        try:
            gw.wait_embedded(timeout=300)
            per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            strategies: set[str] = set()
            with gw.client(timeout=60) as http:
                for q in data["questions"]:
                    r = http.post(
                        "/search/conversations",
                        json={
                            "query": q["question"],
                            "scope": f"conv-{q['conversation']}",
                            "limit": 10,
                        },
                    )
                    assert r.status_code == 200, r.text
                    body = r.json()
                    strategies.add(body["strategy"])
                    ids = [it.get("message_id") for it in body["items"]]
                    gold = set(q["evidence"])
                    sessions = {session_of[g] for g in gold if g in session_of}
                    top5 = {session_of.get(i) for i in ids[:5]}
                    ev = len(gold & set(ids[:10])) / len(gold) if gold else 0.0
                    ss = len(sessions & top5) / len(sessions) if sessions else 0.0
                    for key in (
                        "all",
                        f"lang:{q.get('lang', '?')}",
                        f"cat:{q.get('category', '?')}",
                    ):
                        per[key]["evidence_r10"].append(ev)
                        per[key]["session_r5"].append(ss)
            out["methods"][method] = {
                "strategy_answered": sorted(strategies),
                **{
                    key: {m: round(mean(v), 3) for m, v in ms.items()}
                    | {"n": len(ms["session_r5"])}
                    for key, ms in per.items()
                },
            }
        finally:
            gw.stop()
    return out


def paraphrase_recall(
    root: Path,
    items: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    methods: tuple[str, ...] = METHODS,
    top: int = 5,
) -> dict[str, Any]:
    """Per method: R@1 and R@5 of each query's own memory among those /recall injects."""
    data_dir = root / "data"
    env = {"TDAI_MEMORY__RECALL__MAX_RESULTS": str(top)}
    memory_ids: dict[str, str] = {}
    out: dict[str, Any] = {"memories": len(items), "queries": len(queries), "methods": {}}
    for n, method in enumerate(methods):
        gw = _gateway(data_dir, method, env).start(timeout=120)
        try:
            with gw.client(timeout=60) as http:
                if n == 0:
                    memory_ids.update(post_memories(http, items, "paraphrase", "paraphrase"))
                gw.wait_embedded(timeout=300)
                ranks: dict[str, int | None] = {}
                per_lang: dict[str, list[int | None]] = defaultdict(list)
                for q in queries:
                    r = http.post(
                        "/recall",
                        json={
                            "query": q["query"],
                            "session_key": "paraphrase",
                            "scope": "paraphrase",
                        },
                    )
                    assert r.status_code == 200, r.text
                    got = [m["id"] for m in r.json()["memories"]]
                    gold = memory_ids.get(q["id"])
                    if gold is None:  # a query with no memory of its own: -1 if it injected any
                        ranks[q["id"]] = -1 if got else None
                        continue
                    ranks[q["id"]] = got.index(gold) + 1 if gold in got else None
                    per_lang[q.get("lang", "?")].append(ranks[q["id"]])
            out["methods"][method] = {
                "r1": _at(list(ranks.values()), 1),
                "r5": _at(list(ranks.values()), top),
                **{f"{lang}_r5": _at(rs, top) for lang, rs in per_lang.items()},
                "ranks": ranks,
            }
        finally:
            gw.stop()
    return out


def _at(ranks: list[int | None], k: int) -> float:
    ranks = [r for r in ranks if r != -1]
    return (
        round(sum(1 for r in ranks if r is not None and r <= k) / len(ranks), 3) if ranks else 0.0
    )


def gate_recall(
    root: Path,
    data: dict[str, Any],
    extra_items: list[dict[str, Any]] | None = None,
    methods: tuple[str, ...] = METHODS,
    top: int = 5,
) -> dict[str, Any]:
    """The relevance gate on a gate set (the schema of tests/fixtures/dev/gate_queries.json):
    its memories (plus ``extra_items``, other memories, for a broad scope) stored with
    ``POST /memories``, every related message and world question asked of ``POST /recall``.
    Per method: related R@5 (its memory among those injected), world questions injecting
    anything, memories injected for them in all."""
    data_dir = root / "data"
    env = {"TDAI_MEMORY__RECALL__MAX_RESULTS": str(top)}
    items = [{"id": m["id"], "memory": m["memory"]} for m in data["memories"]]
    items += extra_items or []
    ids: dict[str, str] = {}
    out: dict[str, Any] = {"memories": len(items), "methods": {}}
    for n, method in enumerate(methods):
        gw = _gateway(data_dir, method, env).start(timeout=120)
        try:
            with gw.client(timeout=60) as http:
                if n == 0:
                    ids.update(post_memories(http, items, "gate", "gate"))
                gw.wait_embedded(timeout=300)

                def recalled(query: str) -> list[str]:
                    r = http.post(
                        "/recall", json={"query": query, "session_key": "gate", "scope": "gate"}
                    )
                    assert r.status_code == 200, r.text
                    return [m["id"] for m in r.json()["memories"]]

                related = [ids[q["memory"]] in recalled(q["query"]) for q in data["related"]]
                world = [recalled(q["query"]) for q in data["world"]]
            out["methods"][method] = {
                "related_r5": round(sum(related) / len(related), 3),
                "related_hits": f"{sum(related)}/{len(related)}",
                "world_injecting": f"{sum(1 for w in world if w)}/{len(world)}",
                "world_memories_injected": sum(len(w) for w in world),
            }
        finally:
            gw.stop()
    return out

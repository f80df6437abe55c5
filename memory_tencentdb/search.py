"""The agent's explicit memory tools: search distilled memories (L1) or raw conversations (L0).

Answers carry both structured ``items`` and a pre-rendered ``results`` text, which hosts hand to
the model as the tool result.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memory_tencentdb.found import FoundMemory, FoundMessage
from memory_tencentdb.retrieval import Hits, newer_first_found, retrieve
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.text.sanitize import clean_captured, clip_query, escape_tags, one_line
from memory_tencentdb.vectorizer import Vectorizer


def search_memories(
    store: MemoryStore,
    vectorizer: Vectorizer,
    query: str,
    scope: str,
    limit: int,
    strategy: str,
    type_filter: str | None = None,
    scene: str | None = None,
    team_scopes: tuple[str, ...] = (),
) -> dict[str, Any]:
    clean = clip_query(clean_captured(query))
    filtered = bool(type_filter or scene)
    hits = _across(
        store,
        vectorizer,
        "l1",
        (scope, *team_scopes),
        clean,
        strategy,
        depth=limit * (6 if filtered else 3),
    )
    rows = store.l1_rows([r for r, _ in hits.ranked])
    found: list[FoundMemory] = []
    for seq, score in hits.ranked:
        m = rows.get(seq)
        if m is None or m.status != "active":
            continue
        if type_filter and m.type != type_filter:
            continue
        if scene and scene.lower() not in m.scene_name.lower():
            continue
        found.append(FoundMemory(m, score))
        if len(found) >= limit:
            break
    found = newer_first_found(store, found)
    items = [f.as_json(scope=bool(team_scopes), times=True) for f in found]
    strategy_used = hits.strategy if hits.ranked else ("none" if not clean else hits.strategy)
    return {
        "results": _render_memories(items),
        "total": len(items),
        "strategy": strategy_used,
        "items": items,
    }


def search_conversations(
    store: MemoryStore,
    vectorizer: Vectorizer,
    query: str,
    scope: str,
    limit: int,
    strategy: str,
    session_key: str | None = None,
    team_scopes: tuple[str, ...] = (),
) -> dict[str, Any]:
    clean = clip_query(clean_captured(query))
    hits = _across(
        store,
        vectorizer,
        "l0",
        (scope, *team_scopes),
        clean,
        strategy,
        depth=limit * 3,
        session_key=session_key,
    )
    messages = store.l0_rows([r for r, _ in hits.ranked])
    items = []
    for seq, score in hits.ranked:
        m = messages.get(seq)
        if m is None or (session_key and m.session_key != session_key):
            continue
        items.append(FoundMessage(m, score).as_json(scope=bool(team_scopes)))
        if len(items) >= limit:
            break
    return {
        "results": _render_conversations(items),
        "total": len(items),
        "strategy": hits.strategy if hits.ranked else "none",
        "items": items,
    }


def _across(
    store: MemoryStore,
    vectorizer: Vectorizer,
    layer: str,
    scopes: tuple[str, ...],
    query: str,
    strategy: str,
    depth: int,
    session_key: str | None = None,
) -> Hits:
    """``retrieve`` in each scope (the first is the request's own, the others team scopes it
    may read), merged by score: each scope is ranked against its own rows, as it is alone."""
    first = retrieve(store, vectorizer, layer, scopes[0], query, strategy, depth, session_key)
    if len(scopes) == 1:
        return first
    ranked = list(first.ranked)
    for scope in scopes[1:]:
        more = retrieve(store, vectorizer, layer, scope, query, strategy, depth, session_key)
        first.keyword = first.keyword or more.keyword
        first.vector = first.vector or more.vector
        ranked += more.ranked
    first.ranked = sorted(ranked, key=lambda kv: (-kv[1], kv[0]))[:depth]
    return first


def _when(item: dict[str, Any]) -> str:
    """When the message was said (the host's timestamp, UTC), else when it was recorded."""
    ms = item.get("timestamp") or 0
    if ms > 0:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
    return str(item.get("recorded_at") or "")


def _render_memories(items: list[dict[str, Any]]) -> str:
    if not items:
        return "No matching memories found."
    out = [f"Found {len(items)} matching memories:", ""]
    for it in items:
        prio = "global instruction" if it["priority"] < 0 else f"priority: {it['priority']}"
        scene = f" [scene: {escape_tags(one_line(it['scene_name']))}]" if it["scene_name"] else ""
        out.append(f"- **[{it['type']}]** ({prio}){scene} (score: {it['score']:.3f})")
        out.append("  " + escape_tags(it["content"]).replace("\n", "\n  "))  # stays indented
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _render_conversations(items: list[dict[str, Any]]) -> str:
    if not items:
        return "No matching conversation messages found."
    out = [f"Found {len(items)} matching message(s):", ""]
    for it in items:
        out += [
            "---",
            f"**[{it['role']}{' · ' + escape_tags(it['speaker']) if it['speaker'] else ''}]**"
            f" Session: {it['session_key']} [{_when(it)}]"
            f" (score: {it['score']:.3f})",
            "",
            escape_tags(it["content"]),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"

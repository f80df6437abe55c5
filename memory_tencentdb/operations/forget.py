"""Correct and forget memories.

A correction (``PATCH /memories/{id}``) keeps the id: the old text is stored as a version
``<id>.v<n>`` superseded by it, so ``memories show`` lists it as history. Like a direct write
it answers once durable and keyword-searchable, and is re-embedded in the background; until
then it is found by its new words only (its old vectors are gone with the old text).
Forgetting (by id or by query) appends a tombstone to ``records/`` and drops the memory (with
its older versions) from the keyword and vector indexes in the same request, so recall and
search stop finding it at once, after a restart and after ``reindex``. Lines of the scope's persona and scene files that
quote it verbatim are removed at once, and the next L2/L3 run rebuilds scenes and persona from
the memories that are left. ``purge`` (offline) then removes the text from every file for good.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from memory_tencentdb.operations.browse import BadRequest, NotFound, public_memory
from memory_tencentdb.pipeline import layout, state
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import now_iso
from memory_tencentdb.store.files import write_atomic
from memory_tencentdb.text import tokenize
from memory_tencentdb.vectorizer import Vectorizer

log = logging.getLogger("memory_tencentdb.operations")

# Words a "forget that I said ..." request carries around the thing to forget.
_FORGET_FILLER = frozenset(
    "forget that i said told you my me the a an about remember please 忘记 忘掉 忘了 删除 删掉"
    " 我说 我说过 说过 那个 关于 记住 请".split()
)
MATCH_COVERAGE = 0.5  # share of the query's words a memory must contain to be forgotten


def correct(
    store: MemoryStore,
    vectorizer: Vectorizer,
    memory_id: str,
    scope: str,
    *,
    content: str | None = None,
    type_: str | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    row = store.memory_by_id(memory_id)
    if row is None or row.scope != scope:
        raise NotFound(f"No memory with id {memory_id!r}")
    if row.status != "active":
        raise BadRequest(f"memory {memory_id!r} is {row.status}; only active memories change")
    if content is None and type_ is None and priority is None:
        raise BadRequest("nothing to change: give content, type or priority")
    now = now_iso()
    version = f"{memory_id}.v{store.count_versions(memory_id) + 1}"
    # The old version first: if we crash between the two lines, nothing is lost.
    store.write_memory(
        replace(row, id=version, updated_at=now, status="superseded", superseded_by=memory_id)
    )
    new = replace(
        row,
        content=(content if content is not None else row.content).strip(),
        type=type_ or row.type,
        priority=priority if priority is not None else row.priority,
        metadata={**row.metadata, "corrected_at": now},
        timestamps=[*row.timestamps, now],
        updated_at=now,
        status="active",
        superseded_by="",
    )
    # Durable and keyword-indexed once this returns; a changed text also left the vector
    # indexes with it (the store drops stale vectors), and the background loop embeds the new
    # text (embedding on the request cost ~250 ms). Recalls of the scope wait briefly for it.
    fresh = store.write_memory(new)
    if fresh.text_hash != row.text_hash:
        vectorizer.expect(scope, [fresh.seq])
    if content is not None and content.strip() != row.content:
        request_rebuild(store, scope, [row.content])
    return public_memory(fresh)


def delete(
    store: MemoryStore, memory_ids: list[str], scope: str, reason: str
) -> list[dict[str, Any]]:
    """Forget memories of ``scope`` (and their older versions). Unknown ids raise NotFound
    before anything is written."""
    rows = {r.id: r for r in store.memories_by_ids(memory_ids)}
    missing = [m for m in memory_ids if m not in rows or rows[m].scope != scope]
    if missing:
        raise NotFound(f"No memory with id {missing[0]!r}")
    live = [m for m in memory_ids if rows[m].status != "deleted"]
    older = [h for h in store.history_ids(live) if h not in rows]
    history = [r for r in store.memories_by_ids(older) if r.status != "deleted"]
    store.append_tombstones(live + [h.id for h in history], reason)
    texts = [rows[m].content for m in live] + [h.content for h in history]
    if live:
        request_rebuild(store, scope, texts)
        log.info("forgot %d memories (%d older versions) in %s", len(live), len(history), scope)
    return [
        {
            "id": m,
            "content": rows[m].content,
            "type": rows[m].type,
            "already_deleted": rows[m].status == "deleted",
            "versions": len([h for h in history if h.superseded_by == m]),
        }
        for m in memory_ids
    ]


def preview(store: MemoryStore, memory_ids: list[str], scope: str) -> list[dict[str, Any]]:
    """The active memories of ``scope`` these ids name (NotFound for any other id)."""
    rows = {r.id: r for r in store.memories_by_ids(memory_ids)}
    for m in memory_ids:
        if m not in rows or rows[m].scope != scope or rows[m].status == "deleted":
            raise NotFound(f"No memory with id {m!r}")
    return [{"id": m, "content": rows[m].content, "type": rows[m].type} for m in memory_ids]


def forget_query(
    store: MemoryStore,
    vectorizer: Vectorizer,
    query: str,
    scope: str,
    strategy: str,
    *,
    limit: int = 10,
    dry_run: bool = True,
) -> dict[str, Any]:
    """The memories a query names, forgotten unless ``dry_run``.

    A memory matches when it contains at least half of the query's words (stop words and
    "forget that I said" removed); close semantic neighbours that do not are returned as
    ``candidates`` with their ids, so a person or the agent can forget one by id instead: a
    query never deletes what merely resembles it."""
    from memory_tencentdb.retrieval import retrieve

    terms = [t for t in tokenize.query_terms(query) if t not in _FORGET_FILLER]
    if not terms:
        raise BadRequest("query: nothing to match once filler words are removed")
    hits = retrieve(store, vectorizer, "l1", scope, " ".join(terms), strategy, depth=limit * 4)
    rows = store.l1_rows([r for r, _ in hits.ranked])
    tokens = store.indexed_tokens("l1", [r for r, _ in hits.ranked])
    matched: list[dict[str, Any]] = []
    candidates: list[dict[str, Any]] = []
    for rowid, score in hits.ranked:
        row = rows.get(rowid)
        if row is None or row.status != "active":
            continue
        have = tokens.get(rowid) or set(tokenize.tokens(row.content))
        coverage = sum(1 for t in terms if t in have) / len(terms)
        item = {
            "id": row.id,
            "content": row.content,
            "type": row.type,
            "score": round(score, 6),
            "coverage": round(coverage, 3),
        }
        if coverage >= MATCH_COVERAGE and len(matched) < limit:
            matched.append(item)
        elif len(candidates) < 5:
            candidates.append(item)
    if not dry_run and matched:
        delete(store, [m["id"] for m in matched], scope, reason="forget-by-query")
    return {
        "query": query,
        "scope": scope,
        "dry_run": dry_run,
        "matched": matched,
        "forgotten": [] if dry_run else [m["id"] for m in matched],
        "candidates": candidates,
    }


def request_rebuild(store: MemoryStore, scope: str, forgotten: list[str]) -> None:
    """Scenes and persona of ``scope`` may quote what was forgotten: drop quoting lines now, and
    ask the next L2 run to refold the scope's scenes from the memories left (then L3)."""
    root = layout.scope_root(store.data_dir, scope)
    for path in [layout.persona_file(root), *layout.scene_dir(root).glob("*.md")]:
        scrub_lines(path, forgotten)
    marker = layout.rebuild_marker(root)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(now_iso() + "\n", "utf-8")
    state.update_scope(store, scope, persona_request="memories were forgotten")


def scrub_lines(path: Path, texts: list[str]) -> bool:
    """Remove the lines of ``path`` that contain any of ``texts`` (atomic); True if changed."""
    needles = [t.strip() for t in texts if t and t.strip()]
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if not any(n in text for n in needles):
        return False
    kept = [line for line in text.splitlines(keepends=True) if not any(n in line for n in needles)]
    write_atomic(path, "".join(kept))
    return True

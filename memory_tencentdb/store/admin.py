"""Store queries behind the operations a user runs on their memory: list, count, correct,
forget, export and purge.

Kept apart from ``db.py`` (the capture/recall hot path) so both stay small; every SQL statement
of the operations lives here, so services get typed records and never a connection.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_tencentdb.store import files
from memory_tencentdb.store.db import Store, now_iso
from memory_tencentdb.store.records import (
    L0_SELECT,
    L1_SELECT,
    L0Message,
    Memory,
    l0_from_row,
    memory_from_row,
)

L1_STATUSES = ("active", "superseded", "deleted")


@dataclass
class ScopeCounts:
    scope: str
    memories: int = 0  # active L1
    history: int = 0  # superseded or deleted L1 rows
    messages: int = 0  # L0
    last_activity: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "memories": self.memories,
            "history": self.history,
            "messages": self.messages,
            "last_activity": self.last_activity or None,
        }


def list_memories(
    store: Store,
    scope: str | None,
    *,
    type_: str | None = None,
    status: str = "active",
    since: str | None = None,
    session_key: str | None = None,
    limit: int = 50,
    before_seq: int | None = None,
) -> list[Memory]:
    """Memories newest first (by sequence number); ``before_seq`` continues a previous page."""
    where: list[str] = ["1 = 1"]  # a bare 1 is no boolean to PostgreSQL
    params: list[str | int] = []
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if type_:
        where.append("type = ?")
        params.append(type_)
    if status == "history":
        where.append("status != 'deleted'")
    elif status != "all":
        where.append("status = ?")
        params.append(status)
    if session_key:
        where.append("session_key = ?")
        params.append(session_key)
    if since:
        where.append("updated_at >= ?")
        params.append(since)
    if before_seq is not None:
        where.append("rowid < ?")
        params.append(before_seq)
    params.append(limit)
    cur = store.reader().execute(
        f"SELECT {L1_SELECT} FROM l1_memories WHERE {' AND '.join(where)}"
        " ORDER BY rowid DESC LIMIT ?",
        params,
    )
    return [memory_from_row(r) for r in cur.fetchall()]


def scope_counts(store: Store) -> list[ScopeCounts]:
    """Every scope that has messages or memories, with its counts."""
    out: dict[str, ScopeCounts] = {}
    conn = store.reader()
    for scope, active, other, last in conn.execute(
        "SELECT scope, sum(CASE WHEN status = 'active' THEN 1 ELSE 0 END),"
        " sum(CASE WHEN status != 'active' THEN 1 ELSE 0 END), max(updated_at)"
        " FROM l1_memories GROUP BY scope"
    ):
        out[scope] = ScopeCounts(scope, int(active or 0), int(other or 0), last_activity=last or "")
    for scope, n, last in conn.execute(
        "SELECT scope, count(*), max(recorded_at) FROM l0_messages GROUP BY scope"
    ):
        sc = out.setdefault(scope, ScopeCounts(scope))
        sc.messages = int(n)
        sc.last_activity = max(sc.last_activity, last or "")
    return sorted(out.values(), key=lambda s: s.scope)


def l1_by_ids(store: Store, ids: list[str]) -> list[Memory]:
    return store.memories_by_ids(ids)


def history_ids(store: Store, ids: list[str]) -> list[str]:
    """Ids of every older version behind ``ids`` (rows they superseded, transitively)."""
    seen = set(ids)
    frontier = list(ids)
    found: list[str] = []
    while frontier:
        chunk, frontier = frontier[:500], frontier[500:]
        marks = ",".join("?" * len(chunk))
        for (mid,) in store.reader().execute(
            f"SELECT id FROM l1_memories WHERE superseded_by IN ({marks})", chunk
        ):
            if mid not in seen:
                seen.add(mid)
                found.append(mid)
                frontier.append(mid)
    return found


def count_versions(store: Store, memory_id: str) -> int:
    """How many stored older versions a memory has (for naming the next one)."""
    return int(
        store.reader()
        .execute("SELECT count(*) FROM l1_memories WHERE id LIKE ?", (f"{memory_id}.v%",))
        .fetchone()[0]
    )


def append_tombstones(store: Store, ids: list[str], reason: str) -> None:
    """Mark memories deleted: one ``status`` line each in ``records/`` (durable), then the index.

    Deleted rows leave the keyword and vector indexes at once, so recall and search stop
    finding them with the answer of the request that deleted them."""
    if not ids:
        return
    at = now_iso()
    lines = [
        {
            "op": "status",
            "id": mid,
            "status": "deleted",
            "superseded_by": "",
            "at": at,
            "reason": reason,
        }
        for mid in ids
    ]
    rel = files.day_file("records", datetime.now(UTC), store.tz)
    files.append_lines(store.data_dir / rel, lines)
    for line in lines:
        store.apply_status_line(line)


def deleted_memories(store: Store) -> list[Memory]:
    cur = store.reader().execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE status = 'deleted'")
    return [memory_from_row(r) for r in cur.fetchall()]


def iter_memories(store: Store, scope: str | None, batch: int = 2000) -> Iterator[Memory]:
    """Every memory (history included) in sequence order, for export."""
    last = 0
    where, params = "rowid > ?", []
    if scope is not None:
        where += " AND scope = ?"
        params.append(scope)
    while True:
        cur = store.reader().execute(
            f"SELECT {L1_SELECT} FROM l1_memories WHERE {where} ORDER BY rowid LIMIT ?",
            [last, *params, batch],
        )
        rows = [memory_from_row(r) for r in cur.fetchall()]
        if not rows:
            return
        yield from rows
        last = rows[-1].seq


def iter_messages(store: Store, scope: str | None, batch: int = 2000) -> Iterator[L0Message]:
    """Every L0 message in sequence order, for export."""
    last = 0
    where, params = "rowid > ?", []
    if scope is not None:
        where += " AND scope = ?"
        params.append(scope)
    while True:
        cur = store.reader().execute(
            f"SELECT {L0_SELECT} FROM l0_messages WHERE {where} ORDER BY rowid LIMIT ?",
            [last, *params, batch],
        )
        rows = [l0_from_row(r) for r in cur.fetchall()]
        if not rows:
            return
        yield from rows
        last = rows[-1].seq


def existing_ids(store: Store, layer: str, ids: list[str]) -> set[str]:
    table = "l1_memories" if layer == "l1" else "l0_messages"
    out: set[str] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        out.update(
            r[0]
            for r in store.reader().execute(f"SELECT id FROM {table} WHERE id IN ({marks})", chunk)
        )
    return out


def memory_fingerprint(store: Store, memory_id: str) -> tuple[str, str, str] | None:
    """``(content, status, updated_at)`` of a memory: what import compares to stay idempotent."""
    row = (
        store.reader()
        .execute("SELECT content, status, updated_at FROM l1_memories WHERE id = ?", (memory_id,))
        .fetchone()
    )
    return (row[0], row[1], row[2]) if row else None


def cited_l0_ids(store: Store) -> set[str]:
    """L0 record ids that a live memory (active or kept as history) still cites as evidence."""
    out: set[str] = set()
    for (sources,) in store.reader().execute(
        "SELECT source_ids FROM l1_memories WHERE status != 'deleted' AND source_ids != '[]'"
    ):
        out.update(json.loads(sources or "[]"))
    return out


def delete_orphan_vectors(store: Store) -> int:
    """Drop stored embeddings no row points at any more (purge: they encode forgotten text)."""

    def write(conn: Any) -> int:
        cur = conn.execute(
            "DELETE FROM vectors WHERE (layer = 'l1' AND text_hash NOT IN"
            " (SELECT text_hash FROM l1_memories WHERE status != 'deleted'))"
            " OR (layer = 'l0' AND text_hash NOT IN (SELECT text_hash FROM l0_messages))"
        )
        return int(cur.rowcount)

    return int(store._transaction(write))


def vacuum(store: Store) -> None:
    """Rewrite the database file so freed pages (which still hold old text) are gone."""
    if store.backend != "sqlite":  # a server's storage is its administrator's (VACUUM FULL)
        return
    with store.write_lock:
        store.writer.execute("INSERT INTO l0_fts (l0_fts) VALUES ('optimize')")
        store.writer.execute("INSERT INTO l1_fts (l1_fts) VALUES ('optimize')")
        store.writer.execute("VACUUM")
        store.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def layer_sizes(store: Store) -> dict[str, int]:
    """Rows per layer, for ``status``."""
    conn = store.reader()
    return {
        "l0_messages": conn.execute("SELECT count(*) FROM l0_messages").fetchone()[0],
        "l1_active": conn.execute(
            "SELECT count(*) FROM l1_memories WHERE status = 'active'"
        ).fetchone()[0],
        "l1_history": conn.execute(
            "SELECT count(*) FROM l1_memories WHERE status != 'active'"
        ).fetchone()[0],
        "vectors": conn.execute("SELECT count(*) FROM vectors").fetchone()[0],
    }


def _delete_rows(store: Store, layer: str, ids: list[str]) -> int:
    """Remove rows of one layer (``l0`` or ``l1``) by id from its table and keyword index,
    then from the vector indexes; 500 ids a statement keeps under SQLite's variable limit."""
    table = {"l0": "l0_messages", "l1": "l1_memories"}[layer]
    fts = f"{layer}_fts"
    removed: list[int] = []

    def write(conn: Any) -> None:
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = [
                r[0]
                for r in conn.execute(f"SELECT rowid FROM {table} WHERE id IN ({marks})", chunk)
            ]
            if not rows:
                continue
            rmarks = ",".join("?" * len(rows))
            if store.backend == "sqlite":  # PostgreSQL keeps the tokens in the row itself
                conn.execute(f"DELETE FROM {fts} WHERE rowid IN ({rmarks})", rows)
            conn.execute(f"DELETE FROM {table} WHERE rowid IN ({rmarks})", rows)
            removed.extend(rows)

    store._transaction(write)
    if removed:
        store._drop_from_indexes(layer, removed)
    return len(removed)


def delete_l0(store: Store, record_ids: list[str]) -> int:
    """Remove L0 rows from the index (retention; the files are handled by the caller)."""
    return _delete_rows(store, "l0", record_ids)


def delete_l1(store: Store, ids: list[str]) -> int:
    """Remove L1 rows (purge of forgotten memories) from the table and the keyword index."""
    return _delete_rows(store, "l1", ids)


def drop_vector_indexes(store: Store) -> list[str]:
    """Drop the sqlite-vec index tables (offline only): they are rebuilt from ``vectors`` at the
    next start, and may still hold rows of what was purged."""
    if store.backend != "sqlite":
        return []
    names = [
        r[0]
        for r in store.reader().execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING vec0%'"
        )
    ]
    with store.write_lock:
        for name in list(names):
            try:
                store.writer.execute(f'DROP TABLE IF EXISTS "{name}"')
            except store.binding.Error:  # sqlite-vec not loadable here: leave it to `serve`
                names.remove(name)
    return names


def last_message_per_session(
    store: Store, messages: list[dict[str, Any]]
) -> dict[tuple[str, str], tuple[int, str]]:
    """``{(scope, session_key): (rowid, record id)}`` of the newest of ``messages`` per session."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    ids = [m["record_id"] for m in messages]
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        # The newest per session is picked here, not with SQLite's bare column next to max(),
        # which PostgreSQL refuses.
        for scope, key, rowid, rid in store.reader().execute(
            f"SELECT scope, session_key, rowid, id FROM l0_messages WHERE id IN ({marks})",
            chunk,
        ):
            if rowid > out.get((scope, key), (0, ""))[0]:
                out[(scope, key)] = (rowid, rid)
    return out


def l0_recorded_before(store: Store, cutoff_iso: str) -> list[tuple[str, int]]:
    """``(record id, rowid)`` of the L0 messages recorded before ``cutoff_iso`` (retention)."""
    return [
        (r[0], r[1])
        for r in store.reader().execute(
            "SELECT id, rowid FROM l0_messages WHERE recorded_at != '' AND recorded_at < ?",
            (cutoff_iso,),
        )
    ]


def unextracted_l0_ids(store: Store, ids: list[str]) -> set[str]:
    """Those of ``ids`` that L1 has not read yet (past their session's cursor)."""
    out: set[str] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        out.update(
            r[0]
            for r in store.reader().execute(
                f"SELECT m.id FROM l0_messages m JOIN pipeline_sessions p ON p.scope = m.scope"
                f" AND p.session_key = m.session_key WHERE m.id IN ({marks})"
                " AND m.rowid > p.l1_cursor",
                chunk,
            )
        )
    return out


@contextlib.contextmanager
def bulk(store: Store) -> Iterator[None]:
    """Many ``Store`` writes in one transaction (offline imports: the same rows, one commit per
    batch instead of one per row). Nothing is committed if the block raises."""
    with store.transaction():
        yield


def text_in_live_rows(store: Store, text: str) -> bool:
    """Whether a row that was not forgotten (a live memory or message) contains ``text``."""
    conn = store.reader()
    instr = "instr(content, ?)" if store.backend == "sqlite" else "strpos(content, ?)"
    if conn.execute(
        f"SELECT 1 FROM l1_memories WHERE status != 'deleted' AND {instr} > 0 LIMIT 1",
        (text,),
    ).fetchone():
        return True
    return bool(
        conn.execute(f"SELECT 1 FROM l0_messages WHERE {instr} > 0 LIMIT 1", (text,)).fetchone()
    )

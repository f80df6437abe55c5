"""SQLite's queries behind the operations a user runs on their memory: list, count, correct,
forget, export and purge (the admin section of ``MemoryStore``), a mixin of ``SqliteStore``;
what needs the store's own state (the FTS5 tables, ``VACUUM``, ``instr``) is in ``store.py``.
Kept apart from the capture/recall hot path so both stay small. (PostgreSQL's are
``postgres/admin.py``.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import tzinfo
from pathlib import Path
from typing import Any, TypeVar

from memory_tencentdb.store.common import chunks, memory_filters
from memory_tencentdb.store.records import (
    L0_SELECT,
    L1_SELECT,
    L0Message,
    Memory,
    ScopeCounts,
    l0_from_row,
    memory_from_row,
)

# A row type an export iterates (both carry their sequence number, ``seq``).
_R = TypeVar("_R", Memory, L0Message)


class AdminQueries:
    """The admin section of ``MemoryStore`` in SQL both backends accept (a backend overrides
    what it words differently); needs ``reader()``, ``_transaction(fn)``,
    ``_delete_rows(layer, ids)``, ``apply_status_line``, ``data_dir`` and ``tz``."""

    reader: Callable[[], Any]
    _transaction: Callable[[Callable[[Any], Any]], Any]
    _delete_rows: Callable[[str, list[str]], int]
    apply_status_line: Callable[[dict[str, Any]], None]
    data_dir: Path
    tz: tzinfo

    def list_memories(
        self,
        scope: str | None,
        *,
        type_: str | None = None,
        status: str = "active",
        since: str | None = None,
        session_key: str | None = None,
        scene: str | None = None,
        min_priority: int | None = None,
        limit: int = 50,
        before_seq: int | None = None,
    ) -> list[Memory]:
        """Memories newest first (by sequence number); ``before_seq`` continues a previous page.
        A scope's active ones read through ``l1_scope_status``."""
        where, params = memory_filters(
            "rowid",
            "?",
            scope=scope,
            type_=type_,
            status=status,
            session_key=session_key,
            scene=scene,
            min_priority=min_priority,
            since=since,
            before_seq=before_seq,
        )
        params.append(limit)
        cur = self.reader().execute(
            f"SELECT {L1_SELECT} FROM l1_memories WHERE {' AND '.join(where)}"
            " ORDER BY rowid DESC LIMIT ?",
            params,
        )
        return [memory_from_row(r) for r in cur.fetchall()]

    def scope_counts(self) -> list[ScopeCounts]:
        """Every scope that has messages or memories, with its counts."""
        out: dict[str, ScopeCounts] = {}
        conn = self.reader()
        for scope, active, other, last in conn.execute(
            "SELECT scope, sum(CASE WHEN status = 'active' THEN 1 ELSE 0 END),"
            " sum(CASE WHEN status != 'active' THEN 1 ELSE 0 END), max(updated_at)"
            " FROM l1_memories GROUP BY scope"
        ):
            out[scope] = ScopeCounts(
                scope, int(active or 0), int(other or 0), last_activity=last or ""
            )
        for scope, n, last in conn.execute(
            "SELECT scope, count(*), max(recorded_at) FROM l0_messages GROUP BY scope"
        ):
            sc = out.setdefault(scope, ScopeCounts(scope))
            sc.messages = int(n)
            sc.last_activity = max(sc.last_activity, last or "")
        return sorted(out.values(), key=lambda s: s.scope)

    def history_ids(self, ids: list[str]) -> list[str]:
        """Ids of every older version behind ``ids`` (rows they superseded, transitively)."""
        seen = set(ids)
        frontier = list(ids)
        found: list[str] = []
        while frontier:
            chunk, frontier = frontier[:500], frontier[500:]
            marks = ",".join("?" * len(chunk))
            for (mid,) in self.reader().execute(
                f"SELECT id FROM l1_memories WHERE superseded_by IN ({marks})", chunk
            ):
                if mid not in seen:
                    seen.add(mid)
                    found.append(mid)
                    frontier.append(mid)
        return found

    def count_versions(self, memory_id: str) -> int:
        """How many stored older versions a memory has (for naming the next one)."""
        return int(
            self.reader()
            .execute("SELECT count(*) FROM l1_memories WHERE id LIKE ?", (f"{memory_id}.v%",))
            .fetchone()[0]
        )

    def deleted_memories(self) -> list[Memory]:
        cur = self.reader().execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE status = 'deleted'")
        return [memory_from_row(r) for r in cur.fetchall()]

    def iter_memories(self, scope: str | None, batch: int = 2000) -> Iterator[Memory]:
        """Every memory (history included) in sequence order, for export."""
        return self._iter_rows("l1_memories", L1_SELECT, memory_from_row, scope, batch)

    def iter_messages(self, scope: str | None, batch: int = 2000) -> Iterator[L0Message]:
        """Every L0 message in sequence order, for export."""
        return self._iter_rows("l0_messages", L0_SELECT, l0_from_row, scope, batch)

    def _iter_rows(
        self,
        table: str,
        select: str,
        decode: Callable[[Any], _R],
        scope: str | None,
        batch: int,
    ) -> Iterator[_R]:
        """A table's rows in sequence order, ``batch`` at a time by keyset (``rowid > last``), so
        an export of any size holds one batch in memory and sees rows written meanwhile."""
        last = 0
        where = "rowid > ?"
        params: list[str] = []
        if scope is not None:
            where += " AND scope = ?"
            params.append(scope)
        while True:
            cur = self.reader().execute(
                f"SELECT {select} FROM {table} WHERE {where} ORDER BY rowid LIMIT ?",
                [last, *params, batch],
            )
            rows = [decode(r) for r in cur.fetchall()]
            if not rows:
                return
            yield from rows
            last = rows[-1].seq

    def existing_ids(self, layer: str, ids: list[str]) -> set[str]:
        table = "l1_memories" if layer == "l1" else "l0_messages"
        out: set[str] = set()
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            out.update(
                r[0]
                for r in self.reader().execute(
                    f"SELECT id FROM {table} WHERE id IN ({marks})", chunk
                )
            )
        return out

    def memory_fingerprint(self, memory_id: str) -> tuple[str, str, str] | None:
        """``(content, status, updated_at)`` of a memory: what import compares to stay idempotent."""
        row = (
            self.reader()
            .execute(
                "SELECT content, status, updated_at FROM l1_memories WHERE id = ?", (memory_id,)
            )
            .fetchone()
        )
        return (row[0], row[1], row[2]) if row else None

    def cited_l0_ids(self) -> set[str]:
        """L0 record ids that a live memory (active or kept as history) still cites as evidence."""
        out: set[str] = set()
        for (sources,) in self.reader().execute(
            "SELECT source_ids FROM l1_memories WHERE status != 'deleted' AND source_ids != '[]'"
        ):
            out.update(json.loads(sources or "[]"))
        return out

    def delete_orphan_vectors(self) -> int:
        """Drop stored embeddings no row points at any more (purge: they encode forgotten text)."""

        def write(conn: Any) -> int:
            cur = conn.execute(
                "DELETE FROM vectors WHERE (layer = 'l1' AND text_hash NOT IN"
                " (SELECT text_hash FROM l1_memories WHERE status != 'deleted'))"
                " OR (layer = 'l0' AND text_hash NOT IN (SELECT text_hash FROM l0_messages))"
            )
            return int(cur.rowcount)

        return int(self._transaction(write))

    def layer_sizes(self) -> dict[str, int]:
        """Rows per layer, for ``status``."""
        conn = self.reader()
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

    def delete_l0(self, record_ids: list[str]) -> int:
        """Remove L0 rows from the index (retention; the files are handled by the caller)."""
        return self._delete_rows("l0", record_ids)

    def delete_l1(self, ids: list[str]) -> int:
        """Remove L1 rows (purge of forgotten memories) from the table and the keyword index."""
        return self._delete_rows("l1", ids)

    def last_message_per_session(
        self, messages: list[dict[str, Any]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """``{(scope, session_key): (rowid, record id)}`` of the newest of ``messages`` per session."""
        out: dict[tuple[str, str], tuple[int, str]] = {}
        ids = [m["record_id"] for m in messages]
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            # The newest per session is picked here, not with SQLite's bare column next to max(),
            # which PostgreSQL refuses.
            for scope, key, rowid, rid in self.reader().execute(
                f"SELECT scope, session_key, rowid, id FROM l0_messages WHERE id IN ({marks})",
                chunk,
            ):
                if rowid > out.get((scope, key), (0, ""))[0]:
                    out[(scope, key)] = (rowid, rid)
        return out

    def l0_recorded_before(self, cutoff_iso: str) -> list[tuple[str, int]]:
        """``(record id, rowid)`` of the L0 messages recorded before ``cutoff_iso`` (retention)."""
        return [
            (r[0], r[1])
            for r in self.reader().execute(
                "SELECT id, rowid FROM l0_messages WHERE recorded_at != '' AND recorded_at < ?",
                (cutoff_iso,),
            )
        ]

    def unextracted_l0_ids(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that L1 has not read yet (past their session's cursor)."""
        out: set[str] = set()
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            out.update(
                r[0]
                for r in self.reader().execute(
                    f"SELECT m.id FROM l0_messages m JOIN pipeline_sessions p ON p.scope = m.scope"
                    f" AND p.session_key = m.session_key WHERE m.id IN ({marks})"
                    " AND m.rowid > p.l1_cursor",
                    chunk,
                )
            )
        return out

"""PostgreSQL's pipeline SQL: its state tables (``schema.py`` migration 2) and the reads the
L1/L2/L3 stages need, a mixin of ``PostgresStore``. (SQLite's are ``sqlite/pipeline.py``.)
Services call these named methods and get typed records (``records.py``); they never see a
connection.

Every change that records progress happens in one transaction, together with the counters it
affects, so the database never says "done" for work that was not applied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from memory_tencentdb.store.postgres.rows import L0_SELECT, json_list
from memory_tencentdb.store.records import (
    SCOPE_COLUMNS,
    SESSION_COLUMNS,
    L0Message,
    Memory,
    ScopeState,
    SessionBacklog,
    SessionState,
    l0_from_row,
    scope_from_row,
    session_from_row,
)

_T = TypeVar("_T")

_SESSION_SELECT = ", ".join(SESSION_COLUMNS)
_SCOPE_SELECT = ", ".join(SCOPE_COLUMNS)


def _cols(values: dict[str, Any]) -> dict[str, Any]:
    """``memories_since_persona__add=3`` -> ``{"memories_since_persona +=": 3}``."""
    out = {}
    for key, value in values.items():
        name = key[:-5] if key.endswith("__add") else key
        if name not in SESSION_COLUMNS and name not in SCOPE_COLUMNS:
            raise ValueError(f"not a pipeline state column: {name}")
        out[name + " +=" if key.endswith("__add") else name] = value
    return out


class PgPipeline:
    """Named pipeline-state operations; needs ``reader()``, ``_transaction(fn)``, ``_now()``."""

    if TYPE_CHECKING:  # provided by the store class that mixes this in

        def reader(self) -> Any: ...
        def _transaction(self, fn: Callable[[Any], _T]) -> _T: ...
        def l1_rows(self, seqs: Iterable[int]) -> dict[int, Memory]: ...

    # ----------------------------------------------------------------- state rows

    def session_state(self, scope: str, session_key: str) -> SessionState:
        cur = self.reader().execute(
            f"SELECT {_SESSION_SELECT} FROM pipeline_sessions WHERE scope = %s AND session_key = %s",
            (scope, session_key),
        )
        row = cur.fetchone()
        if row is None:
            return SessionState(scope, session_key)
        return session_from_row(list(SESSION_COLUMNS), row)

    def scope_state(self, scope: str) -> ScopeState:
        cur = self.reader().execute(
            f"SELECT {_SCOPE_SELECT} FROM pipeline_scopes WHERE scope = %s", (scope,)
        )
        row = cur.fetchone()
        return scope_from_row(list(SCOPE_COLUMNS), row) if row else ScopeState(scope)

    def scope_states(self) -> list[ScopeState]:
        cur = self.reader().execute(f"SELECT {_SCOPE_SELECT} FROM pipeline_scopes")
        return [scope_from_row(list(SCOPE_COLUMNS), r) for r in cur.fetchall()]

    def update_session_state(self, scope: str, session_key: str, **values: Any) -> None:
        """Set columns (``col=v``) or add to them (``col__add=n``), creating the row if new."""
        cols = _cols(values)
        self._transaction(
            lambda conn: self._upsert(
                conn, "pipeline_sessions", {"scope": scope, "session_key": session_key}, cols
            )
        )

    def update_scope_state(self, scope: str, **values: Any) -> None:
        cols = _cols(values)
        self._transaction(
            lambda conn: self._upsert(conn, "pipeline_scopes", {"scope": scope}, cols)
        )

    def complete_chunk(
        self,
        scope: str,
        session_key: str,
        to_seq: int,
        to_id: str,
        stored: int,
        last_scene: str,
        last_active: float,
    ) -> None:
        """Advance the L1 cursor past an applied chunk, with the counters it feeds, atomically."""

        def write(conn: Any) -> None:
            self._upsert(
                conn,
                "pipeline_sessions",
                {"scope": scope, "session_key": session_key},
                {
                    "l1_cursor": to_seq,
                    "l1_cursor_id": to_id,
                    "plan": "",
                    "failures": 0,
                    "last_error": "",
                    "last_scene_name": last_scene,
                    "memories_extracted +=": stored,
                },
            )
            self._upsert(
                conn,
                "pipeline_scopes",
                {"scope": scope},
                {"memories_since_persona +=": stored, "last_active": last_active},
            )

        self._transaction(write)

    def _upsert(self, conn: Any, table: str, keys: dict[str, Any], values: dict[str, Any]) -> None:
        """Insert the row with defaults if missing, then apply ``values`` (``col`` or ``col +=``)."""
        from memory_tencentdb.store.common import now_iso

        key_cols = list(keys)
        conn.execute(
            f"INSERT INTO {table} ({', '.join(key_cols)}, updated_at)"
            f" VALUES ({', '.join(['%s'] * len(key_cols))}, %s) ON CONFLICT DO NOTHING",
            (*keys.values(), now_iso()),
        )
        sets, params = ["updated_at = %s"], [now_iso()]
        for col, val in values.items():
            if col.endswith("+="):
                name = col[:-2].strip()
                sets.append(f"{name} = {name} + %s")
            else:
                sets.append(f"{col} = %s")
            params.append(val)
        where = " AND ".join(f"{k} = %s" for k in key_cols)
        conn.execute(
            f"UPDATE {table} SET {', '.join(sets)} WHERE {where}", (*params, *keys.values())
        )

    # ----------------------------------------------------------------- L1 reads

    def backlog_sessions(self) -> list[SessionBacklog]:
        """Sessions with captured messages past their L1 cursor (or a plan left half-applied)."""
        rows = (
            self.reader()
            .execute(
                """
                SELECT m.scope, m.session_key, count(*), max(m.recorded_at), max(m.seq),
                       sum(CASE WHEN m.role = 'user' THEN 1 ELSE 0 END)
                FROM l0_messages m
                LEFT JOIN pipeline_sessions p
                  ON p.scope = m.scope AND p.session_key = m.session_key
                WHERE m.seq > coalesce(p.l1_cursor, 0)
                GROUP BY m.scope, m.session_key
                """
            )
            .fetchall()
        )
        out = [
            SessionBacklog(r[0], r[1], int(r[2]), r[3] or "", int(r[4]), int(r[5] or 0))
            for r in rows
        ]
        known = {(b.scope, b.session_key) for b in out}
        planned = self.reader().execute(
            "SELECT scope, session_key FROM pipeline_sessions WHERE plan != ''"
        )
        for scope, key in planned.fetchall():
            if (scope, key) not in known:
                out.append(SessionBacklog(scope, key))
        return out

    def l0_before(
        self, scope: str, session_key: str, before_seq: int, limit: int
    ) -> list[L0Message]:
        """User and assistant messages of one session before ``before_seq``, newest first."""
        cur = self.reader().execute(
            f"SELECT {L0_SELECT} FROM l0_messages WHERE scope = %s AND session_key = %s"
            " AND seq < %s AND role IN ('user', 'assistant') ORDER BY seq DESC LIMIT %s",
            (scope, session_key, before_seq, limit),
        )
        return [l0_from_row(r) for r in cur.fetchall()]

    def count_l0_between(self, scope: str, session_key: str, after_seq: int, upto: int) -> int:
        return int(
            self.reader()
            .execute(
                "SELECT count(*) FROM l0_messages WHERE scope = %s AND session_key = %s"
                " AND seq > %s AND seq <= %s",
                (scope, session_key, after_seq, upto),
            )
            .fetchone()[0]
        )

    def l0_seq(self, record_id: str) -> int | None:
        """The sequence number of an L0 message now (it changes when the index is rebuilt)."""
        row = (
            self.reader()
            .execute("SELECT seq FROM l0_messages WHERE id = %s", (record_id,))
            .fetchone()
        )
        return int(row[0]) if row else None

    def l1_seq(self, memory_id: str) -> int | None:
        row = (
            self.reader()
            .execute("SELECT seq FROM l1_memories WHERE id = %s", (memory_id,))
            .fetchone()
        )
        return int(row[0]) if row else None

    def max_l0_seq(self) -> int:
        return int(
            self.reader().execute("SELECT coalesce(max(seq), 0) FROM l0_messages").fetchone()[0]
        )

    def captured_message_ids(
        self, scope: str, session_key: str, message_ids: list[str]
    ) -> set[str]:
        """Which of the host's message ids this session has stored already (retried turns)."""
        if not message_ids:
            return set()
        return {
            row[0]
            for row in self.reader()
            .execute(
                "SELECT message_id FROM l0_messages WHERE scope = %s AND session_key = %s"
                " AND message_id = ANY(%s)",
                (scope, session_key, list(message_ids)),
            )
            .fetchall()
        }

    # ----------------------------------------------------------------- L1 memories for L1/L2/L3

    def l1_after(self, scope: str, after_seq: int, limit: int) -> list[Memory]:
        """Active memories of ``scope`` stored after sequence number ``after_seq``, oldest first."""
        seqs = [
            r[0]
            for r in self.reader()
            .execute(
                "SELECT seq FROM l1_memories WHERE scope = %s AND seq > %s AND status = 'active'"
                " ORDER BY seq LIMIT %s",
                (scope, after_seq, limit),
            )
            .fetchall()
        ]
        rows = self.l1_rows(seqs)
        return [rows[r] for r in seqs if r in rows]

    def count_l1_after(self, scope: str, after_seq: int) -> int:
        return int(
            self.reader()
            .execute(
                "SELECT count(*) FROM l1_memories WHERE scope = %s AND seq > %s AND status = 'active'",
                (scope, after_seq),
            )
            .fetchone()[0]
        )

    def max_l1_seq(self, scope: str) -> int:
        return int(
            self.reader()
            .execute("SELECT coalesce(max(seq), 0) FROM l1_memories WHERE scope = %s", (scope,))
            .fetchone()[0]
        )

    def top_memories(self, scope: str, type_: str, limit: int) -> list[Memory]:
        """Active memories of one type, strongest first (priority, then newest)."""
        seqs = [
            r[0]
            for r in self.reader()
            .execute(
                "SELECT seq FROM l1_memories WHERE scope = %s AND type = %s AND status = 'active'"
                " ORDER BY priority DESC, seq DESC LIMIT %s",
                (scope, type_, limit),
            )
            .fetchall()
        ]
        rows = self.l1_rows(seqs)
        return [rows[r] for r in seqs if r in rows]

    def recent_slot_memories(self, scope: str, limit: int) -> list[Memory]:
        """The newest active memories that carry a rules slot (``metadata.slot``)."""
        seqs = [
            r[0]
            for r in self.reader()
            .execute(
                "SELECT seq FROM l1_memories WHERE scope = %s AND status = 'active'"
                " AND metadata ? 'slot' ORDER BY seq DESC LIMIT %s",
                (scope, limit),
            )
            .fetchall()
        ]
        rows = self.l1_rows(seqs)
        return [rows[r] for r in seqs if r in rows]

    # ----------------------------------------------------------------- after a rebuild

    def reconcile_pipeline(self, has_scenes: Callable[[str], bool]) -> list[str]:
        """Make cursors agree with the database after ``reindex`` rebuilt it (rowids change).

        - Cursors with a known record id are moved to that record's current sequence number.
        - Sessions with extracted memories but no state (the state tables were not carried
          over) start after the last message those memories came from, not from the beginning.
        - Scopes with scene files but no state start after their newest memory.
        ``has_scenes(scope)`` says whether a scope has scene files. Returns what was changed.
        """
        notes: list[str] = []
        conn = self.reader()
        for scope, key, cursor, cid in conn.execute(
            "SELECT scope, session_key, l1_cursor, l1_cursor_id FROM pipeline_sessions"
            " WHERE l1_cursor_id != ''"
        ).fetchall():
            seq = self.l0_seq(cid)
            if seq is not None and seq != cursor:
                self.update_session_state(scope, key, l1_cursor=seq)
                notes.append(f"L1 cursor of {scope}/{key} moved {cursor} -> {seq}")
        for scope, cursor, cid in conn.execute(
            "SELECT scope, l2_cursor, l2_cursor_id FROM pipeline_scopes WHERE l2_cursor_id != ''"
        ).fetchall():
            seq = self.l1_seq(cid)
            if seq is not None and seq != cursor:
                self.update_scope_state(scope, l2_cursor=seq)
                notes.append(f"L2 cursor of {scope} moved {cursor} -> {seq}")
        orphans: dict[tuple[str, str], set[str]] = {}
        for scope, key, sources in conn.execute(
            "SELECT m.scope, m.session_key, m.source_ids FROM l1_memories m"
            " WHERE m.origin IN ('extraction', 'rules') AND NOT EXISTS (SELECT 1 FROM"
            " pipeline_sessions p WHERE p.scope = m.scope AND p.session_key = m.session_key)"
        ).fetchall():
            cited = (i for i in json_list(sources) if isinstance(i, str))
            orphans.setdefault((scope, key), set()).update(cited)
        for (scope, key), ids in orphans.items():
            if not ids:
                continue
            row = conn.execute(
                "SELECT max(seq) FROM l0_messages WHERE id = ANY(%s)", (sorted(ids),)
            ).fetchone()
            if row and row[0]:
                self.update_session_state(scope, key, l1_cursor=row[0])
                notes.append(f"L1 cursor of {scope}/{key} restored to {row[0]} from its memories")
        for (scope,) in conn.execute(
            "SELECT DISTINCT scope FROM l1_memories m WHERE NOT EXISTS"
            " (SELECT 1 FROM pipeline_scopes p WHERE p.scope = m.scope)"
        ).fetchall():
            if has_scenes(scope):
                top = self.max_l1_seq(scope)
                self.update_scope_state(scope, l2_cursor=top)
                notes.append(f"L2 cursor of {scope} restored to {top} (scenes exist)")
        return notes

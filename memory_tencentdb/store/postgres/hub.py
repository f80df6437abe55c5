"""PostgreSQL's queries behind the Memory Hub page (``memory_tencentdb/hub``): counts for the
pyramid and pages of memories and conversations, a mixin of ``PostgresStore``. Every one is
bounded (a page, or a GROUP BY over one scope's indexed rows), so the page stays usable at
100k memories. (SQLite's are ``sqlite/hub.py``.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_tencentdb.store.postgres.rows import L0_SELECT, L1_SELECT
from memory_tencentdb.store.records import (
    L0Message,
    Memory,
    l0_from_row,
    memory_from_row,
)


class PgHub:
    """The browse section of ``MemoryStore`` (the Memory Hub page); needs ``reader()``."""

    reader: Callable[[], Any]

    def type_priority_counts(self, scope: str) -> list[tuple[str, int, int]]:
        """``(type, priority, count)`` of the scope's active memories (uses ``l1_scope_status``)."""
        cur = self.reader().execute(
            "SELECT type, priority, count(*) FROM l1_memories WHERE scope = %s AND status = 'active'"
            " GROUP BY type, priority",
            (scope,),
        )
        return [(str(t), int(p if p is not None else 0), int(n)) for t, p, n in cur.fetchall()]

    def conversation_sessions(
        self, scope: str, limit: int, offset: int
    ) -> tuple[int, list[dict[str, Any]]]:
        """How many sessions the scope's raw messages belong to, and one page of them, the most
        recently recorded first: ``{session_key, messages, first, last}``."""
        conn = self.reader()
        total = conn.execute(
            "SELECT count(*) FROM (SELECT DISTINCT session_key FROM l0_messages WHERE scope = %s) s",
            (scope,),
        ).fetchone()[0]
        cur = conn.execute(
            "SELECT session_key, count(*), min(recorded_at), max(recorded_at), max(seq)"
            " FROM l0_messages WHERE scope = %s GROUP BY session_key"
            " ORDER BY max(seq) DESC LIMIT %s OFFSET %s",
            (scope, limit, offset),
        )
        rows = [
            {"session_key": k, "messages": int(n), "first": first or None, "last": last or None}
            for k, n, first, last, _ in cur.fetchall()
        ]
        return int(total or 0), rows

    def session_messages(
        self, scope: str, session_key: str, after_seq: int | None, limit: int
    ) -> list[L0Message]:
        """One page of a session's raw messages in the order they were recorded."""
        params: list[Any] = [scope, session_key]
        extra = ""
        if after_seq is not None:
            extra = " AND seq > %s"
            params.append(after_seq)
        params.append(limit)
        cur = self.reader().execute(
            f"SELECT {L0_SELECT} FROM l0_messages WHERE scope = %s AND session_key = %s{extra}"
            " ORDER BY seq LIMIT %s",
            params,
        )
        return [l0_from_row(r) for r in cur.fetchall()]

    def memories_with_content(self, scope: str, texts: list[str], limit: int) -> list[Memory]:
        """The scope's active memories whose text is exactly one of ``texts`` (a scene's or the
        persona's lines quote the memories they were folded from); one pass over the scope."""
        texts = list(dict.fromkeys(t for t in texts if t))[:200]
        if not texts:
            return []
        cur = self.reader().execute(
            f"SELECT {L1_SELECT} FROM l1_memories WHERE scope = %s AND status = 'active'"
            " AND content = ANY(%s) ORDER BY seq DESC LIMIT %s",
            (scope, texts, limit),
        )
        return [memory_from_row(r) for r in cur.fetchall()]

    def session_count(self, scope: str) -> int:
        """How many sessions the scope's raw messages belong to (``l0_scope_session``, covering)."""
        row = (
            self.reader()
            .execute(
                "SELECT count(*) FROM (SELECT DISTINCT session_key FROM l0_messages WHERE scope = %s) s",
                (scope,),
            )
            .fetchone()
        )
        return int(row[0] or 0)

    def l1_fingerprint(self, scope: str) -> tuple[int, int]:
        """``(active count, highest sequence number)`` of a scope's memories, from the
        ``l1_scope_status`` index alone (milliseconds at 100k): a new, corrected or forgotten memory
        changes it, so counts cached under it are recomputed."""
        conn = self.reader()
        active = conn.execute(
            "SELECT count(*) FROM l1_memories WHERE scope = %s AND status = 'active'", (scope,)
        ).fetchone()[0]
        top = conn.execute(
            "SELECT max(seq) FROM l1_memories WHERE scope = %s", (scope,)
        ).fetchone()[0]
        return int(active or 0), int(top or 0)

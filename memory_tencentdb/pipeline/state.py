"""Pipeline state in ``memory.db`` (tables of migration 2).

Every change that records progress happens in one transaction, together with the counters it
affects, so the database never says "done" for work that was not applied.
"""

from __future__ import annotations

import json
from typing import Any

from memory_tencentdb.store.db import Store, now_iso

SESSION_DEFAULTS = {
    "l1_cursor": 0,
    "l1_cursor_id": "",
    "warmup_threshold": 1,
    "last_scene_name": "",
    "plan": "",
    "failures": 0,
    "last_error": "",
    "memories_extracted": 0,
}
SCOPE_DEFAULTS = {
    "l2_cursor": 0,
    "l2_cursor_id": "",
    "l2_last_run": 0.0,
    "l2_due_at": 0.0,
    "l2_plan": "",
    "scenes_processed": 0,
    "memories_since_persona": 0,
    "last_persona_at": 0,
    "last_persona_time": "",
    "persona_request": "",
    "last_active": 0.0,
    "l2_failures": 0,
    "l3_failures": 0,
    "last_error": "",
}


def _row(store: Store, table: str, where: str, params: tuple, defaults: dict) -> dict[str, Any]:
    cur = store.reader().execute(f"SELECT * FROM {table} WHERE {where}", params)
    row = cur.fetchone()
    if row is None:
        return dict(defaults)
    return {c[0]: v for c, v in zip(cur.description, row, strict=True)}


def get_session(store: Store, scope: str, key: str) -> dict[str, Any]:
    return _row(
        store,
        "pipeline_sessions",
        "scope = ? AND session_key = ?",
        (scope, key),
        SESSION_DEFAULTS,
    )


def get_scope(store: Store, scope: str) -> dict[str, Any]:
    return _row(store, "pipeline_scopes", "scope = ?", (scope,), SCOPE_DEFAULTS)


def _upsert(conn: Any, table: str, keys: dict[str, Any], values: dict[str, Any]) -> None:
    """Insert the row with defaults if missing, then apply ``values`` (``col`` or ``col+=``)."""
    key_cols = list(keys)
    conn.execute(
        f"INSERT OR IGNORE INTO {table} ({', '.join(key_cols)}, updated_at)"
        f" VALUES ({', '.join('?' * len(key_cols))}, ?)",
        (*keys.values(), now_iso()),
    )
    sets, params = ["updated_at = ?"], [now_iso()]
    for col, val in values.items():
        if col.endswith("+="):
            name = col[:-2].strip()
            sets.append(f"{name} = {name} + ?")
        else:
            sets.append(f"{col} = ?")
        params.append(val)
    where = " AND ".join(f"{k} = ?" for k in key_cols)
    conn.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE {where}", (*params, *keys.values()))


def update_session(store: Store, scope: str, key: str, **values: Any) -> None:
    store._transaction(
        lambda conn: _upsert(
            conn, "pipeline_sessions", {"scope": scope, "session_key": key}, _cols(values)
        )
    )


def update_scope(store: Store, scope: str, **values: Any) -> None:
    store._transaction(
        lambda conn: _upsert(conn, "pipeline_scopes", {"scope": scope}, _cols(values))
    )


def _cols(values: dict[str, Any]) -> dict[str, Any]:
    """``memories_since_persona__add=3`` -> ``{"memories_since_persona +=": 3}``."""
    return {(k[:-5] + " +=" if k.endswith("__add") else k): v for k, v in values.items()}


def save_plan(store: Store, scope: str, key: str, plan: dict[str, Any]) -> None:
    update_session(store, scope, key, plan=json.dumps(plan, ensure_ascii=False))


def load_plan(raw: str) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        plan = json.loads(raw)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def complete_chunk(
    store: Store,
    scope: str,
    key: str,
    to_rowid: int,
    to_id: str,
    stored: int,
    last_scene: str,
    last_active: float,
) -> None:
    """Advance the L1 cursor past an applied chunk, with the counters it feeds, atomically."""

    def write(conn: Any) -> None:
        _upsert(
            conn,
            "pipeline_sessions",
            {"scope": scope, "session_key": key},
            {
                "l1_cursor": to_rowid,
                "l1_cursor_id": to_id,
                "plan": "",
                "failures": 0,
                "last_error": "",
                "last_scene_name": last_scene,
                "memories_extracted +=": stored,
            },
        )
        _upsert(
            conn,
            "pipeline_scopes",
            {"scope": scope},
            {"memories_since_persona +=": stored, "last_active": last_active},
        )

    store._transaction(write)


def backlog_sessions(store: Store) -> list[dict[str, Any]]:
    """Sessions with captured messages past their L1 cursor (or a plan left half-applied)."""
    rows = (
        store.reader()
        .execute(
            """
            SELECT m.scope, m.session_key, count(*), max(m.recorded_at), max(m.rowid),
                   sum(CASE WHEN m.role = 'user' THEN 1 ELSE 0 END)
            FROM l0_messages m
            LEFT JOIN pipeline_sessions p
              ON p.scope = m.scope AND p.session_key = m.session_key
            WHERE m.rowid > coalesce(p.l1_cursor, 0)
            GROUP BY m.scope, m.session_key
            """
        )
        .fetchall()
    )
    out = [
        {
            "scope": r[0],
            "session_key": r[1],
            "pending": int(r[2]),
            "last_recorded_at": r[3] or "",
            "max_rowid": int(r[4]),
            "user_messages": int(r[5] or 0),
        }
        for r in rows
    ]
    planned = store.reader().execute(
        "SELECT scope, session_key FROM pipeline_sessions WHERE plan != ''"
    )
    known = {(r["scope"], r["session_key"]) for r in out}
    for scope, key in planned.fetchall():
        if (scope, key) not in known:
            out.append(
                {
                    "scope": scope,
                    "session_key": key,
                    "pending": 0,
                    "last_recorded_at": "",
                    "max_rowid": 0,
                    "user_messages": 0,
                }
            )
    return out


def scopes_with_state(store: Store) -> list[dict[str, Any]]:
    cur = store.reader().execute("SELECT * FROM pipeline_scopes")
    return [{c[0]: v for c, v in zip(cur.description, r, strict=True)} for r in cur.fetchall()]


def pending_l1_memories(store: Store, scope: str, cursor: int, limit: int) -> list[dict[str, Any]]:
    """Active memories of ``scope`` written after the L2 cursor, oldest first."""
    rowids = [
        r[0]
        for r in store.reader()
        .execute(
            "SELECT rowid FROM l1_memories WHERE scope = ? AND rowid > ? AND status = 'active'"
            " ORDER BY rowid LIMIT ?",
            (scope, cursor, limit),
        )
        .fetchall()
    ]
    rows = store.l1_rows(rowids)
    return [rows[r] for r in rowids if r in rows]


def count_pending_l1(store: Store, scope: str, cursor: int) -> int:
    return (
        store.reader()
        .execute(
            "SELECT count(*) FROM l1_memories WHERE scope = ? AND rowid > ? AND status = 'active'",
            (scope, cursor),
        )
        .fetchone()[0]
    )


def max_l1_rowid(store: Store, scope: str) -> int:
    return (
        store.reader()
        .execute("SELECT coalesce(max(rowid), 0) FROM l1_memories WHERE scope = ?", (scope,))
        .fetchone()[0]
    )


def reconcile(store: Store, has_scenes: Any) -> list[str]:
    """Make cursors agree with the database after ``reindex`` rebuilt it (rowids change).

    - Cursors with a known record id are moved to that record's current rowid.
    - Sessions with extracted memories but no state (the state tables were not carried over)
      start after the last message those memories came from, instead of from the beginning.
    - Scopes with scene files but no state start after their newest memory.
    ``has_scenes(scope)`` says whether a scope has scene files. Returns what was changed.
    """
    notes: list[str] = []
    conn = store.reader()
    for scope, key, cursor, cid in conn.execute(
        "SELECT scope, session_key, l1_cursor, l1_cursor_id FROM pipeline_sessions"
        " WHERE l1_cursor_id != ''"
    ).fetchall():
        row = conn.execute("SELECT rowid FROM l0_messages WHERE id = ?", (cid,)).fetchone()
        if row and row[0] != cursor:
            update_session(store, scope, key, l1_cursor=row[0])
            notes.append(f"L1 cursor of {scope}/{key} moved {cursor} -> {row[0]}")
    for scope, cursor, cid in conn.execute(
        "SELECT scope, l2_cursor, l2_cursor_id FROM pipeline_scopes WHERE l2_cursor_id != ''"
    ).fetchall():
        row = conn.execute("SELECT rowid FROM l1_memories WHERE id = ?", (cid,)).fetchone()
        if row and row[0] != cursor:
            update_scope(store, scope, l2_cursor=row[0])
            notes.append(f"L2 cursor of {scope} moved {cursor} -> {row[0]}")
    orphans: dict[tuple[str, str], set[str]] = {}
    for scope, key, sources in conn.execute(
        "SELECT m.scope, m.session_key, m.source_ids FROM l1_memories m"
        " WHERE m.origin IN ('extraction', 'rules') AND NOT EXISTS (SELECT 1 FROM"
        " pipeline_sessions p WHERE p.scope = m.scope AND p.session_key = m.session_key)"
    ).fetchall():
        try:
            ids = json.loads(sources or "[]")
        except ValueError:
            ids = []
        orphans.setdefault((scope, key), set()).update(i for i in ids if isinstance(i, str))
    for (scope, key), ids in orphans.items():
        if not ids:
            continue
        marks = ",".join("?" * len(ids))
        row = conn.execute(
            f"SELECT max(rowid) FROM l0_messages WHERE id IN ({marks})", list(ids)
        ).fetchone()
        if row and row[0]:
            update_session(store, scope, key, l1_cursor=row[0])
            notes.append(f"L1 cursor of {scope}/{key} restored to {row[0]} from its memories")
    for (scope,) in conn.execute(
        "SELECT DISTINCT scope FROM l1_memories m WHERE NOT EXISTS"
        " (SELECT 1 FROM pipeline_scopes p WHERE p.scope = m.scope)"
    ).fetchall():
        if has_scenes(scope):
            top = max_l1_rowid(store, scope)
            update_scope(store, scope, l2_cursor=top)
            notes.append(f"L2 cursor of {scope} restored to {top} (scenes exist)")
    return notes

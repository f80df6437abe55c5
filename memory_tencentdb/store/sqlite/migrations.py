"""Numbered schema migrations for ``memory.db``.

Each migration is a small function, applied once, in order, inside a transaction, recorded in
``_migrations``. Never edit a migration that has shipped: add the next number instead.

The database is an index over the files in the data directory (``conversations/`` and
``records/``); ``memory-tencentdb reindex`` can always rebuild it from them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Migration = Callable[[Any], None]


def m001_core(conn: Any) -> None:
    """L0 messages, L1 memories, their FTS indexes and the embedding store."""
    _run_script(
        conn,
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );

        -- L0: every captured message, verbatim (after sanitising), one row each.
        CREATE TABLE l0_messages (
            rowid       INTEGER PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,       -- record id, also written to the JSONL line
            scope       TEXT NOT NULL,
            session_key TEXT NOT NULL,
            session_id  TEXT NOT NULL DEFAULT '',
            role        TEXT NOT NULL,
            content     TEXT NOT NULL,
            message_id  TEXT NOT NULL DEFAULT '',   -- the host's own id, if it gave one
            timestamp   INTEGER NOT NULL,           -- epoch ms of the message
            recorded_at TEXT NOT NULL,              -- ISO-8601 UTC of capture
            file        TEXT NOT NULL,              -- conversations/<day>.jsonl: the way back
            text_hash   TEXT NOT NULL,              -- key into vectors
            extra       TEXT NOT NULL DEFAULT '{}'  -- tool calls, tool name, ...
        );
        CREATE INDEX l0_scope_session ON l0_messages (scope, session_key, timestamp);
        CREATE INDEX l0_scope_recorded ON l0_messages (scope, recorded_at);
        CREATE INDEX l0_session_id ON l0_messages (session_id);
        CREATE INDEX l0_host_message ON l0_messages (scope, session_key, message_id)
            WHERE message_id != '';

        -- Jieba tokens, space-joined; rowid = l0_messages.rowid.
        CREATE VIRTUAL TABLE l0_fts USING fts5 (tok, tokenize = 'unicode61 remove_diacritics 2');

        -- L1: atomic memories. Superseded and deleted rows stay as history.
        CREATE TABLE l1_memories (
            rowid          INTEGER PRIMARY KEY,
            id             TEXT NOT NULL UNIQUE,
            scope          TEXT NOT NULL,
            content        TEXT NOT NULL,
            type           TEXT NOT NULL,
            priority       INTEGER NOT NULL DEFAULT 50,
            scene_name     TEXT NOT NULL DEFAULT '',
            session_key    TEXT NOT NULL DEFAULT '',
            session_id     TEXT NOT NULL DEFAULT '',
            source_ids     TEXT NOT NULL DEFAULT '[]',  -- L0 record ids this was drawn from
            metadata       TEXT NOT NULL DEFAULT '{}',
            timestamps     TEXT NOT NULL DEFAULT '[]',
            activity_start TEXT NOT NULL DEFAULT '',
            activity_end   TEXT NOT NULL DEFAULT '',
            created_at     TEXT NOT NULL,
            updated_at     TEXT NOT NULL,
            status         TEXT NOT NULL DEFAULT 'active',  -- active | superseded | deleted
            superseded_by  TEXT NOT NULL DEFAULT '',
            origin         TEXT NOT NULL DEFAULT 'api',
            file           TEXT NOT NULL,
            text_hash      TEXT NOT NULL
        );
        CREATE INDEX l1_scope_status ON l1_memories (scope, status);
        CREATE INDEX l1_session_updated ON l1_memories (session_key, updated_at);
        CREATE INDEX l1_superseded_by ON l1_memories (superseded_by);

        CREATE VIRTUAL TABLE l1_fts USING fts5 (tok, tokenize = 'unicode61 remove_diacritics 2');

        -- Canonical embeddings, keyed by model, layer and text hash: a reindex or an identical
        -- text never pays for the same embedding twice, and a model change keeps the old
        -- vectors. A rowid table with a separate key index: vector rows are 1.5-2 KB, too
        -- large for a WITHOUT ROWID b-tree (loading 100k of them took 11 s that way).
        CREATE TABLE vectors (
            id        INTEGER PRIMARY KEY,
            model     TEXT NOT NULL,
            layer     TEXT NOT NULL,               -- l0 | l1
            text_hash TEXT NOT NULL,
            dim       INTEGER NOT NULL,
            vector    BLOB NOT NULL                -- little-endian float32, L2-normalised
        );
        CREATE UNIQUE INDEX vectors_key ON vectors (model, layer, text_hash);
        """,
    )


def m002_pipeline(conn: Any) -> None:
    """Pipeline state: per-session L1 cursors and per-scope L2/L3 progress.

    Cursors are rowids of ``l0_messages`` (L1) and ``l1_memories`` (L2), with the record ids they
    stand for (rowids change when ``reindex`` rebuilds the database): a cursor only moves past
    work that has been applied, in the same transaction that records the result, so a killed
    gateway resumes exactly where it stopped. ``plan`` holds decided but not yet fully applied
    writes (replayed idempotently on restart, so nothing is extracted twice).
    """
    _run_script(
        conn,
        """
        CREATE TABLE pipeline_sessions (
            scope              TEXT NOT NULL,
            session_key        TEXT NOT NULL,
            l1_cursor          INTEGER NOT NULL DEFAULT 0,   -- last l0_messages.rowid extracted
            l1_cursor_id       TEXT NOT NULL DEFAULT '',     -- its record id (survives reindex)
            warmup_threshold   INTEGER NOT NULL DEFAULT 1,   -- 0 = graduated to everyN
            last_scene_name    TEXT NOT NULL DEFAULT '',
            plan               TEXT NOT NULL DEFAULT '',     -- JSON: writes being applied
            failures           INTEGER NOT NULL DEFAULT 0,
            last_error         TEXT NOT NULL DEFAULT '',
            memories_extracted INTEGER NOT NULL DEFAULT 0,
            updated_at         TEXT NOT NULL,
            PRIMARY KEY (scope, session_key)
        );

        CREATE TABLE pipeline_scopes (
            scope                  TEXT PRIMARY KEY,
            l2_cursor              INTEGER NOT NULL DEFAULT 0,  -- last l1_memories.rowid in scenes
            l2_cursor_id           TEXT NOT NULL DEFAULT '',    -- its memory id (survives reindex)
            l2_last_run            REAL NOT NULL DEFAULT 0,     -- epoch seconds
            l2_due_at              REAL NOT NULL DEFAULT 0,     -- epoch seconds, 0 = not armed
            l2_plan                TEXT NOT NULL DEFAULT '',    -- JSON: scene actions being applied
            scenes_processed       INTEGER NOT NULL DEFAULT 0,
            memories_since_persona INTEGER NOT NULL DEFAULT 0,
            last_persona_at        INTEGER NOT NULL DEFAULT 0,  -- L0 count when persona was written
            last_persona_time      TEXT NOT NULL DEFAULT '',
            persona_request        TEXT NOT NULL DEFAULT '',    -- reason, when L2 asked for L3
            last_active            REAL NOT NULL DEFAULT 0,     -- epoch seconds of last capture
            l2_failures            INTEGER NOT NULL DEFAULT 0,
            l3_failures            INTEGER NOT NULL DEFAULT 0,
            last_error             TEXT NOT NULL DEFAULT '',
            updated_at             TEXT NOT NULL
        );
        """,
    )


def m003_l0_speaker(conn: Any) -> None:
    """Who said an L0 message ("Melanie", "Caroline", an agent's name): shown with the message and
    indexed with it, so "When did Melanie paint a sunrise?" finds Melanie's turn. Empty when the
    host did not say (the role still tells user from assistant)."""
    conn.execute("ALTER TABLE l0_messages ADD COLUMN speaker TEXT NOT NULL DEFAULT ''")


def _run_script(conn: Any, script: str) -> None:
    """Run statements one by one: ``executescript`` would commit our open transaction."""
    for statement in script.split(";\n"):
        body = "\n".join(
            line for line in statement.splitlines() if not line.strip().startswith("--")
        ).strip()
        if body:
            conn.execute(body)


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "core", m001_core),
    (2, "pipeline", m002_pipeline),
    (3, "l0-speaker", m003_l0_speaker),
]


def migrate(conn: Any) -> list[int]:
    """Apply pending migrations; returns the numbers applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT number FROM _migrations")}
    applied = []
    for number, name, fn in MIGRATIONS:
        if number in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            fn(conn)
            conn.execute(
                "INSERT INTO _migrations (number, name, applied_at) VALUES (?, ?, ?)",
                (number, name, datetime.now(UTC).isoformat()),
            )
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise
        applied.append(number)
    return applied

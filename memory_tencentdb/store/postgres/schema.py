"""Numbered schema migrations of the PostgreSQL backend (``storeBackend: postgres``).

The same tables and columns as SQLite's (``sqlite/migrations.py``), each backend with its own
statements over them; what differs:

- ``rowid`` is an identity column: the row's sequence number, used by cursors and indexes
  exactly like SQLite's rowid (record ids, not these numbers, are what the files keep).
- The keyword index is a ``tok tsvector`` column of the row (GIN-indexed) holding the same
  jieba tokens as SQLite's FTS5 tables, built from the token list (no PostgreSQL text parser
  in between, so Chinese and English are indexed exactly as on SQLite); NULL for L1 memories
  that are not active.
- ``pipeline_claims``: one row per session, row-locked (``FOR UPDATE SKIP LOCKED``) by the
  gateway extracting it, so two gateways never extract the same chunk.
- Vectors for search live in one pgvector table per (layer, model), made by the index
  (``vector.py``); ``vectors`` keeps the canonical float32 bytes, as on SQLite.

Each migration runs once, in order, in a transaction, under an advisory lock so gateways that
start together do not race; applied numbers are recorded in ``_migrations``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Migration = Callable[[Any], None]
# pg_advisory_xact_lock key: "tdai" in ASCII.
MIGRATION_LOCK = 0x74646169


def m001_core(conn: Any) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    for statement in (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE l0_messages (
            rowid       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,
            scope       TEXT NOT NULL,
            session_key TEXT NOT NULL,
            session_id  TEXT NOT NULL DEFAULT '',
            role        TEXT NOT NULL,
            content     TEXT NOT NULL,
            message_id  TEXT NOT NULL DEFAULT '',
            timestamp   BIGINT NOT NULL,
            recorded_at TEXT NOT NULL,
            file        TEXT NOT NULL,
            text_hash   TEXT NOT NULL,
            extra       TEXT NOT NULL DEFAULT '{}',
            speaker     TEXT NOT NULL DEFAULT '',
            tok         TSVECTOR
        )""",
        "CREATE INDEX l0_scope_session ON l0_messages (scope, session_key, rowid)",
        "CREATE INDEX l0_scope_recorded ON l0_messages (scope, recorded_at)",
        "CREATE INDEX l0_session_id ON l0_messages (session_id)",
        "CREATE INDEX l0_text_hash ON l0_messages (text_hash)",
        "CREATE INDEX l0_host_message ON l0_messages (scope, session_key, message_id)"
        " WHERE message_id != ''",
        "CREATE INDEX l0_tok ON l0_messages USING gin (tok)",
        """CREATE TABLE l1_memories (
            rowid          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id             TEXT NOT NULL UNIQUE,
            scope          TEXT NOT NULL,
            content        TEXT NOT NULL,
            type           TEXT NOT NULL,
            priority       INTEGER NOT NULL DEFAULT 50,
            scene_name     TEXT NOT NULL DEFAULT '',
            session_key    TEXT NOT NULL DEFAULT '',
            session_id     TEXT NOT NULL DEFAULT '',
            source_ids     TEXT NOT NULL DEFAULT '[]',
            metadata       TEXT NOT NULL DEFAULT '{}',
            timestamps     TEXT NOT NULL DEFAULT '[]',
            activity_start TEXT NOT NULL DEFAULT '',
            activity_end   TEXT NOT NULL DEFAULT '',
            created_at     TEXT NOT NULL,
            updated_at     TEXT NOT NULL,
            status         TEXT NOT NULL DEFAULT 'active',
            superseded_by  TEXT NOT NULL DEFAULT '',
            origin         TEXT NOT NULL DEFAULT 'api',
            file           TEXT NOT NULL,
            text_hash      TEXT NOT NULL,
            tok            TSVECTOR
        )""",
        "CREATE INDEX l1_scope_status ON l1_memories (scope, status, rowid)",
        "CREATE INDEX l1_session_updated ON l1_memories (session_key, updated_at)",
        "CREATE INDEX l1_superseded_by ON l1_memories (superseded_by)",
        "CREATE INDEX l1_text_hash ON l1_memories (text_hash)",
        "CREATE INDEX l1_tok ON l1_memories USING gin (tok)",
        """CREATE TABLE vectors (
            id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            model     TEXT NOT NULL,
            layer     TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            dim       INTEGER NOT NULL,
            vector    BYTEA NOT NULL,
            UNIQUE (model, layer, text_hash)
        )""",
    ):
        conn.execute(statement)


def m002_pipeline(conn: Any) -> None:
    for statement in (
        """CREATE TABLE pipeline_sessions (
            scope              TEXT NOT NULL,
            session_key        TEXT NOT NULL,
            l1_cursor          BIGINT NOT NULL DEFAULT 0,
            l1_cursor_id       TEXT NOT NULL DEFAULT '',
            warmup_threshold   INTEGER NOT NULL DEFAULT 1,
            last_scene_name    TEXT NOT NULL DEFAULT '',
            plan               TEXT NOT NULL DEFAULT '',
            failures           INTEGER NOT NULL DEFAULT 0,
            last_error         TEXT NOT NULL DEFAULT '',
            memories_extracted INTEGER NOT NULL DEFAULT 0,
            updated_at         TEXT NOT NULL,
            PRIMARY KEY (scope, session_key)
        )""",
        """CREATE TABLE pipeline_scopes (
            scope                  TEXT PRIMARY KEY,
            l2_cursor              BIGINT NOT NULL DEFAULT 0,
            l2_cursor_id           TEXT NOT NULL DEFAULT '',
            l2_last_run            DOUBLE PRECISION NOT NULL DEFAULT 0,
            l2_due_at              DOUBLE PRECISION NOT NULL DEFAULT 0,
            l2_plan                TEXT NOT NULL DEFAULT '',
            scenes_processed       INTEGER NOT NULL DEFAULT 0,
            memories_since_persona INTEGER NOT NULL DEFAULT 0,
            last_persona_at        BIGINT NOT NULL DEFAULT 0,
            last_persona_time      TEXT NOT NULL DEFAULT '',
            persona_request        TEXT NOT NULL DEFAULT '',
            last_active            DOUBLE PRECISION NOT NULL DEFAULT 0,
            l2_failures            INTEGER NOT NULL DEFAULT 0,
            l3_failures            INTEGER NOT NULL DEFAULT 0,
            last_error             TEXT NOT NULL DEFAULT '',
            updated_at             TEXT NOT NULL
        )""",
        """CREATE TABLE pipeline_claims (
            scope       TEXT NOT NULL,
            session_key TEXT NOT NULL,
            PRIMARY KEY (scope, session_key)
        )""",
    ):
        conn.execute(statement)


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "core", m001_core),
    (2, "pipeline", m002_pipeline),
]


def migrate(conn: Any) -> list[int]:
    """Apply pending migrations (``conn``: an autocommit psycopg connection); returns numbers."""
    applied: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (number INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT number FROM _migrations")}
        for number, name, fn in MIGRATIONS:
            if number in done:
                continue
            fn(conn)
            conn.execute(
                "INSERT INTO _migrations (number, name, applied_at) VALUES (%s, %s, %s)",
                (number, name, datetime.now(UTC).isoformat()),
            )
            applied.append(number)
    return applied

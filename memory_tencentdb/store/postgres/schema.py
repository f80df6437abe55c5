"""Numbered schema migrations of the PostgreSQL backend (``storeBackend: postgres``).

The same tables and columns as SQLite's (``sqlite/migrations.py``), each backend with its own
statements over them; what differs:

- ``seq`` is an identity column: the row's sequence number, used by cursors and indexes as
  SQLite uses its rowid (record ids, not these numbers, are what the files keep). Migration 1
  named it ``rowid`` and kept JSON as text, imitating SQLite; migration 3 renames it and makes
  the JSON columns ``jsonb`` (a database of that schema is upgraded in place).
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

from memory_tencentdb.store.postgres.rows import jsonb_text

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


# The JSON columns of migration 1, with the value an empty one holds.
JSON_COLUMNS = {
    "l0_messages": {"extra": "{}"},
    "l1_memories": {"source_ids": "[]", "metadata": "{}", "timestamps": "[]"},
}


def m003_seq_and_jsonb(conn: Any) -> None:
    """PostgreSQL's own names and types where migration 1 imitated SQLite.

    - The sequence column is ``seq`` (the name every record and cursor uses for it), not
      ``rowid``: renamed in place, so every number, cursor and index entry stays as it was and
      the identity continues after the highest (its sequence is renamed with it). The
      pgvector tables' key column (``pgv_*``, made by ``vector.py``) is renamed too.
    - JSON columns are ``jsonb``, not text: PostgreSQL checks them on write, answers
      ``metadata ? 'slot'`` itself, and psycopg hands them back decoded. Every stored value was
      written by ``json.dumps``, so the cast reads each one as it was written, but for the
      character U+0000, which jsonb refuses: those few values lose it first (``jsonb_text``).

    Rewrites both tables once (seconds at 100k rows), inside the migration's transaction: a
    failure leaves the database as it was. Gateways of the version before must be stopped
    first: their statements name ``rowid``."""
    for table in ("l0_messages", "l1_memories"):
        conn.execute(f"ALTER TABLE {table} RENAME COLUMN rowid TO seq")
        sequence = conn.execute("SELECT pg_get_serial_sequence(%s, 'seq')", (table,)).fetchone()
        if sequence and sequence[0]:
            conn.execute(f"ALTER SEQUENCE {sequence[0]} RENAME TO {table}_seq_seq")
        changes = []
        for column in JSON_COLUMNS[table]:  # values jsonb refuses: see ``rows.jsonb_text``
            for seq, text in conn.execute(
                f"SELECT seq, {column} FROM {table} WHERE strpos({column}, %s) > 0",
                ("\\u0000",),
            ).fetchall():
                conn.execute(
                    f"UPDATE {table} SET {column} = %s WHERE seq = %s", (jsonb_text(text), seq)
                )
        for column, empty in JSON_COLUMNS[table].items():
            changes += [
                f"ALTER COLUMN {column} DROP DEFAULT",
                f"ALTER COLUMN {column} TYPE jsonb USING {column}::jsonb",
                f"ALTER COLUMN {column} SET DEFAULT '{empty}'::jsonb",
            ]
        conn.execute(f"ALTER TABLE {table} {', '.join(changes)}")
    vector_tables = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace"
        " AND left(c.relname, 4) = 'pgv_' AND a.attname = 'rowid' AND NOT a.attisdropped"
    ).fetchall()
    for (name,) in vector_tables:
        conn.execute(f'ALTER TABLE "{name}" RENAME COLUMN rowid TO seq')


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "core", m001_core),
    (2, "pipeline", m002_pipeline),
    (3, "seq-and-jsonb", m003_seq_and_jsonb),
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

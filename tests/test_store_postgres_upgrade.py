"""A PostgreSQL database made by the schema before migration 3 (``rowid`` identity columns,
JSON as ``TEXT``, pgvector tables keyed by ``rowid``) opens with the current store: every row
is readable as it was, searchable by keyword and by vector, the pipeline's cursors still point
at the same messages, and new writes continue the same numbering.

The old database is made here the way that version made it: its migrations 1 and 2 (unchanged
in ``schema.py``), then its own statements for what a gateway wrote (copied below from the
store of that version, ``rowid`` and JSON text included), so the test keeps describing that
version after the code has moved on."""

from __future__ import annotations

import json
from datetime import UTC

import numpy as np
import pytest

from memory_tencentdb.store.records import L0Input, Memory
from memory_tencentdb.text import tokenize
from tests.support import postgres

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("pgserver")

SCOPE = "team-old"
DIM = 16


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _literal(v: np.ndarray) -> str:
    return "[" + ",".join(map(repr, v.astype(np.float32).tolist())) + "]"


def _tsv(text: str) -> str:
    from memory_tencentdb.store.postgres.text_search import tsvector_literal

    out = tsvector_literal(tokenize.index_text(text))
    assert out
    return out


def _old_database(monkeypatch: pytest.MonkeyPatch) -> str:
    """A database as the store before migration 3 left it, with a gateway's worth of rows."""
    from memory_tencentdb.store.postgres import schema
    from memory_tencentdb.store.postgres.vector import pg_vector_table

    dsn = postgres.new_database()
    with psycopg.connect(dsn, autocommit=True) as conn:
        with monkeypatch.context() as m:
            m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
            assert schema.migrate(conn) == [1, 2]
        l0 = [
            ("l0_a", "user", "我下周去成都出差，帮我记一下", {"tool": None}, "Melanie"),
            ("l0_b", "assistant", "好的，已记下成都出差。", {"args": "a\x00b"}, ""),
            ("l0_c", "user", "I am allergic to cat hair", {"k": [1, 2]}, ""),
        ]
        for i, (rid, role, content, extra, speaker) in enumerate(l0):
            indexed = f"{speaker}: {content}" if speaker else content
            conn.execute(
                "INSERT INTO l0_messages (id, scope, session_key, session_id, role, content,"
                " message_id, timestamp, recorded_at, file, text_hash, extra, speaker, tok)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector)"
                " ON CONFLICT (id) DO NOTHING RETURNING rowid",
                (
                    rid,
                    SCOPE,
                    "s1",
                    "sid-1",
                    role,
                    content,
                    f"m{i}",
                    1_700_000_000_000 + i,
                    f"2026-01-01T00:00:0{i}.000Z",
                    "conversations/2026-01-01.jsonl",
                    f"h-{rid}",
                    json.dumps(extra, ensure_ascii=False),
                    speaker,
                    _tsv(indexed),
                ),
            )
        l1 = [
            ("mem_a", "用户下周去成都出差", "active", ["l0_a"], {"slot": {"subject": "trip"}}),
            ("mem_b", "User is allergic to cat hair", "active", ["l0_c"], {}),
            ("mem_old", "User is allergic to dogs", "superseded", [], {"note": "引号\"和'"}),
        ]
        for mid, content, status, sources, metadata in l1:
            conn.execute(
                "INSERT INTO l1_memories (id, scope, content, type, priority, scene_name,"
                " session_key, session_id, source_ids, metadata, timestamps, activity_start,"
                " activity_end, created_at, updated_at, status, superseded_by, origin, file,"
                " text_hash, tok) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s, %s, %s, %s, %s, %s, %s, %s::tsvector)",
                (
                    mid,
                    SCOPE,
                    content,
                    "episodic",
                    60,
                    "travel",
                    "s1",
                    "sid-1",
                    json.dumps(sources),
                    json.dumps(metadata, ensure_ascii=False),
                    json.dumps(["2026-01-01T00:00:00Z"]),
                    "",
                    "",
                    "2026-01-01T00:00:00.000Z",
                    "2026-01-01T00:00:01.000Z",
                    status,
                    "mem_b" if status == "superseded" else "",
                    "extraction",
                    "records/2026-01-01.jsonl",
                    f"h-{mid}",
                    _tsv(content) if status == "active" else None,
                ),
            )
        conn.execute(
            "INSERT INTO pipeline_sessions (scope, session_key, l1_cursor, l1_cursor_id,"
            " updated_at) SELECT scope, session_key, rowid, id, '' FROM l0_messages"
            " WHERE id = 'l0_b'"
        )
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('tokenizer', %s)", (tokenize.TOKENIZER_ID,)
        )
        # The pgvector table and its scope sums as that version's index made them.
        table = pg_vector_table("l1", "m-old")
        conn.execute(
            f"CREATE TABLE {table} (rowid BIGINT PRIMARY KEY, scope TEXT NOT NULL,"
            f" embedding vector({DIM}) NOT NULL)"
        )
        conn.execute(
            f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute(f"CREATE INDEX {table}_scope ON {table} (scope)")
        conn.execute(
            f"CREATE TABLE {table}_stats (scope TEXT PRIMARY KEY, total vector({DIM}) NOT NULL,"
            " n BIGINT NOT NULL)"
        )
        for seed, (rowid, h) in enumerate(
            conn.execute(
                "SELECT rowid, text_hash FROM l1_memories WHERE status = 'active' ORDER BY rowid"
            ).fetchall()
        ):
            v = _vec(seed)
            conn.execute(
                "INSERT INTO vectors (model, layer, text_hash, dim, vector) VALUES (%s, %s, %s,"
                " %s, %s)",
                ("m-old", "l1", h, DIM, v.astype("<f4").tobytes()),
            )
            conn.execute(
                f"INSERT INTO {table} (rowid, scope, embedding) VALUES (%s, %s, %s::vector)",
                (rowid, SCOPE, _literal(v)),
            )
        conn.execute(
            f"INSERT INTO {table}_stats (scope, total, n) SELECT scope, sum(embedding), count(*)"
            f" FROM {table} GROUP BY scope"
        )
    return dsn


def _columns(dsn: str, table: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_name = %s",
                (table,),
            ).fetchall()
        )


def test_a_database_of_the_old_schema_opens_readable_and_writable(tmp_path, monkeypatch):
    from memory_tencentdb.store.postgres import PostgresStore
    from memory_tencentdb.store.postgres.vector import pg_vector_table

    dsn = _old_database(monkeypatch)
    assert "rowid" in _columns(dsn, "l0_messages")
    assert _columns(dsn, "l1_memories")["metadata"] == "text"

    store = PostgresStore(tmp_path / "data", UTC, dsn=dsn)
    try:
        # The schema now: a sequence column named for what it is, JSON as jsonb.
        l0_cols, l1_cols = _columns(dsn, "l0_messages"), _columns(dsn, "l1_memories")
        assert "rowid" not in l0_cols and l0_cols["seq"] == "bigint"
        assert "rowid" not in l1_cols and l1_cols["seq"] == "bigint"
        assert l0_cols["extra"] == "jsonb"
        assert {l1_cols[c] for c in ("source_ids", "metadata", "timestamps")} == {"jsonb"}
        assert "seq" in _columns(dsn, pg_vector_table("l1", "m-old"))

        # Everything written before reads back as it was.
        old = store.l0_by_ids(["l0_a", "l0_b", "l0_c"])
        assert [m.content for m in old] == [
            "我下周去成都出差，帮我记一下",
            "好的，已记下成都出差。",
            "I am allergic to cat hair",
        ]
        assert old[0].extra == {"tool": None} and old[2].extra == {"k": [1, 2]}
        assert old[1].extra == {"args": "ab"}  # jsonb holds no U+0000: the migration drops it
        assert old[0].speaker == "Melanie"
        trip = store.memory_by_id("mem_a")
        assert trip is not None and trip.metadata == {"slot": {"subject": "trip"}}
        assert trip.source_message_ids == ["l0_a"] and trip.timestamps == ["2026-01-01T00:00:00Z"]
        gone = store.memory_by_id("mem_old")
        assert gone is not None and gone.metadata == {"note": "引号\"和'"}
        assert [m.id for m in store.memory_history("mem_b")] == ["mem_old"]
        assert [m.id for m in store.recent_slot_memories(SCOPE, 5)] == ["mem_a"]
        assert store.cited_l0_ids() >= {"l0_a", "l0_c"}
        # The L1 cursor still stands after the same message.
        state = store.session_state(SCOPE, "s1")
        assert state.l1_cursor == store.l0_seq("l0_b")
        assert [m.id for m in store.l0_after(SCOPE, "s1", state.l1_cursor, 10)] == ["l0_c"]
        # Keyword search over the old tokens, in both languages.
        hits = store.keyword_search("l1", SCOPE, tokenize.query_terms("成都 出差"), 5)
        assert [store.l1_rows([h.seq])[h.seq].id for h in hits] == ["mem_a"]
        hits = store.keyword_search("l0", SCOPE, tokenize.query_terms("cat hair"), 5)
        assert hits and store.l0_rows([hits[0].seq])[hits[0].seq].id == "l0_c"
        # The old pgvector table serves by the same numbers.
        index = store.open_index("l1", "m-old", DIM, "pgvector")
        assert len(index) == 2
        best = index.search(SCOPE, _vec(1), 1)
        assert best and best[0][0] == store.l1_seq("mem_b")

        # New writes continue the numbering and use the new columns.
        top = store.max_l0_seq()
        new = store.record_messages(
            [L0Input(SCOPE, "s1", "sid-1", "user", "新消息 new message", 1_700_000_100_000)]
        )
        assert new[0].seq > top
        assert [m.id for m in store.l0_after(SCOPE, "s1", state.l1_cursor, 10)] == [
            "l0_c",
            new[0].id,
        ]
        written = store.write_memory(
            Memory(
                id="mem_new",
                scope=SCOPE,
                content="用户喜欢喝茶",
                metadata={"slot": {"subject": "drink"}},
                source_message_ids=[new[0].id],
            )
        )
        assert written.seq > store.l1_seq("mem_a")  # type: ignore[operator]
        again = store.memory_by_id("mem_new")
        assert again is not None and again.metadata == {"slot": {"subject": "drink"}}
        assert [m.id for m in store.recent_slot_memories(SCOPE, 5)] == ["mem_new", "mem_a"]
        store.save_vectors("l1", "m-old", [(written.seq, SCOPE, written.text_hash, _vec(9))])
        assert index.search(SCOPE, _vec(9), 1)[0][0] == written.seq
    finally:
        store.close()

    # A second gateway (or a restart) finds the schema current and migrates nothing again.
    again = PostgresStore(tmp_path / "data2", UTC, dsn=dsn)
    try:
        assert again.memory_by_id("mem_new") is not None
        assert len(again.l0_by_ids(["l0_a", "l0_b", "l0_c"])) == 3
    finally:
        again.close()

"""The PostgreSQL + pgvector store (``storeBackend: postgres``): team memory.

Several gateways, each with its own data directory (its journal files stay its own), share one
database: L0 messages, L1 memories, pipeline state, keyword and vector indexes. It keeps the
file-first order of every store (``journal_writes.JournalWrites``: JSONL line fsync'ed, then the
database) and owns its SQL and schema (``schema.py``); nothing here is shared with SQLite's:

- Statements use psycopg's ``%s`` placeholders; lists are bound as arrays (``= ANY(%s)``).
- Keyword search: a ``tsvector`` of the same jieba tokens as SQLite's FTS5 (``text_search.py``),
  ranked by BM25 with FTS5's constants.
- Vectors: ``PgVectorIndex`` (pgvector, HNSW) for both layers, so a vector stored by one
  gateway is searchable by all.
- Pipeline work is claimed per session with ``SELECT ... FOR UPDATE SKIP LOCKED`` held on a
  connection of its own for the whole extraction: a second gateway skips the session; a
  killed gateway's connection drops, its lock with it, and the next gateway resumes from the
  cursor (or replays the saved plan).
- Journal bookkeeping (``journal:<file>`` meta keys) is per data directory, because each
  gateway verifies only its own files.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import tzinfo
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psycopg

from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore, RowListener
from memory_tencentdb.store.common import (
    L1_JSON_COLUMNS,
    chunks,
    keeps_index_entry,
    l0_params,
    l1_values,
    now_iso,
)
from memory_tencentdb.store.connection import Binding
from memory_tencentdb.store.errors import StoreUnavailable
from memory_tencentdb.store.journal_writes import JournalWrites
from memory_tencentdb.store.postgres.admin import PgAdmin
from memory_tencentdb.store.postgres.connection import Conn, PooledReader, ReaderPool
from memory_tencentdb.store.postgres.hub import PgHub
from memory_tencentdb.store.postgres.pipeline import PgPipeline
from memory_tencentdb.store.postgres.rows import (
    L0_SELECT,
    L1_SELECT,
    jsonb_text,
    l0_from_pg,
    memory_from_pg,
)
from memory_tencentdb.store.postgres.schema import migrate
from memory_tencentdb.store.postgres.text_search import (
    BM25_B,
    BM25_K1,
    MAX_LEXEME_BYTES,
    tsquery_literal,
    tsvector_literal,
)
from memory_tencentdb.store.postgres.vector import EF_SEARCH, PgVectorIndex, pg_vector_table
from memory_tencentdb.store.records import KeywordHit, L0Message, Memory
from memory_tencentdb.store.vector_index import BLOCK_ROWS, VectorIndex
from memory_tencentdb.text import tokenize

log = logging.getLogger("memory_tencentdb.store")
_T = TypeVar("_T")

STATS_TTL_S = 30.0  # how long document frequencies are reused
# Read connections per gateway (besides the writer, the vector writer and one per pipeline
# worker holding a claim): 2 cores never run more statements than this at once.
MAX_READERS = 8

# An L0 row's indexed text in SQL: the same as ``embedding_text.l0_text``.
_L0_INDEXED_M = "CASE WHEN m.speaker != '' THEN m.speaker || ': ' || m.content ELSE m.content END"


# Placeholders of the L1 columns that are not text: the JSON text ``l1_values`` makes is cast.
_CASTS = {"tok": "%s::tsvector", **{c: "%s::jsonb" for c in L1_JSON_COLUMNS}}


def _table(layer: str) -> str:
    return "l1_memories" if layer == "l1" else "l0_messages"


def _without_vector(layer: str, model: str, skip_roles: tuple[str, ...]) -> tuple[str, list[Any]]:
    """``FROM … WHERE …`` of the rows of ``layer`` (``m``; active ones for L1, L0 ones not of
    the ``skip_roles``) that have no vector for ``model``, and its parameters. Shared by the scan
    and its count."""
    roles = skip_roles if layer == "l0" else ()
    if layer == "l1":
        only = " AND m.status = 'active'"
    else:
        only = " AND m.role <> ALL(%s)" if roles else ""
    sql = (
        f"FROM {_table(layer)} m WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = %s"
        f" AND v.layer = %s AND v.text_hash = m.text_hash){only}"
    )
    return sql, [model, layer, *([list(roles)] if roles else [])]


def session_lock_key(scope: str, session_key: str) -> str:
    return f"tdai-l0:{scope}\x1f{session_key}"


class PostgresStore(JournalWrites, PgPipeline, PgAdmin, PgHub, MemoryStore):
    """The PostgreSQL ``MemoryStore``, over a database shared by several gateways."""

    backend = "postgres"
    shared = True
    vector_index_kind = "pgvector"

    def __init__(self, data_dir: Path, tz: tzinfo, dsn: str) -> None:
        self.data_dir = Path(data_dir)
        self.tz = tz
        for sub in ("conversations", "records", "scene_blocks", ".metadata", ".backup"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
        files.make_private(self.data_dir)
        self.dsn = dsn
        self.db_path = self.data_dir / "memory.db"  # not used: no local database file
        self.write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[Conn] = []  # connections of their own: vectors, claims
        self._readers_lock = threading.Lock()
        self._reader_pool = ReaderPool(self._connect, MAX_READERS)
        self._pooled_reader = PooledReader(self._reader_pool)
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._index_lock = threading.Lock()
        self._row_listeners: list[RowListener] = []
        self._df_cache: dict[tuple[str, str], tuple[float, Any]] = {}
        self.writer = self._connect()
        # Vectors (canonical rows and the HNSW tables) are written on a connection of their
        # own: an HNSW insert costs milliseconds and must not hold captures behind the writer.
        self._vec_lock = threading.Lock()
        self._vec_conn: Conn | None = None
        try:
            migrate(self.writer.raw)
        except psycopg.Error as e:
            self.writer.close()
            raise StoreUnavailable(
                f"PostgreSQL: could not create or update the schema (it needs the pgvector"
                f" extension, and the right to create tables): {e}".strip()
            ) from None
        version = self.writer.execute("SHOW server_version").fetchone()[0]
        vec = self.writer.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        self.binding = Binding(
            "postgres", psycopg, f"PostgreSQL {version}", vec is not None, vec[0] if vec else None
        )
        self.journal_id = self._journal_id()
        self._check_tokenizer()

    # ================================================================= lifecycle

    def _connect(self) -> Conn:
        try:
            raw = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            # The message names host and database, never the password.
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {e}".strip()) from None
        # The JSONL journal (fsync'ed first) is the durable copy and the start-up check indexes
        # what the database lacks, so a commit need not wait for PostgreSQL's own WAL flush
        # (as SQLite runs with synchronous=NORMAL): measured in bench/RESULTS.md.
        raw.execute("SET synchronous_commit = off")
        raw.execute("SET hnsw.iterative_scan = relaxed_order")
        raw.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
        return Conn(raw)

    def reader(self) -> Any:
        """Reads run on the bounded pool (``ReaderPool``), or, inside ``_pinned_reader``, on
        the connection this thread holds for its transaction."""
        pinned = getattr(self._local, "pinned", None)
        return pinned if pinned is not None else self._pooled_reader

    @contextlib.contextmanager
    def _pinned_reader(self) -> Iterator[Conn]:
        """One pooled connection for this thread alone for the block (a read transaction);
        every ``reader()`` statement of the thread meanwhile runs on it."""
        with self._reader_pool.connection() as conn:
            self._local.pinned = conn
            try:
                yield conn
            finally:
                self._local.pinned = None

    def close(self) -> None:
        self._reader_pool.close()
        with self._readers_lock:
            for conn in self._readers:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
            self._readers.clear()
        with self.write_lock, contextlib.suppress(psycopg.Error):
            self.writer.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Every store write inside the block commits together, or none does (it raises).

        Nested blocks join the outer one. Other threads' writes wait until it ends.
        """
        with self.write_lock:
            if getattr(self._local, "in_tx", False):
                yield
                return
            if not self.writer.usable:  # the server restarted: start again on a new connection
                self.writer = self._connect()
            self.writer.execute("BEGIN")
            self._local.in_tx = True
            try:
                yield
            except BaseException:
                self._local.in_tx = False
                self.writer.execute("ROLLBACK")
                raise
            self._local.in_tx = False
            self.writer.execute("COMMIT")

    def _transaction(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(writer_connection)`` in a transaction (or in the caller's, if one is open)."""
        with self.transaction():
            return fn(self.writer)

    def _vector_transaction(self, fn: Callable[[Any], _T]) -> _T:
        with self._vec_lock:
            if self._vec_conn is None or not self._vec_conn.usable:
                self._vec_conn = self._connect()
                with self._readers_lock:
                    self._readers.append(self._vec_conn)
            with self._vec_conn.raw.transaction():
                return fn(self._vec_conn)

    def _journal_id(self) -> str:
        """This data directory's name for its journal bookkeeping in the shared ``meta``."""
        path = self.data_dir / ".metadata" / "store-journal-id"
        try:
            return path.read_text("utf-8").strip()
        except OSError:
            ident = uuid.uuid4().hex[:16]
            files.write_atomic(path, ident + "\n")
            return ident

    def _meta_key(self, key: str) -> str:
        return f"journal@{self.journal_id}:{key[8:]}" if key.startswith("journal:") else key

    def get_meta(self, key: str) -> str | None:
        row = (
            self.reader()
            .execute("SELECT value FROM meta WHERE key = %s", (self._meta_key(key),))
            .fetchone()
        )
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.write_lock:
            self.writer.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (self._meta_key(key), value),
            )

    def _check_tokenizer(self) -> None:
        """Query tokens must match index tokens: re-tokenize if the tokenizer changed."""
        built_with = self.get_meta("tokenizer")
        if built_with not in (None, tokenize.TOKENIZER_ID):
            log.warning(
                "tokenizer changed (%s -> %s): rebuilding the keyword index",
                built_with,
                tokenize.TOKENIZER_ID,
            )
            self.rebuild_fts()
        self.set_meta("tokenizer", tokenize.TOKENIZER_ID)

    # ================================================================= messages (L0)

    def index_l0_lines(self, rows: list[dict[str, Any]], rel_file: str) -> list[int]:
        """Insert JSONL L0 lines (captures, reindex, import); returns the new rows' seqs."""
        params, toks = l0_params(rows, rel_file)
        sessions = sorted({session_lock_key(p[1], p[2]) for p in params})

        def write(conn: Any) -> list[int]:
            for key in sessions:  # see l0_after: no extractor reads past an uncommitted row
                conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", (key,))
            seqs = []
            for p, tok in zip(params, toks, strict=True):
                row = conn.execute(
                    "INSERT INTO l0_messages (id, scope, session_key, session_id, role, content,"
                    " message_id, timestamp, recorded_at, file, text_hash, extra, speaker, tok)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s::tsvector)"
                    " ON CONFLICT (id) DO NOTHING RETURNING seq",
                    (*p[:11], jsonb_text(p[11]), *p[12:], tsvector_literal(tok)),
                ).fetchone()
                if row:
                    seqs.append(int(row[0]))
            return seqs

        seqs = self._transaction(write)
        self._written("l0", seqs)
        return seqs

    def l0_rows(self, seqs: Iterable[int]) -> dict[int, L0Message]:
        wanted = list(seqs)
        if not wanted:
            return {}
        cur = self.reader().execute(
            f"SELECT {L0_SELECT} FROM l0_messages WHERE seq = ANY(%s)", (wanted,)
        )
        return {m.seq: m for m in map(l0_from_pg, cur.fetchall())}

    def l0_sessions(self, seqs: Iterable[int]) -> dict[int, tuple[str, str, str]]:
        """The three columns alone (``l0_rows`` of ~400 rows was ~5 ms of a conversation search)."""
        wanted = list(seqs)
        if not wanted:
            return {}
        cur = self.reader().execute(
            "SELECT seq, scope, session_key, session_id FROM l0_messages WHERE seq = ANY(%s)",
            (wanted,),
        )
        return {int(seq): (scope, key, sid or "") for seq, scope, key, sid in cur.fetchall()}

    def l0_with_roles(self, seqs: Iterable[int], roles: tuple[str, ...]) -> set[int]:
        """The role column alone, not whole rows (see ``l0_sessions``)."""
        wanted = list(seqs)
        if not wanted or not roles:
            return set()
        cur = self.reader().execute(
            "SELECT seq FROM l0_messages WHERE seq = ANY(%s) AND role = ANY(%s)",
            (wanted, list(roles)),
        )
        return {int(seq) for (seq,) in cur.fetchall()}

    def l0_by_ids(self, ids: list[str]) -> list[L0Message]:
        if not ids:
            return []
        cur = self.reader().execute(
            f"SELECT {L0_SELECT} FROM l0_messages WHERE id = ANY(%s)", (list(ids),)
        )
        return sorted(map(l0_from_pg, cur.fetchall()), key=lambda m: (m.timestamp, m.seq))

    def l0_after(self, scope: str, session_key: str, after_seq: int, limit: int) -> list[L0Message]:
        """Never past a message another gateway has numbered and not yet committed: sequence
        numbers are handed out before commit, so a cursor moved past a later-numbered row that
        committed first would skip the earlier one for good. Captures hold a shared lock on the
        session until they commit; this waits for them."""
        with self._pinned_reader() as conn, conn.raw.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (session_lock_key(scope, session_key),),
            )
            cur = conn.execute(
                f"SELECT {L0_SELECT} FROM l0_messages WHERE scope = %s AND session_key = %s"
                " AND seq > %s ORDER BY seq LIMIT %s",
                (scope, session_key, after_seq, limit),
            )
            return [l0_from_pg(r) for r in cur.fetchall()]

    def count(self, table: str, scope: str | None = None) -> int:
        assert table in ("l0_messages", "l1_memories")
        if scope is None:
            return int(self.reader().execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        return int(
            self.reader()
            .execute(f"SELECT count(*) FROM {table} WHERE scope = %s", (scope,))
            .fetchone()[0]
        )

    # ================================================================= memories (L1)

    def index_l1_line(self, r: dict[str, Any], rel_file: str) -> int:
        values, tok = l1_values(r, rel_file)
        for column in L1_JSON_COLUMNS:
            values[column] = jsonb_text(values[column])
        values["tok"] = tsvector_literal(tok) if values["status"] == "active" else None
        cols = ", ".join(values)
        marks = ", ".join(_CASTS.get(c, "%s") for c in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("id", "created_at"))

        def write(conn: Any) -> tuple[int, bool, bool]:
            before = conn.execute(
                "SELECT text_hash, status, scope FROM l1_memories WHERE id = %s", (r["id"],)
            ).fetchone()
            seq = int(
                conn.execute(
                    f"INSERT INTO l1_memories ({cols}) VALUES ({marks})"
                    f" ON CONFLICT (id) DO UPDATE SET {updates} RETURNING seq",
                    tuple(values.values()),
                ).fetchone()[0]
            )
            changed = before is not None and before[0] != values["text_hash"]
            if changed:  # the pgvector rows of the old text go in this transaction
                self._drop_stale_vectors(conn, "l1", seq)
            return seq, changed, keeps_index_entry(before, values)

        seq, changed, same = self._transaction(write)
        if changed:
            self._drop_from_indexes("l1", [seq], memory_only=True)
        self._l1_indexed(seq, values["status"], notify=not same)
        return seq

    def _drop_stale_vectors(self, conn: Any, layer: str, seq: int) -> None:
        """A row's text changed (a correction): its vectors of the old text leave the pgvector
        tables inside the write's transaction (their scope sums with them), so the old meaning
        never matches the new text, not even after a crash. The background loop then embeds
        the new text."""
        for (lay, _), index in list(self._indexes.items()):
            if lay == layer and isinstance(index, PgVectorIndex):
                index.remove_in(conn, [seq])

    def apply_status_line(self, line: dict[str, Any]) -> None:
        status = line["status"]
        row = self._transaction(
            lambda conn: conn.execute(
                "UPDATE l1_memories SET status = %s, superseded_by = %s, updated_at = %s,"
                " tok = CASE WHEN %s = 'active' THEN tok ELSE NULL END WHERE id = %s"
                " RETURNING seq",
                (
                    status,
                    line.get("superseded_by", ""),
                    line.get("at") or now_iso(),
                    status,
                    line["id"],
                ),
            ).fetchone()
        )
        if row is not None and status != "active":
            self._drop_from_indexes("l1", [int(row[0])])

    def l1_rows(self, seqs: Iterable[int]) -> dict[int, Memory]:
        wanted = list(seqs)
        if not wanted:
            return {}
        cur = self.reader().execute(
            f"SELECT {L1_SELECT} FROM l1_memories WHERE seq = ANY(%s)", (wanted,)
        )
        return {m.seq: m for m in map(memory_from_pg, cur.fetchall())}

    def l1_contents(self, seqs: Iterable[int]) -> dict[int, str]:
        wanted = list(seqs)
        if not wanted:
            return {}
        cur = self.reader().execute(
            "SELECT seq, content FROM l1_memories WHERE seq = ANY(%s)", (wanted,)
        )
        return {int(seq): content for seq, content in cur.fetchall()}

    def memory_by_id(self, memory_id: str) -> Memory | None:
        row = (
            self.reader()
            .execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE id = %s", (memory_id,))
            .fetchone()
        )
        return memory_from_pg(row) if row else None

    def memories_by_ids(self, ids: list[str]) -> list[Memory]:
        if not ids:
            return []
        cur = self.reader().execute(
            f"SELECT {L1_SELECT} FROM l1_memories WHERE id = ANY(%s)", (list(ids),)
        )
        return [memory_from_pg(r) for r in cur.fetchall()]

    def memory_history(self, memory_id: str) -> list[Memory]:
        out: list[Memory] = []
        frontier = [memory_id]
        seen = {memory_id}
        while frontier:
            rows = [
                memory_from_pg(r)
                for r in self.reader()
                .execute(
                    f"SELECT {L1_SELECT} FROM l1_memories WHERE superseded_by = ANY(%s)",
                    (frontier,),
                )
                .fetchall()
            ]
            frontier = [r.id for r in rows if r.id not in seen]
            seen.update(frontier)
            out.extend(rows)
        return sorted(out, key=lambda r: r.updated_at, reverse=True)

    # ================================================================= keyword search

    def rebuild_fts(self) -> None:
        def write(conn: Any) -> None:
            for table, where in (("l0_messages", ""), ("l1_memories", " WHERE status = 'active'")):
                text = "content" if table == "l1_memories" else "speaker, content"
                rows = conn.execute(f"SELECT seq, {text} FROM {table}{where}").fetchall()
                for row in rows:
                    if table == "l1_memories":
                        tok = tokenize.index_text(row[1])
                    else:
                        tok = tokenize.index_text(f"{row[1]}: {row[2]}" if row[1] else row[2])
                    conn.execute(
                        f"UPDATE {table} SET tok = %s::tsvector WHERE seq = %s",
                        (tsvector_literal(tok), row[0]),
                    )
            conn.execute("UPDATE l1_memories SET tok = NULL WHERE status != 'active'")

        self._transaction(write)

    def keyword_search(
        self, layer: str, scope: str, terms: list[str], k: int, session_key: str | None = None
    ) -> list[KeywordHit]:
        """BM25 over the jieba tokens within one scope, as SQLite's FTS5 ``bm25()`` computes it
        (k1 1.2, b 0.75, its IDF), so scores and the keyword-only threshold mean the same on
        both backends. Score in (0, 1), higher is better.

        ``ts_rank`` was measured first: its scores (0.01-0.3) sat under the 0.3 threshold, and
        keyword recall at 10k answered 0.03 memories a query where SQLite answered 4.15."""
        terms = [t for t in dict.fromkeys(terms) if t and len(t.encode()) <= MAX_LEXEME_BYTES]
        query = tsquery_literal(terms)
        if not query or k <= 0:
            return []
        docs, df = self._cached_term_stats(layer, terms)
        idf = {
            t: max(1e-6, math.log((docs - df[t] + 0.5) / (df[t] + 0.5))) for t in terms if df.get(t)
        }
        if not idf:
            return []
        extra = ""
        filters: list[Any] = [query, scope]
        if layer == "l1":
            extra = " AND m.status = 'active'"
        if session_key:
            extra += " AND m.session_key = %s"
            filters.append(session_key)
        lexemes = list(idf)
        params = [[idf[t] for t in lexemes], lexemes, self._avg_length(layer), lexemes, *filters, k]
        # Each matching row's own query lexemes only: setweight marks them, ts_filter keeps
        # them, so unnest yields ~1 row per match instead of every lexeme of the memory, and
        # the IDF is an array lookup instead of a join per row (10k memories, a common query:
        # 1052 matches, 27 -> 13 ms; same scores, same order).
        rows = (
            self.reader()
            .execute(
                "SELECT c.seq, sum((%s::float8[])[array_position(%s::text[], c.lexeme)]"
                f" * c.tf * {BM25_K1 + 1}"
                f" / (c.tf + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * c.dl / %s))) AS s"
                " FROM (SELECT m.seq, u.lexeme, cardinality(u.positions) AS tf,"
                f" length(m.tok) AS dl FROM {_table(layer)} m,"
                " unnest(ts_filter(setweight(m.tok, 'A', %s::text[]), '{a}')) u"
                f" WHERE m.tok @@ %s::tsquery AND m.scope = %s{extra}) c"
                " GROUP BY c.seq ORDER BY s DESC, c.seq DESC LIMIT %s",
                params,
            )
            .fetchall()
        )
        out = []
        for seq, score in rows:
            r = float(score or 0.0)
            out.append(KeywordHit(int(seq), r / (1.0 + r) if r > 0 else 1.0 / 1001))
        return out

    def _cached_term_stats(self, layer: str, terms: list[str]) -> tuple[int, dict[str, int]]:
        """``term_stats`` through a short-lived cache: document frequencies move slowly, and
        counting a common term through the GIN index costs milliseconds a query."""
        now = time.monotonic()
        cache = self._df_cache
        missing = [t for t in terms if (layer, t) not in cache or cache[(layer, t)][0] < now]
        if missing or (layer, "") not in cache or cache[(layer, "")][0] < now:
            docs, df = self.term_stats(layer, missing)
            until = now + STATS_TTL_S
            cache[(layer, "")] = (until, docs)
            for t in missing:
                cache[(layer, t)] = (until, df.get(t, 0))
            if len(cache) > 20_000:
                cache.clear()
        docs = cache[(layer, "")][1]
        return docs, {t: cache[(layer, t)][1] for t in terms if (layer, t) in cache}

    def _avg_length(self, layer: str) -> float:
        """Mean distinct tokens per indexed row (BM25's average document length), cached."""
        now = time.monotonic()
        hit = self._df_cache.get((layer, "\x1favgdl"))
        if hit and hit[0] >= now:
            return float(hit[1])
        # A sample is enough, and keeps this O(1) at any size.
        avg = (
            self.reader()
            .execute(
                f"SELECT avg(length(tok)) FROM (SELECT tok FROM {_table(layer)}"
                " WHERE tok IS NOT NULL ORDER BY seq DESC LIMIT 5000) s"
            )
            .fetchone()[0]
        )
        value = max(1.0, float(avg or 1.0))
        self._df_cache[(layer, "\x1favgdl")] = (now + STATS_TTL_S, value)
        return value

    def term_stats(self, layer: str, terms: list[str]) -> tuple[int, dict[str, int]]:
        """``(documents, {term: documents containing it})``, counted through the GIN index."""
        table = _table(layer)
        conn = self.reader()
        df: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            q = tsquery_literal([term])
            if q:
                n = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE tok @@ %s::tsquery", (q,)
                ).fetchone()[0]
                if n:
                    df[term] = int(n)
        docs = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {table}").fetchone()[0]
        return int(docs), df

    def indexed_tokens(self, layer: str, rowids: list[int]) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        if not rowids:
            return out
        for seq, toks in self.reader().execute(
            f"SELECT seq, tsvector_to_array(tok) FROM {_table(layer)}"
            " WHERE seq = ANY(%s) AND tok IS NOT NULL",
            (list(rowids),),
        ):
            out[int(seq)] = set(toks or ())
        return out

    # ================================================================= vectors

    def missing_vectors(
        self,
        layer: str,
        model: str,
        limit: int,
        after: int = 0,
        rowids: list[int] | None = None,
        skip_roles: tuple[str, ...] = (),
    ) -> list[tuple[int, str, str, str]]:
        text = "m.content" if layer == "l1" else _L0_INDEXED_M
        without, params = _without_vector(layer, model, skip_roles)
        if rowids is not None:
            if not rowids:
                return []
            where = " AND m.seq = ANY(%s)"
            params.append(list(rowids))
        else:
            where = " AND m.seq > %s"
            params.append(after)
        params.append(limit)
        rows: list[tuple[int, str, str, str]] = (
            self.reader()
            .execute(
                f"SELECT m.seq, m.scope, m.text_hash, {text}"
                f" {without}{where} ORDER BY m.seq LIMIT %s",
                params,
            )
            .fetchall()
        )
        return rows

    def count_missing_vectors(
        self, layer: str, model: str, skip_roles: tuple[str, ...] = ()
    ) -> int:
        without, params = _without_vector(layer, model, skip_roles)
        return int(self.reader().execute(f"SELECT count(*) {without}", params).fetchone()[0])

    def save_vectors(
        self, layer: str, model: str, items: list[tuple[int, str, str, np.ndarray]]
    ) -> None:
        if not items:
            return
        self._vector_transaction(
            lambda conn: conn.executemany(
                "INSERT INTO vectors (model, layer, text_hash, dim, vector)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [
                    (model, layer, h, int(v.shape[0]), v.astype("<f4").tobytes())
                    for _, _, h, v in items
                ],
            )
        )
        index = self._indexes.get((layer, model))
        if index is not None:
            index.add([(seq, scope, vec) for seq, scope, _, vec in items])

    def stored_vectors(
        self, layer: str, model: str, text_hashes: list[str]
    ) -> dict[str, np.ndarray]:
        if not text_hashes:
            return {}
        rows = self.reader().execute(
            "SELECT text_hash, vector FROM vectors WHERE model = %s AND layer = %s"
            " AND text_hash = ANY(%s)",
            (model, layer, sorted(set(text_hashes))),
        )
        return {h: np.frombuffer(blob, dtype="<f4") for h, blob in rows.fetchall()}

    def vector_counts(self) -> dict[str, int]:
        rows = self.reader().execute("SELECT model, count(*) FROM vectors GROUP BY model")
        return {model: int(n) for model, n in rows.fetchall()}

    def open_index(self, layer: str, model: str, dim: int, backend: str) -> VectorIndex:
        """The pgvector table of ``layer`` x ``model`` (``backend`` is SQLite's choice: every
        gateway on the database must see the same vectors, so it is always pgvector here)."""
        with self._index_lock:
            key = (layer, model)
            if key in self._indexes:
                return self._indexes[key]
            index = PgVectorIndex(
                self._vector_transaction,
                self.reader,
                pg_vector_table(layer, model),
                dim,
                layer,
                model,
            )
            expected = self._count_with_vectors(layer, model)
            if len(index) < expected:
                log.info("filling %s (%d of %d rows)", index.table, len(index), expected)
                for batch in self._vectors_of(layer, model, dim):
                    index.add(batch)
            # Fresh statistics (a bulk load leaves none until autovacuum comes): without them
            # the planner sorted a whole 10k scope by distance (87 ms) instead of walking the
            # HNSW graph (1 ms), and read all of ``vectors`` for 60 rows' bytes (65-95 ms).
            self._vector_transaction(lambda conn: conn.execute(f"ANALYZE {index.table}, vectors"))
            self._indexes[key] = index
            return index

    def numpy_index_bytes(self, layer: str, dim: int) -> int:
        """What an in-memory index of ``layer`` would take (float32 rows for a scope of up to
        BLOCK_ROWS rows, int8 codes past that): asked of every store, though this one always
        serves from pgvector."""
        total = 0
        for (n,) in (
            self.reader().execute(f"SELECT count(*) FROM {_table(layer)} GROUP BY scope").fetchall()
        ):
            total += int(n) * dim * (4 if n <= BLOCK_ROWS else 1)
        return total

    def _count_with_vectors(self, layer: str, model: str) -> int:
        status = " WHERE m.status = 'active'" if layer == "l1" else ""
        return int(
            self.reader()
            .execute(
                f"SELECT count(*) FROM {_table(layer)} m JOIN vectors v ON v.model = %s"
                f" AND v.layer = %s AND v.text_hash = m.text_hash{status}",
                (model, layer),
            )
            .fetchone()[0]
        )

    def _vectors_of(
        self, layer: str, model: str, dim: int, batch: int = 5000
    ) -> Iterator[list[tuple[int, str, np.ndarray]]]:
        """``[(seq, scope, vector)]`` batches for every live row of ``layer`` with a vector,
        joined in Python (one pass over the model's vectors, rows looked up in a dict)."""
        status = " WHERE status = 'active'" if layer == "l1" else ""
        owners: dict[str, list[tuple[int, str]]] = {}
        for seq, scope, h in self.reader().execute(
            f"SELECT seq, scope, text_hash FROM {_table(layer)}{status}"
        ):
            owners.setdefault(h, []).append((int(seq), scope))
        cur = self.reader().execute(
            "SELECT text_hash, vector FROM vectors WHERE model = %s AND layer = %s AND dim = %s",
            (model, layer, dim),
        )
        out: list[tuple[int, str, np.ndarray]] = []
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            for h, blob in rows:
                for seq, scope in owners.get(h, ()):
                    out.append((seq, scope, np.frombuffer(blob, dtype="<f4")))
            if len(out) >= batch:
                yield out
                out = []
        if out:
            yield out

    # ================================================================= pipeline claims

    @contextlib.contextmanager
    def claim_session(self, scope: str, session_key: str) -> Iterator[bool]:
        """Row-lock the session's claim for the whole block; False if another gateway holds it.

        The lock lives on a connection of its own (not the writer: the work inside writes on
        the writer, and must not wait for its own claim). It ends with the block, or with the
        connection when the process dies.
        """
        conn = getattr(self._local, "claim", None)
        if conn is None or not conn.usable:
            conn = self._local.claim = self._connect()
            with self._readers_lock:
                self._readers.append(conn)
        conn.execute(
            "INSERT INTO pipeline_claims (scope, session_key) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (scope, session_key),
        )
        conn.execute("BEGIN")
        try:
            held = conn.execute(
                "SELECT 1 FROM pipeline_claims WHERE scope = %s AND session_key = %s"
                " FOR UPDATE SKIP LOCKED",
                (scope, session_key),
            ).fetchone()
            yield held is not None
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    # ================================================================= admin (PostgreSQL's own)

    def _delete_rows(self, layer: str, ids: list[str]) -> int:
        """Remove rows of one layer by id (their tokens are a column of the row itself), then
        from the vector indexes."""
        table = {"l0": "l0_messages", "l1": "l1_memories"}[layer]

        def write(conn: Any) -> list[int]:
            removed: list[int] = []
            for chunk in chunks(ids):
                rows = conn.execute(
                    f"DELETE FROM {table} WHERE id = ANY(%s) RETURNING seq", (chunk,)
                ).fetchall()
                removed += [int(r[0]) for r in rows]
            return removed

        removed = self._transaction(write)
        if removed:
            self._drop_from_indexes(layer, removed)
        return len(removed)

    def text_in_live_rows(self, text: str) -> bool:
        conn = self.reader()
        if conn.execute(
            "SELECT 1 FROM l1_memories WHERE status != 'deleted' AND strpos(content, %s) > 0"
            " LIMIT 1",
            (text,),
        ).fetchone():
            return True
        return bool(
            conn.execute(
                "SELECT 1 FROM l0_messages WHERE strpos(content, %s) > 0 LIMIT 1", (text,)
            ).fetchone()
        )

"""The PostgreSQL + pgvector backend (``storeBackend: postgres``): team memory.

Several gateways, each with its own data directory (its journal files stay its own), share one
database: L0 messages, L1 memories, pipeline state, keyword and vector indexes. It subclasses
``Store`` and keeps its file-first order (JSONL line fsync'ed, then the database) and every
method; only what the dialect or the sharing changes is overridden here:

- Statements: the store's shared SQL uses ``?`` placeholders; ``_Conn`` maps them to psycopg's
  ``%s`` (and escapes ``%``), so most statements need no second copy.
- Keyword search: a ``tsvector`` of the same jieba tokens as SQLite's FTS5 (built from the
  token list, so no PostgreSQL parser or dictionary changes them), ranked by ``ts_rank``.
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
from typing import Any

import psycopg

from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import keeps_index_entry, l0_params, l1_values, now_iso
from memory_tencentdb.store.connection import Binding
from memory_tencentdb.store.errors import StoreUnavailable
from memory_tencentdb.store.pg_migrations import migrate
from memory_tencentdb.store.pg_vector import EF_SEARCH, PgVectorIndex, pg_vector_table
from memory_tencentdb.store.records import KeywordHit, L0Message
from memory_tencentdb.store.sqlite import Store
from memory_tencentdb.store.vector_index import VectorIndex
from memory_tencentdb.text import tokenize

log = logging.getLogger("memory_tencentdb.store")

# PostgreSQL's limits on a tsvector: positions 1..16383, 256 per lexeme, 2 KiB per lexeme.
_MAX_POS = 16383
_MAX_POSITIONS = 255
_MAX_LEXEME_BYTES = 2000
_sql_cache: dict[str, str] = {}
# FTS5's bm25() constants, so both backends rank and threshold keyword hits alike.
BM25_K1 = 1.2
BM25_B = 0.75
STATS_TTL_S = 30.0  # how long document frequencies are reused
# Read connections per gateway (besides the writer, the vector writer and one per pipeline
# worker holding a claim): 2 cores never run more statements than this at once.
MAX_READERS = 8


def _pg_sql(sql: str) -> str:
    out = _sql_cache.get(sql)
    if out is None:
        out = _sql_cache[sql] = sql.replace("%", "%%").replace("?", "%s")
    return out


class _Conn:
    """A psycopg connection that runs the store's shared (qmark) SQL."""

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Iterable[Any] | None = None) -> Any:
        if params is None:
            return self.raw.execute(sql)
        return self.raw.execute(_pg_sql(sql), list(params))

    def executemany(self, sql: str, seq: Iterable[Iterable[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(_pg_sql(sql), [list(p) for p in seq])
        return cur

    @property
    def usable(self) -> bool:
        return not (self.raw.closed or self.raw.broken)

    def close(self) -> None:
        self.raw.close()


class _ReaderPool:
    """At most ``size`` autocommit connections for reads, shared by every thread.

    A connection is taken for one statement only: psycopg's client-side cursors hold the whole
    result once ``execute`` returns, so the connection goes back at once and the caller reads
    its rows afterwards. Before, each thread kept a connection of its own (the HTTP thread pool
    alone has 40), up to ~45 per gateway; several gateways on one server ran into its
    ``max_connections``. A statement that finds every connection busy waits for one.
    """

    def __init__(self, connect: Callable[[], _Conn], size: int) -> None:
        self._connect = connect
        self.size = size
        self._idle: list[_Conn] = []
        self._all: list[_Conn] = []
        self._cond = threading.Condition()
        self._opening = 0

    def acquire(self) -> _Conn:
        with self._cond:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if conn.usable:
                        return conn
                    self._all.remove(conn)  # the server restarted or dropped it
                if len(self._all) + self._opening < self.size:
                    self._opening += 1
                    break
                self._cond.wait()
        try:
            conn = self._connect()  # outside the lock: connecting takes milliseconds
        except BaseException:
            with self._cond:
                self._opening -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._opening -= 1
            self._all.append(conn)
        return conn

    def release(self, conn: _Conn) -> None:
        with self._cond:
            if conn.usable:
                self._idle.append(conn)
            elif conn in self._all:
                self._all.remove(conn)
            self._cond.notify()

    @contextlib.contextmanager
    def connection(self) -> Iterator[_Conn]:
        conn = self.acquire()
        try:
            yield conn
        finally:
            self.release(conn)

    @property
    def opened(self) -> int:
        with self._cond:
            return len(self._all)

    def close(self) -> None:
        with self._cond:
            conns, self._all, self._idle = self._all, [], []
        for conn in conns:
            with contextlib.suppress(psycopg.Error):
                conn.close()


class _PooledReader:
    """What ``PostgresStore.reader()`` hands out: the store's ``_Conn`` interface, each
    statement on whichever pooled connection is free."""

    usable = True

    def __init__(self, pool: _ReaderPool) -> None:
        self._pool = pool

    def execute(self, sql: str, params: Iterable[Any] | None = None) -> Any:
        with self._pool.connection() as conn:
            return conn.execute(sql, params)

    def executemany(self, sql: str, seq: Iterable[Iterable[Any]]) -> Any:
        with self._pool.connection() as conn:
            return conn.executemany(sql, seq)


def tsvector_literal(tokens_text: str) -> str | None:
    """The tsvector of space-joined tokens, positions kept (for ``ts_rank``), as text input."""
    where: dict[str, list[int]] = {}
    for pos, tok in enumerate(tokens_text.split(), start=1):
        if pos > _MAX_POS:
            break
        if len(tok.encode()) > _MAX_LEXEME_BYTES:
            continue
        spots = where.setdefault(tok, [])
        if len(spots) < _MAX_POSITIONS:
            spots.append(pos)
    if not where:
        return None
    return " ".join(
        "'" + tok.replace("\\", "\\\\").replace("'", "''") + "':" + ",".join(map(str, spots))
        for tok, spots in where.items()
    )


def tsquery_literal(terms: Iterable[str]) -> str | None:
    """An OR of the terms as exact lexemes (user-typed operators are just words)."""
    quoted = [
        "'" + t.replace("\\", "\\\\").replace("'", "''") + "'"
        for t in terms
        if t and len(t.encode()) <= _MAX_LEXEME_BYTES
    ]
    return " | ".join(quoted) if quoted else None


def _session_lock_key(scope: str, session_key: str) -> str:
    return f"tdai-l0:{scope}\x1f{session_key}"


class PostgresStore(Store):
    """The PostgreSQL ``MemoryStore``: ``Store`` over a database shared by several gateways."""

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
        self._readers: list[_Conn] = []  # connections of their own: vectors, claims
        self._readers_lock = threading.Lock()
        self._reader_pool = _ReaderPool(self._connect, MAX_READERS)
        self._pooled_reader = _PooledReader(self._reader_pool)
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._index_lock = threading.Lock()
        self._row_listeners: list[Any] = []
        self._df_cache: dict[tuple[str, str], tuple[float, Any]] = {}
        self.writer = self._connect()
        # Vectors (canonical rows and the HNSW tables) are written on a connection of their
        # own: an HNSW insert costs milliseconds and must not hold captures behind the writer.
        self._vec_lock = threading.Lock()
        self._vec_conn: _Conn | None = None
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

    # ----------------------------------------------------------------- connections

    def _connect(self) -> _Conn:
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
        return _Conn(raw)

    def reader(self) -> Any:
        """Reads run on the bounded pool (``_ReaderPool``), or, inside ``_pinned_reader``, on
        the connection this thread holds for its transaction."""
        pinned = getattr(self._local, "pinned", None)
        return pinned if pinned is not None else self._pooled_reader

    @contextlib.contextmanager
    def _pinned_reader(self) -> Iterator[_Conn]:
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

    def _begin(self) -> None:
        if not self.writer.usable:  # the server restarted: start again on a new connection
            self.writer = self._connect()
        self.writer.execute("BEGIN")

    def _vector_transaction(self, fn: Any) -> Any:
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

    def problems(self) -> list[str]:
        """None of SQLite's (no database file here to be deleted under the gateway)."""
        return MemoryStore.problems(self)

    def _meta_key(self, key: str) -> str:
        return f"journal@{self.journal_id}:{key[8:]}" if key.startswith("journal:") else key

    def get_meta(self, key: str) -> str | None:
        return super().get_meta(self._meta_key(key))

    def _set_meta(self, key: str, value: str) -> None:
        super()._set_meta(self._meta_key(key), value)

    def rebuild_fts(self) -> None:
        def write(conn: Any) -> None:
            for table, where in (("l0_messages", ""), ("l1_memories", " WHERE status = 'active'")):
                text = "content" if table == "l1_memories" else "speaker, content"
                rows = conn.execute(f"SELECT rowid, {text} FROM {table}{where}").fetchall()
                for row in rows:
                    if table == "l1_memories":
                        tok = tokenize.index_text(row[1])
                    else:
                        tok = tokenize.index_text(f"{row[1]}: {row[2]}" if row[1] else row[2])
                    conn.execute(
                        f"UPDATE {table} SET tok = ?::tsvector WHERE rowid = ?",
                        (tsvector_literal(tok), row[0]),
                    )
            conn.execute("UPDATE l1_memories SET tok = NULL WHERE status != 'active'")

        self._transaction(write)

    # ----------------------------------------------------------------- L0 / L1 writes

    def index_l0_lines(self, rows: list[dict[str, Any]], rel_file: str) -> list[int]:
        params, toks = l0_params(rows, rel_file)

        sessions = sorted({_session_lock_key(p[1], p[2]) for p in params})

        def write(conn: Any) -> list[int]:
            for key in sessions:  # see l0_after: no extractor reads past an uncommitted row
                conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(?, 0))", (key,))
            ids = []
            for p, tok in zip(params, toks, strict=True):
                row = conn.execute(
                    "INSERT INTO l0_messages (id, scope, session_key, session_id, role, content,"
                    " message_id, timestamp, recorded_at, file, text_hash, extra, speaker, tok)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::tsvector)"
                    " ON CONFLICT (id) DO NOTHING RETURNING rowid",
                    (*p, tsvector_literal(tok)),
                ).fetchone()
                if row:
                    ids.append(int(row[0]))
            return ids

        ids = self._transaction(write)
        self._written("l0", ids)
        return ids

    def index_l1_line(self, r: dict[str, Any], rel_file: str) -> int:
        values, tok = l1_values(r, rel_file)
        values["tok"] = tsvector_literal(tok) if values["status"] == "active" else None
        cols = ", ".join(values)
        marks = ", ".join("?::tsvector" if c == "tok" else "?" for c in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("id", "created_at"))

        def write(conn: Any) -> tuple[int, bool, bool]:
            before = conn.execute(
                "SELECT text_hash, status, scope FROM l1_memories WHERE id = ?", (r["id"],)
            ).fetchone()
            rowid = conn.execute(
                f"INSERT INTO l1_memories ({cols}) VALUES ({marks})"
                f" ON CONFLICT (id) DO UPDATE SET {updates} RETURNING rowid",
                tuple(values.values()),
            ).fetchone()[0]
            changed = before is not None and before[0] != values["text_hash"]
            if changed:  # the pgvector rows of the old text go in this transaction
                self._drop_stale_vectors(conn, "l1", int(rowid))
            return int(rowid), changed, keeps_index_entry(before, values)

        rowid, changed, same = self._transaction(write)
        if changed:
            self._drop_from_indexes("l1", [rowid], memory_only=True)
        self._l1_indexed(rowid, values["status"], notify=not same)
        return rowid

    def apply_status_line(self, line: dict[str, Any]) -> None:
        status = line["status"]
        row = self._transaction(
            lambda conn: conn.execute(
                "UPDATE l1_memories SET status = ?, superseded_by = ?, updated_at = ?,"
                " tok = CASE WHEN ? = 'active' THEN tok ELSE NULL END WHERE id = ?"
                " RETURNING rowid",
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

    def l0_after(self, scope: str, session_key: str, after_seq: int, limit: int) -> list[L0Message]:
        """As on SQLite, but never past a message another gateway has numbered and not yet
        committed: sequence numbers are handed out before commit, so a cursor moved past a
        later-numbered row that committed first would skip the earlier one for good. Captures
        hold a shared lock on the session until they commit; this waits for them."""
        with self._pinned_reader() as conn, conn.raw.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                (_session_lock_key(scope, session_key),),
            )
            return super().l0_after(scope, session_key, after_seq, limit)

    # ----------------------------------------------------------------- keyword search

    def keyword_search(
        self, layer: str, scope: str, terms: list[str], k: int, session_key: str | None = None
    ) -> list[KeywordHit]:
        """BM25 over the jieba tokens within one scope, as SQLite's FTS5 ``bm25()`` computes it
        (k1 1.2, b 0.75, its IDF), so scores and the keyword-only threshold mean the same on
        both backends. Score in (0, 1), higher is better.

        ``ts_rank`` was measured first: its scores (0.01-0.3) sat under the 0.3 threshold, and
        keyword recall at 10k answered 0.03 memories a query where SQLite answered 4.15."""
        terms = [t for t in dict.fromkeys(terms) if t and len(t.encode()) <= _MAX_LEXEME_BYTES]
        query = tsquery_literal(terms)
        if not query or k <= 0:
            return []
        docs, df = self._cached_term_stats(layer, terms)
        idf = {
            t: max(1e-6, math.log((docs - df[t] + 0.5) / (df[t] + 0.5))) for t in terms if df.get(t)
        }
        if not idf:
            return []
        table = "l1_memories" if layer == "l1" else "l0_messages"
        extra = ""
        params: list[Any] = [query, scope]
        if layer == "l1":
            extra = " AND m.status = 'active'"
        if session_key:
            extra += " AND m.session_key = ?"
            params.append(session_key)
        lexemes = list(idf)
        params = [
            [idf[t] for t in lexemes],
            lexemes,
            self._avg_length(layer),
            lexemes,
            *params,
            k,
        ]
        # Each matching row's own query lexemes only: setweight marks them, ts_filter keeps
        # them, so unnest yields ~1 row per match instead of every lexeme of the memory, and
        # the IDF is an array lookup instead of a join per row (10k memories, a common query:
        # 1052 matches, 27 -> 13 ms; same scores, same order).
        rows = (
            self.reader()
            .execute(
                "SELECT c.rowid, sum((?::float8[])[array_position(?::text[], c.lexeme)]"
                f" * c.tf * {BM25_K1 + 1}"
                f" / (c.tf + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * c.dl / ?))) AS s"
                " FROM (SELECT m.rowid, u.lexeme, cardinality(u.positions) AS tf,"
                f" length(m.tok) AS dl FROM {table} m,"
                " unnest(ts_filter(setweight(m.tok, 'A', ?::text[]), '{a}')) u"
                f" WHERE m.tok @@ ?::tsquery AND m.scope = ?{extra}) c"
                " GROUP BY c.rowid ORDER BY s DESC, c.rowid DESC LIMIT ?",
                params,
            )
            .fetchall()
        )
        out = []
        for rowid, score in rows:
            r = float(score or 0.0)
            out.append(KeywordHit(int(rowid), r / (1.0 + r) if r > 0 else 1.0 / 1001))
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
        table = "l1_memories" if layer == "l1" else "l0_messages"
        # A sample is enough, and keeps this O(1) at any size.
        avg = (
            self.reader()
            .execute(
                f"SELECT avg(length(tok)) FROM (SELECT tok FROM {table} WHERE tok IS NOT NULL"
                " ORDER BY rowid DESC LIMIT 5000) s"
            )
            .fetchone()[0]
        )
        value = max(1.0, float(avg or 1.0))
        self._df_cache[(layer, "\x1favgdl")] = (now + STATS_TTL_S, value)
        return value

    def term_stats(self, layer: str, terms: list[str]) -> tuple[int, dict[str, int]]:
        """``(documents, {term: documents containing it})``, counted through the GIN index."""
        table = "l1_memories" if layer == "l1" else "l0_messages"
        conn = self.reader()
        df: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            q = tsquery_literal([term])
            if q:
                n = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE tok @@ ?::tsquery", (q,)
                ).fetchone()[0]
                if n:
                    df[term] = int(n)
        docs = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()[0]
        return int(docs), df

    def indexed_tokens(self, layer: str, rowids: list[int]) -> dict[int, set[str]]:
        table = "l1_memories" if layer == "l1" else "l0_messages"
        out: dict[int, set[str]] = {}
        if not rowids:
            return out
        for rowid, toks in self.reader().execute(
            f"SELECT rowid, tsvector_to_array(tok) FROM {table}"
            " WHERE rowid = ANY(?) AND tok IS NOT NULL",
            (list(rowids),),
        ):
            out[int(rowid)] = set(toks or ())
        return out

    # ----------------------------------------------------------------- vectors

    def save_vectors(self, layer: str, model: str, items: list[tuple[int, str, str, Any]]) -> None:
        if not items:
            return
        self._vector_transaction(
            lambda conn: conn.executemany(
                "INSERT INTO vectors (model, layer, text_hash, dim, vector)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [
                    (model, layer, h, int(v.shape[0]), v.astype("<f4").tobytes())
                    for _, _, h, v in items
                ],
            )
        )
        index = self._indexes.get((layer, model))
        if index is not None:
            index.add([(rowid, scope, vec) for rowid, scope, _, vec in items])

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

    # ----------------------------------------------------------------- claims

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
            "INSERT INTO pipeline_claims (scope, session_key) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (scope, session_key),
        )
        conn.execute("BEGIN")
        try:
            held = conn.execute(
                "SELECT 1 FROM pipeline_claims WHERE scope = ? AND session_key = ?"
                " FOR UPDATE SKIP LOCKED",
                (scope, session_key),
            ).fetchone()
            yield held is not None
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    # ----------------------------------------------------------------- admin

    def _delete_rows(self, layer: str, ids: list[str]) -> int:
        """Remove rows of one layer by id (their tokens are a column of the row itself), then
        from the vector indexes."""
        table = {"l0": "l0_messages", "l1": "l1_memories"}[layer]

        def write(conn: Any) -> list[int]:
            removed: list[int] = []
            for i in range(0, len(ids), 500):
                rows = conn.execute(
                    f"DELETE FROM {table} WHERE id = ANY(?) RETURNING rowid", (ids[i : i + 500],)
                ).fetchall()
                removed += [int(r[0]) for r in rows]
            return removed

        removed = self._transaction(write)
        if removed:
            self._drop_from_indexes(layer, removed)
        return len(removed)

    def vacuum(self) -> None:
        """Nothing: a server's storage is its administrator's (``VACUUM FULL``)."""
        MemoryStore.vacuum(self)

    def drop_vector_indexes(self) -> list[str]:
        """None: the pgvector tables are shared by every gateway on the database."""
        return MemoryStore.drop_vector_indexes(self)

    def text_in_live_rows(self, text: str) -> bool:
        conn = self.reader()
        if conn.execute(
            "SELECT 1 FROM l1_memories WHERE status != 'deleted' AND strpos(content, ?) > 0"
            " LIMIT 1",
            (text,),
        ).fetchone():
            return True
        return bool(
            conn.execute(
                "SELECT 1 FROM l0_messages WHERE strpos(content, ?) > 0 LIMIT 1", (text,)
            ).fetchone()
        )

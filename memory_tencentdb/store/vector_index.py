"""Nearest-neighbour search over the stored embeddings, scoped.

The canonical vectors live in the ``vectors`` table; the indexes here are derived and can be
rebuilt at any time. Two interchangeable implementations:

- ``NumpyIndex``: one growable float32 matrix per scope, in RAM. Exact. Measured here at 100k
  x 384 it answers in ~7 ms where vec0 needs ~60 ms, so it serves L1 recall.
- ``Vec0Index``: a sqlite-vec ``vec0`` table with the scope as partition key. Exact, nothing in
  RAM; serves L0 (conversation search), which is larger and off the per-turn path.

Both return ``[(rowid, cosine_similarity)]`` best first.
"""

from __future__ import annotations

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


@dataclass
class _ScopeMatrix:
    dim: int
    mat: np.ndarray = field(init=False)
    ids: np.ndarray = field(init=False)
    alive: np.ndarray = field(init=False)
    n: int = 0
    # Running sum and count of the live rows, for the scope's mean vector (centring).
    total: np.ndarray = field(init=False)
    live: int = 0
    version: int = 0
    cached: tuple[int, np.ndarray, np.ndarray] | None = None  # (version, mean, mat @ mean)

    def __post_init__(self) -> None:
        self.mat = np.zeros((64, self.dim), dtype=np.float32)
        self.ids = np.zeros(64, dtype=np.int64)
        self.alive = np.zeros(64, dtype=bool)
        self.total = np.zeros(self.dim, dtype=np.float64)

    def extend(self, rowids: list[int], block: np.ndarray) -> range:
        """Append rows in one copy; returns their positions. Grows by half, not double: at
        100k x 896 floats every spare row is RAM the gateway holds for nothing."""
        need = self.n + len(rowids)
        if need > len(self.ids):
            cap = max(need, int(len(self.ids) * 1.5) + 64)
            mat = np.zeros((cap, self.dim), dtype=np.float32)
            mat[: self.n] = self.mat[: self.n]
            self.mat = mat
            self.ids = np.resize(self.ids, cap)
            alive = np.zeros(cap, dtype=bool)
            alive[: self.n] = self.alive[: self.n]
            self.alive = alive
        start = self.n
        self.mat[start:need] = block
        self.ids[start:need] = rowids
        self.alive[start:need] = True
        self.n = need
        self.total += block.sum(axis=0, dtype=np.float64)
        self.live += len(rowids)
        self.version += 1
        return range(start, need)

    def kill(self, pos: int) -> None:
        if self.alive[pos]:
            self.alive[pos] = False
            self.total -= self.mat[pos]
            self.live -= 1
            self.version += 1


# How many memories' worth of weight the all-scopes mean gets when a scope's own mean is
# estimated: a scope with 3 memories is centred mostly on the global mean, one with 1000 on its
# own (a shrinkage estimator; a mean of very few vectors would distort every score).
PRIOR_WEIGHT = 10


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
        self._where: dict[int, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._where)

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None:
        by_scope: dict[str, list[tuple[int, np.ndarray]]] = {}
        for rowid, scope, vec in items:
            by_scope.setdefault(scope, []).append((rowid, vec))
        with self._lock:
            for scope, rows in by_scope.items():
                for rowid, _ in rows:
                    if rowid in self._where:  # a changed text: the old vector goes
                        old_scope, pos = self._where.pop(rowid)
                        self._scopes[old_scope].kill(pos)
                sm = self._scopes.get(scope)
                if sm is None:
                    sm = self._scopes[scope] = _ScopeMatrix(self.dim)
                ids = [r for r, _ in rows]
                positions = sm.extend(ids, np.stack([v for _, v in rows]))
                for rowid, pos in zip(ids, positions, strict=True):
                    self._where[rowid] = (scope, pos)

    def remove(self, rowids: list[int]) -> None:
        with self._lock:
            for rowid in rowids:
                where = self._where.pop(rowid, None)
                if where:
                    self._scopes[where[0]].kill(where[1])

    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        with self._lock:
            sm = self._scopes.get(scope)
            if sm is None or sm.n == 0:
                return []
            mat, ids, alive = sm.mat[: sm.n], sm.ids[: sm.n], sm.alive[: sm.n]
            query = query.astype(np.float32, copy=False)
            if self.centre and sm.live >= 2:
                sims = self._centred_scores(sm, mat, query)
            else:
                sims = mat @ query
        sims = np.where(alive, sims, -np.inf)
        k = min(k, int(alive.sum()))
        if k <= 0:
            return []
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
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
            cols, positions = [], []
            for i, r in enumerate(rowids):
                where = self._where.get(r)
                if where and where[0] == scope and sm.alive[where[1]]:
                    cols.append(i)
                    positions.append(where[1])
            if not positions:
                return out
            rows = sm.mat[positions]
            q = queries.astype(np.float32, copy=False)
            if self.centre and sm.live >= 2:
                if sm.cached is None or sm.cached[0] != sm.version:
                    mu = self._mean(sm)
                    sm.cached = (sm.version, mu, sm.mat[: sm.n] @ mu)
                _, mu, m_mu = sm.cached
                q_c = q - mu
                q_norm = np.linalg.norm(q_c, axis=1, keepdims=True)
                q_norm[q_norm == 0] = 1.0
                m_norm = np.sqrt(np.maximum(1.0 - 2.0 * m_mu[positions] + float(mu @ mu), 1e-9))
                scores = ((q_c @ rows.T) - (q_c @ mu)[:, None]) / (q_norm * m_norm[None, :])
            else:
                scores = q @ rows.T
        out[:, cols] = scores
        return out

    def _mean(self, sm: _ScopeMatrix) -> np.ndarray:
        g_total = sum((m.total for m in self._scopes.values()), np.zeros(self.dim))
        g_live = sum(m.live for m in self._scopes.values())
        prior = g_total / g_live if g_live else np.zeros(self.dim)
        return ((sm.total + PRIOR_WEIGHT * prior) / (sm.live + PRIOR_WEIGHT)).astype(np.float32)

    def _centred_scores(self, sm: _ScopeMatrix, mat: np.ndarray, q: np.ndarray) -> np.ndarray:
        """cos(q - mu, m - mu) for every row, from mat @ q and a cached mat @ mu."""
        if sm.cached is None or sm.cached[0] != sm.version:
            mu = self._mean(sm)
            sm.cached = (sm.version, mu, mat @ mu)
        _, mu, m_mu = sm.cached
        mu_sq = float(mu @ mu)
        q_c = q - mu
        q_norm = float(np.linalg.norm(q_c)) or 1.0
        m_norm = np.sqrt(np.maximum(1.0 - 2.0 * m_mu + mu_sq, 1e-9))
        return ((mat @ q_c) - float(mu @ q_c)) / (m_norm * q_norm)


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
        return self._reader().execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

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

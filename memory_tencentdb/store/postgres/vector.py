"""``VectorIndex`` over pgvector: one table per (layer, model), shared by every gateway.

Unlike ``NumpyIndex`` (a matrix in this process) the table is the index, so a vector one
gateway stores is found by all of them at once. Rows are L2-normalised, so cosine distance
``<=>`` gives ``1 - cosine``. An HNSW index serves the search; with a scope filter pgvector
0.8's iterative scan (``hnsw.iterative_scan``) keeps reading the graph until ``k`` rows of the
scope are found, so a small scope in a large table still gets its ``k`` neighbours.

L1 scores are centred, as ``NumpyIndex`` centres them on SQLite: the cosine of ``q - mu`` and
``m - mu``, ``mu`` the scope's mean vector shrunk toward the mean of all scopes. With plain
cosines (small models bunch them at 0.8-0.9) the recall's relevance gate dropped the right
memory ("pet allergy" -> "用户对猫毛过敏" was recalled on SQLite and not on PostgreSQL). The
sums behind ``mu`` live in a ``<table>_stats`` row per scope, kept exact by every add and
remove in the same transaction, so every gateway on the database centres on the same mean.
The HNSW graph still orders by plain cosine: it supplies ``CANDIDATES_PER_RESULT`` times the
asked-for rows (at least ``MIN_CANDIDATES``), which are re-scored centred in the same query.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from memory_tencentdb.store.vector_index import CENTRE_MIN_ROWS, PRIOR_WEIGHT

# Search breadth: pgvector's default ef_search (40) caps results at 40 and loses recall on
# filtered queries; 100 is measured in bench/RESULTS.md ("PostgreSQL").
EF_SEARCH = 100
# Centred L1 search: how many plain-cosine neighbours are re-scored per asked-for row.
CANDIDATES_PER_RESULT = 4
MIN_CANDIDATES = 100


def pg_vector_table(layer: str, model: str) -> str:
    return f"pgv_{layer}_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


def _literal(vec: np.ndarray) -> str:
    """pgvector's text form; ``repr`` of float32 keeps every digit that matters."""
    return "[" + ",".join(map(repr, vec.astype(np.float32).tolist())) + "]"


def _parse(text: str | None, dim: int) -> np.ndarray:
    if not text:
        return np.zeros(dim, dtype=np.float64)
    return np.array(text.strip("[]").split(","), dtype=np.float64)


class PgVectorIndex:
    kind = "pgvector"

    def __init__(
        self,
        transaction: Callable[[Callable[[Any], Any]], Any],
        reader: Callable[[], Any],
        table: str,
        dim: int,
        layer: str = "l1",
        model: str = "",
    ) -> None:
        self.table = table
        self.dim = dim
        self.layer = layer
        self.model = model
        self._transaction = transaction
        self._reader = reader
        self.centre = layer == "l1"
        self.stats = f"{table}_stats"

        def create(conn: Any) -> None:
            # Gateways starting together must not both create the index.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (seq BIGINT PRIMARY KEY,"
                f" scope TEXT NOT NULL, embedding vector({dim}) NOT NULL)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table}"
                " USING hnsw (embedding vector_cosine_ops)"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_scope ON {table} (scope)")
            if not self.centre:
                return
            made = conn.execute("SELECT to_regclass(%s)", (self.stats,)).fetchone()[0]
            if made is None:  # first start of this version on the table: sum what is there
                conn.execute(
                    f"CREATE TABLE {self.stats} (scope TEXT PRIMARY KEY,"
                    f" total vector({dim}) NOT NULL, n BIGINT NOT NULL)"
                )
                conn.execute(
                    f"INSERT INTO {self.stats} (scope, total, n)"
                    f" SELECT scope, sum(embedding), count(*) FROM {table} GROUP BY scope"
                )

        transaction(create)

    def __len__(self) -> int:
        return int(self._reader().execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None:
        if not items:
            return
        rows = [(int(r), s, _literal(v)) for r, s, v in items]
        if not self.centre:
            self._transaction(
                lambda conn: conn.executemany(
                    f"INSERT INTO {self.table} (seq, scope, embedding) VALUES (%s, %s, %s::vector)"
                    " ON CONFLICT (seq) DO UPDATE SET scope = excluded.scope,"
                    " embedding = excluded.embedding",
                    rows,
                )
            )
            return

        def write(conn: Any) -> None:
            # A re-embedded row (changed text) is replaced: its old vector leaves the sums.
            self._subtract(conn, [r for r, _, _ in rows])
            # A row another gateway inserted meanwhile is its to count.
            added = {
                int(r[0])
                for r in conn.execute(
                    f"INSERT INTO {self.table} (seq, scope, embedding)"
                    " SELECT r, s, e::vector FROM unnest(%s::bigint[], %s::text[], %s::text[])"
                    " AS u(r, s, e) ON CONFLICT (seq) DO NOTHING RETURNING seq",
                    ([r for r, _, _ in rows], [s for _, s, _ in rows], [e for _, _, e in rows]),
                ).fetchall()
            }
            sums: dict[str, tuple[np.ndarray, int]] = {}
            for rowid, scope, vec in items:
                if int(rowid) in added:
                    total, n = sums.get(scope, (np.zeros(self.dim, dtype=np.float64), 0))
                    sums[scope] = (total + vec, n + 1)
            if sums:
                self._add_sums(conn, sums)

        self._transaction(write)

    def _subtract(self, conn: Any, rowids: list[int]) -> None:
        conn.execute(
            f"WITH gone AS (DELETE FROM {self.table} WHERE seq = ANY(%s)"
            " RETURNING scope, embedding),"
            " g AS (SELECT scope, sum(embedding) AS total, count(*) AS n FROM gone"
            " GROUP BY scope)"
            f" UPDATE {self.stats} s SET total = s.total - g.total, n = s.n - g.n"
            " FROM g WHERE s.scope = g.scope",
            (list(rowids),),
        )

    def _add_sums(self, conn: Any, sums: dict[str, tuple[np.ndarray, int]]) -> None:
        conn.executemany(
            f"INSERT INTO {self.stats} (scope, total, n) VALUES (%s, %s::vector, %s)"
            f" ON CONFLICT (scope) DO UPDATE SET total = {self.stats}.total + excluded.total,"
            f" n = {self.stats}.n + excluded.n",
            [(scope, _literal(total), n) for scope, (total, n) in sums.items()],
        )

    def remove(self, rowids: list[int]) -> None:
        if not rowids:
            return
        if self.centre:
            self._transaction(lambda conn: self._subtract(conn, list(rowids)))
            return
        self._transaction(
            lambda conn: conn.execute(
                f"DELETE FROM {self.table} WHERE seq = ANY(%s)", (list(rowids),)
            )
        )

    def remove_in(self, conn: Any, rowids: list[int]) -> None:
        """``remove`` inside a transaction the caller holds (a corrected text's old vector
        leaves with the write that changed it), keeping the sums exact."""
        if self.centre:
            self._subtract(conn, list(rowids))
        else:
            conn.execute(f"DELETE FROM {self.table} WHERE seq = ANY(%s)", (list(rowids),))

    def _mean(self, scope: str) -> np.ndarray | None:
        """The scope's mean shrunk toward the all-scopes mean, as ``NumpyIndex._mean``; None
        when the scope has fewer than ``CENTRE_MIN_ROWS`` vectors (plain cosines, as there)."""
        reader = self._reader()
        row = reader.execute(
            f"SELECT total::text, n FROM {self.stats} WHERE scope = %s", (scope,)
        ).fetchone()
        if row is None or int(row[1]) < CENTRE_MIN_ROWS:
            return None
        g_total, g_n = reader.execute(
            f"SELECT sum(total)::text, sum(n) FROM {self.stats}"
        ).fetchone()
        g_n = int(g_n or 0)
        prior = _parse(g_total, self.dim) / g_n if g_n else np.zeros(self.dim)
        mu = (_parse(row[0], self.dim) + PRIOR_WEIGHT * prior) / (int(row[1]) + PRIOR_WEIGHT)
        return mu.astype(np.float32)

    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        mu = self._mean(scope) if self.centre else None
        if mu is not None:
            return self._centred_search(scope, query.astype(np.float32), mu, k)
        rows = (
            self._reader()
            .execute(
                # relaxed_order (the iterative scan) may hand rows back slightly out of order.
                f"WITH c AS MATERIALIZED (SELECT seq, embedding <=> %s::vector AS d"
                f" FROM {self.table} WHERE scope = %s ORDER BY d LIMIT %s)"
                " SELECT seq, d FROM c ORDER BY d",
                (_literal(query), scope, int(k)),
            )
            .fetchall()
        )
        return [(int(r), 1.0 - float(d)) for r, d in rows if d is not None]

    def _centred_search(
        self, scope: str, query: np.ndarray, mu: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        """cos(q - mu, m - mu) of the plain-cosine neighbours, best first: with unit rows,
        |m - mu|^2 = 1 - 2 m.mu + mu.mu, so two inner products per row give the score."""
        q_c = query - mu
        q_norm = float(np.linalg.norm(q_c)) or 1.0
        rows = (
            self._reader()
            .execute(
                f"WITH c AS MATERIALIZED (SELECT seq, embedding FROM {self.table}"
                " WHERE scope = %s ORDER BY embedding <=> %s::vector LIMIT %s)"
                " SELECT seq, (-(embedding <#> %s::vector) - %s)"
                " / (sqrt(greatest(1 + 2 * (embedding <#> %s::vector) + %s, 1e-9)) * %s) AS s"
                " FROM c ORDER BY s DESC LIMIT %s",
                (
                    scope,
                    _literal(query),
                    max(CANDIDATES_PER_RESULT * int(k), MIN_CANDIDATES),
                    _literal(q_c),
                    float(mu @ q_c),
                    _literal(mu),
                    float(mu @ mu),
                    q_norm,
                    int(k),
                ),
            )
            .fetchall()
        )
        return [(int(r), float(sc)) for r, sc in rows if sc is not None]

    def score_rows(self, scope: str, queries: np.ndarray, rowids: list[int]) -> np.ndarray:
        """Cosines of ``queries`` (R x dim) against some rows of ``scope``; NaN where absent."""
        out = np.full((len(queries), len(rowids)), np.nan, dtype=np.float32)
        if not rowids:
            return out
        # The canonical float32 bytes (``vectors``), not pgvector's text form (parsing a few
        # hundred floats per row in Python cost more than the search), in two indexed lookups
        # (one join let the planner hash the whole vectors table: 87 ms at 10k).
        rows = "l1_memories" if self.layer == "l1" else "l0_messages"
        live = " AND status = 'active'" if self.layer == "l1" else ""
        reader = self._reader()
        hashes = dict(
            reader.execute(
                f"SELECT seq, text_hash FROM {rows} WHERE seq = ANY(%s) AND scope = %s{live}",
                (list(rowids), scope),
            ).fetchall()
        )
        blobs = (
            dict(
                reader.execute(
                    "SELECT text_hash, vector FROM vectors WHERE model = %s AND layer = %s"
                    " AND text_hash = ANY(%s)",
                    (self.model, self.layer, list(set(hashes.values()))),
                ).fetchall()
            )
            if hashes
            else {}
        )
        found = {
            int(r): np.frombuffer(blobs[h], dtype="<f4") for r, h in hashes.items() if h in blobs
        }
        cols = [i for i, r in enumerate(rowids) if r in found]
        if cols:
            mat = np.stack([found[rowids[i]] for i in cols])
            q = queries.astype(np.float32, copy=False)
            mu = self._mean(scope) if self.centre else None
            if mu is None:
                out[:, cols] = q @ mat.T
            else:  # as search scores them
                q_c = q - mu
                q_norm = np.linalg.norm(q_c, axis=1, keepdims=True)
                q_norm[q_norm == 0] = 1.0
                m_norm = np.sqrt(np.maximum(1.0 - 2.0 * (mat @ mu) + float(mu @ mu), 1e-9))
                out[:, cols] = ((q_c @ mat.T) - (q_c @ mu)[:, None]) / (q_norm * m_norm[None, :])
        return out

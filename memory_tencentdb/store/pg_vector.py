"""``VectorIndex`` over pgvector: one table per (layer, model), shared by every gateway.

Unlike ``NumpyIndex`` (a matrix in this process) the table is the index, so a vector one
gateway stores is found by all of them at once. Rows are L2-normalised, so cosine distance
``<=>`` gives ``1 - cosine``. An HNSW index serves the search; with a scope filter pgvector
0.8's iterative scan (``hnsw.iterative_scan``) keeps reading the graph until ``k`` rows of the
scope are found, so a small scope in a large table still gets its ``k`` neighbours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

# Search breadth: pgvector's default ef_search (40) caps results at 40 and loses recall on
# filtered queries; 100 is measured in bench/RESULTS.md ("PostgreSQL").
EF_SEARCH = 100


def pg_vector_table(layer: str, model: str) -> str:
    return f"pgv_{layer}_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


def _literal(vec: np.ndarray) -> str:
    """pgvector's text form; ``repr`` of float32 keeps every digit that matters."""
    return "[" + ",".join(map(repr, vec.astype(np.float32).tolist())) + "]"


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

        def create(conn: Any) -> None:
            # Gateways starting together must not both create the index.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (table,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (rowid BIGINT PRIMARY KEY,"
                f" scope TEXT NOT NULL, embedding vector({dim}) NOT NULL)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table}"
                " USING hnsw (embedding vector_cosine_ops)"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_scope ON {table} (scope)")

        transaction(create)

    def __len__(self) -> int:
        return int(self._reader().execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def add(self, items: list[tuple[int, str, np.ndarray]]) -> None:
        if not items:
            return
        rows = [(int(r), s, _literal(v)) for r, s, v in items]
        self._transaction(
            lambda conn: conn.executemany(
                f"INSERT INTO {self.table} (rowid, scope, embedding) VALUES (?, ?, ?::vector)"
                " ON CONFLICT (rowid) DO UPDATE SET scope = excluded.scope,"
                " embedding = excluded.embedding",
                rows,
            )
        )

    def remove(self, rowids: list[int]) -> None:
        if rowids:
            self._transaction(
                lambda conn: conn.execute(
                    f"DELETE FROM {self.table} WHERE rowid = ANY(?)", (list(rowids),)
                )
            )

    def search(self, scope: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        rows = (
            self._reader()
            .execute(
                # relaxed_order (the iterative scan) may hand rows back slightly out of order.
                f"WITH c AS MATERIALIZED (SELECT rowid, embedding <=> ?::vector AS d"
                f" FROM {self.table} WHERE scope = ? ORDER BY d LIMIT ?)"
                " SELECT rowid, d FROM c ORDER BY d",
                (_literal(query), scope, int(k)),
            )
            .fetchall()
        )
        return [(int(r), 1.0 - float(d)) for r, d in rows if d is not None]

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
                f"SELECT rowid, text_hash FROM {rows} WHERE rowid = ANY(?) AND scope = ?{live}",
                (list(rowids), scope),
            ).fetchall()
        )
        blobs = (
            dict(
                reader.execute(
                    "SELECT text_hash, vector FROM vectors WHERE model = ? AND layer = ?"
                    " AND text_hash = ANY(?)",
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
            out[:, cols] = queries.astype(np.float32, copy=False) @ mat.T
        return out

"""Read the original project's ``vectors.db`` (reference/original-core.md §10), read-only.

Only the plain tables are read (``l1_records``, ``l0_conversations``, ``embedding_meta``); the
``vec0`` tables hold another model's embeddings, so imported rows are embedded again. A missing
table reads as empty: older versions of the original did not have all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_tencentdb.store.connection import connect


@dataclass
class OriginalDB:
    l1: dict[str, dict[str, Any]]  # record_id -> row (the live L1 set)
    l0: dict[str, dict[str, Any]]  # record_id -> row
    embedding: dict[str, Any]  # {provider, model, dimensions}, if recorded


def read_vectors_db(path: Path) -> OriginalDB:
    """The live rows of an original ``vectors.db``. Raises ``ValueError`` if it is not SQLite."""
    try:
        conn = connect(path, readonly=True)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except Exception as e:  # noqa: BLE001 - a corrupt or non-SQLite file
        raise ValueError(f"{path} is not an SQLite database ({e})") from None
    try:
        l1: dict[str, dict[str, Any]] = {}
        l0: dict[str, dict[str, Any]] = {}
        meta: dict[str, Any] = {}
        if "l1_records" in tables:
            cur = conn.execute("SELECT * FROM l1_records")
            cols = [c[0] for c in cur.description]
            for row in cur:
                r = dict(zip(cols, row, strict=True))
                l1[str(r["record_id"])] = r
        if "l0_conversations" in tables:
            cur = conn.execute("SELECT * FROM l0_conversations")
            cols = [c[0] for c in cur.description]
            for row in cur:
                r = dict(zip(cols, row, strict=True))
                l0[str(r["record_id"])] = r
        if "embedding_meta" in tables:
            row = conn.execute(
                "SELECT value FROM embedding_meta WHERE key = 'embedding_provider_info'"
            ).fetchone()
            if row:
                try:
                    meta = json.loads(row[0])
                except ValueError:
                    meta = {}
        return OriginalDB(l1, l0, meta)
    finally:
        conn.close()

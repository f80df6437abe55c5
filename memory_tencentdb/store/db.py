"""Where the SQLite store lived before the backends became sibling packages: these names are
imported from here by code and benches written before ``store/sqlite/`` (kept so they work)."""

from memory_tencentdb.store.common import (
    L1_TYPES,
    keeps_index_entry,
    new_id,
    now_iso,
    text_hash,
)
from memory_tencentdb.store.records import L0Input
from memory_tencentdb.store.sqlite.store import (
    AUTO_NUMPY_BYTES,
    KEYWORD_OVERFETCH,
    KEYWORD_OVERFETCH_MIN,
    Store,
)

__all__ = [
    "AUTO_NUMPY_BYTES",
    "KEYWORD_OVERFETCH",
    "KEYWORD_OVERFETCH_MIN",
    "L1_TYPES",
    "L0Input",
    "Store",
    "keeps_index_entry",
    "new_id",
    "now_iso",
    "text_hash",
]

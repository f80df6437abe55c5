"""The PostgreSQL + pgvector backend (``storeBackend: postgres``): team memory, one database
shared by several gateways. ``store.py`` holds the class and its hot path, ``pipeline.py``,
``admin.py`` and ``hub.py`` its other sections of ``MemoryStore``, ``schema.py`` its migrations,
``vector.py`` the pgvector index, ``text_search.py`` the tsvector keyword index, ``rows.py`` the
columns a record is read from and ``connection.py`` the psycopg connections.

Imported only when the backend is chosen: psycopg is an optional dependency
(``memory-tencentdb[postgres]``)."""

from memory_tencentdb.store.postgres.store import MAX_READERS, STATS_TTL_S, PostgresStore
from memory_tencentdb.store.postgres.text_search import (
    BM25_B,
    BM25_K1,
    MAX_LEXEME_BYTES,
    tsquery_literal,
    tsvector_literal,
)

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_LEXEME_BYTES",
    "MAX_READERS",
    "STATS_TTL_S",
    "PostgresStore",
    "tsquery_literal",
    "tsvector_literal",
]

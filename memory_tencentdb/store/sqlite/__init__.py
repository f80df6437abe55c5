"""The SQLite backend (``storeBackend: sqlite``, the default): ``memory.db`` in the data
directory, embedded, one gateway per directory. ``store.py`` holds the class and its hot path,
``pipeline.py``, ``admin.py`` and ``hub.py`` its other sections of ``MemoryStore``, and
``migrations.py`` its schema."""

from memory_tencentdb.store.sqlite.store import SqliteStore, Store

__all__ = ["SqliteStore", "Store"]

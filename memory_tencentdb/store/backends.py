"""Which store serves a gateway: a small registry keyed by ``storeBackend``.

``sqlite`` (the default) keeps the index in ``<data dir>/memory.db``, embedded, one gateway per
data directory. ``postgres`` keeps it in a PostgreSQL database with pgvector that several
gateways share (team memory); each gateway still journals to the files of its own data
directory. Both return a ``MemoryStore`` (``base.py``): ``sqlite.SqliteStore`` and
``postgres.PostgresStore``, siblings that each own their SQL and schema, so nothing above
``store/`` knows which one it has.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.errors import StoreUnavailable
from memory_tencentdb.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

__all__ = ["BACKENDS", "StoreUnavailable", "open_store"]

Opener = Callable[[Path, tzinfo, "Settings"], MemoryStore]


def _open_sqlite(data_dir: Path, tz: tzinfo, settings: Settings) -> MemoryStore:
    return SqliteStore(data_dir, tz)


def _open_postgres(data_dir: Path, tz: tzinfo, settings: Settings) -> MemoryStore:
    # Imported here: psycopg is an optional dependency (``memory-tencentdb[postgres]``).
    from memory_tencentdb.store.postgres import PostgresStore

    return PostgresStore(data_dir, tz, dsn=settings.postgres.dsn)


BACKENDS: dict[str, Opener] = {"sqlite": _open_sqlite, "postgres": _open_postgres}


def open_store(settings: Settings, tz: tzinfo, data_dir: Path | None = None) -> MemoryStore:
    """The store ``settings.store_backend`` names, over ``data_dir`` (default: the settings')."""
    name = settings.store_backend or "sqlite"
    try:
        opener = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown store backend {name!r} (known: {', '.join(BACKENDS)})") from None
    return opener(Path(data_dir or settings.data_dir), tz, settings)

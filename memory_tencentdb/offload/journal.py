"""``offload-<session>.jsonl``: appends and whole-file rewrites serialized by one lock per file.

The original lost appends that landed between a rewrite's read and write, and a rewrite dropped
every line it could not parse. Here both go through the same lock, rewrites are atomic
(tmp + fsync + rename), and a corrupt line is moved to ``<file>.corrupt`` (and counted) before a
rewrite, never silently dropped.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from memory_tencentdb.offload.records import OffloadRow

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(Path(path), threading.Lock())


def _line(row: OffloadRow) -> bytes:
    return (json.dumps(row.as_json(), ensure_ascii=False) + "\n").encode("utf-8")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append(path: Path, rows: Iterable[OffloadRow]) -> None:
    """Append and fsync before returning: the caller may answer a stub after this."""
    data = b"".join(_line(r) for r in rows)
    if not data:
        return
    with lock_for(path):
        new = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if new:
            _fsync_dir(path.parent)


def _parse(raw: bytes) -> OffloadRow | None:
    try:
        data = json.loads(raw.decode("utf-8"))
        if isinstance(data, dict) and data.get("tool_call_id"):
            return OffloadRow.from_json(data)
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        pass
    return None


def _read_locked(path: Path) -> tuple[list[OffloadRow], int]:
    """Rows of the file; corrupt lines are moved to ``.corrupt`` first (count returned)."""
    try:
        lines = path.read_bytes().splitlines(keepends=True)
    except FileNotFoundError:
        return [], 0
    rows: list[OffloadRow] = []
    bad: list[bytes] = []
    for raw in lines:
        if not raw.strip():
            continue
        row = _parse(raw)
        if row is None:
            bad.append(raw if raw.endswith(b"\n") else raw + b"\n")
        else:
            rows.append(row)
    if bad:
        with path.with_name(path.name + ".corrupt").open("ab") as f:
            f.write(b"".join(bad))
            f.flush()
            os.fsync(f.fileno())
        _write_locked(path, rows)
    return rows, len(bad)


def _write_locked(path: Path, rows: list[OffloadRow]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(b"".join(_line(r) for r in rows))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read(path: Path) -> tuple[list[OffloadRow], int]:
    with lock_for(path):
        return _read_locked(path)


def rewrite(path: Path, rows: list[OffloadRow]) -> int:
    """Replace the file with ``rows`` (the caller's up-to-date copy). Lines appended since the
    caller read are kept: rows on disk whose id is not in ``rows`` are carried over."""
    with lock_for(path):
        current, bad = _read_locked(path)
        known = {r.tool_call_id for r in rows}
        extra = [r for r in current if r.tool_call_id not in known]
        _write_locked(path, [*rows, *extra])
        return bad

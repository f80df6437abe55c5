"""The files that are the source of truth: append-only JSONL logs and atomic replacements.

``conversations/YYYY-MM-DD.jsonl`` holds L0 (one message a line) and ``records/YYYY-MM-DD.jsonl``
holds L1 (one upsert or delete a line). The day is the local day in the configured timezone.
Appends go through one lock per file and are flushed and fsync'ed before returning, so a caller
that got an answer knows its data survives a crash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

log = logging.getLogger("memory_tencentdb.store")


class _Ticket:
    __slots__ = ("data", "done", "error")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.done = threading.Event()
        self.error: BaseException | None = None


class _GroupAppender:
    """Appends to one file with group commit: concurrent callers share one fsync.

    The first caller to arrive becomes the leader: it writes every queued payload, fsyncs once
    and releases all of them, and keeps doing so while more arrive. Alone, a caller pays one
    fsync as before; with four clients the disk flush is no longer paid four times.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._queue: list[_Ticket] = []
        self._leading = False

    def append(self, data: bytes, fsync: bool) -> None:
        ticket = _Ticket(data)
        with self._lock:
            self._queue.append(ticket)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._drain(fsync)
        ticket.done.wait()
        if ticket.error is not None:
            raise ticket.error

    def _drain(self, fsync: bool) -> None:
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._leading = False
                    return
            try:
                self._write(b"".join(t.data for t in batch), fsync)
            except BaseException as e:  # every caller of the batch gets the failure
                for t in batch:
                    t.error = e
            for t in batch:
                t.done.set()

    def _write(self, payload: bytes, fsync: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:  # first write of a new folder
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o600)
        try:
            # Never append onto a torn line (a crash or a full disk mid-write): the new,
            # acknowledged line would be glued to it and lost to every reader.
            size = _repair_fd(fd, self.path)
            written = 0
            try:
                while written < len(payload):
                    written += os.write(fd, payload[written:])
                if fsync:
                    os.fdatasync(fd) if hasattr(os, "fdatasync") else os.fsync(fd)
            except OSError:
                if written:  # take the partial write back, so the file ends on a whole line
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


@dataclass
class TornTail:
    """A last line without its newline, moved out of a journal into ``<file>.torn``."""

    file: str
    bytes: int
    kept: bool  # the tail was a whole JSON object missing only "\n": completed, not moved
    at: str


_torn: list[TornTail] = []
_torn_lock = threading.Lock()


def torn_tails() -> list[TornTail]:
    """Every torn tail repaired by this process (start-up check and appends)."""
    with _torn_lock:
        return list(_torn)


def repair_torn_tail(path: Path) -> TornTail | None:
    """If ``path`` does not end with a newline, repair it now (see ``_repair_fd``)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        return None
    try:
        before = len(_torn)
        _repair_fd(fd, path)
        with _torn_lock:
            return _torn[-1] if len(_torn) > before else None
    finally:
        os.close(fd)


def _repair_fd(fd: int, path: Path) -> int:
    """Make the file end on a whole line; returns its size afterwards.

    A tail that parses as a JSON object lost only its newline: it gets one. Anything else is
    moved to ``<file>.torn`` (appended, so nothing is ever destroyed) and cut off.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    start = size
    while start > 0:  # find the last newline, reading backwards
        step = min(65536, start)
        chunk = os.pread(fd, step, start - step)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            start = start - step + cut + 1
            break
        start -= step
    tail = os.pread(fd, size - start, start)
    try:
        kept = isinstance(json.loads(tail.decode("utf-8")), dict)
    except ValueError:  # UnicodeDecodeError is a ValueError too
        kept = False
    if kept:
        os.write(fd, b"\n")
        size += 1
    else:
        aside = path.with_name(path.name + ".torn")
        side = os.open(aside, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(side, tail + b"\n")
            os.fsync(side)
        finally:
            os.close(side)
        os.ftruncate(fd, start)
        size = start
    os.fsync(fd)
    event = TornTail(
        file=str(path), bytes=len(tail), kept=kept, at=datetime.now().isoformat(timespec="seconds")
    )
    with _torn_lock:
        _torn.append(event)
    log.warning(
        "journal %s ended with a torn line (%d bytes): %s",
        path,
        len(tail),
        "it was whole but for its newline, completed" if kept else f"moved to {path.name}.torn",
    )
    return size


_appenders: dict[Path, _GroupAppender] = {}
_appenders_guard = threading.Lock()


def _appender(path: Path) -> _GroupAppender:
    with _appenders_guard:
        appender = _appenders.get(path)
        if appender is None:
            appender = _appenders[path] = _GroupAppender(path)
        return appender


def day_file(folder: str, when: datetime, tz: tzinfo) -> str:
    """Relative path of the shard for ``when``: ``<folder>/YYYY-MM-DD.jsonl`` in local time."""
    return f"{folder}/{when.astimezone(tz).strftime('%Y-%m-%d')}.jsonl"


def append_lines(path: Path, rows: list[dict[str, Any]], fsync: bool = True) -> None:
    """Append ``rows`` as JSON lines in one write, durable (fsync'ed) before returning.

    The lines of one call are contiguous in the file; concurrent calls never interleave."""
    if not rows:
        return
    data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    _appender(path).append(data.encode("utf-8"), fsync)


def read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)``; a torn or corrupt line is skipped, never fatal."""
    for n, obj, _problem, _end in scan_lines(path):
        if obj is not None:
            yield n, obj


def scan_lines(
    path: Path, start: int = 0
) -> Iterator[tuple[int, dict[str, Any] | None, str | None, int]]:
    """Yield ``(line_number, object or None, problem or None, end offset)`` for every non-blank
    line from byte ``start`` on. A bad line (invalid UTF-8, not JSON, not an object) is reported,
    never fatal, and never stops the lines after it. Line numbers count from ``start``."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        fh.seek(start)
        offset = start
        for n, raw in enumerate(fh, 1):
            offset += len(raw)
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                yield n, None, "invalid UTF-8", offset
                continue
            except ValueError:
                yield n, None, "not JSON", offset
                continue
            if isinstance(obj, dict):
                yield n, obj, None, offset
            else:
                yield n, None, f"not an object ({type(obj).__name__})", offset


def shards(folder: Path) -> list[Path]:
    """The day files of a folder in chronological order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.jsonl") if p.is_file())


def write_atomic(path: Path, text: str, backups: int = 0) -> None:
    """Replace ``path`` with ``text`` via temp file + rename, keeping ``backups`` old copies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if backups > 0 and path.exists():
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        backup_dir = path.parent / ".backup"
        backup_dir.mkdir(exist_ok=True)
        shutil.copy2(path, backup_dir / f"{path.name}.{stamp}")
        old = sorted(backup_dir.glob(f"{path.name}.*"))
        for stale in old[:-backups]:
            stale.unlink(missing_ok=True)
    os.replace(tmp, path)


# Memories are private: the gateway runs with umask 077 (see ``cli.main``) and, at start, takes
# back whatever an older version or a copy left readable.
PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700


def make_private(root: Path) -> int:
    """chmod every file under ``root`` to 0600 and every folder (``root`` too) to 0700.

    Symlinks are left alone (never followed). Returns how many modes were changed; a file we
    may not change (someone else's) is logged and skipped, never fatal."""
    changed = 0
    resolved = Path(root).resolve()
    if resolved == resolved.parent or resolved in (Path.home().resolve(), *Path.home().parents):
        log.warning("data directory %s is a home or root folder: modes left alone", root)
        return 0
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for path, want in [(here, PRIVATE_DIR)] + [(here / n, PRIVATE_FILE) for n in filenames]:
            try:
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) == want:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    want = PRIVATE_DIR
                path.chmod(want)
                changed += 1
            except OSError as e:
                log.warning("cannot make %s private: %s", path, e)
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
    return changed

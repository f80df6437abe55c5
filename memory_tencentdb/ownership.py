"""Who owns a data directory: its gateway key file and its lock.

A zero-config gateway must never be confused with another one (another user, another data
directory) that happens to answer on the same port, and two processes must never write one data
directory at once. Both are solved with two small files next to the data:

- ``gateway.key``: a random Bearer token created by the first ``serve`` that has no key configured.
  The adapters (Hermes, OpenClaw, the CLI) read it from the data directory they expect, so a
  gateway serving another directory answers them 401 and is treated as "not ours".
- ``gateway.lock``: an exclusive ``fcntl.flock`` held by ``serve`` for its lifetime (and by offline
  commands such as ``reindex`` while they run), with JSON about the holder so whoever is refused
  can be told who holds it. The kernel drops the lock when the process dies, so a crash never
  leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY_FILE = "gateway.key"
LOCK_FILE = "gateway.lock"
LOCKED_EXIT_CODE = 3


@dataclass(frozen=True)
class GatewayAuth:
    """The key the gateway demands (``None`` = auth off) and where it came from."""

    token: str | None
    mode: str  # "configured" | "key-file" | "off"


def key_path(data_dir: Path) -> Path:
    return Path(data_dir) / KEY_FILE


def read_key_file(data_dir: Path) -> str | None:
    """The token in ``<data_dir>/gateway.key``, or None when there is none (or it is empty)."""
    try:
        token = key_path(data_dir).read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def ensure_key_file(data_dir: Path) -> str:
    """Reuse the data directory's key, or create it (0600, created exclusively so two starts
    racing on a fresh directory agree on one token)."""
    existing = read_key_file(data_dir)
    if existing:
        return existing
    path = key_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # someone else won the race (or left an empty file): theirs counts
        again = read_key_file(data_dir)
        if again:
            return again
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return token


def gateway_auth(server: Any, data_dir: Path) -> GatewayAuth:
    """What ``serve`` enforces: a configured key, else nothing when auth is off, else the key file."""
    if server.api_key:
        return GatewayAuth(server.api_key, "configured")
    if server.auth == "off":
        return GatewayAuth(None, "off")
    return GatewayAuth(ensure_key_file(data_dir), "key-file")


def client_token(server: Any, data_dir: Path) -> str | None:
    """What a client of the gateway sends: the configured key, else the key file's token."""
    return server.api_key or read_key_file(data_dir)


class DataDirLocked(RuntimeError):
    """Another process holds ``<data_dir>/gateway.lock``."""

    def __init__(self, data_dir: Path, holder: dict[str, Any]) -> None:
        self.data_dir = Path(data_dir)
        self.holder = holder
        super().__init__(f"{self.data_dir} is in use by {describe_holder(holder)}")


def describe_holder(holder: dict[str, Any]) -> str:
    """``gateway pid 123 on 127.0.0.1:8420 (since 2026-...)``, or what is known of it."""
    if not holder:
        return "another process (no details in the lock file)"
    what = holder.get("command", "gateway")
    text = f"{what} pid {holder.get('pid', '?')}"
    if holder.get("port"):
        text += f" on {holder.get('host', '127.0.0.1')}:{holder['port']}"
    if holder.get("started_at"):
        text += f" (since {holder['started_at']})"
    return text


class DataDirLock:
    """The exclusive lock of one data directory; ``acquire`` raises ``DataDirLocked`` if taken."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, **info: Any) -> DataDirLock:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Never O_TRUNC before holding the lock: that would wipe the holder's details.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirLocked(self.data_dir, holder) from None
        body = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **info,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(body) + "\n").encode("utf-8"), 0)
        self._fd = fd
        return self

    def update(self, **info: Any) -> None:
        """Add details once known (the port actually bound, the instance id)."""
        if self._fd is None:
            return
        body = {**_read_holder(self._fd), **info}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(body) + "\n").encode("utf-8"), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # a reader never sees a released lock's old holder
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        body = json.loads(raw.decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def lock_holder(data_dir: Path) -> dict[str, Any] | None:
    """The holder's details when the lock is held right now, else None (read-only probe)."""
    path = Path(data_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

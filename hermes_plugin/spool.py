"""Writes kept on disk until the gateway has them: a turn is never lost at exit.

Why: a one-shot ``hermes chat -q`` exits seconds after its turn; if the gateway is frozen,
restarting or not ours at that moment, the turn's capture used to be dropped ("abandoned 2 queued
write(s)"). Each write is now put in ``$HERMES_HOME/memory-tencentdb/spool/`` (directory 0700,
files 0600) when it is queued, and removed once the gateway answered it. Whatever is left when a
process ends is sent by the next session of this Hermes home. Captures carry message ids, so a
capture that did arrive before its file could be removed is not stored twice (the gateway drops
message ids it already has for that session).

File names are ``<ms>-<seq>.<pid>.json``: sorting keeps the original order, and only files whose
process is gone are taken over (renamed to the new owner's pid, atomically, so two sessions
starting together never both send one file).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("hermes_memory_tencentdb")

_seq = itertools.count()


@dataclass(frozen=True)
class Entry:
    """One write: the route, the JSON body, and the file that holds it (None if not spooled)."""

    kind: str
    path: str
    body: dict[str, Any]
    file: Path | None = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # a zombie is gone for our purposes
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Spool:
    """One directory of pending writes for one Hermes home."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self._warned = False

    def _ensure_dir(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.dir, 0o700)

    def put(self, kind: str, path: str, body: dict[str, Any]) -> Entry:
        """Persist a write before it is sent; on a disk error the write still goes (in memory)."""
        name = f"{int(time.time() * 1000):014d}-{next(_seq):06d}.{os.getpid()}.json"
        record = {"kind": kind, "path": path, "body": body, "created": time.time()}
        try:
            self._ensure_dir()
            target = self.dir / name
            tmp = self.dir / (name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False)
            os.replace(tmp, target)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("memory_tencentdb: cannot keep writes in %s: %s", self.dir, exc)
            return Entry(kind, path, body, None)
        return Entry(kind, path, body, target)

    @staticmethod
    def done(entry: Entry) -> None:
        if entry.file is not None:
            with contextlib.suppress(OSError):
                entry.file.unlink()

    def adopt(self) -> list[Entry]:
        """Take over the writes of processes that ended, oldest first."""
        try:
            names = sorted(p.name for p in self.dir.iterdir() if p.name.endswith(".json"))
        except OSError:
            return []
        me = os.getpid()
        out: list[Entry] = []
        for name in names:
            stem, _, rest = name.partition(".")
            try:
                owner = int(rest[: -len(".json")])
            except ValueError:
                continue
            if owner == me or _pid_alive(owner):
                continue
            source = self.dir / name
            target = self.dir / f"{stem}.{me}.json"
            try:
                os.rename(source, target)  # atomic: exactly one new owner
                record = json.loads(target.read_text("utf-8"))
            except FileNotFoundError:
                continue  # another session took it
            except (OSError, ValueError) as exc:
                log.warning("memory_tencentdb: unreadable kept write %s: %s", name, exc)
                with contextlib.suppress(OSError):
                    target.rename(target.with_suffix(".bad"))
                continue
            if not isinstance(record, dict) or not isinstance(record.get("body"), dict):
                continue
            out.append(
                Entry(str(record.get("kind")), str(record.get("path")), record["body"], target)
            )
        return out

    def count(self) -> int:
        try:
            return sum(1 for p in self.dir.iterdir() if p.name.endswith(".json"))
        except OSError:
            return 0

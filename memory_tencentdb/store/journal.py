"""Keeping the index honest about the journal: line checks, torn tails, the start-up check.

The JSONL files are the truth and ``memory.db`` an index over them, so two things must hold
whatever happened before (a crash mid-write, a full disk, a deleted database, a hand edit):

- a bad line (torn, invalid UTF-8, not JSON, wrong types such as ``"timestamp": "yesterday"``)
  is skipped and counted by whoever reads the journal, never fatal for the lines after it;
- every good line is in the index. At start-up ``check_journal`` repairs torn tails, then reads
  each file from the offset it had verified last time (``meta`` key ``journal:<file>``) and
  indexes what the index lacks: lines a crash left unindexed, or everything when ``memory.db``
  was deleted. What it did is reported in ``/health`` (``journal``) and the log.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.store import files

if TYPE_CHECKING:  # db imports this module
    from memory_tencentdb.store.base import MemoryStore

log = logging.getLogger("memory_tencentdb.store")

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
FOLDERS = ("conversations", "records")
BATCH = 500


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(line: dict[str, Any], key: str, required: bool = False) -> str | None:
    value = line.get(key)
    if value is None:
        return f"{key} missing" if required else None
    if not isinstance(value, str):
        return f"{key} is {type(value).__name__}, not text"
    if required and not value:
        return f"{key} empty"
    return None


def original_format(line: dict[str, Any]) -> bool:
    """An L0 line of the original project (text, no record id): for ``import``, not an error."""
    return "record_id" not in line and bool(line.get("content")) and "sessionKey" in line


def l0_problem(line: dict[str, Any]) -> str | None:
    """Why an L0 line cannot be indexed, or None when it can."""
    for key, required in (("record_id", True), ("content", True), ("role", False)):
        problem = _text(line, key, required)
        if problem:
            return problem
    for key in ("scope", "sessionKey", "sessionId", "recordedAt"):
        problem = _text(line, key)
        if problem:
            return problem
    ts = line.get("timestamp")
    if ts is not None:
        if isinstance(ts, float) and ts.is_integer():
            ts = int(ts)
        if not _is_int(ts) or not 0 <= ts <= MAX_TIMESTAMP_MS:
            return f"timestamp {ts!r} is not epoch milliseconds"
    return None


def l1_problem(line: dict[str, Any]) -> str | None:
    """Why an L1 log line cannot be applied, or None when it can."""
    op = line.get("op", "upsert")
    if op == "status":
        return _text(line, "id", True) or _text(line, "status", True)
    if op != "upsert":
        return f"unknown op {op!r}"
    for key in ("id", "content"):
        problem = _text(line, key, True)
        if problem:
            return problem
    for key in ("scope", "type", "scene_name", "session_key", "status", "created_at"):
        problem = _text(line, key)
        if problem:
            return problem
    priority = line.get("priority", 50)
    if isinstance(priority, float) and math.isfinite(priority) and priority.is_integer():
        priority = int(priority)
    if not _is_int(priority) or abs(priority) > 10**9:
        return f"priority {line.get('priority')!r} is not a number"
    for key in ("timestamps", "source_message_ids"):
        if line.get(key) is not None and not isinstance(line[key], list):
            return f"{key} is not a list"
    if line.get("metadata") is not None and not isinstance(line["metadata"], dict):
        return "metadata is not an object"
    return None


@dataclass
class BadLines:
    """Lines skipped, by reason, with a few examples (``file:line``) to look at."""

    count: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, rel: str, n: int, problem: str) -> None:
        self.count += 1
        reason = (
            problem.split(" ", 1)[0] if problem.startswith(("timestamp", "priority")) else problem
        )
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if len(self.examples) < 10:
            self.examples.append(f"{rel}:{n}: {problem}")

    def summary(self) -> str:
        if not self.count:
            return "no bad lines"
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(self.reasons.items()))
        return f"{self.count} bad line(s) skipped ({parts}); e.g. {self.examples[0]}"


@dataclass
class JournalReport:
    """What the start-up check found and did (``/health`` ``journal``)."""

    checked_lines: int = 0
    reindexed_l0: int = 0
    reindexed_l1: int = 0
    torn_tails: int = 0
    bad: BadLines = field(default_factory=BadLines)
    database_was_new: bool = False
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["bad_lines"] = out.pop("bad")
        return out

    @property
    def noteworthy(self) -> bool:
        return bool(self.reindexed_l0 or self.reindexed_l1 or self.torn_tails or self.bad.count)


def index_l0_batch(store: MemoryStore, rows: list[dict[str, Any]], rel: str) -> int:
    """Index good L0 lines; a batch that fails is retried line by line. Returns rows added."""
    try:
        return len(store.index_l0_lines(rows, rel))
    except Exception:  # noqa: BLE001 - isolate the line the database refuses
        added = 0
        for row in rows:
            try:
                added += len(store.index_l0_lines([row], rel))
            except Exception as e:  # noqa: BLE001
                log.warning("journal %s: line %s not indexable: %s", rel, row.get("record_id"), e)
        return added


def apply_l1(store: MemoryStore, line: dict[str, Any], rel: str) -> None:
    if line.get("op", "upsert") == "status":
        store.apply_status_line(line)
    else:
        store.index_l1_line(line, rel)


def _verified(store: MemoryStore, rel: str, path: Path) -> int:
    """Offset up to which this file was verified last time (0 when unknown or rewritten)."""
    raw = store.get_meta(f"journal:{rel}")
    if not raw:
        return 0
    try:
        ino, offset = (int(x) for x in raw.split(":"))
        st = path.stat()
    except (ValueError, OSError):
        return 0
    return offset if st.st_ino == ino and offset <= st.st_size else 0


def _l1_stale(store: MemoryStore, line: dict[str, Any]) -> bool:
    """Whether the index lacks what this L1 line says (checked in file order)."""
    row = store.memory_by_id(line["id"])
    if line.get("op", "upsert") == "status":
        return row is not None and row.status != line["status"]
    if row is None:
        return True
    if row.content != line["content"]:
        return str(line.get("updated_at") or "") >= row.updated_at
    return str(line.get("updated_at") or "") > row.updated_at


def check_journal(store: MemoryStore, database_was_new: bool = False) -> JournalReport:
    """Repair torn tails and index what the journal has and the index lacks (see module doc)."""
    started = time.monotonic()
    report = JournalReport(database_was_new=database_was_new)
    before = len(files.torn_tails())
    for folder in FOLDERS:
        for shard in files.shards(store.data_dir / folder):
            files.repair_torn_tail(shard)
    report.torn_tails = len(files.torn_tails()) - before
    marks: dict[str, str] = {}
    for folder in FOLDERS:
        for shard in files.shards(store.data_dir / folder):
            rel = f"{folder}/{shard.name}"
            start = _verified(store, rel, shard)
            pending: list[dict[str, Any]] = []
            for n, line, problem, _end in files.scan_lines(shard, start):
                report.checked_lines += 1
                if line is not None:
                    if folder == "conversations" and original_format(line):
                        continue  # the original's format: `import --from-original` reads it
                    problem = l0_problem(line) if folder == "conversations" else l1_problem(line)
                if problem:
                    report.bad.add(rel, n, problem)
                    continue
                assert line is not None
                if folder == "conversations":
                    pending.append(line)
                    if len(pending) >= BATCH:
                        report.reindexed_l0 += _missing_l0(store, pending, rel)
                        pending = []
                elif _l1_stale(store, line):
                    try:
                        apply_l1(store, line, rel)
                        report.reindexed_l1 += 1
                    except Exception as e:  # noqa: BLE001
                        report.bad.add(rel, n, f"not indexable: {type(e).__name__}: {e}")
            if pending:
                report.reindexed_l0 += _missing_l0(store, pending, rel)
            st = shard.stat()  # nothing appends during the check: it runs before serving
            marks[rel] = f"{st.st_ino}:{st.st_size}"
    for rel, value in marks.items():
        store.set_meta(f"journal:{rel}", value)
    report.seconds = round(time.monotonic() - started, 3)
    if report.noteworthy:
        log.warning(
            "journal check: %d line(s) read in %.1fs; indexed %d message(s) and %d memory line(s)"
            " the index lacked%s; %d torn tail(s) repaired; %s",
            report.checked_lines,
            report.seconds,
            report.reindexed_l0,
            report.reindexed_l1,
            " (memory.db was missing: rebuilt from the journal)" if database_was_new else "",
            report.torn_tails,
            report.bad.summary(),
        )
    else:
        log.info("journal check: %d new line(s), index consistent", report.checked_lines)
    return report


def _missing_l0(store: MemoryStore, lines: list[dict[str, Any]], rel: str) -> int:
    have = store.existing_ids("l0", [line["record_id"] for line in lines])
    missing = [line for line in lines if line["record_id"] not in have]
    return index_l0_batch(store, missing, rel) if missing else 0


def database_missing(data_dir: Path) -> bool:
    """True when there is a journal but no ``memory.db`` (deleted, or lost with its disk)."""
    data_dir = Path(data_dir)
    if (data_dir / "memory.db").exists():
        return False
    return any(
        shard.stat().st_size > 0 for folder in FOLDERS for shard in files.shards(data_dir / folder)
    )


def db_identity(path: Path) -> int | None:
    """The inode of ``memory.db`` (to notice it being deleted or replaced under us)."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None

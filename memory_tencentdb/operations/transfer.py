"""Export and import: one JSONL file that carries memories with their ids, history (superseded
and forgotten versions) and source links (the raw messages they were drawn from).

The file starts with a header line ``{"kind": "memory-tencentdb-export", "version": 1, ...}``;
then one ``{"kind": "message", ...}`` line per L0 message (the ``conversations/`` line format)
and one ``{"kind": "memory", ...}`` line per L1 row (the ``records/`` upsert format). Messages
come first so every source link resolves when the memories arrive.

Import reads and checks the whole file before writing anything: a wrong file or a bad line is an
error naming the line, and the data directory is untouched. Rows already present with the same
content are skipped, so importing twice changes nothing. Embeddings are computed by the next
``serve`` in the background (the same as after ``reindex``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import IO, Any

from memory_tencentdb import __version__
from memory_tencentdb.pipeline import state
from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import L1_TYPES, now_iso
from memory_tencentdb.store.records import L0Message, Memory
from memory_tencentdb.text.redact import redact, redact_obj

HEADER_KIND = "memory-tencentdb-export"
FORMAT_VERSION = 1
_DAY_FILE = re.compile(r"^(conversations|records)/\d{4}-\d{2}-\d{2}\.jsonl$")
L1_STATUSES = ("active", "superseded", "deleted")


class ImportError_(ValueError):
    """The file cannot be imported; the message names the line and what is wrong."""


@dataclass
class TransferReport:
    messages: int = 0
    memories: int = 0
    skipped_messages: int = 0
    skipped_memories: int = 0
    updated_memories: int = 0
    # Lines whose id belongs to a record of another scope (in the data directory, or earlier
    # in the file): skipped, never moved or overwritten.
    other_scope_messages: int = 0
    other_scope_memories: int = 0


# --------------------------------------------------------------------------- export


def _message_line(m: L0Message) -> dict[str, Any]:
    """An export line: the journal line (the same names) with its kind and file."""
    return {"kind": "message", **m.journal_line(), "file": m.file}


def _memory_line(m: Memory) -> dict[str, Any]:
    """An export line: the journal's upsert line (the same names) with its kind and file."""
    line = m.journal_line()
    del line["op"]
    return {"kind": "memory", **line, "file": m.file}


def export_lines(store: MemoryStore, scope: str | None) -> Iterator[dict[str, Any]]:
    yield {
        "kind": HEADER_KIND,
        "version": FORMAT_VERSION,
        "exported_at": now_iso(),
        "exporter": f"memory-tencentdb {__version__}",
        "scope": scope,
    }
    for row in store.iter_messages(scope):
        yield _message_line(row)
    # What the user forgot must not leave in a backup or a shared file: a forgotten memory and
    # the older versions of it are exported by id and status only, so an import keeps them
    # forgotten without their text. ``purge`` removes them from this data directory too.
    forgotten = {m.id for m in store.iter_memories(scope) if m.status == "deleted"}
    for m in store.iter_memories(scope):
        line = _memory_line(m)
        if m.status == "deleted" or m.id.split(".v")[0] in forgotten:
            line["content"] = ""
            line["forgotten"] = True
        yield line


def export(
    store: MemoryStore, out: IO[str], scope: str | None, tick: Callable[[int], None] | None = None
) -> TransferReport:
    report = TransferReport()
    for line in export_lines(store, scope):
        out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        if line["kind"] == "message":
            report.messages += 1
        elif line["kind"] == "memory":
            report.memories += 1
        if tick and line["kind"] != HEADER_KIND:
            tick(1)
    out.flush()
    return report


# --------------------------------------------------------------------------- import


def _need(line: dict[str, Any], n: int, key: str, kind: type | tuple[type, ...]) -> Any:
    value = line.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ImportError_(f"line {n}: {key!r} must be a {want}, got {value!r:.60}")
    return value


INT64 = 2**63  # SQLite's INTEGER: a timestamp outside it cannot be stored


def _optional(line: dict[str, Any], n: int, key: str, kind: type | tuple[type, ...]) -> None:
    """``key`` absent or null, else of ``kind``."""
    if line.get(key) is not None:
        _need(line, n, key, kind)


def _iso(line: dict[str, Any], n: int, key: str) -> None:
    """An optional date-time field: a string ``datetime.fromisoformat`` reads."""
    value = line.get(key)
    if value is None or value == "":
        return
    if not isinstance(value, str):
        raise ImportError_(f"line {n}: {key!r} must be an ISO date-time string, got {value!r:.40}")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ImportError_(f"line {n}: {key!r} is not an ISO date-time: {value!r:.40}") from None


def _str_list(line: dict[str, Any], n: int, key: str) -> None:
    value = line.get(key)
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImportError_(f"line {n}: {key!r} must be a list of strings")


def _check_message(line: dict[str, Any], n: int) -> dict[str, Any]:
    """Every field the journal line and the index use, checked before anything is written."""
    _need(line, n, "record_id", str)
    _need(line, n, "content", str)
    _need(line, n, "role", str)
    ts = line.get("timestamp", 0)
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise ImportError_(f"line {n}: 'timestamp' must be epoch milliseconds, got {ts!r:.40}")
    if not -INT64 <= ts < INT64:
        raise ImportError_(f"line {n}: 'timestamp' {ts} is out of range (64-bit milliseconds)")
    if not line["record_id"].strip() or not line["content"].strip():
        raise ImportError_(f"line {n}: a message needs a record_id and content")
    for key in ("scope", "sessionKey", "sessionId", "id", "speaker"):
        _optional(line, n, key, str)
    _optional(line, n, "extra", dict)
    _iso(line, n, "recordedAt")
    return line


def _check_memory(line: dict[str, Any], n: int) -> dict[str, Any]:
    _need(line, n, "id", str)
    _need(line, n, "content", str)
    # A forgotten memory (and its older versions) travels without its text.
    if not line["id"].strip() or not (line["content"].strip() or line.get("forgotten")):
        raise ImportError_(f"line {n}: a memory needs an id and content")
    if line.get("type", "episodic") not in L1_TYPES:
        raise ImportError_(f"line {n}: type must be one of {', '.join(L1_TYPES)}")
    if line.get("status", "active") not in L1_STATUSES:
        raise ImportError_(f"line {n}: status must be one of {', '.join(L1_STATUSES)}")
    priority = line.get("priority", 50)
    if not isinstance(priority, int) or isinstance(priority, bool) or not -1 <= priority <= 100:
        raise ImportError_(f"line {n}: priority must be an integer -1..100")
    for key in ("scope", "scene_name", "session_key", "session_id", "superseded_by", "origin"):
        _optional(line, n, key, str)
    _optional(line, n, "metadata", dict)
    _str_list(line, n, "source_message_ids")
    _str_list(line, n, "timestamps")
    for key in ("created_at", "updated_at"):
        _iso(line, n, key)
    return line


def read_export(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Parse and check a whole export file: (header, messages, memories). Raises ImportError_."""
    try:
        fh = path.open("r", encoding="utf-8")
    except OSError as e:
        raise ImportError_(f"cannot read {path}: {e.strerror or e}") from None
    messages: list[dict[str, Any]] = []
    memories: list[dict[str, Any]] = []
    header: dict[str, Any] | None = None
    with fh:
        try:
            for n, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except RecursionError:
                    raise ImportError_(f"line {n}: JSON nested too deeply") from None
                except ValueError as e:
                    if header is None:
                        raise ImportError_(
                            f"{path} is not a memory-tencentdb export (line {n} is not JSON)"
                        ) from None
                    raise ImportError_(f"line {n}: not valid JSON ({e})") from None
                if header is None:
                    if not isinstance(line, dict) or line.get("kind") != HEADER_KIND:
                        raise ImportError_(
                            f"{path} is not a memory-tencentdb export: line {n} should be the"
                            f' header {{"kind": "{HEADER_KIND}", ...}} (an original data'
                            " directory imports with --from-original)"
                        )
                    if line.get("version") != FORMAT_VERSION:
                        raise ImportError_(
                            f"line {n}: export format version {line.get('version')!r} is not"
                            f" supported (this version reads {FORMAT_VERSION})"
                        )
                    header = line
                    continue
                if not isinstance(line, dict):
                    raise ImportError_(f"line {n}: must be a JSON object")
                kind = line.get("kind")
                if kind == "message":
                    messages.append(_check_message(line, n))
                elif kind == "memory":
                    memories.append(_check_memory(line, n))
                else:
                    raise ImportError_(f"line {n}: unknown kind {kind!r} (message or memory)")
        except UnicodeDecodeError:
            raise ImportError_(f"{path} is not UTF-8 text: not an export file") from None
    if header is None:
        raise ImportError_(f"{path} is empty: not an export file")
    return header, messages, memories


def _day_file(line: dict[str, Any], folder: str, when: str, tz: tzinfo) -> str:
    given = str(line.get("file") or "")
    if _DAY_FILE.match(given) and given.startswith(folder):
        return given
    try:
        at = datetime.fromisoformat(when)
    except (ValueError, TypeError):  # not a time, or no string at all
        at = datetime.now(UTC)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return files.day_file(folder, at, tz)


def _scope(line: dict[str, Any]) -> str:
    return line.get("scope") or "default"


def _own_rows(
    store: MemoryStore, messages: list[dict[str, Any]], memories: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, int]:
    """The rows that change no other scope: an id already stored under another scope, or
    given earlier in the file with another scope, is dropped and counted. Read-only."""
    owner = {m.id: m.scope for m in store.l0_by_ids([m["record_id"] for m in messages])}
    kept_msgs = []
    for m in messages:
        if owner.setdefault(m["record_id"], _scope(m)) == _scope(m):
            kept_msgs.append(m)
    owner = {m.id: m.scope for m in store.memories_by_ids([m["id"] for m in memories])}
    kept_mems = []
    for m in memories:
        if owner.setdefault(m["id"], _scope(m)) == _scope(m):
            kept_mems.append(m)
    return (
        kept_msgs,
        kept_mems,
        len(messages) - len(kept_msgs),
        len(memories) - len(kept_mems),
    )


def import_rows(
    store: MemoryStore,
    messages: list[dict[str, Any]],
    memories: list[dict[str, Any]],
    tick: Callable[[int], None] | None = None,
    batch: int = 2000,
) -> TransferReport:
    """Write checked rows: files first (durable), then the index; present rows are skipped,
    and so is every row whose id is another scope's (an import never changes another scope)."""
    report = TransferReport()
    tz = store.tz
    messages, memories, report.other_scope_messages, report.other_scope_memories = _own_rows(
        store, messages, memories
    )
    for i in range(0, len(messages), batch):
        chunk = messages[i : i + batch]
        have = store.existing_ids("l0", [m["record_id"] for m in chunk])
        by_file: dict[str, list[dict[str, Any]]] = {}
        for m in chunk:
            if m["record_id"] in have:
                report.skipped_messages += 1
                continue
            have.add(m["record_id"])
            line = {k: v for k, v in m.items() if k not in ("kind", "file")}
            line["content"] = redact(line["content"])
            if line.get("extra"):
                line["extra"] = redact_obj(line["extra"])
            line.setdefault("scope", "default")
            line.setdefault("recordedAt", now_iso())
            rel = _day_file(m, "conversations", line["recordedAt"], tz)
            by_file.setdefault(rel, []).append(line)
        for rel, lines in by_file.items():
            files.append_lines(store.data_dir / rel, lines)
            report.messages += len(store.index_l0_lines(lines, rel))
        if tick:
            tick(len(chunk))
    for i in range(0, len(memories), batch):
        chunk = memories[i : i + batch]
        by_file = {}
        for m in chunk:
            line = {"op": "upsert", **{k: v for k, v in m.items() if k not in ("kind", "file")}}
            line["content"] = redact(line["content"])
            line.setdefault("scope", "default")
            line.setdefault("updated_at", now_iso())
            line.setdefault("created_at", line["updated_at"])
            current = store.memory_fingerprint(line["id"])
            wanted = (line["content"], line.get("status") or "active", line["updated_at"])
            if current == wanted:
                report.skipped_memories += 1
                continue
            if current is not None:
                report.updated_memories += 1
            rel = _day_file(m, "records", line["updated_at"], tz)
            by_file.setdefault(rel, []).append(line)
        for rel, lines in by_file.items():
            files.append_lines(store.data_dir / rel, lines)
            with store.bulk():
                for line in lines:
                    store.index_l1_line(line, rel)
            report.memories += len(lines)
        if tick:
            tick(len(chunk))
    report.memories -= report.updated_memories
    settle_cursors(store, messages, memories)
    return report


def settle_cursors(
    store: MemoryStore, messages: list[dict[str, Any]], memories: list[dict[str, Any]]
) -> None:
    """Imported messages were distilled already (their memories came with them): L1 starts
    after them, and L2 after the imported memories, so nothing is extracted or folded twice."""
    for (scope, key), (rowid, rid) in store.last_message_per_session(messages).items():
        st = state.get_session(store, scope, key)
        if st.l1_cursor < rowid:
            state.update_session(
                store, scope, key, l1_cursor=rowid, l1_cursor_id=rid, warmup_threshold=0
            )
    for scope in {m.get("scope") or "default" for m in memories}:
        top = state.max_l1_rowid(store, scope)
        sc = state.get_scope(store, scope)
        if top and sc.l2_cursor < top:
            row = store.l1_rows([top]).get(top)
            state.update_scope(store, scope, l2_cursor=top, l2_cursor_id=row.id if row else "")

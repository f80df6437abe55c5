"""``memory-tencentdb purge``: forgotten memories leave every file for good.

Forgetting is a tombstone: the text stays in the append-only ``records/`` log (and in backups)
until this runs. Purge is offline (the gateway must be stopped: it rewrites the logs the gateway
appends to) and goes, in order:

1. collect the forgotten memories (tombstoned ids, every version of them) and, with
   ``messages``, the raw L0 messages they were drawn from (unless a live memory still cites one);
2. rewrite ``records/`` without their upserts (tombstones stay, they carry no text) and
   ``conversations/`` without those messages, atomically and without a backup copy;
3. delete their rows from ``memory.db`` in place (pipeline cursors keep their rowids), drop
   embeddings nothing points at any more and the sqlite-vec tables (rebuilt at the next start),
   VACUUM, and delete the database backups (old copies of the index hold the text);
4. remove the lines quoting the text from every other file under the data directory (scenes,
   persona, their backups, offload files, logs);
5. check what it rewrote and the database once more, and report anything left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path

from memory_tencentdb.store import admin, files
from memory_tencentdb.store.db import Store
from memory_tencentdb.store.files import write_atomic

log = logging.getLogger("memory_tencentdb.operations")

MIN_NEEDLE = 4  # shorter texts would match ordinary lines everywhere
DB_SCAN_MAX_NEEDLES = 200  # the final byte scan of memory.db costs needles x its size
SKIP_FILES = ("gateway.key", "gateway.lock")
Progress = Callable[[str, int], None]  # (stage, items done) -> None


@dataclass
class PurgeReport:
    memories: int = 0
    versions: int = 0
    messages: int = 0
    messages_kept: int = 0  # forgotten memories' sources still cited by a live memory
    files_rewritten: list[str] = field(default_factory=list)
    backups_removed: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)


def _needles(texts: set[str]) -> list[tuple[str, bytes, bytes | None]]:
    """(text, its UTF-8 bytes, its JSON-escaped bytes if they differ) per text worth finding."""
    out = []
    for t in sorted({t.strip() for t in texts if t and len(t.strip()) >= MIN_NEEDLE}):
        raw = t.encode("utf-8")
        esc = json.dumps(t, ensure_ascii=False)[1:-1].encode("utf-8")
        out.append((t, raw, esc if esc != raw else None))
    return out


def _found(data: bytes, needles: list[tuple[str, bytes, bytes | None]]) -> bool:
    return any(raw in data or (esc is not None and esc in data) for _, raw, esc in needles)


def purge(
    data_dir: Path, tz: tzinfo, messages: bool = False, progress: Progress | None = None
) -> PurgeReport:
    data_dir = Path(data_dir)
    report = PurgeReport()
    tick = progress or (lambda stage, n: None)
    store = Store(data_dir, tz)
    try:
        deleted = admin.deleted_memories(store)
        ids = {m.id for m in deleted}
        texts = {m.content for m in deleted}
        report.versions = sum(1 for m in deleted if m.superseded_by)
        report.memories = len(ids) - report.versions
        drop_l0: set[str] = set()
        if messages:
            wanted = {s for m in deleted for s in m.source_message_ids}
            cited = admin.cited_l0_ids(store)
            drop_l0 = wanted - cited
            report.messages_kept = len(wanted & cited)
            texts |= {m.content for m in store.l0_by_ids(sorted(drop_l0))}
    finally:
        store.close()
    if not ids and not drop_l0:
        return report

    # Every version of a forgotten id (a corrected memory has several upserts in the log).
    for shard in files.shards(data_dir / "records"):
        for _, line in files.read_lines(shard):
            if line.get("id") in ids and line.get("content"):
                texts.add(str(line["content"]))

    def forgotten_upsert(line: dict) -> bool:
        return line.get("op", "upsert") == "upsert" and line.get("id") in ids

    for shard in files.shards(data_dir / "records"):
        if _rewrite_jsonl(shard, forgotten_upsert):
            report.files_rewritten.append(str(shard.relative_to(data_dir)))
        tick("records", 1)
    for shard in files.shards(data_dir / "conversations") if drop_l0 else []:
        if _rewrite_jsonl(shard, lambda line: line.get("record_id") in drop_l0):
            report.files_rewritten.append(str(shard.relative_to(data_dir)))
        tick("conversations", 1)
    report.messages = len(drop_l0)

    # The index, in place (pipeline cursors and every other row keep their rowids).
    store = Store(data_dir, tz)
    try:
        admin.delete_l1(store, sorted(ids))
        admin.delete_l0(store, sorted(drop_l0))
        admin.delete_orphan_vectors(store)
        admin.drop_vector_indexes(store)  # rebuilt from the stored vectors at the next start
        admin.vacuum(store)
    finally:
        store.close()
    tick("database", 1)
    needles = _needles(texts)
    # Database backups (taken by reindex) are old copies of an index the files can rebuild:
    # they all hold the text, so they all go.
    for backup in sorted((data_dir / ".backup").glob("memory.db.*")):
        backup.unlink(missing_ok=True)
        report.backups_removed.append(str(backup.relative_to(data_dir)))
    by_id = set(report.files_rewritten)
    for path in _all_files(data_dir):
        rel = str(path.relative_to(data_dir))
        # The logs are cleaned by id above: a line of another memory or message that merely
        # contains the text is not the user's to lose.
        if rel.startswith(("memory.db", "records/", "conversations/")):
            continue
        if _scrub(path, needles):
            report.files_rewritten.append(rel)
        tick("files", 1)
    # The scrub pass looked at every derived file already: check what it rewrote, and the
    # database (byte by byte while that stays cheap; its rows are deleted and VACUUMed anyway).
    check = sorted({data_dir / rel for rel in report.files_rewritten if rel not in by_id})
    report.leftovers = [
        str(p.relative_to(data_dir)) for p in check if p.exists() and _contains(p, needles, set())
    ]
    if len(needles) <= DB_SCAN_MAX_NEEDLES:
        report.leftovers += _database_leftovers(data_dir, tz, needles)
    if report.leftovers:
        log.warning("purge: forgotten text still found in %s", ", ".join(report.leftovers))
    return report


def _database_leftovers(
    data_dir: Path, tz: tzinfo, needles: list[tuple[str, bytes, bytes | None]]
) -> list[str]:
    """Database files still holding a forgotten text that no kept row explains (a memory you
    kept may contain the forgotten words: that is not a leftover)."""
    blobs = [(p, p.read_bytes()) for p in sorted(data_dir.glob("memory.db*")) if p.is_file()]
    found = [n for n in needles if any(_found(b, [n]) for _, b in blobs)]
    if not found:
        return []
    store = Store(data_dir, tz)
    try:
        unexplained = [n for n in found if not admin.text_in_live_rows(store, n[0])]
    finally:
        store.close()
    return [str(p.relative_to(data_dir)) for p, b in blobs if _found(b, unexplained)]


def _rewrite_jsonl(path: Path, drop: Callable[[dict], bool]) -> bool:
    """Rewrite a JSONL file without the lines ``drop`` selects (torn lines are kept as they
    are); atomic, no backup (a backup would keep the text)."""
    raw = path.read_text("utf-8", errors="replace").splitlines(keepends=True)
    kept, changed = [], False
    for line in raw:
        try:
            obj = json.loads(line)
        except ValueError:
            kept.append(line)
            continue
        if isinstance(obj, dict) and drop(obj):
            changed = True
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    if changed:
        write_atomic(path, "".join(kept))
    return changed


def _all_files(data_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in data_dir.rglob("*")
        if p.is_file() and p.name not in SKIP_FILES and not p.name.endswith((".tmp",))
    )


def _contains(path: Path, needles: list[tuple[str, bytes, bytes | None]], ids: set[str]) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if _found(data, needles):
        return True
    return any(i.encode("utf-8") in data for i in ids)


def _scrub(path: Path, needles: list[tuple[str, bytes, bytes | None]]) -> bool:
    """Remove the lines of a text file that quote a forgotten text; True if it changed."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if not _found(data, needles):
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("purge: %s holds forgotten text but is not text; removing it", path)
        path.unlink(missing_ok=True)
        return True
    escaped = [(t, (esc or raw).decode("utf-8")) for t, raw, esc in needles]
    kept = [
        line
        for line in text.splitlines(keepends=True)
        if not any(t in line or e in line for t, e in escaped)
    ]
    write_atomic(path, "".join(kept))
    return True

"""``memory-tencentdb purge``: forgotten memories leave their own scope's files for good.

Forgetting is a tombstone: the text stays in the append-only ``records/`` log (and in backups)
until this runs. Purge is offline (the gateway must be stopped: it rewrites the logs the gateway
appends to). It first makes a plan, which ``--dry-run`` prints (every file and line it would
change), then carries it out:

1. collect the forgotten memories (tombstoned ids, every version of them) with their scope and,
   with ``messages``, the raw L0 messages of that scope they were drawn from (unless a live
   memory still cites one);
2. ``records/`` loses those memories' upserts and ``conversations/`` those messages' lines,
   matched by id *and* scope: a daily file holds every scope's lines, only the forgotten
   scope's lines change (tombstones stay, they carry no text);
3. in the forgotten memory's own scope only: the lines quoting its text leave the scope's
   derived files (``persona.md``, ``scene_blocks/``, ``.metadata/``, their ``.backup/``) and,
   with ``messages``, its offload files (refs, journals, canvases, session state);
4. their rows leave ``memory.db`` in place (pipeline cursors keep their rowids), embeddings
   nothing points at any more and the sqlite-vec tables go (rebuilt at the next start),
   VACUUM, and the database backups go (old copies of the index hold the text);
5. what it rewrote and the database are checked once more; anything left is reported.

Never touched: another scope's files (another scope quoting the same words keeps them: that is
its own data), the gateway's own files (``keys.json``, ``gateway.key``, configuration, logs).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb.offload.layout import ScopeLayout
from memory_tencentdb.pipeline import layout
from memory_tencentdb.store import files
from memory_tencentdb.store.files import write_atomic
from memory_tencentdb.store.sqlite import Store

log = logging.getLogger("memory_tencentdb.operations")

MIN_NEEDLE = 4  # shorter texts would match ordinary lines everywhere
DB_SCAN_MAX_NEEDLES = 200  # the final byte scan of memory.db costs needles x its size
PREVIEW_CHARS = 100  # a dry run shows this much of each line it would remove
Progress = Callable[[str, int], object]  # (stage, items done); what it returns is ignored
Needles = list[tuple[str, bytes, bytes | None]]


@dataclass
class FileChange:
    """One file the purge changes: the 1-based numbers of the lines it removes (with a short
    preview of each, for the dry run), or the whole file when it is not text."""

    path: Path
    rel: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    whole_file: bool = False
    by_id: bool = False  # a log cleaned by id (records/, conversations/)


@dataclass
class PurgeReport:
    memories: int = 0
    versions: int = 0
    messages: int = 0
    messages_kept: int = 0  # forgotten memories' sources still cited by a live memory
    scopes: list[str] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)  # the plan (done unless dry run)
    files_rewritten: list[str] = field(default_factory=list)
    backups_removed: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    dry_run: bool = False


def _needles(texts: set[str]) -> Needles:
    """(text, its UTF-8 bytes, its JSON-escaped bytes if they differ) per text worth finding."""
    out = []
    for t in sorted({t.strip() for t in texts if t and len(t.strip()) >= MIN_NEEDLE}):
        raw = t.encode("utf-8")
        esc = json.dumps(t, ensure_ascii=False)[1:-1].encode("utf-8")
        out.append((t, raw, esc if esc != raw else None))
    return out


def _found(data: bytes, needles: Needles) -> bool:
    return any(raw in data or (esc is not None and esc in data) for _, raw, esc in needles)


def scope_files(data_dir: Path, scope: str, offload_dir: Path | None) -> list[Path]:
    """The files that belong to ``scope`` alone: its derived files (scenes, persona, their
    index and backups) and, given ``offload_dir``, its offload directory. For ``default`` the
    derived files sit at the top of the data directory beside the gateway's own files, so they
    are named one by one, never found by walking the directory."""
    root = layout.scope_root(data_dir, scope)
    found: list[Path] = []
    persona = layout.persona_file(root)
    if persona.is_file():
        found.append(persona)
    for folder in (
        layout.scene_dir(root),
        layout.scene_index_file(root).parent,
        layout.scene_backup_dir(root),
        layout.persona_backup_dir(root),
    ):
        if folder.is_dir():
            found += [p for p in folder.rglob("*") if p.is_file()]
    if offload_dir is not None:
        off = ScopeLayout.of(offload_dir, scope).root
        if off.is_dir():
            found += [p for p in off.rglob("*") if p.is_file()]
    return sorted({p for p in found if not p.name.endswith(".tmp")})


def _rel(path: Path, data_dir: Path) -> str:
    try:
        return str(path.relative_to(data_dir))
    except ValueError:
        return str(path)  # an offload directory configured outside the data directory


def purge(
    data_dir: Path,
    tz: tzinfo,
    messages: bool = False,
    progress: Progress | None = None,
    dry_run: bool = False,
    offload_dir: Path | None = None,
) -> PurgeReport:
    """Plan, then (unless ``dry_run``) carry out the purge; see the module doc. ``offload_dir``
    (default ``<data_dir>/offload``) is only touched with ``messages``."""
    data_dir = Path(data_dir)
    offload_dir = Path(offload_dir) if offload_dir is not None else data_dir / "offload"
    report = PurgeReport(dry_run=dry_run)
    tick = progress or (lambda stage, n: None)
    store = Store(data_dir, tz)
    try:
        deleted = store.deleted_memories()
        scope_of = {m.id: m.scope for m in deleted}
        texts: dict[str, set[str]] = {}
        for m in deleted:
            texts.setdefault(m.scope, set()).add(m.content)
        report.versions = sum(1 for m in deleted if m.superseded_by)
        report.memories = len(scope_of) - report.versions
        drop_l0: dict[str, str] = {}  # record id -> its scope
        if messages:
            wanted = {(s, m.scope) for m in deleted for s in m.source_message_ids}
            cited = store.cited_l0_ids()
            report.messages_kept = len({s for s, _ in wanted} & cited)
            ids = sorted({s for s, _ in wanted} - cited)
            scopes_wanted = {(s, sc) for s, sc in wanted}
            for row in store.l0_by_ids(ids):
                # Only a message of the forgotten memory's own scope is the user's to drop.
                if (row.id, row.scope) in scopes_wanted:
                    drop_l0[row.id] = row.scope
                    texts.setdefault(row.scope, set()).add(row.content)
    finally:
        store.close()
    if not scope_of and not drop_l0:
        return report
    report.scopes = sorted(texts)

    # Every version of a forgotten id (a corrected memory has several upserts in the log).
    for shard in files.shards(data_dir / "records"):
        for _, line in files.read_lines(shard):
            if scope_of.get(line.get("id", "")) == (line.get("scope") or "default") and line.get(
                "content"
            ):
                texts[scope_of[line["id"]]].add(str(line["content"]))

    def forgotten_upsert(line: dict[str, Any]) -> bool:
        return line.get("op", "upsert") == "upsert" and scope_of.get(line.get("id", "")) == (
            line.get("scope") or "default"
        )

    def forgotten_message(line: dict[str, Any]) -> bool:
        return drop_l0.get(line.get("record_id", "")) == (line.get("scope") or "default")

    # ---------------------------------------------------------------- the plan
    for shard in files.shards(data_dir / "records"):
        _plan_jsonl(report, shard, data_dir, forgotten_upsert)
        tick("records", 1)
    for shard in files.shards(data_dir / "conversations") if drop_l0 else []:
        _plan_jsonl(report, shard, data_dir, forgotten_message)
        tick("conversations", 1)
    report.messages = len(drop_l0)
    needles_of = {scope: _needles(t) for scope, t in texts.items()}
    for scope, needles in needles_of.items():
        for path in scope_files(data_dir, scope, offload_dir if messages else None):
            change = _plan_scrub(path, _rel(path, data_dir), needles)
            if change is not None:
                report.changes.append(change)
            tick("files", 1)
    if dry_run:
        return report

    # ---------------------------------------------------------------- carrying it out
    for change in report.changes:
        _apply(change)
        report.files_rewritten.append(change.rel)
    # The index, in place (pipeline cursors and every other row keep their rowids).
    store = Store(data_dir, tz)
    try:
        store.delete_l1(sorted(scope_of))
        store.delete_l0(sorted(drop_l0))
        store.delete_orphan_vectors()
        store.drop_vector_indexes()  # rebuilt from the stored vectors at the next start
        store.vacuum()
    finally:
        store.close()
    tick("database", 1)
    # Database backups (taken by reindex) are old copies of an index the files can rebuild:
    # they all hold the text, so they all go.
    for backup in sorted((data_dir / ".backup").glob("memory.db.*")):
        backup.unlink(missing_ok=True)
        report.backups_removed.append(str(backup.relative_to(data_dir)))
    # Check what was scrubbed (the logs were cleaned by id: a kept line may quote the text).
    for scope, needles in needles_of.items():
        for path in scope_files(data_dir, scope, offload_dir if messages else None):
            if _found(_read(path), needles):
                report.leftovers.append(_rel(path, data_dir))
    all_needles = [n for ns in needles_of.values() for n in ns]
    if len(all_needles) <= DB_SCAN_MAX_NEEDLES:
        report.leftovers += _database_leftovers(data_dir, tz, all_needles)
    if report.leftovers:
        log.warning("purge: forgotten text still found in %s", ", ".join(report.leftovers))
    return report


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _split(text: str) -> list[str]:
    """Lines ending at "\n" only, with their ends (``str.splitlines`` would also cut at
    U+2028 and the like, which JSON written with ``ensure_ascii=False`` keeps raw)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _preview(line: str) -> str:
    one = " ".join(line.split())
    return one if len(one) <= PREVIEW_CHARS else one[: PREVIEW_CHARS - 1] + "…"


def _plan_jsonl(
    report: PurgeReport, path: Path, data_dir: Path, drop: Callable[[dict], bool]
) -> None:
    """The lines of a JSONL log that ``drop`` selects (torn lines are kept as they are)."""
    lines = []
    text = path.read_text("utf-8", errors="replace")
    for n, line in enumerate(_split(text), 1):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and drop(obj):
            lines.append((n, _preview(line)))
    if lines:
        report.changes.append(FileChange(path, _rel(path, data_dir), lines, by_id=True))


def rewrite_jsonl(path: Path, drop: Callable[[dict], bool]) -> bool:
    """Rewrite a JSONL file without the lines ``drop`` selects (torn lines are kept); atomic,
    no backup. True if it changed (also used by retention)."""
    report = PurgeReport()
    _plan_jsonl(report, path, path.parent, drop)
    for change in report.changes:
        _apply(change)
    return bool(report.changes)


def _plan_scrub(path: Path, rel: str, needles: Needles) -> FileChange | None:
    """The lines of one of the scope's files that quote a forgotten text (None: none do)."""
    data = _read(path)
    if not _found(data, needles):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return FileChange(path, rel, whole_file=True)
    escaped = [(t, (esc or raw).decode("utf-8")) for t, raw, esc in needles]
    lines = [
        (n, _preview(line))
        for n, line in enumerate(_split(text), 1)
        if any(t in line or e in line for t, e in escaped)
    ]
    return FileChange(path, rel, lines) if lines else None


def _apply(change: FileChange) -> None:
    """Remove the planned lines (atomic, no backup: a backup would keep the text). The data
    directory is locked, so the file is the one the plan read."""
    if change.whole_file:
        log.warning("purge: %s holds forgotten text but is not text; removing it", change.rel)
        change.path.unlink(missing_ok=True)
        return
    drop = {n for n, _ in change.lines}
    text = change.path.read_text("utf-8", errors="replace")
    kept = []
    for n, line in enumerate(_split(text), 1):
        if n in drop:
            continue
        if change.by_id and not line.endswith("\n"):
            line += "\n"
        kept.append(line)
    write_atomic(change.path, "".join(kept))


def _database_leftovers(data_dir: Path, tz: tzinfo, needles: Needles) -> list[str]:
    """Database files still holding a forgotten text that no kept row explains (a memory you
    kept may contain the forgotten words: that is not a leftover)."""
    blobs = [(p, p.read_bytes()) for p in sorted(data_dir.glob("memory.db*")) if p.is_file()]
    found = [n for n in needles if any(_found(b, [n]) for _, b in blobs)]
    if not found:
        return []
    store = Store(data_dir, tz)
    try:
        unexplained = [n for n in found if not store.text_in_live_rows(n[0])]
    finally:
        store.close()
    return [str(p.relative_to(data_dir)) for p, b in blobs if _found(b, unexplained)]

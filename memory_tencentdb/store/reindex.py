"""Rebuild ``memory.db`` from the files alone.

The JSONL files are the truth; the database is an index. Reindex builds a fresh database next
to the old one, replays ``conversations/`` and ``records/`` in day order, carries over the
embeddings the old database already computed (they are keyed by model and text hash, so they
still fit), then swaps the new file in. The old database is kept under ``.backup/`` so a bad
reindex can be undone by hand.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb.store import files, journal
from memory_tencentdb.store.sqlite import Store

log = logging.getLogger("memory_tencentdb.store")


@dataclass
class ReindexReport:
    l0_messages: int = 0
    l1_lines: int = 0
    l1_memories: int = 0
    vectors_kept: int = 0
    backup: str | None = None
    # Lines with text but no record id: the original project's L0 format (``import
    # --from-original`` reads those); counted so they are never skipped silently.
    l0_foreign: int = 0
    torn_tails: int = 0
    # Lines skipped (torn, invalid UTF-8, not JSON, wrong types), counted by reason.
    bad: journal.BadLines = field(default_factory=journal.BadLines)


def reindex(data_dir: Path, tz: tzinfo, tick: Callable[[int], None] | None = None) -> ReindexReport:
    """Rebuild; ``tick(1)`` after each day file (a progress bar's ``update``)."""
    data_dir = Path(data_dir)
    report = ReindexReport()
    db = data_dir / "memory.db"
    tmp = data_dir / "memory.db.reindex"
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)

    new = Store(data_dir, tz, db_file=tmp.name)
    try:
        for folder in journal.FOLDERS:  # a torn tail goes aside first, as at start-up
            for shard in files.shards(data_dir / folder):
                if files.repair_torn_tail(shard):
                    report.torn_tails += 1
        for shard in files.shards(data_dir / "conversations"):
            rel = f"conversations/{shard.name}"
            batch: list[dict[str, Any]] = []
            for n, line, problem, _ in files.scan_lines(shard):
                if line is not None and journal.original_format(line):
                    report.l0_foreign += 1
                    continue
                problem = problem or journal.l0_problem(line or {})
                if problem:
                    report.bad.add(rel, n, problem)
                    continue
                assert line is not None  # l0_problem({}) names the missing record_id
                batch.append(line)
                if len(batch) >= 1000:
                    report.l0_messages += journal.index_l0_batch(new, batch, rel)
                    batch = []
            report.l0_messages += journal.index_l0_batch(new, batch, rel) if batch else 0
            if tick:
                tick(1)
        for shard in files.shards(data_dir / "records"):
            rel = f"records/{shard.name}"
            for n, line, problem, _ in files.scan_lines(shard):
                problem = problem or journal.l1_problem(line or {})
                if not problem:
                    try:
                        journal.apply_l1(new, line or {}, rel)
                    except Exception as e:  # noqa: BLE001 - one line never stops the rebuild
                        problem = f"not indexable: {type(e).__name__}: {e}"
                if problem:
                    report.bad.add(rel, n, problem)
                    continue
                report.l1_lines += 1
            if tick:
                tick(1)
        report.l1_memories = new.count("l1_memories")
        for folder in journal.FOLDERS:  # every line was read: the next start checks only new ones
            for shard in files.shards(data_dir / folder):
                st = shard.stat()
                new.set_meta(f"journal:{folder}/{shard.name}", f"{st.st_ino}:{st.st_size}")
        if db.exists():
            report.vectors_kept = _copy_vectors(new, db)
    finally:
        new.close()

    if db.exists():
        backup_dir = data_dir / ".backup"
        backup_dir.mkdir(exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
        backup = backup_dir / f"memory.db.{stamp}"
        _checkpoint(db)
        shutil.move(str(db), backup)
        report.backup = str(backup)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.replace(tmp, db)
    return report


def _copy_vectors(new: Store, old_db: Path) -> int:
    try:
        with new.write_lock:
            new.writer.execute("ATTACH DATABASE ? AS old", (str(old_db),))
            try:
                cur = new.writer.execute(
                    "INSERT OR IGNORE INTO vectors (model, layer, text_hash, dim, vector)"
                    " SELECT model, layer, text_hash, dim, vector FROM old.vectors"
                )
                return int(cur.rowcount)
            finally:
                new.writer.execute("DETACH DATABASE old")
    except new.binding.Error as e:
        log.warning("could not carry embeddings over from the old database (%s); re-embedding", e)
        return 0


def _checkpoint(db: Path) -> None:
    from memory_tencentdb.store.connection import connect

    try:
        conn = connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    except Exception:  # noqa: BLE001 - the move below still keeps the main file
        pass

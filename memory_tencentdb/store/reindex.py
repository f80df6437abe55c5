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
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path

from memory_tencentdb.store import files
from memory_tencentdb.store.db import Store

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
        for shard in files.shards(data_dir / "conversations"):
            rel = f"conversations/{shard.name}"
            batch = []
            for _, line in files.read_lines(shard):
                if "record_id" in line and "content" in line:
                    batch.append(line)
                elif line.get("content") and line.get("sessionKey") is not None:
                    report.l0_foreign += 1
                if len(batch) >= 1000:
                    report.l0_messages += len(new.index_l0_lines(batch, rel))
                    batch = []
            report.l0_messages += len(new.index_l0_lines(batch, rel))
            if tick:
                tick(1)
        for shard in files.shards(data_dir / "records"):
            rel = f"records/{shard.name}"
            for _, line in files.read_lines(shard):
                op = line.get("op", "upsert")
                if op == "status" and line.get("id"):
                    new.apply_status_line(line)
                elif op == "upsert" and line.get("id") and line.get("content"):
                    new.index_l1_line(line, rel)
                else:
                    continue
                report.l1_lines += 1
            if tick:
                tick(1)
        report.l1_memories = new.count("l1_memories")
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
                return cur.rowcount
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

"""Retention: raw layers older than the configured age are dropped, on a schedule, and never
anything a newer layer still cites.

- L0 (``memory.retention.l0Days``, else the original's ``capture.l0l1RetentionDays``): messages
  recorded before the cutoff leave ``conversations/`` and the index, except those a memory still
  cites as evidence (active or kept as history) and those L1 has not read yet.
- Offload (``offload.offloadRetentionDays``): canvases (``mmds/``) older than the cutoff go
  first; then journals (``offload-*.jsonl``) whose nodes no remaining canvas shows; then refs
  (``refs/*.md``) no remaining journal row points at. So the path metadata -> canvas -> JSONL ->
  ref is never cut in the middle.

Only day files older than yesterday are rewritten (the gateway appends to today's), atomically.
L1 memories are never deleted by age: they are the distilled layer a user curates (forget them
explicitly). ``RetentionScheduler`` runs the pass in the gateway every ``intervalMinutes``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.operations.purge import rewrite_jsonl
from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import utc_iso

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.operations")
_DAY = re.compile(r"^(\d{4}-\d{2}-\d{2})\.jsonl$")


@dataclass
class RetentionReport:
    ran_at: str = ""
    l0_days: int = 0
    offload_days: int = 0
    l0_deleted: int = 0
    l0_kept_cited: int = 0
    offload_deleted: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def l0_days(settings: Settings) -> int:
    return int(
        settings.memory.retention.l0_days or settings.memory.capture.l0l1_retention_days or 0
    )


def offload_root(settings: Settings, data_dir: Path) -> Path:
    cfg = settings.memory.offload
    return Path(cfg.data_dir).expanduser() if cfg.data_dir else Path(data_dir) / "offload"


def run(store: MemoryStore, settings: Settings, now: datetime | None = None) -> RetentionReport:
    now = now or datetime.now(UTC)
    report = RetentionReport(
        ran_at=now.isoformat(timespec="seconds"),
        l0_days=l0_days(settings),
        offload_days=int(settings.memory.offload.offload_retention_days or 0),
    )
    if report.l0_days:
        _l0(store, now - timedelta(days=report.l0_days), now, report)
    if report.offload_days:
        cutoff = (now - timedelta(days=report.offload_days)).timestamp()
        report.offload_deleted = _offload(offload_root(settings, store.data_dir), cutoff)
    if report.l0_deleted or any(report.offload_deleted.values()):
        log.info("retention: %s", json.dumps(report.as_json(), ensure_ascii=False))
    return report


def _l0(store: MemoryStore, cutoff: datetime, now: datetime, report: RetentionReport) -> None:
    cutoff_iso = utc_iso(cutoff)
    today = now.astimezone(store.tz).date()
    old = store.l0_recorded_before(cutoff_iso)
    if not old:
        return
    cited = store.cited_l0_ids() | store.unextracted_l0_ids([r for r, _ in old])
    drop = {rid for rid, _ in old if rid not in cited}
    report.l0_kept_cited = len(old) - len(drop)
    safe: set[str] = set()
    for shard in files.shards(store.data_dir / "conversations"):
        m = _DAY.match(shard.name)
        if not m or datetime.fromisoformat(m.group(1)).date() >= today - timedelta(days=1):
            continue  # today's and yesterday's files may still be appended to
        before = {
            rid for _, line in files.read_lines(shard) if (rid := line.get("record_id")) in drop
        }
        if before and rewrite_jsonl(shard, functools.partial(_record_in, before)):
            safe |= before
    report.l0_deleted = store.delete_l0(sorted(safe))


def _record_in(ids: set[str], line: dict[str, Any]) -> bool:
    return line.get("record_id") in ids


def _offload(root: Path, cutoff: float) -> dict[str, int]:
    out = {"canvases": 0, "journals": 0, "refs": 0}
    if not root.is_dir():
        return out
    for scope_dir in (p for p in root.iterdir() if p.is_dir()):
        canvases = sorted((scope_dir / "mmds").glob("*.mmd"))
        for path in canvases:
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                out["canvases"] += 1
        shown = "\n".join(
            p.read_text("utf-8", "replace") for p in (scope_dir / "mmds").glob("*.mmd")
        )
        cited_refs: set[str] = set()
        for journal in sorted(scope_dir.glob("offload-*.jsonl")):
            rows = [line for _, line in files.read_lines(journal)]
            nodes = {str(r.get("node_id")) for r in rows if r.get("node_id")}
            if journal.stat().st_mtime < cutoff and not any(n in shown for n in nodes):
                journal.unlink(missing_ok=True)
                out["journals"] += 1
                continue
            cited_refs |= {  # "refs/<f>.md#a-b": a part of a request's bundle (offload/store.py)
                Path(str(r["result_ref"]).partition("#")[0]).name
                for r in rows
                if r.get("result_ref")
            }
        for ref in sorted((scope_dir / "refs").glob("*")):
            if ref.is_file() and ref.stat().st_mtime < cutoff and ref.name not in cited_refs:
                ref.unlink(missing_ok=True)
                out["refs"] += 1
    return out


class RetentionScheduler:
    """Runs the retention pass in the gateway: a minute after start, then every interval."""

    def __init__(self, store: MemoryStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.last: RetentionReport | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return bool(l0_days(self.settings) or self.settings.memory.offload.offload_retention_days)

    def start(self) -> None:
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def run_now(self) -> RetentionReport:
        try:
            self.last = run(self.store, self.settings)
        except Exception as e:  # noqa: BLE001 - reported in /health, retried next interval
            log.exception("retention pass failed")
            self.last = RetentionReport(ran_at=datetime.now(UTC).isoformat(), error=str(e))
        return self.last

    def _loop(self) -> None:
        cfg = self.settings.memory.retention
        delay = float(cfg.first_run_delay_seconds)
        while not self._stop.wait(delay):
            self.run_now()
            delay = cfg.interval_minutes * 60.0

    def status(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "l0_days": l0_days(self.settings),
            "offload_days": int(self.settings.memory.offload.offload_retention_days or 0),
            "last": self.last.as_json() if self.last else None,
        }

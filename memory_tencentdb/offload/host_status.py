"""What the host adapters report about their own offload seams, for ``/health``.

Only the host can see some failures: OpenClaw silently runs its ``legacy`` context engine when
ours is in the slot but a turn cannot use it, and the bridge notices that (no engine call
before the turn's prompt). It reports it with ``POST /offload/host-status``; the report stays in
``/health`` (``offload.hosts``, and a ``degraded`` line) until the same host reports the engine
running again. Kept in memory: a restarted gateway hears it again from the next affected turn.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime


@dataclass
class HostReport:
    """The last report of one host adapter: which engine, and why it is bypassed (or None)."""

    engine: str
    fallback: str | None
    since: str | None  # when the current fallback was first reported
    updated: str


class HostReports:
    """Latest report per host name; thread-safe (routes run in a thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[str, HostReport] = {}

    def report(self, host: str, engine: str, fallback: str | None) -> HostReport:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock:
            old = self._reports.get(host)
            since = None
            if fallback is not None:
                since = old.since if old and old.fallback is not None and old.since else now
            rep = HostReport(engine=engine, fallback=fallback, since=since, updated=now)
            self._reports[host] = rep
            return rep

    def status(self) -> dict[str, dict]:
        with self._lock:
            return {host: asdict(rep) for host, rep in self._reports.items()}

    def degraded(self) -> list[str]:
        with self._lock:
            return [
                f"{host}: context engine {rep.engine!r} not in use ({rep.fallback}) since {rep.since}"
                for host, rep in sorted(self._reports.items())
                if rep.fallback is not None
            ]

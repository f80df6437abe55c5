"""What the host adapters report about their own offload seams, for ``/health``.

Only the host can see some failures: OpenClaw silently runs its ``legacy`` context engine when
ours is in the slot but a turn cannot use it, and the bridge notices that (no engine call
before the turn's prompt). It reports it with ``POST /offload/host-status``; the report stays in
``/health`` (``offload.hosts``, and a ``degraded`` line) until the same host reports the engine
running again. Kept in memory: a restarted gateway hears it again from the next affected turn.

A report belongs to a scope (the caller must be allowed to write it, like any offload write), so
one principal cannot mark another's host degraded, and what ``/health`` keeps is bounded: at most
``PER_SCOPE`` hosts per scope and ``TOTAL`` reports (a new one first replaces the oldest report
that is not a fallback; when every kept report is a fallback, the new host is refused), each
fallback text cut to ``TEXT_LIMIT`` characters. The numbers: a host reports one adapter (two
hosts exist, OpenClaw and Hermes), so 8 per scope is four times what a real setup sends.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from memory_tencentdb.pipeline.layout import DEFAULT_SCOPE

PER_SCOPE = 8
TOTAL = 256
TEXT_LIMIT = 500


class TooManyHosts(Exception):
    """No room for a new host's report (every kept report is a fallback)."""


@dataclass
class HostReport:
    """The last report of one host adapter: which engine, and why it is bypassed (or None)."""

    engine: str
    fallback: str | None
    since: str | None  # when the current fallback was first reported
    updated: str
    scope: str = DEFAULT_SCOPE


def _label(scope: str, host: str) -> str:
    """The key in ``/health``: the host's name, prefixed by its scope unless it is the default."""
    return host if scope == DEFAULT_SCOPE else f"{scope}/{host}"


class HostReports:
    """Latest report per (scope, host); thread-safe (routes run in a thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[tuple[str, str], HostReport] = {}

    def _make_room(self, key: tuple[str, str]) -> None:
        """Caller holds the lock; ``key`` is new. Drop the oldest cleared report where a cap is
        reached, or refuse."""
        same = [k for k in self._reports if k[0] == key[0]]
        for pool, cap in ((same, PER_SCOPE), (list(self._reports), TOTAL)):
            if len(pool) < cap:
                continue
            cleared = [k for k in pool if self._reports[k].fallback is None]
            if not cleared:
                raise TooManyHosts(
                    f"host: already {len(pool)} hosts reporting a fallback"
                    + (f" in scope {key[0]!r}" if cap == PER_SCOPE else "")
                    + "; a report clearing one makes room"
                )
            del self._reports[min(cleared, key=lambda k: self._reports[k].updated)]

    def report(
        self, host: str, engine: str, fallback: str | None, scope: str = DEFAULT_SCOPE
    ) -> HostReport:
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        if fallback is not None and len(fallback) > TEXT_LIMIT:
            fallback = fallback[: TEXT_LIMIT - 1] + "…"
        key = (scope, host)
        with self._lock:
            old = self._reports.get(key)
            if old is None:
                self._make_room(key)
            since = None
            if fallback is not None:
                since = old.since if old and old.fallback is not None and old.since else now
            rep = HostReport(
                engine=engine, fallback=fallback, since=since, updated=now, scope=scope
            )
            self._reports[key] = rep
            return rep

    def status(self) -> dict[str, dict]:
        with self._lock:
            return {_label(*k): asdict(rep) for k, rep in self._reports.items()}

    def degraded(self) -> list[str]:
        with self._lock:
            return [
                f"{_label(*k)}: context engine {rep.engine!r} not in use ({rep.fallback})"
                f" since {rep.since}"
                for k, rep in sorted(self._reports.items())
                if rep.fallback is not None
            ]

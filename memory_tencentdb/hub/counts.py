"""The pyramid's memory counts by type and priority, cached per scope.

Counting a scope's memories by type and priority reads every row of it: 0.5 s at 100k memories
(bench/results/hub.json, the synthetic 100k scope, 2 busy cores). The answer is kept with the
scope's fingerprint (active count and highest sequence number, read from an index in ~30 ms)
and recomputed when that changes (a memory added, corrected or forgotten) or after ``TTL_S``
(a change of type or priority alone leaves the fingerprint as it was).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_tencentdb.store.base import MemoryStore

TTL_S = 60.0
MAX_SCOPES = 256


class TypeCounts:
    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[int, int], float, list[tuple[str, int, int]]]] = {}
        self._lock = threading.Lock()

    def get(self, store: MemoryStore, scope: str) -> list[tuple[str, int, int]]:
        stamp = store.l1_fingerprint(scope)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(scope)
        if hit is not None and hit[0] == stamp and now - hit[1] < TTL_S:
            return hit[2]
        counts = store.type_priority_counts(scope)
        with self._lock:
            if len(self._cache) >= MAX_SCOPES:
                self._cache.pop(next(iter(self._cache)))
            self._cache[scope] = (stamp, now, counts)
        return counts

"""Circuit breaker shared by every call the provider makes to the gateway.

Why: a dead or wedged gateway must cost Hermes nothing. After ``threshold`` consecutive
failures the breaker opens and every call is refused instantly (prefetch returns "" in
microseconds); after ``cooldown_s`` exactly one caller is let through as a half-open probe,
whose outcome closes or re-opens the breaker. The original provider counted failures but never
gated prefetch or capture, and had no probe; this one gates everything.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


class CircuitBreaker:
    """Thread-safe closed → open → half-open state machine."""

    def __init__(
        self,
        threshold: int = 3,
        cooldown_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[str, str], None] | None = None,
    ) -> None:
        self.threshold = max(1, int(threshold))
        self.cooldown_s = max(0.0, float(cooldown_s))
        self._clock = clock
        self._lock = threading.Lock()
        self._probe_done = threading.Condition(self._lock)
        self._state = CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False
        self.times_opened = 0
        self.on_change = on_change  # (old_state, new_state), called outside the lock

    @property
    def state(self) -> str:
        """Current state; an open breaker whose cooldown elapsed still reads ``open``."""
        return self._state

    @property
    def failures(self) -> int:
        return self._failures

    def allow(self) -> bool:
        """May a call go to the gateway now? Never blocks.

        In ``open`` state, the first caller after the cooldown becomes the half-open probe;
        everybody else is refused until that probe reports back.
        """
        state = self._state
        if state == CLOSED:  # fast path without the lock: the common case
            return True
        with self._lock:
            if self._state == CLOSED:
                return True
            if self._state == OPEN:
                if self._clock() - self._opened_at < self.cooldown_s:
                    return False
                self._state = HALF_OPEN
                self._probe_in_flight = True
                return True
            # HALF_OPEN: one probe at a time.
            if self._probe_in_flight:
                return False
            self._probe_in_flight = True
            return True

    def refuses_now(self) -> bool:
        """Would ``allow()`` refuse right now? A peek that takes no half-open probe slot.

        Why: the offload seams hand the call to a worker thread; checking first spares that
        hand-off (and its deadline) while the breaker is open.
        """
        if self._state == CLOSED:
            return False
        with self._lock:
            if self._state == OPEN:
                return self._clock() - self._opened_at < self.cooldown_s
            return self._state == HALF_OPEN and self._probe_in_flight

    def record_success(self) -> None:
        """The gateway answered (any non-5xx answer counts): close."""
        if self._state == CLOSED and self._failures == 0:
            return  # fast path: nothing to change
        with self._lock:
            old = self._state
            self._state = CLOSED
            self._failures = 0
            self._probe_in_flight = False
            self._probe_done.notify_all()
        self._changed(old, CLOSED)

    def record_failure(self) -> None:
        """Transport error, timeout or 5xx: count it, open at the threshold or on a failed probe."""
        with self._lock:
            old = self._state
            self._probe_in_flight = False
            if self._state == HALF_OPEN:
                self._open()
            else:
                self._failures += 1
                if self._state == CLOSED and self._failures >= self.threshold:
                    self._open()
            new = self._state
            self._probe_done.notify_all()
        self._changed(old, new)

    def wait_for_probe(self, timeout_s: float) -> bool:
        """If a half-open probe is in flight, wait (bounded) for its outcome; True if closed.

        Why: the probe may be a background capture; a turn's recall arriving a moment later
        should get the verdict rather than being refused for the whole turn.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)  # real time: Condition.wait is
        with self._lock:
            while self._state == HALF_OPEN and self._probe_in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._probe_done.wait(remaining)
            return self._state == CLOSED

    def _changed(self, old: str, new: str) -> None:
        if old != new and self.on_change is not None:
            with contextlib.suppress(Exception):  # observers must not break the caller
                self.on_change(old, new)

    def trip(self) -> None:
        """Open now: the supervisor saw the gateway hang, so no call should wait on it."""
        with self._lock:
            old = self._state
            self._probe_in_flight = False
            self._open()
            self._probe_done.notify_all()
        self._changed(old, OPEN)

    def reset(self) -> None:
        """Close unconditionally: the supervisor just saw the gateway become healthy."""
        self.record_success()

    def _open(self) -> None:
        self._state = OPEN
        self._opened_at = self._clock()
        self.times_opened += 1

    def snapshot(self) -> dict[str, object]:
        """State for logs and tests."""
        with self._lock:
            return {
                "state": self._state,
                "failures": self._failures,
                "times_opened": self.times_opened,
            }

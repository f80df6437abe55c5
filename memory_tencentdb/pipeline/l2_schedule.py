"""When a scope's L2 (scenes) and L3 (persona) run: the per-scope timers, pure.

The companion of ``l1_schedule.py`` for the scope level, kept apart from ``scheduler.py`` for the
same reason: the rules (delay after new memories, minimum and maximum interval, dropping the
fallback run of an inactive scope, retry backoff) are what a reader needs to state and a test
to check without threads. Every function changes only the ``L2Scope`` it is given and returns
what the caller must do; times are epoch seconds passed in (``wall``); no lock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory_tencentdb.pipeline.l1_schedule import backoff


@dataclass(frozen=True)
class L2Policy:
    """The configuration the transitions read (``memory.pipeline``)."""

    delay_after_l1_seconds: float
    min_interval_seconds: float
    max_interval_seconds: float
    active_window_hours: float
    idle_timeout_seconds: float  # the retry backoff is the same as L1's


@dataclass
class L2Scope:
    """What the scheduler keeps in memory about one scope's L2/L3 runs."""

    scope: str
    due: float = 0.0  # epoch seconds, 0 = not armed
    due_kind: str = ""  # delay | max | retry
    last_run: float = 0.0
    last_active: float = 0.0
    queued: set[str] = field(default_factory=set)  # {"l2", "l3"}
    running: str | None = None
    failures: int = 0
    l3_failures: int = 0
    l3_retry_at: float = 0.0


def arm(sc: L2Scope, at: float, kind: str, only_earlier: bool) -> bool:
    """Set the L2 timer; with ``only_earlier`` an earlier armed time is kept. True if it moved."""
    if only_earlier and sc.due and sc.due <= at:
        return False
    sc.due, sc.due_kind = at, kind
    return True


def after_l1(sc: L2Scope, wall: float, policy: L2Policy) -> bool:
    """New memories: L2 after the delay, but not before the minimum interval has passed since
    the previous run. The timer only ever moves earlier (a pending max-interval run is pulled
    forward). True if it moved; the time is ``sc.due``."""
    desired = max(wall + policy.delay_after_l1_seconds, sc.last_run + policy.min_interval_seconds)
    return arm(sc, desired, "delay", only_earlier=True)


def fire(sc: L2Scope, wall: float, policy: L2Policy) -> bool:
    """The L2 timer is due: disarm it. True: run L2. False: it was the max-interval fallback of
    a scope inactive for longer than the active window, which is not run (nor re-armed)."""
    kind, sc.due, sc.due_kind = sc.due_kind, 0.0, ""
    window = policy.active_window_hours * 3600
    return not (kind == "max" and sc.last_active and wall - sc.last_active >= window)


def timers_fired(sc: L2Scope, wall: float) -> tuple[bool, bool, float | None]:
    """The timer thread's look at a scope: (L2 due, L3 retry due, earliest timer still armed).
    A due L3 retry is disarmed here; a due L2 timer is left for ``fire``."""
    l2_due, l3_due, nxt = False, False, None
    if sc.due:
        if sc.due <= wall:
            l2_due = True
        else:
            nxt = sc.due
    if sc.l3_retry_at:
        if sc.l3_retry_at <= wall:
            sc.l3_retry_at = 0.0
            l3_due = True
        else:
            nxt = sc.l3_retry_at if nxt is None else min(nxt, sc.l3_retry_at)
    return l2_due, l3_due, nxt


def l2_failed(sc: L2Scope, wall: float, policy: L2Policy) -> float:
    """An L2 run failed: retry with backoff (never given up). Returns the delay."""
    sc.failures += 1
    delay = backoff(sc.failures, policy.idle_timeout_seconds)
    arm(sc, wall + delay, "retry", only_earlier=False)
    return delay


def l2_succeeded(sc: L2Scope, wall: float, folded: bool, policy: L2Policy) -> None:
    """An L2 run completed (``folded``: it turned memories into scenes). The fallback run is
    armed the maximum interval later."""
    sc.failures = 0
    if folded:
        sc.last_run = wall
    arm(sc, wall + policy.max_interval_seconds, "max", only_earlier=False)


def l3_failed(sc: L2Scope, wall: float, policy: L2Policy) -> float:
    """A persona run failed: retry it alone with backoff. Returns the delay."""
    sc.l3_failures += 1
    delay = backoff(sc.l3_failures, policy.idle_timeout_seconds)
    sc.l3_retry_at = wall + delay
    return delay

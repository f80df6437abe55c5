"""When a session's messages are due for L1 extraction: the session state machine, pure.

Kept apart from ``scheduler.py`` because the rules (warm-up thresholds, idle timer, retry
backoff, shrinking the window after a truncated answer) are the part a reader needs to state
and a test needs to check in milliseconds, while the scheduler around them is threads, locks,
queues and the database. Every function here changes only the ``L1Session`` it is given and
returns what the caller must do; it reads no clock (the caller passes ``wall``, epoch seconds,
and ``mono``, monotonic seconds), takes no lock and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_tencentdb.pipeline.l1 import WINDOW_NEW

MAX_BACKOFF_SECONDS = 600
# A session with nothing pending and no timer is forgotten after this long without a capture
# (its state is in the database; the next capture rebuilds it).
FORGET_AFTER_SECONDS = 3600.0


@dataclass(frozen=True)
class L1Policy:
    """The configuration the transitions read (``memory.pipeline``)."""

    every_n_conversations: int
    enable_warmup: bool
    idle_timeout_seconds: float


@dataclass
class L1Session:
    """What the scheduler keeps in memory about one session (scope + session key)."""

    scope: str
    key: str
    count: int = 0  # conversations captured since the last successful run
    threshold: int = 1  # warm-up threshold (1, 2, 4, ...); 0 = graduated to everyN
    pending: int = 0
    idle_at: float | None = None  # monotonic
    retry_at: float | None = None  # monotonic
    queued: bool = False
    running: bool = False
    failures: int = 0
    window: int = WINDOW_NEW
    runs_done: int = 0
    last_ok: bool = True
    last_error: str | None = None
    last_active: float = 0.0  # epoch
    # Bumped by every capture. A run that found nothing left and saw no capture meanwhile sets
    # ``pending`` to 0: the counter drifts when another path (the shared-database poll) starts a
    # run between a capture's commit and its notification, which once left a session "pending"
    # forever with nothing to extract.
    captures: int = 0


@dataclass(frozen=True)
class RunSucceeded:
    """What the caller does after a successful run (beside the session's own changes)."""

    warmup_threshold: int | None  # to persist, when the warm-up moved on
    enqueue: bool  # more chunks are pending: queue the session again


def threshold(s: L1Session, policy: L1Policy) -> int:
    """Conversations to count before a run: the warm-up step, at most ``everyNConversations``."""
    every = policy.every_n_conversations
    if not policy.enable_warmup or s.threshold <= 0:
        return every
    return min(s.threshold, every)


def backoff(failures: int, idle_timeout_seconds: float) -> float:
    """Retry delay (L1, L2 and L3): a twentieth of the idle timeout (1-30 s), doubling, capped
    at 10 min."""
    base = max(1.0, min(30.0, idle_timeout_seconds / 20))
    return float(min(MAX_BACKOFF_SECONDS, base * (2 ** max(0, failures - 1))))


def captured(
    s: L1Session, rows: int, wall: float, mono: float, recalling: bool, policy: L1Policy
) -> bool:
    """A capture of ``rows`` messages (one conversation). True: run now (queue it); otherwise the
    idle timer is armed, unless the session is already queued."""
    s.count += 1
    s.captures += 1
    s.pending += rows
    s.failures = 0
    s.last_active = wall
    if s.count >= threshold(s, policy) or recalling:
        return True
    if not s.queued:
        s.idle_at = mono + policy.idle_timeout_seconds
    return False


def backlog_found(
    s: L1Session,
    pending: int,
    user_messages: int,
    has_plan: bool,
    last_recorded: float,
    wall: float,
    mono: float,
    policy: L1Policy,
) -> bool:
    """Messages past the cursor found in the database (at start, or left by another gateway).
    True: run now (a half-done plan, the idle time already passed, or enough conversations);
    otherwise the idle timer is armed for what is left of the idle time."""
    idle = policy.idle_timeout_seconds
    s.pending = pending
    s.count = max(s.count, user_messages, 1 if pending else 0)
    if has_plan or last_recorded + idle <= wall or s.count >= threshold(s, policy):
        return True
    s.idle_at = mono + (last_recorded + idle - wall)
    return False


def timers_fired(s: L1Session, mono: float) -> tuple[bool, float | None]:
    """The timer thread's look at a session: clears the timers that are due.

    Returns (run now, earliest timer still armed). An idle timer runs the session only if it
    has something counted or pending; a retry timer always does."""
    run, nxt = False, None
    for attr in ("idle_at", "retry_at"):
        at = getattr(s, attr)
        if at is None:
            continue
        if at <= mono:
            setattr(s, attr, None)
            if s.count > 0 or s.pending > 0 or attr == "retry_at":
                run = True
        else:
            nxt = at if nxt is None else min(nxt, at)
    return run, nxt


def forgettable(s: L1Session, wall: float) -> bool:
    """Idle, with nothing pending and no timer, for over an hour: drop it from memory."""
    return (
        not s.queued
        and not s.running
        and s.pending <= 0
        and s.idle_at is None
        and s.retry_at is None
        and wall - s.last_active > FORGET_AFTER_SECONDS
    )


def run_started(s: L1Session) -> tuple[int, int]:
    """The worker takes the session; returns (conversations counted, captures seen) so far."""
    s.queued = False
    s.running = True
    return s.count, s.captures


def run_succeeded(
    s: L1Session, counted: int, seen: int, more: bool, mono: float, policy: L1Policy
) -> RunSucceeded:
    """A run completed. The conversations it covered are uncounted, the warm-up doubles (and
    graduates to ``everyNConversations``), and conversations captured during the run get the idle
    timer again."""
    s.running = False
    s.runs_done += 1
    s.last_ok = True
    s.failures, s.last_error, s.window = 0, None, WINDOW_NEW
    s.count = max(0, s.count - counted)
    warmup: int | None = None
    if counted and policy.enable_warmup and s.threshold > 0:
        nxt = s.threshold * 2
        s.threshold = 0 if nxt >= policy.every_n_conversations else nxt
        warmup = s.threshold
    if not more and s.captures == seen:
        s.pending = 0  # the store had nothing past the cursor
    if not more and s.count > 0 and s.idle_at is None and not s.queued:
        s.idle_at = mono + policy.idle_timeout_seconds
    return RunSucceeded(warmup_threshold=warmup, enqueue=more)


def run_failed(
    s: L1Session, error: str | None, truncated: bool, mono: float, policy: L1Policy
) -> float:
    """A run failed: the cursor stays, the retry timer is armed with backoff (never given up),
    and a truncated answer halves the window of messages sent next. Returns the delay."""
    s.running = False
    s.runs_done += 1
    s.last_ok = False
    s.failures += 1
    s.last_error = error
    if truncated:
        s.window = max(1, s.window // 2)
    delay = backoff(s.failures, policy.idle_timeout_seconds)
    s.retry_at = mono + delay
    return delay

"""The L1 session state machine (pipeline/l1_schedule.py), checked without threads or clocks.

Each test drives one ``L1Session`` through the transitions with explicit times; the gateway
behaviour built on them is covered by test_schedule.py and test_failures.py."""

from __future__ import annotations

import pytest

from memory_tencentdb.pipeline import l1_schedule as t
from memory_tencentdb.pipeline.l1 import WINDOW_NEW
from memory_tencentdb.pipeline.l1_schedule import L1Policy, L1Session

POLICY = L1Policy(every_n_conversations=5, enable_warmup=True, idle_timeout_seconds=600.0)
NO_WARMUP = L1Policy(every_n_conversations=5, enable_warmup=False, idle_timeout_seconds=600.0)
WALL, MONO = 1_800_000_000.0, 1000.0

# Session keys as the hosts send them, in both languages: the state machine never reads them.
KEYS = ["agent:main:default", "agent:主助手:会话-一"]


def run_ok(s: L1Session, more: bool = False, mono: float = MONO) -> t.RunSucceeded:
    counted, seen = t.run_started(s)
    return t.run_succeeded(s, counted, seen, more, mono, POLICY)


@pytest.mark.parametrize("key", KEYS)
def test_warm_up_runs_after_1_2_4_then_every_n_conversations(key: str) -> None:
    s = L1Session("scope", key)
    sizes = []
    for _ in range(5):
        n = 0
        while True:
            n += 1
            if t.captured(s, 2, WALL, MONO, False, POLICY):
                break
        sizes.append(n)
        done = run_ok(s)
        assert done.enqueue is False
    assert sizes == [1, 2, 4, 5, 5]
    assert s.threshold == 0  # graduated (persisted as warmup_threshold=0)


def test_warm_up_steps_are_reported_for_persisting() -> None:
    s = L1Session("s", "k")
    assert t.captured(s, 1, WALL, MONO, False, POLICY)
    assert run_ok(s).warmup_threshold == 2
    s.count = 2
    assert run_ok(s).warmup_threshold == 4
    s.count = 4
    assert run_ok(s).warmup_threshold == 0  # 8 >= everyN: graduated
    s.count = 5
    assert run_ok(s).warmup_threshold is None  # nothing more to record


def test_without_warm_up_every_n_from_the_start() -> None:
    s = L1Session("s", "k")
    assert t.threshold(s, NO_WARMUP) == 5
    assert [t.captured(s, 1, WALL, MONO, False, NO_WARMUP) for _ in range(5)] == [
        False,
        False,
        False,
        False,
        True,
    ]


def test_below_threshold_arms_the_idle_timer_and_it_fires() -> None:
    s = L1Session("s", "会话", threshold=4)
    assert t.captured(s, 3, WALL, MONO, False, POLICY) is False
    assert s.idle_at == MONO + 600 and s.pending == 3 and s.last_active == WALL
    assert t.timers_fired(s, MONO + 599) == (False, MONO + 600)
    assert s.idle_at == MONO + 600
    assert t.timers_fired(s, MONO + 600) == (True, None)
    assert s.idle_at is None


def test_a_recalling_host_runs_at_once() -> None:
    s = L1Session("s", "k", threshold=4)
    assert t.captured(s, 1, WALL, MONO, True, POLICY) is True
    assert s.idle_at is None


def test_a_queued_session_gets_no_idle_timer() -> None:
    s = L1Session("s", "k", threshold=4, queued=True)
    assert t.captured(s, 1, WALL, MONO, False, POLICY) is False
    assert s.idle_at is None


def test_an_idle_timer_with_nothing_counted_does_not_run() -> None:
    s = L1Session("s", "k", idle_at=MONO)
    assert t.timers_fired(s, MONO) == (False, None)
    s = L1Session("s", "k", retry_at=MONO)  # a retry always runs
    assert t.timers_fired(s, MONO) == (True, None)


def test_capture_during_a_run_keeps_pending_and_rearms_idle() -> None:
    s = L1Session("s", "k", threshold=0)
    for _ in range(5):
        due = t.captured(s, 1, WALL, MONO, False, POLICY)
    assert due
    s.idle_at, s.queued = None, True  # what the scheduler's queueing does
    counted, seen = t.run_started(s)
    assert (s.queued, s.running) == (False, True)
    assert t.captured(s, 2, WALL + 1, MONO + 1, False, POLICY)  # arrives mid-run: due
    s.queued = True
    done = t.run_succeeded(s, counted, seen, False, MONO + 5, POLICY)
    assert done.enqueue is False
    assert s.count == 1 and s.pending == 7  # not zeroed: a capture came in meanwhile
    assert s.idle_at is None  # queued already: no idle timer
    s.queued = False
    counted, seen = t.run_started(s)
    s.count += 1
    t.run_succeeded(s, counted, seen, False, MONO + 9, POLICY)
    assert s.idle_at == MONO + 9 + 600  # what came in meanwhile waits for the idle time


def test_a_run_that_found_nothing_clears_pending() -> None:
    s = L1Session("s", "k", pending=3, count=1)
    done = run_ok(s)
    assert s.pending == 0 and s.count == 0 and s.idle_at is None and done.enqueue is False


def test_more_chunks_requeue_instead_of_idling() -> None:
    s = L1Session("s", "k", pending=50, count=1)
    assert run_ok(s, more=True).enqueue is True
    assert s.pending == 50


@pytest.mark.parametrize(
    ("idle", "expected"),
    [
        (600, [30, 60, 120, 240, 480, 600, 600]),
        (20, [1, 2, 4, 8, 16, 32, 64]),
        (2400, [30, 60, 120, 240, 480, 600, 600]),
    ],
)
def test_backoff_doubles_from_a_twentieth_of_idle_capped(idle: float, expected: list[int]) -> None:
    assert [t.backoff(n, idle) for n in range(1, 8)] == expected


def test_failure_arms_retry_halves_window_on_truncation_and_success_resets() -> None:
    s = L1Session("s", "k", count=1)
    t.run_started(s)
    delay = t.run_failed(s, "LLM 超时 / timeout", True, MONO, POLICY)
    assert delay == 30 and s.retry_at == MONO + 30
    assert (s.failures, s.last_ok, s.running, s.window) == (1, False, False, WINDOW_NEW // 2)
    assert s.last_error == "LLM 超时 / timeout"
    t.run_started(s)
    assert t.run_failed(s, "bad JSON", False, MONO, POLICY) == 60
    assert s.window == WINDOW_NEW // 2  # only a truncated answer shrinks it
    run_ok(s)
    assert (s.failures, s.last_error, s.window, s.last_ok) == (0, None, WINDOW_NEW, True)
    assert s.runs_done == 3


def test_window_never_below_one() -> None:
    s = L1Session("s", "k", window=1)
    t.run_failed(s, "truncated", True, MONO, POLICY)
    assert s.window == 1


def test_a_capture_resets_the_failure_count() -> None:
    s = L1Session("s", "k", failures=4)
    t.captured(s, 1, WALL, MONO, False, POLICY)
    assert s.failures == 0


def test_backlog_runs_now_when_idle_passed_or_plan_or_threshold() -> None:
    s = L1Session("s", "k", threshold=4)
    assert t.backlog_found(s, 2, 1, False, WALL - 600, WALL, MONO, POLICY) is True
    s = L1Session("s", "k", threshold=4)
    assert t.backlog_found(s, 2, 1, True, WALL, WALL, MONO, POLICY) is True
    s = L1Session("s", "k", threshold=4)
    assert t.backlog_found(s, 8, 4, False, WALL, WALL, MONO, POLICY) is True
    s = L1Session("s", "k", threshold=4)
    assert t.backlog_found(s, 2, 1, False, WALL - 100, WALL, MONO, POLICY) is False
    assert s.idle_at == MONO + 500  # what is left of the idle time
    assert (s.pending, s.count) == (2, 1)


def test_backlog_with_pending_messages_counts_at_least_one() -> None:
    s = L1Session("s", "k", threshold=4)
    t.backlog_found(s, 3, 0, False, WALL, WALL, MONO, POLICY)
    assert s.count == 1


def test_forgotten_only_when_idle_for_an_hour_with_nothing_left() -> None:
    s = L1Session("s", "k", last_active=WALL)
    assert not t.forgettable(s, WALL + 3600)
    assert t.forgettable(s, WALL + 3601)
    for busy in (
        L1Session("s", "k", pending=1),
        L1Session("s", "k", queued=True),
        L1Session("s", "k", running=True),
        L1Session("s", "k", idle_at=1.0),
        L1Session("s", "k", retry_at=1.0),
    ):
        assert not t.forgettable(busy, WALL + 99999)

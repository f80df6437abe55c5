"""The per-scope L2/L3 timers (pipeline/l2_schedule.py), checked without threads or clocks.

The gateway behaviour built on them is covered by test_schedule.py and test_scenes_persona.py."""

from __future__ import annotations

from memory_tencentdb.pipeline import l2_schedule as t
from memory_tencentdb.pipeline.l2_schedule import L2Policy, L2Scope

POLICY = L2Policy(
    delay_after_l1_seconds=10,
    min_interval_seconds=900,
    max_interval_seconds=3600,
    active_window_hours=24,
    idle_timeout_seconds=600,
)
# Scope names in both languages: the timers never read them.
SCOPES = ["user:alice", "用户:张三"]


def test_after_l1_waits_the_delay_then_the_minimum_interval() -> None:
    for name in SCOPES:
        sc = L2Scope(name)
        assert t.after_l1(sc, 1000.0, POLICY) and (sc.due, sc.due_kind) == (1010.0, "delay")
        sc.due, sc.last_run = 0.0, 1010.0
        assert t.after_l1(sc, 1100.0, POLICY) and sc.due == 1910.0  # last run + 900 s


def test_after_l1_only_moves_the_timer_earlier() -> None:
    sc = L2Scope("s", due=1500.0, due_kind="max")
    assert t.after_l1(sc, 1000.0, POLICY) and (sc.due, sc.due_kind) == (1010.0, "delay")
    assert not t.after_l1(sc, 1005.0, POLICY) and sc.due == 1010.0


def test_the_fallback_run_of_an_inactive_scope_is_dropped() -> None:
    sc = L2Scope("用户:张三", due=5.0, due_kind="max", last_active=1.0)
    assert t.fire(sc, 1.0 + 25 * 3600, POLICY) is False
    assert (sc.due, sc.due_kind) == (0.0, "")
    sc = L2Scope("s", due=5.0, due_kind="max", last_active=1.0)
    assert t.fire(sc, 1.0 + 2 * 3600, POLICY) is True
    sc = L2Scope("s", due=5.0, due_kind="delay", last_active=1.0)
    assert t.fire(sc, 1.0 + 25 * 3600, POLICY) is True  # new memories always fold


def test_timers_report_what_is_due_and_the_next_wake() -> None:
    sc = L2Scope("s", due=100.0, due_kind="delay", l3_retry_at=50.0)
    assert t.timers_fired(sc, 10.0) == (False, False, 50.0)
    assert t.timers_fired(sc, 60.0) == (False, True, 100.0)
    assert sc.l3_retry_at == 0.0
    assert t.timers_fired(sc, 100.0) == (True, False, None)
    assert sc.due == 100.0  # left for fire()


def test_failures_back_off_and_success_arms_the_fallback() -> None:
    sc = L2Scope("s", due=0.0)
    assert t.l2_failed(sc, 1000.0, POLICY) == 30
    assert (sc.due, sc.due_kind, sc.failures) == (1030.0, "retry", 1)
    assert t.l2_failed(sc, 1000.0, POLICY) == 60
    t.l2_succeeded(sc, 2000.0, False, POLICY)
    assert (sc.failures, sc.last_run, sc.due, sc.due_kind) == (0, 0.0, 5600.0, "max")
    t.l2_succeeded(sc, 3000.0, True, POLICY)
    assert sc.last_run == 3000.0


def test_persona_failures_retry_alone() -> None:
    sc = L2Scope("s")
    assert t.l3_failed(sc, 1000.0, POLICY) == 30 and sc.l3_retry_at == 1030.0
    assert t.l3_failed(sc, 1000.0, POLICY) == 60 and sc.l3_failures == 2
    assert sc.due == 0.0  # L2's timer is not touched

"""Scheduling rules of the pipeline, checked in process with explicit clocks (no waiting):
L2 delay / min interval / max interval and the active window, retry backoff."""

from __future__ import annotations

from datetime import UTC

import pytest

from memory_tencentdb.config import Settings
from memory_tencentdb.pipeline.scheduler import Pipeline
from memory_tencentdb.store.db import Store
from memory_tencentdb.vectorizer import Vectorizer


@pytest.fixture
def make(tmp_path):
    made = []

    def _make(**pipeline) -> Pipeline:
        settings = Settings(data_dir=tmp_path, memory={"pipeline": pipeline})
        store = Store(tmp_path, UTC)
        vec = Vectorizer(store, settings.memory.embedding, {"l1": "numpy", "l0": "numpy"})
        p = Pipeline(store, vec, settings, UTC)
        made.append(store)
        return p

    yield _make
    for store in made:
        store.close()


def test_l2_waits_for_delay_and_min_interval(make):
    p = make(l2_delay_after_l1_seconds=10, l2_min_interval_seconds=900)
    sc = p._scope("s")
    with p._cv:  # the scheduler's lock, held by every caller
        assert p._l2_after_l1(sc, now=1000.0) == 1010.0  # first run: just the delay
        sc.due, sc.last_run = 0.0, 1010.0
        assert p._l2_after_l1(sc, now=1100.0) == 1910.0  # not before last run + 900 s
        # The timer only moves earlier: a max-interval run at +3600 is pulled forward.
        sc.due, sc.due_kind = 5000.0, "max"
        assert p._l2_after_l1(sc, now=1100.0) == 1910.0 and sc.due_kind == "delay"
        sc.last_run = 0.0
        assert p._l2_after_l1(sc, now=1100.0) == 1110.0


def test_max_interval_run_dropped_for_inactive_scopes(make):
    p = make(session_active_window_hours=24)
    sc = p._scope("s")
    with p._cv:
        sc.due, sc.due_kind, sc.last_active = 100.0, "max", 1.0
        p._fire_l2(sc, wall=1.0 + 25 * 3600)  # inactive for 25 h: not re-run
        assert not p._l2_queue and sc.due == 0.0
        sc.due, sc.due_kind, sc.last_active = 100.0, "max", 1.0
        p._fire_l2(sc, wall=1.0 + 2 * 3600)  # active 2 h ago: runs
        assert list(p._l2_queue) == [("l2", "s")]
        p._l2_queue.clear()
        sc.queued.clear()
        sc.due, sc.due_kind = 100.0, "delay"  # a run owed to new memories always happens
        p._fire_l2(sc, wall=1.0 + 25 * 3600)
        assert list(p._l2_queue) == [("l2", "s")]


@pytest.mark.parametrize(
    ("idle", "expected"),
    [(600, [30, 60, 120, 240, 480, 600, 600]), (1, [1, 2, 4, 8, 16, 32, 64])],
)
def test_retry_backoff(make, idle, expected):
    p = make(l1_idle_timeout_seconds=idle)
    assert [p._backoff(n) for n in range(1, 8)] == expected


def test_warm_up_threshold(make):
    p = make(every_n_conversations=5)
    s = p._session("s", "k")
    assert p._threshold(s) == 1
    s.threshold = 4
    assert p._threshold(s) == 4
    s.threshold = 0  # graduated
    assert p._threshold(s) == 5
    off = make(every_n_conversations=5, enable_warmup=False)
    assert off._threshold(off._session("s", "k2")) == 5

"""Scheduling rules of the pipeline, checked in process with explicit clocks (no waiting):
L2 delay / min interval / max interval and the active window, retry backoff."""

from __future__ import annotations

from datetime import UTC

import pytest

from memory_tencentdb.config import Settings
from memory_tencentdb.pipeline.scheduler import Pipeline
from memory_tencentdb.store.sqlite.store import Store
from memory_tencentdb.vectorizer import Vectorizer
from tests.support.gateway import KEYWORD_ONLY


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


def test_session_end_waits_or_not(start_gateway):
    """``wait`` (default) answers once L1 for the session is done; ``wait: false`` answers at
    once and the flush still happens in the background."""
    import time as _time

    env = {
        "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "600",
        **KEYWORD_ONLY,
    }
    gw = start_gateway(env=env)

    def turn(c, scope: str, text: str) -> None:
        # Two turns, so the warm-up (1 -> 2 -> 4) leaves the second one pending.
        for user in ("你好", text):
            c.post(
                "/capture",
                json={
                    "session_key": "k",
                    "scope": scope,
                    "user_content": user,
                    "assistant_content": "好的",
                },
            )

    def found(c, scope: str, query: str) -> list[str]:
        r = c.post("/search/memories", json={"query": query, "scope": scope})
        return [i["content"] for i in r.json()["items"]]

    with gw.client() as c:
        turn(c, "waiting", "I always drink oolong tea in the afternoon")
        r = c.post("/session/end", json={"session_key": "k", "scope": "waiting"})
        assert r.status_code == 200 and r.json() == {"flushed": True}
        assert any("oolong" in m for m in found(c, "waiting", "oolong tea"))

        turn(c, "exiting", "我习惯每天晚上十点睡觉")
        started = _time.monotonic()
        r = c.post("/session/end", json={"session_key": "k", "scope": "exiting", "wait": False})
        assert r.status_code == 200 and _time.monotonic() - started < 2.0
        deadline = _time.monotonic() + 15
        while _time.monotonic() < deadline and not found(c, "exiting", "十点睡觉"):
            _time.sleep(0.2)
        assert any("十点" in m for m in found(c, "exiting", "十点睡觉"))


def test_pending_count_recovers_when_a_run_overtakes_the_capture_notice(make):
    """On a shared database the poll can start a run between a capture's commit and its
    notification: the run extracts the rows, then the notice counts them again. The next run
    finds nothing and must clear the count, or /health says "not idle" forever (CI saw this
    on PostgreSQL)."""
    import time as _time

    from memory_tencentdb import capture as capture_service
    from memory_tencentdb.pipeline import state

    p = make(l1_idle_timeout_seconds=1)  # the late notice arms the idle timer
    p.start()
    try:
        turn = [
            {"role": "user", "content": "Remember: I only drink decaf coffee."},
            {"role": "assistant", "content": "好的，记住了。"},
        ]
        rows = capture_service.capture(p.store, "race", "k", "sid", turn, listeners=[])
        with p._cv:  # what the shared-database poll does
            p._schedule_backlog(state.backlog_sessions(p.store), _time.time(), _time.monotonic())

        def wait(done) -> dict:
            deadline = _time.monotonic() + 10
            while not done():
                assert _time.monotonic() < deadline, p.status()
                _time.sleep(0.02)
            return p.status()

        def at_rest() -> bool:
            st = p.status()
            return not st["backlog"]["l1_queued"] and st["running"]["l1"] is None

        wait(lambda: state.get_session(p.store, "race", "k").l1_cursor > 0 and at_rest())
        p.on_capture("race", "k", "sid", rows)  # the late notice of the same rows
        s = p._sessions[("race", "k")]
        runs = s.runs_done
        st = wait(lambda: s.runs_done > runs and at_rest())
        assert st["backlog"]["l1_messages"] == 0 and st["idle"], st
    finally:
        p.close()

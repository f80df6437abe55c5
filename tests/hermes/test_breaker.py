"""The circuit breaker's state machine, with a fake clock so no test sleeps."""

from __future__ import annotations

import threading
import time

from hermes_plugin.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_consecutive_failures():
    b = CircuitBreaker(threshold=3, cooldown_s=10, clock=Clock())
    for _ in range(2):
        assert b.allow()
        b.record_failure()
    assert b.state == CLOSED
    assert b.allow()
    b.record_failure()
    assert b.state == OPEN
    assert not b.allow()


def test_success_resets_the_count():
    b = CircuitBreaker(threshold=2, cooldown_s=10, clock=Clock())
    b.record_failure()
    b.record_success()
    b.record_failure()
    assert b.state == CLOSED


def test_one_half_open_probe_after_cooldown_then_close_on_success():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=5, clock=clock)
    b.record_failure()
    clock.now += 4.9
    assert not b.allow()
    clock.now += 0.2
    assert b.allow()  # the probe
    assert b.state == HALF_OPEN
    assert not b.allow()  # only one probe at a time
    b.record_success()
    assert b.state == CLOSED
    assert b.allow()


def test_failed_probe_reopens_for_a_full_cooldown():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=5, clock=clock)
    b.record_failure()
    clock.now += 5
    assert b.allow()
    b.record_failure()
    assert b.state == OPEN
    assert b.times_opened == 2
    clock.now += 4
    assert not b.allow()
    clock.now += 1
    assert b.allow()


def test_reset_closes_immediately():
    b = CircuitBreaker(threshold=1, cooldown_s=999, clock=Clock())
    b.record_failure()
    b.reset()
    assert b.allow() and b.state == CLOSED


def test_refusal_is_fast():
    b = CircuitBreaker(threshold=1, cooldown_s=999)
    b.record_failure()
    t0 = time.perf_counter()
    for _ in range(10_000):
        b.allow()
    per_call_ms = (time.perf_counter() - t0) * 1000 / 10_000
    assert per_call_ms < 0.05


def test_concurrent_probe_is_granted_once():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=1, clock=clock)
    b.record_failure()
    clock.now += 2
    grants: list[bool] = []
    start = threading.Barrier(16)

    def race() -> None:
        start.wait()
        grants.append(b.allow())

    threads = [threading.Thread(target=race) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert grants.count(True) == 1


def test_waiting_for_a_probe_returns_its_verdict():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=1, clock=clock)
    b.record_failure()
    clock.now += 2
    assert b.allow()  # someone else's probe is now in flight
    threading.Timer(0.1, b.record_success).start()
    t0 = time.perf_counter()
    assert b.wait_for_probe(5.0)
    assert time.perf_counter() - t0 < 2.0


def test_waiting_for_a_probe_is_bounded():
    clock = Clock()
    b = CircuitBreaker(threshold=1, cooldown_s=1, clock=clock)
    b.record_failure()
    clock.now += 2
    assert b.allow()
    t0 = time.perf_counter()
    assert not b.wait_for_probe(0.2)
    assert 0.15 < time.perf_counter() - t0 < 1.0

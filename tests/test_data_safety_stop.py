"""SIGTERM ends the gateway within its drain bound whatever is pending (issue 22).

A few hundred captured messages and an embedding service that answers after 20 s (the fake
OpenAI-compatible one: an embedding call in flight that nothing can interrupt, as a bundled
model's batch on a busy machine, where the audit saw the gateway still up 30 s after SIGTERM):
``/health`` must not say ``idle`` meanwhile, a SIGTERM must end the process within
``server.drainTimeoutS`` plus a small margin, and the next start (the service fast again) must
finish the backlog, as after a crash."""

from __future__ import annotations

import signal
import time

import httpx

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess

DRAIN_S = 4.0
# The bound is DRAIN_S + EXIT_GRACE_S (1 s, lifecycle.py); the rest is the time a loaded 2-core
# machine takes to tear a Python process down and reap it.
MARGIN_S = 2.5
MESSAGES = 400


def _health(g: GatewayProcess) -> dict:
    return httpx.get(g.base_url + "/health", timeout=10).json()


def _left(health: dict) -> int:
    return sum(
        int(b.get("l0", 0)) + int(b.get("l1", 0)) for b in health["embedding"]["backlog"].values()
    )


def test_sigterm_with_a_backlog_exits_within_the_bound_and_the_next_start_resumes(
    tmp_path, fake_llm: FakeLLM
):
    g = GatewayProcess(
        tmp_path / "data",
        env={
            **fake_llm.embedding_env(),
            "TDAI_SERVER__DRAIN_TIMEOUT_S": str(DRAIN_S),
            "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
        },
    ).start()
    g.wait_embedded(timeout=60)
    fake_llm.embedding_delay = 20.0  # from now on every embedding call hangs for 20 s
    with g.client() as c:
        for i in range(MESSAGES // 20):
            msgs = [
                {
                    "role": "user" if j % 2 == 0 else "assistant",
                    "content": f"第{i}轮第{j}句：我们讨论了部署计划和数据库迁移 / round {i}"
                    f" line {j}: we discussed the rollout plan and the schema migration",
                }
                for j in range(20)
            ]
            r = c.post(
                "/capture", json={"session_key": f"s{i % 4}", "scope": "stop", "messages": msgs}
            )
            assert r.status_code == 200, r.text
    health = _health(g)
    assert _left(health) > 0, health["embedding"]
    assert health["embedding"]["idle"] is False and health["idle"] is False

    started = time.monotonic()
    g.proc.send_signal(signal.SIGTERM)
    code = g.proc.wait(DRAIN_S + 30)
    took = time.monotonic() - started
    assert took <= DRAIN_S + MARGIN_S, f"exit took {took:.1f}s (bound {DRAIN_S}s)\n{g.log()}"
    assert code == 0

    fake_llm.embedding_delay = 0.0
    g.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        health = _health(g)
        if health["embedding"]["idle"]:
            break
        time.sleep(0.5)
    assert health["embedding"]["idle"] is True, health["embedding"]
    assert _left(health) == 0
    assert health["counts"]["l0_messages"] == MESSAGES  # nothing captured was lost
    # Every model has vectors for what the killed run left: the start-up scan found it.
    assert all(n > 0 for n in health["embedding"]["vectors"].values())
    g.stop()

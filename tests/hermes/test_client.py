"""The provider's HTTP client and breaker against the real gateway: up, slow, down."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_plugin.breaker import OPEN, CircuitBreaker
from hermes_plugin.client import GatewayClient, GatewayRejected, GatewayUnavailable
from hermes_plugin.ownership import Ownership
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess, free_port

from .slow_proxy import SlowProxy

SCOPE = "hermes:test-client"
# The transport is under test, not semantic recall: skip loading the embedding model.


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(tmp_path_factory.mktemp("client") / "data", env=KEYWORD_ONLY)
    yield proc.start()
    proc.stop()


def client_for(url: str, token: str = "", **breaker: float) -> GatewayClient:
    return GatewayClient(url, token, breaker=CircuitBreaker(**breaker))  # type: ignore[arg-type]


def test_up_round_trip(gw: GatewayProcess):
    c = client_for(gw.base_url, gw.token or "")
    assert c.health(2) is not None
    out = c.capture(
        {
            "session_key": "client-s1",
            "scope": SCOPE,
            "messages": [
                {
                    "role": "user",
                    "content": "The staging cluster is called blue-heron.",
                    "timestamp": 1,
                },
                {"role": "assistant", "content": "Got it.", "timestamp": 2},
            ],
        }
    )
    assert out["l0_recorded"] == 2
    mem = c.add_memory(
        {
            "session_key": "client-s1",
            "scope": SCOPE,
            "type": "persona",
            "content": "User prefers rooibos tea in the afternoon",
        }
    )
    assert mem["id"]
    recall = c.recall({"query": "rooibos tea", "session_key": "client-s2", "scope": SCOPE}, 10)
    assert "rooibos" in recall["prepend_context"]
    found = c.search_conversations({"query": "blue-heron", "scope": SCOPE}, 10)
    assert found["total"] >= 1 and "blue-heron" in found["results"]
    assert c.breaker.failures == 0


def test_bad_request_is_rejected_without_tripping_the_breaker(gw: GatewayProcess):
    c = client_for(gw.base_url, gw.token or "", threshold=1)
    with pytest.raises(GatewayRejected) as info:
        c.recall({"session_key": "x", "scope": SCOPE}, 5)  # no query
    assert info.value.status == 422
    assert c.breaker.state != OPEN


def test_slow_gateway_times_out_within_budget_and_counts_as_failure(gw: GatewayProcess):
    with SlowProxy(gw.base_url, delay_s=2.0) as proxy:
        c = client_for(proxy.base_url, gw.token or "", threshold=2, cooldown_s=60)
        t0 = time.perf_counter()
        with pytest.raises(GatewayUnavailable):
            c.recall({"query": "tea", "session_key": "s", "scope": SCOPE}, 0.5)
        assert time.perf_counter() - t0 < 2.0  # budget 0.5 s, not the 2 s delay
        assert c.breaker.failures == 1
        # A budget longer than the delay gets the real answer.
        out = c.recall({"query": "rooibos", "session_key": "s", "scope": SCOPE}, 5.0)
        assert "prepend_context" in out
        assert c.breaker.failures == 0


def test_down_gateway_opens_the_breaker_then_refuses_fast():
    c = client_for(f"http://127.0.0.1:{free_port()}", threshold=3, cooldown_s=60)
    for _ in range(3):
        with pytest.raises(GatewayUnavailable):
            c.recall({"query": "q", "session_key": "s"}, 1.0)
    assert c.breaker.state == OPEN
    t0 = time.perf_counter()
    for _ in range(100):
        with pytest.raises(GatewayUnavailable, match="breaker"):
            c.recall({"query": "q", "session_key": "s"}, 1.0)
    assert (time.perf_counter() - t0) * 1000 / 100 < 5


def test_breaker_recovers_when_the_gateway_comes_back(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # As the provider does: the key is read from the data directory once it exists.
    owner = Ownership(url, "", tmp_path / "data", check_dir=True)
    c = GatewayClient(url, breaker=CircuitBreaker(threshold=1, cooldown_s=0.2), owner=owner)
    with pytest.raises(GatewayUnavailable):
        c.capture({"session_key": "s", "user_content": "a", "assistant_content": "b"})
    assert c.breaker.state == OPEN
    back = GatewayProcess(tmp_path / "data", env=KEYWORD_ONLY, port=port).start(60)
    try:
        time.sleep(0.25)
        out = c.capture({"session_key": "s", "user_content": "a", "assistant_content": "b"})
        assert out["l0_recorded"] == 2
        assert c.breaker.state == "closed"
    finally:
        back.stop()

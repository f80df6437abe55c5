"""POST /offload/host-status: a host adapter's report on its own seams, shown in /health.

The OpenClaw bridge reports that its context engine is in the slot but not in use (OpenClaw fell
back to `legacy`); /health shows it under offload.hosts and in `degraded` until the host
reports the engine running again. Bad input is a 422 naming the field.
"""

from __future__ import annotations

import pytest

from tests.support.inprocess import InProcessGateway


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = InProcessGateway(tmp_path_factory.mktemp("host-status") / "data").start()
    yield g
    g.stop()


def test_fallback_is_shown_until_the_engine_runs_again(gw: InProcessGateway) -> None:
    with gw.client() as c:
        health = c.get("/health").json()
        assert health["offload"]["hosts"] == {}
        reason = "OpenClaw did not call it before this turn's prompt"
        body = {"host": "openclaw", "engine": "memory-tencentdb", "fallback": reason}
        first = c.post("/offload/host-status", json=body)
        assert first.status_code == 200, first.text
        assert first.json()["fallback"] == reason and first.json()["since"]
        again = c.post("/offload/host-status", json=body).json()
        assert again["since"] == first.json()["since"]  # the fallback's start is kept
        health = c.get("/health").json()
        assert health["offload"]["hosts"]["openclaw"]["fallback"] == reason
        assert any("memory-tencentdb" in d and reason in d for d in health["degraded"])

        cleared = c.post("/offload/host-status", json={**body, "fallback": None})
        assert cleared.status_code == 200 and cleared.json()["fallback"] is None
        health = c.get("/health").json()
        assert health["offload"]["hosts"]["openclaw"]["fallback"] is None
        assert not any("memory-tencentdb" in d for d in health["degraded"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"engine": "memory-tencentdb"}, "host"),
        ({"host": "openclaw", "engine": ""}, "engine"),
        ({"host": "openclaw", "engine": "x", "fallback": 3}, "fallback"),
    ],
)
def test_bad_reports_are_refused(gw: InProcessGateway, body: dict, field: str) -> None:
    with gw.client() as c:
        got = c.post("/offload/host-status", json=body)
        assert got.status_code == 422
        assert field in got.text
        assert "bad" not in c.get("/health").json()["offload"]["hosts"]

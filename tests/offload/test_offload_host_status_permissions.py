"""POST /offload/host-status behind the caller's permission and capped (issue 21, item 11).

Any key could mark ``/health`` degraded and grow it without bound (12.6 MB after 3,000 calls).
A report now belongs to a scope the caller may write (403 otherwise), ``/health`` keeps at most
8 hosts per scope (a new host replaces the oldest cleared one; with none, 429) and 500
characters of a reason, and the body is capped (413).
"""

from __future__ import annotations

import json

import pytest

from tests.support.inprocess import InProcessGateway

KEYS = {"agent-a": "key-of-agent-a-0123456789", "agent-b": "key-of-agent-b-0123456789"}
KEYS_FILE = {
    "principals": {
        "agent-a": {"key": KEYS["agent-a"], "scopes": ["a-home"]},
        "agent-b": {"key": KEYS["agent-b"], "scopes": ["b-home"]},
    }
}
REPORT = {"host": "openclaw", "engine": "memory-tencentdb", "fallback": "引擎未被调用 / not called"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("host-perm") / "data"
    data.mkdir(parents=True)
    (data / "keys.json").write_text(json.dumps(KEYS_FILE), "utf-8")
    (data / "keys.json").chmod(0o600)
    g = InProcessGateway(data).start()
    yield g
    g.stop()


def test_a_principal_reports_only_for_scopes_it_may_write(gw: InProcessGateway) -> None:
    with gw.client(token=KEYS["agent-b"]) as b:
        r = b.post("/offload/host-status", json={**REPORT, "scope": "a-home"})
        assert r.status_code == 403 and "a-home" in r.text, r.text
        r = b.post("/offload/host-status", json=REPORT)  # no scope: the default one
        assert r.status_code == 403, r.text
    with gw.client() as owner:
        hosts = owner.get("/health").json()["offload"]["hosts"]
        assert hosts == {}, hosts  # nothing the refused calls said is kept
        assert not any("memory-tencentdb" in d for d in owner.get("/health").json()["degraded"])
    with gw.client(token=KEYS["agent-a"]) as a:
        r = a.post("/offload/host-status", json={**REPORT, "scope": "a-home"})
        assert r.status_code == 200 and r.json()["scope"] == "a-home", r.text
    with gw.client() as owner:
        assert owner.post("/offload/host-status", json=REPORT).status_code == 200
        health = owner.get("/health").json()
        assert set(health["offload"]["hosts"]) == {"openclaw", "a-home/openclaw"}
        assert sum("not called" in d for d in health["degraded"]) == 2


def test_reports_are_capped_per_scope_and_in_length(gw: InProcessGateway) -> None:
    with gw.client(token=KEYS["agent-b"]) as b:
        for i in range(8):
            body = {**REPORT, "scope": "b-home", "host": f"host-{i}", "fallback": "x" * 2000}
            assert b.post("/offload/host-status", json=body).status_code == 200
        ninth = b.post("/offload/host-status", json={**REPORT, "scope": "b-home", "host": "h9"})
        assert ninth.status_code == 429 and "b-home" in ninth.text, ninth.text
        # A host that clears its fallback makes room: the new host replaces it.
        cleared = {**REPORT, "scope": "b-home", "host": "host-3", "fallback": None}
        assert b.post("/offload/host-status", json=cleared).status_code == 200
        r = b.post("/offload/host-status", json={**REPORT, "scope": "b-home", "host": "h9"})
        assert r.status_code == 200, r.text
        for i in range(300):  # many more hosts never grow what is kept beyond the cap
            b.post("/offload/host-status", json={**REPORT, "scope": "b-home", "host": f"z{i}"})
        big = {**REPORT, "scope": "b-home", "fallback": "y" * 20_000}
        assert b.post("/offload/host-status", json=big).status_code in (413, 422)
        huge = json.dumps({**REPORT, "scope": "b-home", "pad": "p" * 40_000})
        r = b.post(
            "/offload/host-status", content=huge, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 413, r.text
    with gw.client() as owner:
        hosts = owner.get("/health").json()["offload"]["hosts"]
    mine = {k: v for k, v in hosts.items() if k.startswith("b-home/")}
    assert len(mine) == 8, sorted(mine)
    assert "b-home/h9" in mine and "b-home/host-3" not in mine
    assert all(len(v["fallback"] or "") <= 500 for v in mine.values())
    assert len(json.dumps(hosts)) < 20_000


@pytest.mark.parametrize("host", ["", "a" * 65, "open claw", "宿主"])
def test_host_names_are_checked(gw: InProcessGateway, host: str) -> None:
    with gw.client() as owner:
        r = owner.post("/offload/host-status", json={**REPORT, "host": host})
        assert r.status_code == 422 and "host" in r.text, r.text

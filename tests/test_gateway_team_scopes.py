"""Team scopes with permissions (issue 14 part 3), through the gateway's routes (in process).

A keys file gives three agents their own keys; ``team:research`` has agent-a as writer and
agent-b as reader. Agent A writes there, B recalls it with its own scope, C (no permission)
never sees it and gets a 403 naming the scope when it asks explicitly; B cannot write to it.
The gateway's own key stays the owner's. Keys-file changes take effect without a restart. (A
bad keys file stopping ``serve``: ``test_serve_config_errors.py``.)
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import KEYWORD_ONLY
from tests.support.inprocess import InProcessGateway

# Sharing is what a PostgreSQL store is for (a team's gateways on one database), so `make test`
# runs this suite there too; the store's own behaviour is held on both backends by
# test_store_contract.py.
pytestmark = pytest.mark.both_backends

TEAM = "team:research"
KEYS = {
    "agent-a": "key-of-agent-a-0123456789",
    "agent-b": "key-of-agent-b-0123456789",
    "agent-c": "key-of-agent-c-0123456789",
}
KEYS_FILE = {
    "principals": {
        "agent-a": {"key": KEYS["agent-a"], "scopes": ["a-home"]},
        "agent-b": {"key": KEYS["agent-b"], "scopes": ["b-home"]},
        "agent-c": {"key": KEYS["agent-c"]},  # owns the scope "agent-c"
    },
    "scopes": {TEAM: {"readers": ["agent-b"], "writers": ["agent-a"]}},
}
TEAM_FACTS = {
    "zh": (
        "团队决定：所有数据库迁移必须在周五下午三点之前合并到主分支",
        "数据库迁移最晚什么时候合并？",
    ),
    "en": (
        "Team decision: the staging cluster stays frozen during the whole release week",
        "When is the staging cluster frozen?",
    ),
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("team") / "data"
    data.mkdir(parents=True)
    (data / "keys.json").write_text(json.dumps(KEYS_FILE), "utf-8")
    (data / "keys.json").chmod(0o600)
    g = InProcessGateway(data).start()
    yield g
    g.stop()


def agent(gw: InProcessGateway, name: str) -> httpx.Client:
    return gw.client(token=KEYS[name])


@pytest.fixture(scope="module")
def written(gw: InProcessGateway) -> dict[str, str]:
    """Agent A's two team memories (zh, en), embedded; their ids by language."""
    ids = {}
    with agent(gw, "agent-a") as a:
        for lang, (fact, _) in TEAM_FACTS.items():
            r = a.post(
                "/memories",
                json={"content": fact, "type": "episodic", "scope": TEAM, "session_key": "s-a"},
            )
            assert r.status_code == 201, r.text
            ids[lang] = r.json()["id"]
    gw.wait_embedded(120)
    return ids


def _recalled(client: httpx.Client, scope: str, query: str, **extra) -> httpx.Response:
    return client.post(
        "/recall", json={"query": query, "session_key": "s", "scope": scope, **extra}
    )


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_reader_recalls_team_memory_from_its_own_scope(gw, written, lang):
    fact, query = TEAM_FACTS[lang]
    with agent(gw, "agent-b") as b:
        r = _recalled(b, "b-home", query)
        assert r.status_code == 200, r.text
        body = r.json()
        hit = [m for m in body["memories"] if m["id"] == written[lang]]
        assert hit and hit[0]["scope"] == TEAM and hit[0]["content"] == fact, body["relevance"]
        assert fact in body["prepend_context"]
        assert TEAM in body["relevance"].get("team_scopes", {}), body["relevance"]
        # The explicit search tools merge the team scope too.
        r = b.post("/search/memories", json={"query": query, "scope": "b-home", "limit": 5})
        assert r.status_code == 200, r.text
        assert written[lang] in [it["id"] for it in r.json()["items"]]
        # ... unless the request asks for its own scope only.
        r = _recalled(b, "b-home", query, team_scopes=[])
        assert written[lang] not in [m["id"] for m in r.json()["memories"]]
        # Reading the team scope directly is allowed to a reader.
        r = b.get(f"/memories/{written[lang]}", params={"scope": TEAM})
        assert r.status_code == 200 and r.json()["content"] == fact


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_outsider_sees_nothing_and_gets_403_naming_the_scope(gw, written, lang):
    fact, query = TEAM_FACTS[lang]
    with agent(gw, "agent-c") as c:
        r = _recalled(c, "agent-c", query)
        assert r.status_code == 200, r.text
        assert r.json()["memories"] == [] and fact not in r.json()["context"]
        r = c.post("/search/memories", json={"query": query, "scope": "agent-c"})
        assert r.status_code == 200 and r.json()["items"] == []
        explicit = [
            _recalled(c, "agent-c", query, team_scopes=[TEAM]),
            _recalled(c, TEAM, query),
            c.post("/search/memories", json={"query": query, "scope": TEAM}),
            c.post("/search/conversations", json={"query": query, "scope": TEAM}),
            c.get("/memories", params={"scope": TEAM}),
            c.get(f"/memories/{written[lang]}", params={"scope": TEAM}),
            c.get("/persona", params={"scope": TEAM}),
        ]
        for r in explicit:
            assert r.status_code == 403, (r.request.url, r.text)
            assert TEAM in r.json()["error"] and "agent-c" in r.json()["error"]


def test_reader_cannot_write_and_nothing_is_written(gw, written):
    with agent(gw, "agent-b") as b:
        attempts = [
            b.post(
                "/memories",
                json={
                    "content": "B 的笔记 / B's note",
                    "type": "episodic",
                    "scope": TEAM,
                    "session_key": "s-b",
                },
            ),
            b.post(
                "/capture",
                json={
                    "scope": TEAM,
                    "session_key": "s-b",
                    "user_content": "我是 B",
                    "assistant_content": "ok",
                },
            ),
            b.patch(f"/memories/{written['en']}", json={"scope": TEAM, "content": "changed"}),
            b.delete(f"/memories/{written['zh']}", params={"scope": TEAM}),
            b.post(
                "/memories/forget", json={"scope": TEAM, "ids": [written["zh"]], "dry_run": False}
            ),
            b.post("/session/end", json={"scope": TEAM, "session_key": "s-b"}),
        ]
        for r in attempts:
            assert r.status_code == 403, (r.request.method, r.request.url, r.text)
            assert f"may not write scope {TEAM!r}" in r.json()["error"]
        # Its own scope is writable; another agent's own scope is not.
        ok = b.post(
            "/memories",
            json={
                "content": "B 喜欢乌龙茶",
                "type": "persona",
                "scope": "b-home",
                "session_key": "s-b",
            },
        )
        assert ok.status_code == 201, ok.text
        other = b.post(
            "/memories",
            json={"content": "x", "type": "persona", "scope": "a-home", "session_key": "s-b"},
        )
        assert other.status_code == 403 and "a-home" in other.json()["error"]
        # An owner-only route.
        assert b.post("/admin/shutdown", json={"cancel": True}).status_code == 403
    with gw.client() as owner:  # the gateway's own key: the owner, unchanged
        listed = owner.get("/memories", params={"scope": TEAM}).json()
        contents = sorted(m["content"] for m in listed["items"])
        assert contents == sorted(f for f, _ in TEAM_FACTS.values()), listed
        assert (
            owner.get("/memories", params={"scope": TEAM, "status": "deleted"}).json()["items"]
            == []
        )
        conv = owner.post("/search/conversations", json={"query": "我是 B", "scope": TEAM})
        assert conv.json()["items"] == []


def test_scopes_lists_what_the_caller_may_see(gw, written):
    with agent(gw, "agent-b") as b:
        body = b.get("/scopes").json()
    seen = {s["scope"]: s for s in body["scopes"]}
    assert body["principal"] == "agent-b" and body["owner"] is False
    assert seen[TEAM]["access"] == "read" and seen[TEAM]["team"] is True
    assert seen[TEAM]["memories"] == 2
    assert seen["b-home"]["access"] == "write"
    assert "a-home" not in seen and "agent-c" not in seen
    with agent(gw, "agent-c") as c:
        body = c.get("/scopes").json()
    assert [s["scope"] for s in body["scopes"]] == ["agent-c"]
    with agent(gw, "agent-a") as a:
        seen = {s["scope"]: s for s in a.get("/scopes").json()["scopes"]}
    assert seen[TEAM]["access"] == "write"
    with gw.client() as owner:
        body = owner.get("/scopes").json()
    assert body["owner"] is True
    assert {TEAM, "b-home"} <= {s["scope"] for s in body["scopes"]}


def test_unknown_key_is_401_not_403(gw):
    with gw.client(token="key-of-nobody-0123456789") as x:
        r = x.post("/recall", json={"query": "q", "session_key": "s", "scope": TEAM})
    assert r.status_code == 401


# -- Keys-file changes take effect without a restart ------------------------------------------


def _write_keys(data: Path, content: dict | str, atomic: bool = False) -> None:
    """Write ``keys.json`` in place (as an editor saving over it) or by rename (as tools do)."""
    text = content if isinstance(content, str) else json.dumps(content)
    path = data / "keys.json"
    target = data / "keys.json.tmp" if atomic else path
    target.write_text(text, "utf-8")
    target.chmod(0o600)
    if atomic:
        os.replace(target, path)


def _eventually(check, timeout: float = 15.0):
    """Poll ``check()`` until it returns a truthy value (the gateway looks once a second)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def _reload_gateway(start_app_gateway, tmp_path: Path) -> InProcessGateway:
    data = tmp_path / "reload-data"
    data.mkdir()
    _write_keys(data, KEYS_FILE)
    return start_app_gateway(env=KEYWORD_ONLY, data_dir=data)


def _status(gw: InProcessGateway, key: str, path: str = "/scopes") -> int:
    with gw.client(token=key) as c:
        return c.get(path).status_code


NEW_KEY = "key-of-agent-d-0123456789"


def test_key_added_to_the_keys_file_works_without_restart(start_app_gateway, tmp_path: Path):
    gw = _reload_gateway(start_app_gateway, tmp_path)
    assert _status(gw, NEW_KEY) == 401
    added = json.loads(json.dumps(KEYS_FILE))
    added["principals"]["agent-d"] = {"key": NEW_KEY, "scopes": ["d-home"]}
    added["scopes"][TEAM]["readers"].append("agent-d")
    engine = gw.engine
    _write_keys(gw.data_dir, added)
    assert _eventually(lambda: _status(gw, NEW_KEY) == 200), "the new key never worked"
    with gw.client(token=NEW_KEY) as d:
        body = d.get("/scopes").json()
        assert body["principal"] == "agent-d"
        assert {s["scope"]: s["access"] for s in body["scopes"]}[TEAM] == "read"
        r = d.post("/recall", json={"query": "迁移", "session_key": "s", "scope": TEAM})
        assert r.status_code == 200, r.text
    assert _status(gw, KEYS["agent-a"]) == 200
    assert gw.engine is engine  # the same gateway all along
    with gw.client() as c:
        health = c.get("/health").json()
    assert health["keys_file"]["error"] is None and health["keys_file"]["principals"] == 4


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_revoked_key_gets_401_without_restart(start_app_gateway, tmp_path: Path, lang):
    gw = _reload_gateway(start_app_gateway, tmp_path)
    fact, query = TEAM_FACTS[lang]
    with gw.client(token=KEYS["agent-a"]) as a:
        r = a.post(
            "/memories",
            json={"content": fact, "type": "episodic", "scope": TEAM, "session_key": "s"},
        )
        assert r.status_code == 201, r.text
    assert _status(gw, KEYS["agent-b"]) == 200
    revoked = json.loads(json.dumps(KEYS_FILE))
    del revoked["principals"]["agent-b"]
    revoked["scopes"][TEAM]["readers"] = []
    _write_keys(gw.data_dir, revoked, atomic=True)
    assert _eventually(lambda: _status(gw, KEYS["agent-b"]) == 401), "the revoked key still works"
    with gw.client(token=KEYS["agent-b"]) as b:
        r = b.post("/recall", json={"query": query, "session_key": "s", "scope": TEAM})
        assert r.status_code == 401 and "invalid token" in r.text
    with gw.client(token=KEYS["agent-a"]) as a:  # the others keep working
        r = a.post("/recall", json={"query": query, "session_key": "s", "scope": TEAM})
        assert r.status_code == 200 and r.json()["memory_count"] == 1, r.text


def test_broken_keys_file_keeps_the_last_good_keys_until_fixed(
    start_app_gateway, tmp_path: Path, caplog
):
    caplog.set_level(logging.INFO)
    gw = _reload_gateway(start_app_gateway, tmp_path)

    def health() -> dict:
        with gw.client() as c:
            return c.get("/health").json()

    assert health()["keys_file"]["error"] is None
    # A half-saved file, then one that names a principal that does not exist.
    broken = json.loads(json.dumps(KEYS_FILE))
    broken["principals"]["agent-d"] = {"key": NEW_KEY}
    broken["scopes"][TEAM]["readers"].append("agent-x")
    for bad, message in (('{"principals": {', "not valid JSON"), (broken, "'agent-x'")):
        _write_keys(gw.data_dir, bad)
        got = _eventually(lambda m=message: m in (health()["keys_file"]["error"] or ""))
        assert got, health()["keys_file"]
        body = health()
        assert body["status"] == "degraded" and "keys.json" in body["keys_file"]["error"]
        assert any(d.startswith("keys file not used") for d in body["degraded"]), body
        # The last good keys stay in force, and nothing of the bad file is.
        assert _status(gw, KEYS["agent-a"]) == 200 and _status(gw, KEYS["agent-c"]) == 200
        assert _status(gw, NEW_KEY) == 401
    time.sleep(2.5)  # more checks of the same broken file: logged once, not once a second
    _status(gw, KEYS["agent-a"])
    assert caplog.text.count("the last good keys stay in force") == 2, caplog.text
    fixed = json.loads(json.dumps(KEYS_FILE))
    fixed["principals"]["agent-d"] = {"key": NEW_KEY}
    _write_keys(gw.data_dir, fixed)
    assert _eventually(lambda: health()["keys_file"]["error"] is None), health()["keys_file"]
    body = health()
    assert not any(d.startswith("keys file") for d in body["degraded"]), body
    assert _status(gw, NEW_KEY) == 200 and _status(gw, KEYS["agent-a"]) == 200

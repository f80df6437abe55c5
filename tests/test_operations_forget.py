"""Operations against a real gateway: see, correct and forget memories (HTTP and CLI, zh + en),
purge for good, and secrets that never reach a file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.wait import wait_for

FAST = {
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MAX_INTERVAL_SECONDS": "3600",
    "TDAI_MEMORY__PERSONA__TRIGGER_EVERY_N": "1",
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = GatewayProcess(tmp_path_factory.mktemp("ops") / "data", env=dict(FAST)).start()
    g.wait_embedded()
    yield g
    g.stop()


def cli(gw: GatewayProcess, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def remember(gw: GatewayProcess, scope: str, content: str, type_: str = "persona") -> str:
    with gw.client() as c:
        r = c.post(
            "/memories",
            json={"content": content, "type": type_, "session_key": "s1", "scope": scope},
        )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def recall_text(gw: GatewayProcess, scope: str, query: str) -> str:
    with gw.client() as c:
        body = c.post("/recall", json={"query": query, "session_key": "s1", "scope": scope}).json()
    return json.dumps(body, ensure_ascii=False)


def search_text(gw: GatewayProcess, scope: str, query: str) -> str:
    with gw.client() as c:
        body = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 20})
    assert body.status_code == 200, body.text
    return json.dumps(body.json(), ensure_ascii=False)


# ------------------------------------------------------------------------------------ see


@pytest.mark.both_backends
def test_list_pages_filters_and_counts_over_http(gw, scope):
    ids = [
        remember(gw, scope, "用户喜欢吃川菜，尤其是水煮鱼"),
        remember(gw, scope, "The user prefers tea over coffee"),
        remember(gw, scope, "Always answer in British English", "instruction"),
    ]
    with gw.client() as c:
        page = c.get("/memories", params={"scope": scope, "limit": 2}).json()
        assert [m["id"] for m in page["items"]] == ids[::-1][:2]  # newest first
        rest = c.get(
            "/memories", params={"scope": scope, "limit": 2, "cursor": page["next_cursor"]}
        ).json()
        assert [m["id"] for m in rest["items"]] == [ids[0]] and rest["next_cursor"] is None
        only = c.get("/memories", params={"scope": scope, "type": "instruction"}).json()
        assert [m["content"] for m in only["items"]] == ["Always answer in British English"]
        assert c.get("/memories", params={"scope": scope, "since": "1d"}).json()["items"]
        future = c.get("/memories", params={"scope": scope, "since": "2999-01-01"}).json()
        assert future["items"] == []
        # Another scope sees none of them.
        assert c.get("/memories", params={"scope": scope + "-other"}).json()["items"] == []
        for bad, field in (
            ({"type": "fact"}, "type"),
            ({"since": "last tuesday"}, "since"),
            ({"cursor": "abc"}, "cursor"),
            ({"limit": 0}, "limit"),
        ):
            r = c.get("/memories", params={"scope": scope, **bad})
            assert r.status_code == 422 and field in r.json()["error"], (bad, r.text)
        scopes = {s["scope"]: s for s in c.get("/scopes").json()["scopes"]}
    assert scopes[scope]["memories"] == 3 and scopes[scope]["messages"] == 0


@pytest.mark.both_backends
def test_captured_facts_show_trace_scenes_and_persona_cli(gw, scope):
    with gw.client() as c:
        for user in ("我对花生过敏", "I live in Lisbon and work as a nurse"):
            r = c.post(
                "/capture",
                json={
                    "scope": scope,
                    "session_key": "s1",
                    "user_content": user,
                    "assistant_content": "好的 / OK",
                },
            )
            assert r.status_code == 200
        c.post("/session/end", json={"scope": scope, "session_key": "s1"})
    items = wait_for(
        lambda: gw.client().get("/memories", params={"scope": scope}).json()["items"],
        what="rule-based L1",
    )
    peanut = next(m for m in items if "花生" in m["content"])
    shown = cli(gw, "memories", "show", peanut["id"], "--scope", scope)
    assert shown.returncode == 0, shown.stderr
    assert "我对花生过敏" in shown.stdout and "conversations/" in shown.stdout
    listed = cli(gw, "memories", "list", "--scope", scope, "--json")
    assert listed.returncode == 0 and "花生" in listed.stdout
    assert json.loads(listed.stdout)[0]["scope"] == scope
    scenes = wait_for(
        lambda: gw.client().get("/scenes", params={"scope": scope}).json()["scenes"],
        what="L2 scenes",
    )
    assert any("花生" in s["content"] or "Lisbon" in s["content"] for s in scenes)
    persona = wait_for(
        lambda: gw.client().get("/persona", params={"scope": scope}).json()["persona"],
        what="L3 persona",
    )
    assert "Lisbon" in persona or "花生" in persona
    out = cli(gw, "persona", "--scope", scope)
    assert out.returncode == 0 and out.stdout.strip()
    out = cli(gw, "scenes", "--scope", scope)
    assert out.returncode == 0 and "heat" in out.stdout
    out = cli(gw, "scopes")
    assert out.returncode == 0 and scope in out.stdout


# ------------------------------------------------------------------------------------ correct


@pytest.mark.both_backends
def test_patch_keeps_the_old_version_as_history(gw, scope):
    mid = remember(gw, scope, "用户住在北京")
    with gw.client() as c:
        r = c.patch(
            f"/memories/{mid}", json={"scope": scope, "content": "用户住在上海", "priority": 90}
        )
        assert r.status_code == 200, r.text
        assert r.json()["content"] == "用户住在上海" and r.json()["priority"] == 90
        shown = c.get(f"/memories/{mid}", params={"scope": scope}).json()
        assert shown["content"] == "用户住在上海"
        assert [h["content"] for h in shown["trace"]["history"]] == ["用户住在北京"]
        # Bad input: unknown id, another scope's id, bad fields, nothing to change.
        assert c.patch("/memories/m_nope", json={"scope": scope, "content": "x"}).status_code == 404
        assert (
            c.patch(f"/memories/{mid}", json={"scope": "other", "content": "x"}).status_code == 404
        )
        r = c.patch(f"/memories/{mid}", json={"scope": scope, "priority": 500})
        assert r.status_code == 422 and "priority" in r.json()["error"]
        r = c.patch(f"/memories/{mid}", json={"scope": scope, "type": "fact"})
        assert r.status_code == 422 and "type" in r.json()["error"]
        assert c.patch(f"/memories/{mid}", json={"scope": scope}).status_code == 422
        after = c.get(f"/memories/{mid}", params={"scope": scope}).json()
    assert after["content"] == "用户住在上海" and after["priority"] == 90
    assert "上海" in search_text(gw, scope, "上海") and "北京" not in search_text(gw, scope, "北京")
    out = cli(
        gw, "memories", "edit", mid, "--scope", scope, "--content", "The user lives in Shanghai"
    )
    assert out.returncode == 0 and "Shanghai" in out.stdout
    out = cli(gw, "memories", "show", mid, "--scope", scope)
    assert "history (2)" in out.stdout and "用户住在北京" in out.stdout


# ------------------------------------------------------------------------------------ forget


def test_forget_by_id_and_by_query_survive_restart_and_purge_leaves_no_trace(
    start_gateway, tmp_path, scope
):
    data = tmp_path / "data"
    g = start_gateway(env=dict(FAST), data_dir=data)
    g.wait_embedded()
    keep_en = remember(g, scope, "The user plays the cello in an orchestra")
    keep_zh = remember(g, scope, "用户每天早上跑步五公里")
    by_id = remember(g, scope, "The user's locker code is nine-four-seven-two")
    by_query = remember(g, scope, "用户的前男友叫王小明，住在杭州西湖区")
    with g.client() as c:
        # A captured turn whose fact the rule extractor keeps: forgotten with its source message.
        c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s1",
                "user_content": "I am allergic to shellfish and penicillin",
                "assistant_content": "Noted.",
            },
        )
        c.post("/session/end", json={"scope": scope, "session_key": "s1"})
    g.wait_embedded()
    captured = wait_for(
        lambda: [
            m
            for m in g.client().get("/memories", params={"scope": scope}).json()["items"]
            if "shellfish" in m["content"]
        ],
        what="the captured fact",
    )[0]
    with g.client() as c:
        r = c.delete(f"/memories/{by_id}", params={"scope": scope})
        assert r.status_code == 200 and r.json()["deleted"][0]["id"] == by_id
        assert c.delete("/memories/m_unknown", params={"scope": scope}).status_code == 404
        assert c.delete(f"/memories/{keep_en}", params={"scope": "elsewhere"}).status_code == 404
        dry = c.post("/memories/forget", json={"query": "前男友王小明", "scope": scope}).json()
        assert [m["id"] for m in dry["matched"]] == [by_query] and dry["forgotten"] == []
        assert "王小明" in search_text(g, scope, "王小明")  # a dry run changes nothing
        r = c.post("/memories/forget", json={"query": "", "scope": scope})
        assert r.status_code == 422
    out = cli(g, "memories", "forget", "前男友王小明", "--scope", scope, "--yes")
    assert out.returncode == 0 and "forgotten: 1" in out.stdout, out
    out = cli(
        g,
        "memories",
        "forget",
        "forget that I said I am allergic to shellfish",
        "--scope",
        scope,
        "--yes",
    )
    assert out.returncode == 0 and captured["id"] in out.stdout, out
    for query in ("locker code", "王小明 杭州", "shellfish allergy", "前男友"):
        assert "nine-four" not in recall_text(g, scope, query)
        assert "王小明" not in recall_text(g, scope, query)
        assert "shellfish" not in recall_text(g, scope, query)
        assert "王小明" not in search_text(g, scope, query)
        assert "nine-four" not in search_text(g, scope, query)
    assert "cello" in recall_text(g, scope, "what instrument does the user play")
    assert "跑步" in search_text(g, scope, "跑步")

    g.restart()
    g.wait_embedded()
    for query in ("locker code nine", "王小明", "shellfish"):
        text = recall_text(g, scope, query) + search_text(g, scope, query)
        assert "nine-four" not in text and "王小明" not in text and "shellfish" not in text
    listed = g.client().get("/memories", params={"scope": scope, "status": "deleted"}).json()
    assert {m["id"] for m in listed["items"]} >= {by_id, by_query, captured["id"]}

    # Purge refuses while the gateway holds the data directory.
    locked = cli(g, "purge", "--messages")
    assert locked.returncode == 3 and "in use" in locked.stderr
    g.stop()
    out = cli(g, "purge", "--messages")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "purged 3 forgotten memories" in out.stdout
    for needle in ("nine-four-seven-two", "王小明", "shellfish and penicillin", "杭州西湖区"):
        found = [
            str(p.relative_to(data))
            for p in data.rglob("*")
            if p.is_file() and needle.encode() in p.read_bytes()
        ]
        assert found == [], (needle, found)
    g.start()
    g.wait_embedded()
    assert "cello" in recall_text(g, scope, "what instrument does the user play")
    assert "跑步" in search_text(g, scope, "跑步")
    with g.client() as c:
        assert c.get(f"/memories/{by_id}", params={"scope": scope}).status_code == 404
        assert c.get(f"/memories/{keep_zh}", params={"scope": scope}).status_code == 200


@pytest.mark.both_backends
def test_forget_rebuilds_scenes_and_persona(gw, scope):
    with gw.client() as c:
        for user in ("我喜欢爬山", "I love sailing on weekends"):
            c.post(
                "/capture",
                json={
                    "scope": scope,
                    "session_key": "s2",
                    "user_content": user,
                    "assistant_content": "好",
                },
            )
        c.post("/session/end", json={"scope": scope, "session_key": "s2"})

    def scenes_text() -> str:
        return json.dumps(
            gw.client().get("/scenes", params={"scope": scope}).json(), ensure_ascii=False
        )

    wait_for(lambda: "sailing" in scenes_text() and "爬山" in scenes_text(), what="scenes")
    wait_for(
        lambda: "sailing" in gw.client().get("/persona", params={"scope": scope}).json()["persona"],
        what="persona",
    )
    from memory_tencentdb.pipeline import layout

    root = layout.scope_root(gw.data_dir, scope)

    def backups() -> tuple[set[str], set[str]]:
        """Names of the scene and persona backups (a new name = a new run; counts are capped)."""
        scene_b = layout.scene_backup_dir(root)
        persona_b = layout.persona_backup_dir(root)
        return (
            {p.name for p in scene_b.iterdir()} if scene_b.is_dir() else set(),
            {p.name for p in persona_b.glob("persona_*.md")} if persona_b.is_dir() else set(),
        )

    wait_for(lambda: gw.client().get("/health").json()["pipeline"]["idle"], what="pipeline idle")
    scenes_before, personas_before = backups()
    with gw.client() as c:
        r = c.post(
            "/memories/forget",
            json={"query": "sailing on weekends", "scope": scope, "dry_run": False},
        )
        assert r.json()["forgotten"], r.text
        # Gone from the stable part of recall at once, rebuilt by the next L2/L3.
        assert "sailing" not in c.get("/persona", params={"scope": scope}).text
        assert "sailing" not in scenes_text()
    # The next L2 run consumed the rebuild request (backing the scenes up first), refolded the
    # memories left, and L3 rewrote the persona (backing the old one up).
    wait_for(lambda: not layout.rebuild_marker(root).exists(), what="L2 rebuild")
    wait_for(lambda: backups()[0] - scenes_before, what="scene backup of the rebuild")
    wait_for(lambda: "爬山" in scenes_text(), what="scenes rebuilt")
    wait_for(lambda: backups()[1] - personas_before, what="persona rewritten by L3")
    persona = gw.client().get("/persona", params={"scope": scope}).json()["persona"]
    assert "爬山" in persona and "sailing" not in persona
    assert "sailing" not in recall_text(gw, scope, "weekend hobbies")


# ------------------------------------------------------------------------------------ redaction


SECRETS = (
    "sk-proj-Zx81fQ2mB7LpWc4Rt9YvKs3Nd6Hj0Ae5",
    "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngPurp0s3sXy",
    "AKIAZ7QH3LMN4PQR2STU",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.Qm9ndXNTaWduYXR1cmVGb3JUZXN0aW5n",
    "hunter2-Blue-Moon",
    "五月花开2024",
)
LOOKALIKES = (
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",  # a commit hash
    "123e4567-e89b-12d3-a456-426614174000",  # a UUID
    "the password policy requires twelve characters",
    "密码策略要求至少十二位",
)


@pytest.mark.both_backends
def test_secrets_never_reach_a_file_recall_or_search(start_gateway, tmp_path, scope):
    data = tmp_path / "data"
    g = start_gateway(env=dict(FAST), data_dir=data)
    before = g.wait_healthy()["redaction"]["redacted"]
    user = (
        f"My OpenAI key is {SECRETS[0]} and my GitHub token {SECRETS[1]}; AWS id {SECRETS[2]}."
        f" Session token {SECRETS[3]}. My password is {SECRETS[4]}. 另外我的银行卡密码是{SECRETS[5]}。"
        f" Commit {LOOKALIKES[0]}, request {LOOKALIKES[1]}; {LOOKALIKES[2]}. {LOOKALIKES[3]}。"
    )
    key_block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----"
    with g.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s1",
                "messages": [
                    {"role": "user", "content": user},
                    {
                        "role": "assistant",
                        "content": "I will not repeat them.",
                        "tool_calls": [
                            {"id": "t1", "function": {"name": "save", "arguments": key_block}}
                        ],
                    },
                ],
            },
        )
        assert r.status_code == 200, r.text
        r = c.post(
            "/memories",
            json={
                "content": f"用户的密码是{SECRETS[5]}",
                "type": "persona",
                "session_key": "s1",
                "scope": scope,
            },
        )
        assert r.status_code == 201
        c.post("/session/end", json={"scope": scope, "session_key": "s1"})
    g.wait_embedded()
    health = g.wait_healthy()["redaction"]
    assert health["enabled"] and health["redacted"] >= before + 8, health
    convo = (
        g.client()
        .post(
            "/search/conversations",
            json={"query": "OpenAI key GitHub token password commit", "scope": scope},
        )
        .json()
    )
    text = json.dumps(convo, ensure_ascii=False)
    assert "[REDACTED:api-key]" in text and "[REDACTED:password]" in text
    for lookalike in LOOKALIKES:
        assert lookalike in text, lookalike
    for query in ("OpenAI key", "password", "密码", "GitHub token"):
        found = recall_text(g, scope, query) + search_text(g, scope, query)
        found += json.dumps(
            g.client().post("/search/conversations", json={"query": query, "scope": scope}).json(),
            ensure_ascii=False,
        )
        for secret in SECRETS:
            assert secret not in found, (query, secret)
    g.stop()
    for path in data.rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            for secret in (*SECRETS, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"):
                assert secret.encode() not in blob, (path, secret)


def test_purge_keeps_a_live_memory_that_contains_the_forgotten_text(start_gateway, tmp_path, scope):
    data = tmp_path / "data"
    g = start_gateway(env=KEYWORD_ONLY, data_dir=data)
    gone = remember(g, scope, "用户喜欢猫")
    kept = remember(g, scope, "用户喜欢猫和狗，周末常去宠物店")
    gone_en = remember(g, scope, "The user likes jazz")
    kept_en = remember(g, scope, "The user likes jazz and blues records")
    with g.client() as c:
        for mid in (gone, gone_en):
            assert c.delete(f"/memories/{mid}", params={"scope": scope}).status_code == 200
    g.stop()
    out = cli(g, "purge")
    assert out.returncode == 0, out.stdout + out.stderr
    assert cli(g, "reindex").returncode == 0  # the files alone still hold the kept ones
    g.start()
    with g.client() as c:
        for mid in (kept, kept_en):
            assert c.get(f"/memories/{mid}", params={"scope": scope}).json()["status"] == "active"
        for mid in (gone, gone_en):
            assert c.get(f"/memories/{mid}", params={"scope": scope}).status_code == 404
    assert "宠物店" in search_text(g, scope, "宠物店") and "blues" in search_text(g, scope, "blues")


@pytest.mark.both_backends
def test_redaction_can_be_turned_off(start_gateway, scope):
    g = start_gateway(env={"TDAI_MEMORY__REDACTION__ENABLED": "false", **KEYWORD_ONLY})
    assert g.wait_healthy()["redaction"]["enabled"] is False
    with g.client() as c:
        c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s",
                "user_content": "my password is Tr0ub4dor-99",
                "assistant_content": "OK",
            },
        ).raise_for_status()
        found = c.post(
            "/search/conversations", json={"query": "password Tr0ub4dor", "scope": scope}
        ).json()["results"]
    assert "Tr0ub4dor-99" in found  # the user chose to keep secrets verbatim

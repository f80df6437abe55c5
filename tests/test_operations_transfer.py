"""Export / import (JSONL) and import from the original project's data directory, through the
real CLI and a real gateway (zh + en): same search results and traces, idempotent, bad input
refused with nothing changed."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import postgres
from tests.support.gateway import GatewayProcess

FAST = {
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
}


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def snapshot(data: Path) -> dict[str, str]:
    """Hash of every file the import may touch (the database's content, not its pages)."""
    out = {}
    for p in sorted(data.rglob("*")):
        if p.is_file() and not p.name.startswith(("memory.db", "gateway.")):
            out[str(p.relative_to(data))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def search_ids(gw: GatewayProcess, scope: str, query: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 5})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["items"]]


def trace(gw: GatewayProcess, scope: str, mid: str) -> dict:
    with gw.client() as c:
        body = c.get(f"/memories/{mid}", params={"scope": scope}).json()
    t = body["trace"]
    return {
        "content": body["content"],
        "status": body["status"],
        "sources": [(m["id"], m["content"]) for m in t["source_messages"]],
        "history": [(h["id"], h["content"]) for h in t["history"]],
    }


QUERIES = ("川菜", "tea", "猫", "Lisbon nurse", "花生过敏")
MATCHED = ("川菜", "tea", "Lisbon nurse", "花生过敏")  # each has a stored memory that answers it


def test_export_then_import_gives_the_same_results_and_is_idempotent(
    start_gateway, tmp_path, scope
):
    data1, data2 = tmp_path / "one", tmp_path / "two"
    g1 = start_gateway(env=dict(FAST), data_dir=data1)
    with g1.client() as c:
        ids = []
        for text in ("用户喜欢吃川菜", "The user prefers green tea", "用户家里养了两只猫"):
            r = c.post(
                "/memories",
                json={"content": text, "type": "persona", "session_key": "s", "scope": scope},
            )
            ids.append(r.json()["id"])
        c.patch(
            f"/memories/{ids[1]}", json={"scope": scope, "content": "The user prefers oolong tea"}
        )
        c.delete(f"/memories/{ids[2]}", params={"scope": scope})
        for user in ("我对花生过敏", "I live in Lisbon and work as a nurse"):
            c.post(
                "/capture",
                json={
                    "scope": scope,
                    "session_key": "s1",
                    "user_content": user,
                    "assistant_content": "OK",
                },
            )
        c.post("/session/end", json={"scope": scope, "session_key": "s1"})
        listed = c.get("/memories", params={"scope": scope, "status": "all"}).json()["items"]
    assert any(m["source_message_ids"] for m in listed), listed  # captured facts with sources
    g1.wait_embedded()
    before = {q: search_ids(g1, scope, q) for q in QUERIES}
    traces = {m["id"]: trace(g1, scope, m["id"]) for m in listed if m["status"] != "deleted"}
    assert sum(bool(v) for v in before.values()) >= 4, before
    assert any(t["sources"] for t in traces.values()), traces  # source links
    assert any(t["history"] for t in traces.values()), traces  # the corrected one's old text

    export = tmp_path / "memories.jsonl"
    out = cli(g1.env(), "export", "--scope", scope, "-o", str(export))  # gateway running: fine
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in export.read_text("utf-8").splitlines()]
    assert lines[0]["kind"] == "memory-tencentdb-export"
    assert {x["kind"] for x in lines[1:]} == {"message", "memory"}
    # What the user forgot does not leave in the export, yet stays forgotten through import.
    assert "两只猫" not in export.read_text("utf-8")
    assert any(x.get("forgotten") and x["id"] == ids[2] for x in lines[1:])
    stdout = cli(g1.env(), "export", "--scope", scope)
    assert stdout.returncode == 0 and stdout.stdout == export.read_text("utf-8").replace(
        lines[0]["exported_at"], json.loads(stdout.stdout.splitlines()[0])["exported_at"]
    )

    # On PostgreSQL the second data directory has a database of its own, as its gateway will.
    env2 = {**g1.env(), "TDAI_DATA_DIR": str(data2), **postgres.gateway_env(data2, {})}
    out = cli(env2, "import", str(export))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout
    first = snapshot(data2)
    again = cli(env2, "import", str(export))
    assert again.returncode == 0 and "imported 0 memories" in again.stdout, again.stdout
    assert snapshot(data2) == first  # importing twice changes nothing

    g2 = start_gateway(env=dict(FAST), data_dir=data2)
    g2.wait_embedded()
    after = {q: search_ids(g2, scope, q) for q in QUERIES}
    # The same memories answer each query, and the one that matches comes first. Below it the
    # scores of unrelated memories nearly tie (every one of "猫"'s, its memory being forgotten),
    # and their order may differ between two stores that hold the same memories.
    assert {q: set(v) for q, v in after.items()} == {q: set(v) for q, v in before.items()}
    assert {q: after[q][:1] for q in MATCHED} == {q: before[q][:1] for q in MATCHED}
    assert {mid: trace(g2, scope, mid) for mid in traces} == traces
    with g2.client() as c:
        deleted = c.get(f"/memories/{ids[2]}", params={"scope": scope}).json()
    assert deleted["status"] == "deleted"
    # Import needs the gateway stopped.
    locked = cli(env2, "import", str(export))
    assert locked.returncode == 3 and "in use" in locked.stderr
    g2.stop()

    # A forgotten memory stays forgotten through reindex.
    g1.stop()
    out = cli(g1.env(), "reindex")
    if postgres.backend_under_test() == "postgres":  # nothing embedded to rebuild: refused
        assert out.returncode == 2 and "SQLite" in out.stderr, out.stderr
        for command in (("purge",), ("import", "--from-original", str(tmp_path))):
            refused = cli(g1.env(), *command)
            assert refused.returncode == 2 and "postgres (storeBackend)" in refused.stderr
    else:
        assert out.returncode == 0, out.stderr
    g1.start()
    assert "猫" not in json.dumps(
        g1.client().post("/search/memories", json={"query": "猫", "scope": scope}).json(),
        ensure_ascii=False,
    )


def test_bad_import_files_change_nothing(tmp_path):
    data = tmp_path / "data"
    env = {**GatewayProcess(data).env()}
    good = {"kind": "memory", "id": "m_1", "content": "用户喜欢下雨天", "type": "persona"}
    header = {"kind": "memory-tencentdb-export", "version": 1}
    cases = {
        "malformed.jsonl": [header, good, "{not json", good],
        "badtype.jsonl": [header, {**good, "id": "m_2", "type": "fact"}],
        "badprio.jsonl": [header, {**good, "priority": "high"}],
        "nokind.jsonl": [header, {"id": "m_3", "content": "x"}],
        "noheader.jsonl": [good],
        "conversations.jsonl": [
            {
                "sessionKey": "agent:main:main",
                "id": "msg_1",
                "role": "user",
                "content": "hi",
                "timestamp": 1,
            }
        ],
        "empty.jsonl": [],
    }
    out = cli(env, "import", str(tmp_path / "ok.jsonl"))  # a file that does not exist
    assert out.returncode == 1 and "cannot read" in out.stderr
    for name, rows in cases.items():
        path = tmp_path / name
        path.write_text(
            "".join(
                (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                for r in rows
            ),
            "utf-8",
        )
        out = cli(env, "import", str(path))
        assert out.returncode == 1, (name, out.stdout, out.stderr)
        assert "nothing was imported" in out.stderr, (name, out.stderr)
        assert not data.exists() or snapshot(data) == {}, name
    assert "line 3" in cli(env, "import", str(tmp_path / "malformed.jsonl")).stderr
    assert (
        "not a memory-tencentdb export"
        in cli(env, "import", str(tmp_path / "conversations.jsonl")).stderr
    )
    binary = tmp_path / "memory.db"
    binary.write_bytes(b"SQLite format 3\x00\xff\xfe" * 20)
    out = cli(env, "import", str(binary))
    assert out.returncode == 1 and "not" in out.stderr


# --------------------------------------------------------------------------- the original


def build_original(root: Path) -> dict:
    """A data directory in the original's formats (reference/original-core.md §0, §4, §6-§8, §10)."""
    (root / "conversations").mkdir(parents=True)
    (root / "records").mkdir()
    (root / "scene_blocks").mkdir()
    (root / ".metadata").mkdir()
    l0 = [
        # (sessionKey, id, role, content, timestamp, vectors.db record_id)
        (
            "agent:main:main",
            "msg_1",
            "user",
            "I moved to Porto last spring",
            1746090000000,
            "l0_agent:main:main_1746090000000_0_a1b2c3",
        ),
        (
            "agent:main:main",
            "msg_2",
            "assistant",
            "Porto is lovely!",
            1746090001000,
            "l0_agent:main:main_1746090001000_1_d4e5f6",
        ),
        (
            "agent:main:main",
            "msg_3",
            "user",
            "Please always reply in short bullet points",
            1746090002000,
            "l0_agent:main:main_1746090002000_2_0a0b0c",
        ),
        (
            "agent:coder:main",
            "msg_4",
            "user",
            "我们的项目用 Rust 写后端",
            1746090003000,
            "l0_agent:coder:main_1746090003000_0_111111",
        ),
        ("agent:coder:main", "msg_5", "user", "我喜欢用 Vim 编辑代码", 1746090004000, None),
    ]
    with (root / "conversations" / "2025-05-01.jsonl").open("w", encoding="utf-8") as fh:
        for key, mid, role, content, ts, _ in l0:
            fh.write(
                json.dumps(
                    {
                        "sessionKey": key,
                        "sessionId": "",
                        "recordedAt": "2025-05-01T09:00:00.000Z",
                        "id": mid,
                        "role": role,
                        "content": content,
                        "timestamp": ts,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
        fh.write('{"sessionKey": "agent:main:main", "id": "torn\n')  # a torn last line
    records = [
        # the live ones (in vectors.db) ...
        {
            "id": "m_1746090100000_aaaa0001",
            "content": "The user moved to Porto in spring 2025",
            "type": "episodic",
            "priority": 70,
            "scene_name": "I (AI) am chatting with a new Porto resident",
            "source_message_ids": ["msg_1"],
            "metadata": {},
            "timestamps": ["2025-05-01T09:01:00.000Z"],
            "createdAt": "2025-05-01T09:01:00.000Z",
            "updatedAt": "2025-05-01T09:01:00.000Z",
            "sessionKey": "agent:main:main",
            "sessionId": "",
        },
        {
            "id": "m_1746090100000_aaaa0002",
            "content": "Always reply in short bullet points",
            "type": "instruction",
            "priority": 90,
            "scene_name": "x",
            "source_message_ids": ["l0_agent:main:main_1746090002000_2_0a0b0c"],
            "metadata": {},
            "timestamps": [],
            "createdAt": "2025-05-01T09:01:00.000Z",
            "updatedAt": "2025-05-01T09:01:00.000Z",
            "sessionKey": "agent:main:main",
            "sessionId": "",
        },
        {
            "id": "m_1746090100000_bbbb0001",
            "content": "项目后端使用 Rust 编写",
            "type": "persona",
            "priority": 80,
            "scene_name": "我（AI）在和开发者讨论项目",
            "source_message_ids": ["l0_agent:coder:main_1746090003000_0_111111"],
            "metadata": {},
            "timestamps": [],
            "createdAt": "2025-05-01T09:02:00.000Z",
            "updatedAt": "2025-05-01T09:02:00.000Z",
            "sessionKey": "agent:coder:main",
            "sessionId": "",
        },
        {
            "id": "m_1746090100000_bbbb0002",
            "content": "用户习惯用 Vim 编辑代码",
            "type": "preference",
            "priority": 60,
            "scene_name": "我（AI）在和开发者讨论项目",
            "source_message_ids": ["msg_5"],
            "metadata": {},
            "timestamps": [],
            "createdAt": "2025-05-01T09:03:00.000Z",
            "updatedAt": "2025-05-01T09:03:00.000Z",
            "sessionKey": "agent:coder:main",
            "sessionId": "",
        },
        # ... and one the original merged away (still in the append-only log, not in vectors.db)
        {
            "id": "m_1746090000000_cccc0001",
            "content": "The user lives in Lisbon",
            "type": "persona",
            "priority": 60,
            "scene_name": "x",
            "source_message_ids": [],
            "metadata": {},
            "timestamps": [],
            "createdAt": "2025-04-01T09:00:00.000Z",
            "updatedAt": "2025-04-01T09:00:00.000Z",
            "sessionKey": "agent:main:main",
            "sessionId": "",
        },
    ]
    with (root / "records" / "2025-05-01.jsonl").open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (root / "scene_blocks" / "porto-life.md").write_text(
        "-----META-START-----\ncreated: 2025-05-01T09:05:00.000Z\nupdated:"
        " 2025-05-01T09:05:00.000Z\nsummary: Life in Porto\nheat: 3\n-----META-END-----\n\n"
        "## Basics\nThe user moved to Porto in spring 2025.\n",
        "utf-8",
    )
    (root / "persona.md").write_text(
        "# User Narrative Profile\n> **Archetype**: a newcomer to Porto who likes brevity\n\n"
        "---\n## 🗺️ Scene Navigation (Scene Index)\n### Path: scene_blocks/porto-life.md\n",
        "utf-8",
    )
    (root / ".metadata" / "scene_index.json").write_text(
        json.dumps(
            [
                {
                    "filename": "porto-life.md",
                    "summary": "Life in Porto",
                    "heat": 3,
                    "created": "2025-05-01T09:05:00.000Z",
                    "updated": "2025-05-01T09:05:00.000Z",
                }
            ]
        ),
        "utf-8",
    )
    db = sqlite3.connect(root / "vectors.db")
    db.executescript(
        """
        CREATE TABLE embedding_meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE l1_records (record_id TEXT PRIMARY KEY, content TEXT NOT NULL, type TEXT
          DEFAULT '', priority INTEGER DEFAULT 50, scene_name TEXT DEFAULT '', session_key TEXT
          DEFAULT '', session_id TEXT DEFAULT '', timestamp_str TEXT DEFAULT '', timestamp_start
          TEXT DEFAULT '', timestamp_end TEXT DEFAULT '', created_time TEXT DEFAULT '',
          updated_time TEXT DEFAULT '', metadata_json TEXT DEFAULT '{}');
        CREATE TABLE l0_conversations (record_id TEXT PRIMARY KEY, session_key TEXT NOT NULL,
          session_id TEXT DEFAULT '', role TEXT NOT NULL, message_text TEXT NOT NULL,
          recorded_at TEXT DEFAULT '', timestamp INTEGER);
        """
    )
    db.execute(
        "INSERT INTO embedding_meta VALUES ('embedding_provider_info', ?)",
        (json.dumps({"provider": "openai", "model": "text-embedding-3-small", "dimensions": 4}),),
    )
    for r in records[:4]:
        db.execute(
            "INSERT INTO l1_records (record_id, content, type, priority, scene_name, session_key,"
            " created_time, updated_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                r["id"],
                r["content"],
                r["type"],
                r["priority"],
                r["scene_name"],
                r["sessionKey"],
                r["createdAt"],
                r["updatedAt"],
            ),
        )
    for key, _mid, role, content, ts, rid in l0:
        if rid:
            db.execute(
                "INSERT INTO l0_conversations VALUES (?, ?, '', ?, ?, '2025-05-01T09:00:00.000Z',"
                " ?)",
                (rid, key, role, content, ts),
            )
    db.commit()
    db.close()
    return {"records": records, "l0": l0}


def test_import_from_the_original_keeps_every_trace(start_gateway, tmp_path):
    home = tmp_path / "home"
    original = home / ".openclaw" / "memory-tdai"
    built = build_original(original)
    data = tmp_path / "data"
    env = {**GatewayProcess(data).env(), "HOME": str(home)}
    out = cli(env, "import", "--from-original")  # found at the OpenClaw default location
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"found the original's data directory at {original} (OpenClaw default)" in out.stdout
    assert "main: 2 memories, 3 messages" in out.stdout and "coder: 2 memories" in out.stdout
    first = snapshot(data)
    again = cli(env, "import", "--from-original", str(original))
    assert again.returncode == 0 and "nothing new" in again.stdout, again.stdout
    assert snapshot(data) == first

    gw = start_gateway(env={"HOME": str(home)}, data_dir=data)
    gw.wait_embedded()
    with gw.client() as c:
        scopes = {s["scope"]: s for s in c.get("/scopes").json()["scopes"]}
        assert scopes["main"]["memories"] == 2 and scopes["main"]["history"] == 1
        assert scopes["coder"]["memories"] == 2 and scopes["coder"]["messages"] == 2
        for r in built["records"][:4]:
            scope = r["sessionKey"].split(":")[1]
            m = c.get(f"/memories/{r['id']}", params={"scope": scope}).json()
            assert m["status"] == "active" and m["content"] == r["content"]
            sources = m["trace"]["source_messages"]
            assert sources, r["id"]  # every L1 keeps its trace to L0
            assert sources[0]["file"] == "conversations/2025-05-01.jsonl"
        assert (
            c.get("/memories/m_1746090100000_bbbb0002", params={"scope": "coder"}).json()["type"]
            == "persona"
        )  # the original's legacy alias
        merged = c.get("/memories/m_1746090000000_cccc0001", params={"scope": "main"}).json()
        assert merged["status"] == "superseded"
        hits = c.post("/search/memories", json={"query": "Porto", "scope": "main"}).json()
        assert "Porto" in hits["results"] and "Lisbon" not in hits["results"]
        hits = c.post("/search/memories", json={"query": "后端用什么语言", "scope": "coder"}).json()
        assert "Rust" in hits["results"]
        convo = c.post("/search/conversations", json={"query": "Vim", "scope": "coder"}).json()
        assert "Vim" in convo["results"]
        scenes = c.get("/scenes", params={"scope": "main"}).json()["scenes"]
        assert [s["filename"] for s in scenes] == ["porto-life.md"] and scenes[0]["heat"] == 3
        persona = c.get("/persona", params={"scope": "main"}).json()["persona"]
        assert "newcomer to Porto" in persona
        recall = c.post(
            "/recall",
            json={
                "query": "when did I move to Porto",
                "session_key": "agent:main:main",
                "scope": "main",
            },
        ).json()
        assert "newcomer to Porto" in recall["append_system_context"]
        assert "Porto" in recall["prepend_context"]


def test_import_from_original_refuses_what_is_not_one(tmp_path):
    env = {**GatewayProcess(tmp_path / "data").env(), "HOME": str(tmp_path / "nohome")}
    out = cli(env, "import", "--from-original")
    assert out.returncode == 1 and "no original data directory found" in out.stderr
    (tmp_path / "plain").mkdir()
    out = cli(env, "import", "--from-original", str(tmp_path / "plain"))
    assert out.returncode == 1 and "does not look like" in out.stderr
    bad = tmp_path / "bad"
    (bad / "records").mkdir(parents=True)
    (bad / "records" / "x.jsonl").write_text("{}\n")
    (bad / "vectors.db").write_bytes(b"not a database at all" * 50)
    out = cli(env, "import", "--from-original", str(bad))
    assert out.returncode == 1 and "nothing was imported" in out.stderr
    assert not (tmp_path / "data" / "records").exists() or not any(
        (tmp_path / "data" / "records").iterdir()
    )


@pytest.fixture
def scope() -> str:
    import uuid

    return f"t-{uuid.uuid4().hex[:8]}"


def test_reindex_names_the_original_lines_it_cannot_index(tmp_path):
    original = tmp_path / "orig"
    build_original(original)
    (original / "vectors.db").unlink()
    env = {**GatewayProcess(original).env()}
    out = cli(env, "reindex")
    assert out.returncode == 0, out.stderr
    assert "5 lines in the original project's format were not indexed" in out.stdout, out.stdout
    assert "import --from-original" in out.stdout

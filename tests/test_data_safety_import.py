"""``import`` never changes another scope's record and writes nothing from a bad file (issue 22).

A line carrying the id of alice's memory under bob's scope is skipped and counted (alice's memory
is still hers, unchanged); a file with one bad line (a timestamp past int64, a date that is not a
date, nesting too deep for the JSON reader) is refused naming the line, no traceback, and the
data directory is byte for byte what it was."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

HEADER = {"kind": "memory-tencentdb-export", "version": 1}


def cli(g: GatewayProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=g.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_export(path: Path, *lines: dict | str) -> Path:
    body = [json.dumps(HEADER)] + [
        ln if isinstance(ln, str) else json.dumps(ln, ensure_ascii=False) for ln in lines
    ]
    path.write_text("\n".join(body) + "\n", "utf-8")
    return path


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "gateway.log"
    }


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory):
    """A data directory with one memory of alice's; the gateway stopped (import is offline)."""
    g = GatewayProcess(tmp_path_factory.mktemp("imp") / "data", env=KEYWORD_ONLY).start()
    with g.client() as c:
        r = c.post(
            "/memories",
            json={
                "content": "爱丽丝喜欢大提琴 / Alice plays the cello",
                "scope": "alice",
                "type": "persona",
                "session_key": "s",
            },
        )
        assert r.status_code == 201, r.text
        alice_id = r.json()["id"]
        r = c.post(
            "/capture",
            json={
                "scope": "alice",
                "session_key": "s",
                "user_content": "你好",
                "assistant_content": "hi",
            },
        )
        assert r.status_code == 200, r.text
        msg_id = c.post("/search/conversations", json={"query": "你好", "scope": "alice"}).json()[
            "items"
        ][0]["id"]
    g.stop()
    return g, alice_id, msg_id


def test_a_colliding_id_of_another_scope_is_skipped_and_counted(stopped, tmp_path):
    g, alice_id, msg_id = stopped
    export = write_export(
        tmp_path / "x.jsonl",
        {"kind": "message", "record_id": msg_id, "scope": "bob", "role": "user", "content": "moved", "timestamp": 1},
        {"kind": "message", "record_id": "l0_bob_1", "scope": "bob", "role": "user", "content": "鲍勃的消息", "timestamp": 1},
        {"kind": "memory", "id": alice_id, "scope": "bob", "content": "bob took it over"},
        {"kind": "memory", "id": "m_bob_1", "scope": "bob", "content": "Bob likes 乒乓球"},
        {"kind": "memory", "id": "m_bob_1", "scope": "carol", "content": "carol's claim on bob's id"},
    )  # fmt: skip
    out = cli(g, "import", str(export))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skipped 2 memories and 1 messages whose id belongs to another scope" in out.stdout
    g.start()
    try:
        with g.client() as c:
            mine = c.get(f"/memories/{alice_id}", params={"scope": "alice"})
            assert mine.status_code == 200, mine.text
            assert mine.json()["content"] == "爱丽丝喜欢大提琴 / Alice plays the cello"
            assert c.get(f"/memories/{alice_id}", params={"scope": "bob"}).status_code == 404
            bob = c.get("/memories/m_bob_1", params={"scope": "bob"})
            assert bob.status_code == 200 and bob.json()["content"] == "Bob likes 乒乓球"
            assert c.get("/memories/m_bob_1", params={"scope": "carol"}).status_code == 404
            said = c.post("/search/conversations", json={"query": "你好", "scope": "alice"})
            mine = {i["id"]: i for i in said.json()["items"]}
            assert mine[msg_id]["content"] == "你好"
            moved = c.post("/search/conversations", json={"query": "moved", "scope": "bob"})
            assert moved.json()["items"] == []
    finally:
        g.stop()


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"kind": "message", "record_id": "l0_x", "role": "user", "content": "hi", "timestamp": 2**63}, "'timestamp'"),
        ({"kind": "message", "record_id": "l0_x", "role": "user", "content": "hi", "recordedAt": 5}, "'recordedAt'"),
        ({"kind": "memory", "id": "m_x", "content": "hi", "updated_at": "next week"}, "'updated_at'"),
        ({"kind": "memory", "id": "m_x", "content": "hi", "scope": 7}, "'scope'"),
        ({"kind": "memory", "id": "m_x", "content": "hi", "timestamps": [1]}, "'timestamps'"),
        ('{"kind": "memory", "id": "m_x", "content": "hi", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_naming_it_and_nothing_is_written(stopped, tmp_path, bad, says):
    g, _, _ = stopped
    export = write_export(
        tmp_path / "bad.jsonl",
        {"kind": "message", "record_id": "l0_good", "scope": "dave", "role": "user", "content": "good one", "timestamp": 1},
        {"kind": "memory", "id": "m_good", "scope": "dave", "content": "a good memory"},
        bad,
    )  # fmt: skip
    before = digests(g.data_dir)
    out = cli(g, "import", str(export))
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr
    assert "line 4" in out.stderr and says in out.stderr, out.stderr
    assert "nothing was imported" in out.stderr
    assert digests(g.data_dir) == before

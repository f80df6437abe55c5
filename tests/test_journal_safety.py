"""The journal stays the truth (issue 8, audit): torn tails, bad lines, an index that fell behind.

- a torn last line (a crash or a full disk mid-write) is moved aside to ``<file>.torn`` and
  counted, so the next acknowledged capture is never glued onto it;
- ``reindex`` skips and counts bad lines (invalid UTF-8, wrong types, garbage) instead of
  aborting or skipping them silently;
- at start-up the index catches up with the journal: lines a crash left unindexed, and a
  ``memory.db`` deleted before the start; one deleted while running is reported in ``/health``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess


def _turn(gw: GatewayProcess, scope: str, user: str, assistant: str = "OK") -> None:
    with gw.client() as c:
        body = {"scope": scope, "session_key": "s", "user_content": user}
        r = c.post("/capture", json={**body, "assistant_content": assistant})
        assert r.status_code == 200, r.text


def _said(gw: GatewayProcess, scope: str, query: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/conversations", json={"query": query, "scope": scope, "limit": 10})
        assert r.status_code == 200, r.text
        return [i["content"] for i in r.json()["items"]]


def _memories(gw: GatewayProcess, scope: str, query: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/memories", json={"query": query, "scope": scope, "limit": 10})
        assert r.status_code == 200, r.text
        return [i["content"] for i in r.json()["items"]]


def _journal(gw: GatewayProcess, folder: str) -> Path:
    shards = sorted((gw.data_dir / folder).glob("*.jsonl"))
    assert shards, f"no {folder} journal yet"
    return shards[-1]


def _health(gw: GatewayProcess) -> dict:
    return httpx.get(gw.base_url + "/health", timeout=10).json()


def _reindex(gw: GatewayProcess) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "reindex"],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_torn_tail_moved_aside_at_start_and_next_capture_survives_reindex(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"torn-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "第一句话 first words")
    gw.stop()
    shard = _journal(gw, "conversations")
    torn = b'{"record_id":"l0_torn","scope":"' + scope.encode() + b'","content":"half a li'
    with shard.open("ab") as fh:
        fh.write(torn)  # a crash mid-write: no newline, not JSON
    gw.start()
    check = _health(gw)["journal"]["startup_check"]
    assert check["torn_tails"] == 1
    aside = shard.with_name(shard.name + ".torn")
    assert aside.read_bytes() == torn + b"\n"  # kept, byte for byte, for a human to look at
    assert "torn line" in gw.log()
    _turn(gw, scope, "最后一句话 the acknowledged one")
    gw.stop()
    assert shard.read_bytes().endswith(b"\n")
    done = _reindex(gw)
    assert done.returncode == 0, done.stderr
    gw.start()
    assert "最后一句话 the acknowledged one" in _said(gw, scope, "最后一句话")
    assert "第一句话 first words" in _said(gw, scope, "第一句话")


def test_torn_tail_appearing_while_running_is_repaired_before_the_next_append(start_gateway):
    """A full disk mid-write leaves a torn tail under a running gateway: the next capture must
    not be appended onto it."""
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"torn-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "before the disk filled up")
    shard = _journal(gw, "conversations")
    with shard.open("ab") as fh:
        fh.write(b'{"record_id":"l0_x","content":"tor')
    _turn(gw, scope, "after the disk was freed")
    lines = shard.read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)  # every line whole
    assert shard.with_name(shard.name + ".torn").exists()
    assert _health(gw)["journal"]["torn_tails_repaired"] == 1
    gw.stop()
    assert _reindex(gw).returncode == 0
    gw.start()
    assert "after the disk was freed" in _said(gw, scope, "disk freed")


def test_reindex_skips_and_counts_bad_lines(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"bad-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "我喜欢爬山 I like hiking")
    with gw.client() as c:
        body = {"content": "用户养了一只猫", "type": "persona", "session_key": "s", "scope": scope}
        assert c.post("/memories", json=body).status_code == 201
    gw.stop()
    l0, l1 = _journal(gw, "conversations"), _journal(gw, "records")
    good = {
        "record_id": "l0_good_after",
        "scope": scope,
        "sessionKey": "s",
        "role": "user",
        "content": "good line after the bad ones",
        "timestamp": 1_700_000_000_000,
    }
    with l0.open("ab") as fh:
        fh.write(b'{"record_id":"l0_bad_utf8","content":"\xff\xfe broken"}\n')
        fh.write(json.dumps({**good, "record_id": "l0_y", "timestamp": "yesterday"}).encode())
        fh.write(b"\nnot json at all\n[1, 2, 3]\n")
        fh.write(json.dumps(good).encode() + b"\n")
    memory = {"op": "upsert", "id": "m_high", "scope": scope, "content": "优先级写错了"}
    with l1.open("ab") as fh:
        fh.write(json.dumps({**memory, "priority": "high"}, ensure_ascii=False).encode() + b"\n")
        fh.write(b"\x00\x00garbage\n")
        ok = {**memory, "id": "m_ok", "content": "用户的生日是三月八日", "priority": 70}
        fh.write(json.dumps(ok, ensure_ascii=False).encode() + b"\n")
    done = _reindex(gw)
    assert done.returncode == 0, done.stderr
    assert "6 bad line(s) skipped" in done.stdout, done.stdout
    for reason in ("invalid UTF-8", "timestamp", "not JSON", "priority", "not an object"):
        assert reason in done.stdout, reason
    gw.start()
    assert "good line after the bad ones" in _said(gw, scope, "good line")
    assert "我喜欢爬山 I like hiking" in _said(gw, scope, "爬山")
    assert "用户的生日是三月八日" in _memories(gw, scope, "生日")
    assert "用户养了一只猫" in _memories(gw, scope, "猫")
    assert not any("优先级" in m for m in _memories(gw, scope, "优先级"))
    # The start-up check of the same lines counts them too (and indexes nothing twice).
    assert _health(gw)["journal"]["startup_check"]["reindexed_l0"] == 0


def test_lines_a_crash_left_unindexed_are_indexed_at_start(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"gap-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "indexed as usual")
    gw.kill()  # as if killed between the journal's fsync and the index write:
    with _journal(gw, "conversations").open("ab") as fh:
        line = {
            "record_id": f"l0_{uuid.uuid4().hex[:12]}",
            "scope": scope,
            "sessionKey": "s",
            "role": "user",
            "content": "在日志里但不在索引里 journaled but never indexed",
            "timestamp": int(time.time() * 1000),
            "recordedAt": "2026-01-01T00:00:00.000Z",
        }
        fh.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")
    records = gw.data_dir / "records" / "2026-01-01.jsonl"
    memory = {
        "op": "upsert",
        "id": "m_unindexed",
        "scope": scope,
        "content": "用户对花生过敏",
        "type": "persona",
        "priority": 80,
    }
    records.write_text(json.dumps(memory, ensure_ascii=False) + "\n", "utf-8")
    gw.start()
    check = _health(gw)["journal"]["startup_check"]
    assert (check["reindexed_l0"], check["reindexed_l1"]) == (1, 1), check
    assert "indexed 1 message(s) and 1 memory line(s)" in gw.log()
    assert any("never indexed" in t for t in _said(gw, scope, "never indexed"))
    assert "用户对花生过敏" in _memories(gw, scope, "花生")
    gw.restart()  # the report clears once the index has caught up
    check = _health(gw)["journal"]["startup_check"]
    assert (check["reindexed_l0"], check["reindexed_l1"], check["checked_lines"]) == (0, 0, 0)


def test_memory_db_deleted_before_start_is_rebuilt(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"lost-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "I prefer green tea to coffee.")
    with gw.client() as c:
        body = {"content": "用户住在成都", "type": "persona", "session_key": "s", "scope": scope}
        assert c.post("/memories", json=body).status_code == 201
    gw.stop()
    before = sum(1 for f in (gw.data_dir / "records").glob("*.jsonl") for _ in f.open("rb"))
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        (gw.data_dir / name).unlink(missing_ok=True)
    gw.start()
    health = _health(gw)
    assert health["journal"]["startup_check"]["database_was_new"] is True
    assert health["counts"]["l0_messages"] >= 2
    assert "I prefer green tea to coffee." in _said(gw, scope, "green tea")
    assert "用户住在成都" in _memories(gw, scope, "成都")
    time.sleep(2)  # the pipeline must not extract the rebuilt history again
    after = sum(1 for f in (gw.data_dir / "records").glob("*.jsonl") for _ in f.open("rb"))
    assert after == before


def test_memory_db_deleted_while_running_is_reported_until_restart(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    scope = f"gone-{uuid.uuid4().hex[:8]}"
    _turn(gw, scope, "written before the database vanished")
    assert _health(gw)["status"] == "ok"
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        (gw.data_dir / name).unlink(missing_ok=True)
    health = _health(gw)
    assert health["status"] == "degraded"
    assert any("memory.db was deleted" in d for d in health["degraded"])
    _turn(gw, scope, "written after it vanished")  # still accepted: the journal has it
    gw.restart()
    health = _health(gw)
    assert not any("memory.db" in d for d in health["degraded"])
    said = _said(gw, scope, "written")
    assert "written before the database vanished" in said and "written after it vanished" in said

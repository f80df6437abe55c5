"""The store hands out typed records with one name per fact, on both backends, and a message
keeps its id and fields from the JSONL journal through the store to the HTTP answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import FrozenInstanceError, fields
from datetime import UTC
from pathlib import Path

import pytest

from memory_tencentdb.store.records import KeywordHit, L0Input, L0Message, Memory
from memory_tencentdb.store.sqlite.store import Store
from tests.support import postgres
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

pytestmark = pytest.mark.both_backends

L0_FIELDS = {
    "id",
    "scope",
    "session_key",
    "session_id",
    "role",
    "content",
    "timestamp",
    "recorded_at",
    "message_id",
    "speaker",
    "extra",
    "seq",
    "file",
    "text_hash",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    if postgres.backend_under_test() == "postgres":
        from memory_tencentdb.store.postgres import PostgresStore

        s: Store = PostgresStore(tmp_path, UTC, dsn=postgres.new_database())
    else:
        s = Store(tmp_path, UTC)
    yield s
    s.close()


def _journal(data_dir: Path, folder: str) -> list[dict]:
    out = []
    for f in sorted((data_dir / folder).glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text("utf-8").splitlines() if line.strip()]
    return out


def test_store_returns_l0_messages_with_the_api_names(store: Store, tmp_path: Path):
    said = [
        L0Input(
            "s1", "k1", "run-1", "user", "我对花生过敏", 1_700_000_000_000, "host-1", None, "小王"
        ),
        L0Input("s1", "k1", "run-1", "assistant", "Noted: no peanuts.", 1_700_000_000_001),
        L0Input("s1", "k2", "run-2", "user", "I live in Lisbon", 1_700_000_000_002, "host-3"),
    ]
    stored = store.record_messages(said)
    assert all(type(m) is L0Message for m in stored)
    assert {f.name for f in fields(L0Message)} == L0_FIELDS
    first = stored[0]
    assert (first.scope, first.session_key, first.session_id, first.role) == (
        "s1",
        "k1",
        "run-1",
        "user",
    )
    assert (first.content, first.message_id, first.speaker) == ("我对花生过敏", "host-1", "小王")
    assert first.id.startswith("l0_") and first.seq > 0 and first.text_hash
    with pytest.raises(FrozenInstanceError):
        first.content = "changed"  # type: ignore[misc]

    # Every read hands out the same record (sequence number, file and hash included).
    assert store.l0_rows([m.seq for m in stored]) == {m.seq: m for m in stored}
    assert store.l0_by_ids([m.id for m in stored]) == stored
    assert store.l0_after("s1", "k1", 0, 10) == stored[:2]
    assert store.l0_after("s1", "k1", first.seq, 10) == stored[1:2]
    assert store.l0_before("s1", "k1", stored[1].seq + 1, 10) == [stored[1], first]
    assert store.l0_seq(first.id) == first.seq

    # The journal line names the same facts its own way; the record translates exactly.
    lines = {line["record_id"]: line for line in _journal(tmp_path, "conversations")}
    for m in stored:
        assert lines[m.id] == m.journal_line()
    assert lines[first.id]["id"] == "host-1" and lines[first.id]["sessionKey"] == "k1"
    assert first.file and (tmp_path / first.file).is_file()


MEMORY_FIELDS = {
    "id",
    "scope",
    "content",
    "type",
    "priority",
    "scene_name",
    "session_key",
    "session_id",
    "source_message_ids",
    "metadata",
    "timestamps",
    "created_at",
    "updated_at",
    "status",
    "superseded_by",
    "origin",
    "seq",
    "file",
    "text_hash",
}


def test_store_returns_memories_with_the_api_names(store: Store, tmp_path: Path):
    [said] = store.record_messages(
        [
            L0Input(
                "s1", "k1", "run-1", "user", "我对花生过敏 and I love green tea", 1_700_000_000_000
            )
        ]
    )
    first = store.write_memory(
        Memory(
            id="m_tea",
            scope="s1",
            content="The user loves green tea",
            type="persona",
            priority=70,
            scene_name="饮食",
            session_key="k1",
            session_id="run-1",
            source_message_ids=[said.id],
            metadata={"activity_start_time": "2023-11-14T22:13:20+00:00"},
            timestamps=["2023-11-14T22:13:20+00:00"],
            origin="extraction",
        )
    )
    assert type(first) is Memory and {f.name for f in fields(Memory)} == MEMORY_FIELDS
    assert first.seq > 0 and first.text_hash and first.file.startswith("records/")
    assert first.created_at and first.updated_at and first.status == "active"
    with pytest.raises(FrozenInstanceError):
        first.content = "changed"  # type: ignore[misc]

    # Every read hands out the record write_memory returned.
    assert store.memory_by_id("m_tea") == first
    assert store.l1_rows([first.seq]) == {first.seq: first}
    assert store.memories_by_ids(["m_tea", "m_none"]) == [first]
    assert store.l1_after("s1", 0, 10) == [first]
    assert store.top_memories("s1", "persona", 5) == [first]
    assert list(store.iter_memories("s1")) == [first]
    assert store.list_memories("s1") == [first]
    hits = store.keyword_search("l1", "s1", ["green", "tea"], 5)
    assert hits and type(hits[0]) is KeywordHit and hits[0].seq == first.seq
    seq, score = hits[0]
    assert 0 < score < 1

    # A later version replaces it; the old text is history, newest first.
    old = store.write_memory(
        Memory(**{**_as_kwargs(first), "id": "m_tea.v1", "status": "superseded"})
    )
    store.set_memory_status("m_tea.v1", "superseded", "m_tea")
    assert [h.id for h in store.memory_history("m_tea")] == ["m_tea.v1"]
    assert store.memory_history("m_tea")[0].superseded_by == "m_tea" and old.seq > first.seq

    # The journal line and the API dict name each fact as the record does.
    line = next(x for x in _journal(tmp_path, "records") if x["id"] == "m_tea")
    assert line == first.journal_line()
    assert line["source_message_ids"] == [said.id]
    public = first.public()
    assert public["source_message_ids"] == [said.id]
    assert public["activity_start"] == "2023-11-14T22:13:20+00:00"
    assert "seq" not in public and "text_hash" not in public and "rowid" not in public


def test_memories_with_empty_lists_and_contents_alone(store: Store):
    """A memory with no sources, metadata or timestamps reads back with fresh empty ones (built,
    not parsed: one read's list is never another's), and ``l1_contents`` gives the contents
    alone, of the rows that exist, in both languages."""
    zh = store.write_memory(Memory(id="m_zh", scope="s1", content="用户对花生过敏"))
    en = store.write_memory(
        Memory(id="m_en", scope="s1", content="The user loves green tea", metadata={"k": "v"})
    )
    a, b = store.l1_rows([zh.seq])[zh.seq], store.memory_by_id("m_zh")
    assert a == b == zh
    assert (a.source_message_ids, a.metadata, a.timestamps) == ([], {}, [])
    assert a.metadata is not b.metadata and a.source_message_ids is not b.source_message_ids
    assert store.l1_rows([en.seq])[en.seq].metadata == {"k": "v"}
    missing = max(zh.seq, en.seq) + 100
    assert store.l1_contents([en.seq, zh.seq, missing]) == {
        zh.seq: "用户对花生过敏",
        en.seq: "The user loves green tea",
    }
    assert store.l1_contents([]) == {}


def _as_kwargs(m: Memory) -> dict:
    return {f.name: getattr(m, f.name) for f in fields(Memory)}


def test_one_message_id_from_the_journal_to_the_http_answers(start_gateway, scope: str):
    gw: GatewayProcess = start_gateway(
        env={
            "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
            **KEYWORD_ONLY,
        }
    )
    with gw.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "k1",
                "session_id": "run-1",
                "messages": [
                    {"role": "user", "content": "我对花生过敏", "id": "host-u1", "speaker": "小王"},
                    {"role": "assistant", "content": "好的，记住了。", "id": "host-a1"},
                ],
            },
        )
        assert r.status_code == 200, r.text
        assert c.post("/session/end", json={"scope": scope, "session_key": "k1"}).json()["flushed"]
        found = c.post(
            "/search/conversations", json={"scope": scope, "query": "花生过敏", "limit": 5}
        ).json()["items"]
        listed = c.get("/memories", params={"scope": scope}).json()["items"]
        traced = [c.get(f"/memories/{m['id']}", params={"scope": scope}).json() for m in listed]

    line = next(
        x for x in _journal(gw.data_dir, "conversations") if x.get("scope") == scope
    )  # the user's message, as the journal has it
    assert line["id"] == "host-u1" and line["content"] == "我对花生过敏"
    hit = next(i for i in found if i["content"] == "我对花生过敏")
    assert hit["id"] == line["record_id"]
    assert (hit["message_id"], hit["session_key"], hit["session_id"], hit["speaker"]) == (
        "host-u1",
        "k1",
        "run-1",
        "小王",
    )
    assert (hit["recorded_at"], hit["timestamp"]) == (line["recordedAt"], line["timestamp"])

    cited = [m for m in listed if line["record_id"] in m["source_message_ids"]]
    assert cited, listed  # the allergy was extracted from that message, and names it
    sources = [s for t in traced for s in t["trace"]["source_messages"]]
    source = next(s for s in sources if s["id"] == line["record_id"])
    assert (source["content"], source["session_key"], source["timestamp"]) == (
        line["content"],
        "k1",
        line["timestamp"],
    )
    assert source["file"].startswith("conversations/")

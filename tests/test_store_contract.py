"""Every backend keeps the ``MemoryStore`` contract (``store/base.py``), in process.

Each test runs on SQLite (a temporary data directory) and on PostgreSQL (a new database on the
test server, ``tests/support/postgres.py``), through the interface only, with typed records.
Each test writes to scopes of its own, so the tests share one store per backend. The last test
checks that the others called every method of the interface on that backend: a method a backend
lacks, or runs in another dialect's SQL, fails here before any gateway test runs it.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import (
    KeywordHit,
    L0Input,
    L0Message,
    Memory,
    ScopeCounts,
    ScopeState,
    SessionBacklog,
    SessionState,
)
from memory_tencentdb.store.sqlite import Store
from memory_tencentdb.text import tokenize
from tests.support import postgres

BACKENDS = ["sqlite", "postgres"]
# Every method of the interface: the abstract ones and the optional capabilities with defaults.
INTERFACE = sorted(
    name
    for name, value in vars(MemoryStore).items()
    if callable(value) and not name.startswith("_")
)
_ATTRIBUTES = ("backend", "shared", "vector_index_kind", "data_dir", "tz")
_called: dict[str, set[str]] = defaultdict(set)


class _Through:
    """The store, seen through ``MemoryStore`` only: a name outside the interface is an error,
    and each call is noted (for ``test_every_method_was_exercised``)."""

    def __init__(self, store: MemoryStore, backend: str, reopen: Any) -> None:
        self._store = store
        self._backend = backend
        self.reopen = reopen  # another store over the same data (a second process's view)

    def __getattr__(self, name: str) -> Any:
        if name not in INTERFACE and name not in _ATTRIBUTES:
            raise AttributeError(f"{name} is not part of MemoryStore")
        if name in INTERFACE:
            _called[self._backend].add(name)
        return getattr(self._store, name)


@pytest.fixture(scope="module", params=BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    data_dir: Path = tmp_path_factory.mktemp(f"contract-{request.param}")
    if request.param == "postgres":
        from memory_tencentdb.store.postgres import PostgresStore

        dsn = postgres.new_database()

        def reopen() -> _Through:
            return _Through(PostgresStore(data_dir, UTC, dsn=dsn), "postgres", None)
    else:

        def reopen() -> _Through:
            return _Through(Store(data_dir, UTC), "sqlite", None)

    s = reopen()
    assert isinstance(s._store, MemoryStore)
    assert s.backend == request.param
    yield _Through(s._store, request.param, reopen)
    s._store.close()


def _scope() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def _said(scope: str, key: str, *texts: str, role: str = "user", t0: int = 1_700_000_000_000):
    return [
        L0Input(
            scope=scope,
            session_key=key,
            session_id=f"sid-{key}",
            role=role if i % 2 == 0 else "assistant",
            content=text,
            timestamp=t0 + i,
            message_id=f"m-{key}-{i}",
        )
        for i, text in enumerate(texts)
    ]


def _memory(scope: str, content: str, **kw: Any) -> Memory:
    return Memory(id=f"mem_{uuid.uuid4().hex[:12]}", scope=scope, content=content, **kw)


# --------------------------------------------------------------------------- lifecycle


def test_a_new_store_is_healthy_and_says_what_it_is(store: Any):
    assert store.problems() == []
    # Only a store several gateways share claims sessions and names one vector index kind.
    assert store.shared is (store.backend == "postgres")
    assert store.vector_index_kind == ("pgvector" if store.shared else None)


def test_meta_and_transactions(store: Any):
    key = f"contract:{uuid.uuid4().hex[:6]}"
    assert store.get_meta(key) is None
    store.set_meta(key, "一")
    store.set_meta(key, "two")
    assert store.get_meta(key) == "two"

    scope = _scope()
    with pytest.raises(RuntimeError), store.transaction():
        store.update_scope_state(scope, scenes_processed=5)
        raise RuntimeError("rolled back")
    assert store.scope_state(scope).scenes_processed == 0
    with store.bulk():
        store.update_scope_state(scope, scenes_processed=2)
        store.update_scope_state(scope, scenes_processed__add=1)
    assert store.scope_state(scope).scenes_processed == 3


def test_what_a_closed_store_wrote_is_there_for_the_next(store: Any):
    scope = _scope()
    first = store.reopen()
    said = first.record_messages(_said(scope, "c", "写完就关闭", "closed"))
    m = first.write_memory(_memory(scope, "written before close"))
    first.close()
    assert [x.id for x in store.l0_by_ids([x.id for x in said])] == [x.id for x in said]
    got = store.memory_by_id(m.id)
    assert got is not None and (got.content, got.seq) == (m.content, m.seq)


# --------------------------------------------------------------------------- messages


def test_json_values_with_a_nul_character_are_stored(store: Any):
    """A tool call's arguments or a memory's metadata may hold U+0000 (JSON allows it, the
    journal keeps it). Every backend stores the row and reads the rest of the value back; a
    backend whose JSON type cannot hold the character (PostgreSQL's jsonb) drops it alone."""
    scope = _scope()
    calls = [{"id": "c1", "name": "grep", "arguments": 'a\x00b \\u0000 "引号"'}]
    said = _said(scope, "nul", "工具调用 tool call")[0]
    stored = store.record_messages([replace(said, extra={"tool_calls": calls})])
    got = store.l0_rows([stored[0].seq])[stored[0].seq].extra["tool_calls"][0]["arguments"]
    assert got.replace("\x00", "") == 'ab \\u0000 "引号"'
    m = store.write_memory(_memory(scope, "nul in metadata", metadata={"k\x00": ["x\x00y"]}))
    back = store.memory_by_id(m.id)
    assert back is not None
    assert {
        k.replace("\x00", ""): [v.replace("\x00", "") for v in vs]
        for k, vs in back.metadata.items()
    } == {"k": ["xy"]}


def test_messages_are_recorded_and_read_back(store: Any):
    scope = _scope()
    stored = store.record_messages(
        _said(scope, "s1", "我们用 PostgreSQL 做团队记忆", "好的, noted", "deploy on Friday")
    )
    assert [type(m) for m in stored] == [L0Message] * 3
    assert all(m.seq > 0 and m.id.startswith("l0_") and m.text_hash for m in stored)
    assert [m.content for m in stored][0] == "我们用 PostgreSQL 做团队记忆"
    seqs = [m.seq for m in stored]
    assert seqs == sorted(seqs)

    rows = store.l0_rows(seqs)
    assert set(rows) == set(seqs) and rows[seqs[0]] == stored[0]
    assert store.l0_sessions(seqs) == {s: (scope, "s1", "sid-s1") for s in seqs}
    assert [m.id for m in store.l0_by_ids([stored[2].id, stored[0].id])] == [
        stored[0].id,
        stored[2].id,
    ]
    assert store.l0_seq(stored[1].id) == seqs[1]
    assert store.l0_seq("l0_missing") is None
    assert store.max_l0_seq() >= seqs[-1]
    assert store.captured_message_ids(scope, "s1", ["m-s1-0", "m-s1-9"]) == {"m-s1-0"}
    assert store.captured_message_ids(scope, "other", ["m-s1-0"]) == set()
    assert store.captured_message_ids(scope, "s1", []) == set()

    assert [m.seq for m in store.l0_after(scope, "s1", seqs[0], 10)] == seqs[1:]
    assert [m.seq for m in store.l0_after(scope, "s1", 0, 2)] == seqs[:2]
    assert [m.seq for m in store.l0_before(scope, "s1", seqs[2], 10)] == [seqs[1], seqs[0]]
    assert store.count_l0_between(scope, "s1", seqs[0], seqs[2]) == 2
    assert store.count("l0_messages", scope) == 3
    assert store.count("l0_messages") >= 3


def test_journal_lines_index_once(store: Any):
    """Reindexing lines already indexed adds nothing (reindex and import rely on it)."""
    scope = _scope()
    stored = store.record_messages(_said(scope, "s", "一行", "two"))
    lines = [m.journal_line() for m in stored]
    assert store.index_l0_lines(lines, stored[0].file) == []
    assert store.count("l0_messages", scope) == 2


# --------------------------------------------------------------------------- memories


def test_memories_are_written_superseded_and_read_back(store: Any):
    scope = _scope()
    first = store.write_memory(_memory(scope, "用户喜欢喝乌龙茶", type="persona", priority=80))
    assert isinstance(first, Memory) and first.seq > 0 and first.created_at
    newer = store.write_memory(_memory(scope, "The user now drinks green tea", priority=60))
    store.set_memory_status(first.id, "superseded", superseded_by=newer.id)

    got = store.memory_by_id(first.id)
    assert got is not None and got.status == "superseded" and got.superseded_by == newer.id
    assert store.memory_by_id("mem_missing") is None
    assert {m.id for m in store.memories_by_ids([first.id, newer.id, "x"])} == {first.id, newer.id}
    assert set(store.l1_rows([first.seq, newer.seq])) == {first.seq, newer.seq}
    assert store.l1_contents([first.seq, newer.seq]) == {
        first.seq: first.content,
        newer.seq: newer.content,
    }
    assert [m.id for m in store.memory_history(newer.id)] == [first.id]
    assert store.l1_seq(newer.id) == newer.seq
    assert store.l1_seq("mem_missing") is None
    assert store.max_l1_seq(scope) == newer.seq
    assert [m.id for m in store.l1_after(scope, 0, 10)] == [newer.id]  # active only
    assert store.count_l1_after(scope, 0) == 1
    assert store.count("l1_memories", scope) == 2

    # An update keeps the id and the first created_at.
    changed = store.write_memory(
        Memory(
            id=newer.id,
            scope=scope,
            content="The user drinks jasmine tea",
            created_at=newer.created_at,
        )
    )
    assert changed.seq == newer.seq
    again = store.memory_by_id(newer.id)
    assert again is not None and again.content == "The user drinks jasmine tea"
    assert again.created_at == newer.created_at


def test_typed_selections_of_memories(store: Any):
    scope = _scope()
    low = store.write_memory(_memory(scope, "likes hiking", type="persona", priority=20))
    high = store.write_memory(_memory(scope, "is vegetarian 素食", type="persona", priority=90))
    slot = store.write_memory(_memory(scope, "timezone is UTC+8", metadata={"slot": "timezone"}))
    assert [m.id for m in store.top_memories(scope, "persona", 5)] == [high.id, low.id]
    assert [m.id for m in store.recent_slot_memories(scope, 5)] == [slot.id]


def test_journal_status_lines_apply(store: Any):
    scope = _scope()
    m = store.write_memory(_memory(scope, "status line target"))
    store.apply_status_line({"op": "status", "id": m.id, "status": "deleted", "at": ""})
    got = store.memory_by_id(m.id)
    assert got is not None and got.status == "deleted"
    line = {**m.journal_line(), "content": "indexed from a journal line"}
    assert store.index_l1_line(line, m.file) == m.seq
    got = store.memory_by_id(m.id)
    assert got is not None and got.content == "indexed from a journal line"


# --------------------------------------------------------------------------- keyword search


def test_keyword_search_is_scoped_ranked_and_typed(store: Any):
    scope, other = _scope(), _scope()
    a = store.write_memory(_memory(scope, "项目部署在 Kubernetes 集群 Kubernetes"))
    b = store.write_memory(_memory(scope, "The deploy uses Kubernetes once"))
    store.write_memory(_memory(other, "Kubernetes everywhere in the other scope"))
    gone = store.write_memory(_memory(scope, "Kubernetes memory that is deleted"))
    store.set_memory_status(gone.id, "deleted")

    terms = tokenize.query_terms("Kubernetes")
    hits = store.keyword_search("l1", scope, terms, 10)
    assert all(isinstance(h, KeywordHit) and 0 < h.score < 1 for h in hits)
    assert {h.seq for h in hits} == {a.seq, b.seq}  # its scope, active rows only
    assert store.keyword_search("l1", scope, [], 10) == []
    assert store.keyword_search("l1", scope, terms, 0) == []

    docs, df = store.term_stats("l1", terms)
    assert docs >= 3 and all(df.get(t, 0) >= 3 for t in terms)
    toks = store.indexed_tokens("l1", [a.seq])
    assert set(terms) <= toks[a.seq]

    said = store.record_messages(_said(scope, "k", "明天去上海出差", "ok"))
    found = store.keyword_search("l0", scope, tokenize.query_terms("上海"), 5, session_key="k")
    assert [h.seq for h in found] == [said[0].seq]
    assert store.keyword_search("l0", scope, tokenize.query_terms("上海"), 5, "other") == []


def test_rebuilt_keyword_index_answers_the_same(store: Any):
    scope = _scope()
    m = store.write_memory(_memory(scope, "rebuild marker zebracorn"))
    terms = tokenize.query_terms("zebracorn")
    before = [h.seq for h in store.keyword_search("l1", scope, terms, 5)]
    store.rebuild_fts()
    assert [h.seq for h in store.keyword_search("l1", scope, terms, 5)] == before == [m.seq]


# --------------------------------------------------------------------------- vectors


def test_vectors_are_stored_indexed_and_searched(store: Any):
    scope = _scope()
    model = f"contract-{uuid.uuid4().hex[:6]}"
    dim = 16
    written: list[tuple[str, list[int]]] = []
    store.on_rows_written(lambda layer, seqs: written.append((layer, list(seqs))))
    m1 = store.write_memory(_memory(scope, "vector one"))
    m2 = store.write_memory(_memory(scope, "vector two"))
    assert ("l1", [m1.seq]) in written and ("l1", [m2.seq]) in written

    todo = store.missing_vectors("l1", model, 100_000, rowids=[m1.seq, m2.seq])
    assert {(seq, s, text) for seq, s, _, text in todo} == {
        (m1.seq, scope, "vector one"),
        (m2.seq, scope, "vector two"),
    }
    assert store.missing_vectors("l1", model, 10, rowids=[]) == []
    assert store.count_missing_vectors("l1", model) >= 2
    assert store.numpy_index_bytes("l1", dim) >= 0

    index = store.open_index("l1", model, dim, "numpy")
    assert store.index("l1", model) is index
    assert store.index("l1", "no-such-model") is None
    rng = np.random.default_rng(7)
    vecs = {seq: rng.standard_normal(dim).astype(np.float32) for seq, *_ in todo}
    for v in vecs.values():
        v /= np.linalg.norm(v)
    store.save_vectors("l1", model, [(seq, s, h, vecs[seq]) for seq, s, h, _ in todo])
    assert store.vector_counts()[model] == 2
    assert store.missing_vectors("l1", model, 10, rowids=[m1.seq, m2.seq]) == []
    best = index.search(scope, vecs[m1.seq], 1)
    assert [seq for seq, _ in best] == [m1.seq]

    # A deleted memory leaves the index at once.
    store.set_memory_status(m1.id, "deleted")
    assert m1.seq not in [seq for seq, _ in index.search(scope, vecs[m1.seq], 2)]


def test_stored_vectors_are_found_by_text_for_any_row(store: Any):
    """A text's vector, once stored, answers for every row with that text (another scope, the
    same words said again): the vectorizer reuses it instead of running the model again."""
    model = f"contract-{uuid.uuid4().hex[:6]}"
    a, b = _scope(), _scope()
    first = store.write_memory(_memory(a, "同一句话 the same words"))
    again = store.write_memory(_memory(b, "同一句话 the same words"))
    other = store.write_memory(_memory(b, "something else"))
    assert first.text_hash == again.text_hash != other.text_hash
    assert store.stored_vectors("l1", model, [first.text_hash]) == {}
    vec = np.arange(8, dtype=np.float32) / 10
    store.save_vectors("l1", model, [(first.seq, a, first.text_hash, vec)])
    found = store.stored_vectors("l1", model, [again.text_hash, other.text_hash, "no-such"])
    assert list(found) == [again.text_hash]
    assert np.array_equal(found[again.text_hash], vec)
    assert store.stored_vectors("l0", model, [first.text_hash]) == {}, "layers are apart"
    assert store.stored_vectors("l1", "another-model", [first.text_hash]) == {}
    assert store.stored_vectors("l1", model, []) == {}


def test_a_vector_scan_can_pass_by_the_roles_a_model_skips(store: Any):
    """``skip_roles``: L0 rows of those roles are in no scan, by rows or resumed, nor in its
    count; what people said is, and a scan without it still asks for every row."""
    scope = _scope()
    model = f"contract-{uuid.uuid4().hex[:6]}"
    said = _said(scope, "t1", "run the build", "on it")
    (result,) = _said(scope, "t1", "第三步失败：数据库连接超时", t0=1_700_000_000_100)
    tool = replace(result, role="tool", message_id="m-t1-tool")
    stored = store.record_messages([said[0], tool, said[1]])
    seqs = [m.seq for m in stored]
    people = {stored[0].seq, stored[2].seq}
    skip = ("tool",)
    assert {r[0] for r in store.missing_vectors("l0", model, 10, rowids=seqs)} == set(seqs)
    by_rows = store.missing_vectors("l0", model, 10, rowids=seqs, skip_roles=skip)
    assert {r[0] for r in by_rows} == people
    resumed = store.missing_vectors("l0", model, 100_000, after=seqs[0] - 1, skip_roles=skip)
    assert people <= {r[0] for r in resumed} and stored[1].seq not in {r[0] for r in resumed}
    every = store.count_missing_vectors("l0", model)
    skipping = store.count_missing_vectors("l0", model, skip)
    assert every - skipping >= 1
    assert store.l0_with_roles(seqs, skip) == {stored[1].seq}
    assert store.l0_with_roles(seqs, ("user", "assistant")) == people
    assert store.l0_with_roles(seqs, ()) == set() == store.l0_with_roles([], skip)
    store.record_messages([replace(tool, message_id="m-t1-tool2", content="另一个工具结果")])
    assert store.count_missing_vectors("l0", model, skip) == skipping
    assert store.count_missing_vectors("l0", model) == every + 1


# --------------------------------------------------------------------------- pipeline state


def test_pipeline_state_rows(store: Any):
    scope = _scope()
    assert store.session_state(scope, "s") == SessionState(scope, "s")
    assert store.scope_state(scope) == ScopeState(scope)
    said = store.record_messages(_said(scope, "s", "hello 你好", "hi", "bye"))
    store.update_session_state(scope, "s", warmup_threshold=0, failures__add=2)
    store.complete_chunk(scope, "s", said[1].seq, said[1].id, 3, "scene-a", 123.5)
    st = store.session_state(scope, "s")
    assert isinstance(st, SessionState)
    assert (st.l1_cursor, st.l1_cursor_id, st.failures, st.memories_extracted) == (
        said[1].seq,
        said[1].id,
        0,
        3,
    )
    assert st.warmup_threshold == 0 and st.last_scene_name == "scene-a"
    sc = store.scope_state(scope)
    assert sc.memories_since_persona == 3 and sc.last_active == 123.5
    assert scope in {s.scope for s in store.scope_states()}

    backlog = [b for b in store.backlog_sessions() if b.scope == scope]
    assert backlog == [
        SessionBacklog(scope, "s", 1, said[2].recorded_at, said[2].seq, 1),
    ]
    with pytest.raises(ValueError):
        store.update_scope_state(scope, not_a_column=1)
    with store.claim_session(scope, "s") as held:
        assert held is True


def test_reconcile_moves_cursors_to_renumbered_rows(store: Any):
    scope = _scope()
    said = store.record_messages(_said(scope, "r", "one", "two"))
    store.update_session_state(scope, "r", l1_cursor=1, l1_cursor_id=said[1].id)
    notes = store.reconcile_pipeline(lambda s: False)
    assert any(scope in n for n in notes)
    assert store.session_state(scope, "r").l1_cursor == said[1].seq


# --------------------------------------------------------------------------- admin


def test_admin_listing_counts_and_export(store: Any):
    scope = _scope()
    said = store.record_messages(_said(scope, "a", "导出 one", "export two"))
    old = store.write_memory(_memory(scope, "old fact", source_message_ids=[said[0].id]))
    new = store.write_memory(_memory(scope, "new fact", session_key="a"))
    store.set_memory_status(old.id, "superseded", superseded_by=new.id)

    assert [m.id for m in store.list_memories(scope)] == [new.id]
    assert [m.id for m in store.list_memories(scope, status="all")] == [new.id, old.id]
    assert [m.id for m in store.list_memories(scope, status="superseded")] == [old.id]
    assert [m.id for m in store.list_memories(scope, status="all", before_seq=new.seq)] == [old.id]
    assert [m.id for m in store.list_memories(scope, session_key="a")] == [new.id]
    counts = {c.scope: c for c in store.scope_counts()}
    assert isinstance(counts[scope], ScopeCounts)
    assert (counts[scope].memories, counts[scope].history, counts[scope].messages) == (1, 1, 2)
    assert store.history_ids([new.id]) == [old.id]
    assert store.count_versions(new.id) == 0
    assert [m.id for m in store.iter_memories(scope, batch=1)] == [old.id, new.id]
    assert [m.id for m in store.iter_messages(scope, batch=1)] == [m.id for m in said]
    assert store.existing_ids("l1", [old.id, "nope"]) == {old.id}
    assert store.existing_ids("l0", [said[1].id, "nope"]) == {said[1].id}
    fp = store.memory_fingerprint(new.id)
    assert fp is not None and fp[:2] == ("new fact", "active")
    assert store.memory_fingerprint("nope") is None
    assert said[0].id in store.cited_l0_ids()
    sizes = store.layer_sizes()
    assert set(sizes) == {"l0_messages", "l1_active", "l1_history", "vectors"}
    assert sizes["l1_history"] >= 1
    newest = store.last_message_per_session([m.journal_line() for m in said])
    assert newest == {(scope, "a"): (said[1].seq, said[1].id)}
    assert {rid for rid, _ in store.l0_recorded_before("9999")} >= {m.id for m in said}
    assert store.l0_recorded_before("0000") == []
    store.update_session_state(scope, "a", l1_cursor=said[0].seq)
    assert store.unextracted_l0_ids([m.id for m in said]) == {said[1].id}


def test_forget_and_purge(store: Any):
    scope = _scope()
    said = store.record_messages(_said(scope, "f", "secret 口令 swordfish", "ok"))
    m = store.write_memory(_memory(scope, "the passphrase is swordfish"))
    terms = tokenize.query_terms("swordfish")
    assert store.text_in_live_rows("swordfish")

    store.append_tombstones([m.id], "user asked")
    assert store.memory_by_id(m.id).status == "deleted"  # type: ignore[union-attr]
    assert m.id in {d.id for d in store.deleted_memories()}
    assert store.keyword_search("l1", scope, terms, 5) == []

    assert store.delete_l1([m.id, "nope"]) == 1
    assert store.delete_l0([said[0].id]) == 1
    assert store.memory_by_id(m.id) is None and store.l0_seq(said[0].id) is None
    assert store.keyword_search("l0", scope, terms, 5) == []
    assert not store.text_in_live_rows("swordfish")
    assert store.delete_orphan_vectors() >= 0
    assert isinstance(store.drop_vector_indexes(), list)
    store.vacuum()
    assert store.count("l0_messages", scope) == 1


# --------------------------------------------------------------------------- browse


def test_browse_pages_and_counts(store: Any):
    scope = _scope()
    store.record_messages(_said(scope, "b1", "第一条", "second"))
    s2 = store.record_messages(_said(scope, "b2", "third", "fourth", "fifth"))
    p1 = store.write_memory(_memory(scope, "likes tea", type="persona", priority=80))
    e1 = store.write_memory(_memory(scope, "went to Beijing", scene_name="travel", priority=40))

    assert sorted(store.type_priority_counts(scope)) == [("episodic", 40, 1), ("persona", 80, 1)]
    page = store.list_memories(scope, limit=10)
    assert [m.id for m in page] == [e1.id, p1.id]
    page = store.list_memories(scope, scene="travel", limit=10)
    assert [m.id for m in page] == [e1.id]
    page = store.list_memories(scope, min_priority=50, limit=10)
    assert [m.id for m in page] == [p1.id]
    total, sessions = store.conversation_sessions(scope, 1, 0)
    assert total == 2 and [s["session_key"] for s in sessions] == ["b2"]
    assert sessions[0]["messages"] == 3
    assert [m.id for m in store.session_messages(scope, "b2", s2[0].seq, 10)] == [
        s2[1].id,
        s2[2].id,
    ]
    assert [m.id for m in store.memories_with_content(scope, ["likes tea", "x"], 5)] == [p1.id]
    assert store.session_count(scope) == 2
    assert store.l1_fingerprint(scope) == (2, e1.seq)


# --------------------------------------------------------------------------- the whole contract


def test_each_backend_implements_the_interface_itself(store: Any):
    """Siblings, not a base and its subclass: a method added to one backend is not silently run
    on the other in the wrong dialect (each owns its SQL; only ``MemoryStore`` and SQL-free
    helpers are shared)."""
    from memory_tencentdb.store.backends import BACKENDS
    from memory_tencentdb.store.postgres import PostgresStore
    from memory_tencentdb.store.sqlite import SqliteStore

    assert set(BACKENDS) == {"sqlite", "postgres"}
    assert not issubclass(PostgresStore, SqliteStore)
    assert not issubclass(SqliteStore, PostgresStore)
    assert type(store._store) is {"sqlite": SqliteStore, "postgres": PostgresStore}[store.backend]


def test_every_method_was_exercised(store: Any):
    """Runs last for its backend (pytest keeps file order within a module-scoped parameter)."""
    missing = sorted(set(INTERFACE) - _called[store.backend])
    assert not missing, f"{store.backend}: interface methods no test called: {missing}"

"""Conversation search (L0) is served from the in-memory index while it is small, and from
sqlite-vec past ``AUTO_NUMPY_BYTES``: the same answers either way, and ``/health`` says which.

Why: at 10k messages the sqlite-vec scans were most of what ``/search/conversations`` spent
beside the query embedding (bench/conversation_search_bench.py)."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

from memory_tencentdb.store.records import L0Input
from memory_tencentdb.store.sqlite import store as store_db
from memory_tencentdb.store.sqlite.store import Store
from memory_tencentdb.store.vector_index import NumpyIndex, Vec0Index, vec0_table_name

TURNS = [
    ("我下个月去成都出差，想吃地道的火锅", "可以试试玉林路那几家老店。"),
    ("My sister is getting married in Lisbon in June", "Congratulations to her!"),
    ("周末带女儿去科技馆看恐龙化石展", "孩子一定很开心。"),
    ("I switched our CI from Jenkins to GitHub Actions last week", "How is it going?"),
    ("最近在学做粤式早茶，虾饺总是包不好", "虾饺皮要用澄面和生粉。"),
    ("Our standup moved to 9:30 because of the new hire in Berlin", "Makes sense."),
]
QUERIES = ["成都火锅", "wedding abroad", "带孩子看展览", "continuous integration migration"]


def _search(gw, query: str, scope: str) -> list[str]:
    with gw.client() as c:
        r = c.post("/search/conversations", json={"query": query, "scope": scope, "limit": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["strategy"] in ("hybrid", "embedding"), body  # the models answered
    return [it["content"] for it in body["items"]]


def test_small_l0_is_served_in_memory_and_vec0_answers_the_same(start_gateway, scope: str):
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "local"})
    if gw.wait_healthy()["store"]["backend"] != "sqlite":
        pytest.skip("sqlite-vec and the in-memory index are the SQLite backend's")
    with gw.client() as c:
        for user, assistant in TURNS:
            r = c.post(
                "/capture",
                json={
                    "session_key": "s1",
                    "scope": scope,
                    "user_content": user,
                    "assistant_content": assistant,
                },
            )
            assert r.status_code == 200, r.text
    gw.wait_embedded()
    gw.restart()  # the index kind is chosen when it opens, from what is stored
    gw.wait_embedded()
    assert gw.wait_healthy()["vector_index"]["l0"] == "numpy"
    in_memory = {q: _search(gw, q, scope) for q in QUERIES}
    assert in_memory["成都火锅"][0].startswith("我下个月去成都出差")
    assert in_memory["wedding abroad"][0].startswith("My sister is getting married")

    gw.stop()
    gw.extra_env["TDAI_VECTOR_INDEX_L0"] = "vec0"
    gw.start()
    gw.wait_embedded()
    if gw.wait_healthy()["sqlite"]["sqlite_vec"] is None:
        pytest.skip("sqlite-vec does not load here")
    assert gw.wait_healthy()["vector_index"]["l0"] == "vec0"
    assert {q: _search(gw, q, scope) for q in QUERIES} == in_memory


def test_auto_picks_vec0_once_the_layer_outgrows_the_bound(tmp_path: Path, monkeypatch):
    store = Store(tmp_path / "data", UTC)
    try:
        if not store.binding.vec_available:
            pytest.skip("sqlite-vec does not load here")
        rows = store.record_messages(
            [L0Input("a", "s", "", "user", f"message {i}", 1_700_000_000 + i) for i in range(20)]
        )
        rng = np.random.default_rng(1)
        vecs = rng.standard_normal((len(rows), 8)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        # Float32 rows while the scope is small: 20 rows x 8 dims x 4 bytes.
        assert store.numpy_index_bytes("l0", 8) == 20 * 8 * 4
        assert isinstance(store.open_index("l0", "m-small", 8, "auto"), NumpyIndex)
        monkeypatch.setattr(store_db, "AUTO_NUMPY_BYTES", 20 * 8 * 4 - 1)
        assert isinstance(store.open_index("l0", "m-large", 8, "auto"), Vec0Index)
    finally:
        store.close()
    # Back under the bound (a later start): the vec0 table, no longer kept up to date, is gone.
    monkeypatch.setattr(store_db, "AUTO_NUMPY_BYTES", 32 << 20)
    store = Store(tmp_path / "data", UTC)
    try:
        table = vec0_table_name("l0", "m-large")
        assert isinstance(store.open_index("l0", "m-large", 8, "auto"), NumpyIndex)
        assert (
            not store.reader()
            .execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,))
            .fetchall()
        )
    finally:
        store.close()

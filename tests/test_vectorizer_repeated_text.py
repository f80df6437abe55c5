"""``wait_embedded`` waits for rows whose text another row already has (the same memory in two
scopes), not only for texts never embedded before.

The store's vectors are keyed by the text's hash, so a second scope's copy of a memory "has a
vector" at once, yet its own scope's index only gets it when the fill loop re-embeds it. A
recall that waited for it must then find it (measured before the fix: wait_embedded returned
True with 33 of 235 such rows in the scope's index).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_tencentdb.config import load_settings
from memory_tencentdb.engine import Engine
from memory_tencentdb.text.embedding_text import for_embedding

THINGS_ZH = ["邮票", "硬币", "贝壳", "明信片", "茶壶", "古书", "唱片", "石头", "钥匙扣", "地图"]
THINGS_EN = ["stamps", "coins", "shells", "postcards", "teapots", "old books", "vinyl records"]
N = 150


def _texts() -> list[str]:
    out = []
    for i in range(N):
        if i % 2:
            out.append(f"用户的第{i}个爱好是收集{THINGS_ZH[i % len(THINGS_ZH)]}")
        else:
            out.append(f"The user's hobby number {i} is collecting {THINGS_EN[i % len(THINGS_EN)]}")
    return out


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    settings = load_settings({"TDAI_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    eng = _started(Engine(settings))
    try:
        yield eng
    finally:
        eng.close()


def _started(eng: Engine) -> Engine:
    """``eng`` started with its models loaded (the test is skipped when none can load)."""
    eng.start()
    assert eng.vectorizer.wait_loaded(300)
    if eng.vectorizer.state != "ready":
        eng.close()
        pytest.skip(f"no embedding model loaded (state={eng.vectorizer.state})")
    return eng


@contextmanager
def _model_inputs(vec: Any) -> Iterator[list[str]]:
    """Every text the vectorizer's models are asked to embed while the block runs."""
    seen: list[str] = []
    for emb in vec.embedders:
        model_embed = emb.embed

        def counted(batch: list[str], _embed: Any = model_embed) -> np.ndarray:
            seen.extend(batch)
            return _embed(batch)

        emb.embed = counted
    try:
        yield seen
    finally:
        for emb in vec.embedders:
            del emb.embed  # the instance attribute: the model's own method again


def _write(engine: Engine, scope: str, texts: list[str]) -> list[int]:
    return [
        engine.write_memory(content=t, type_="persona", session_key="k", scope=scope).seq
        for t in texts
    ]


@pytest.mark.slow  # tens of seconds of embedding
def test_wait_embedded_covers_rows_whose_text_is_already_embedded(engine: Engine) -> None:
    vec, store = engine.vectorizer, engine.store
    texts = _texts()
    first = _write(engine, "s1", texts)
    assert vec.wait_embedded("s1", 120)
    for emb in vec.embedders:
        scores = store.index("l1", emb.model_id).score_rows("s1", np.zeros((1, emb.dim)), first)
        assert not np.isnan(scores).any(), emb.model_id

    # The same texts in s2 reuse the stored vectors: no s2 text reaches a model.
    with _model_inputs(vec) as seen:
        second = _write(engine, "s2", texts)
        assert vec.wait_embedded("s2", 120)
    assert seen == [], f"{len(seen)} texts embedded again, e.g. {seen[:2]}"
    # Right after it returned: every s2 row is in s2's index of every model.
    for emb in vec.embedders:
        index = store.index("l1", emb.model_id)
        scores = index.score_rows("s2", np.zeros((1, emb.dim), dtype=np.float32), second)
        missing = int(np.isnan(scores).sum())
        assert missing == 0, f"{emb.model_id}: {missing} of {len(second)} s2 rows not indexed"

    # And a search of s2 with a memory's own vector finds that memory's s2 row first.
    pick = [0, N // 2 + 1, N - 1]
    for emb in vec.embedders:
        index = store.index("l1", emb.model_id)
        own = np.asarray(emb.embed([for_embedding("l1", texts[i]) for i in pick]), np.float32)
        for i, query in zip(pick, own, strict=True):
            hits = index.search("s2", query, 5)
            assert hits and hits[0][0] == second[i], (emb.model_id, texts[i], hits[:3])


@pytest.mark.slow  # two engines, each loading the models
def test_a_repeated_text_written_while_the_indexes_are_built_is_indexed(tmp_path: Path) -> None:
    """A memory written after the start-up build read the stored vectors, whose text already has
    a vector (the same memory in another scope), is found by neither the build nor the start-up
    scan (which looks for texts without a vector): only the write listener can queue it, so it
    must listen before the build. Before, such a memory was in no index until rewritten."""
    settings = load_settings({"TDAI_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    text = "用户的猫叫年糕，是一只橘猫"
    first = _started(Engine(settings))
    try:
        first.write_memory(content=text, type_="persona", session_key="k", scope="s1")
        assert first.vectorizer.wait_embedded("s1", 120)
    finally:
        first.close()

    eng = Engine(settings)
    build = eng.store.open_index
    written: list[int] = []

    def build_then_write(layer: str, model: str, dim: int, backend: str):
        index = build(layer, model, dim, backend)
        if not written:  # right after the first build read the stored vectors
            row = eng.write_memory(content=text, type_="persona", session_key="k", scope="s2")
            written.append(row.seq)
        return index

    eng.store.open_index = build_then_write  # type: ignore[method-assign]
    eng.start()
    try:
        assert eng.vectorizer.wait_loaded(300)
        assert written
        assert eng.vectorizer.wait_embedded("s2", 120)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not eng.vectorizer.idle:
            time.sleep(0.1)
        for emb in eng.vectorizer.embedders:
            index = eng.store.index("l1", emb.model_id)
            scores = index.score_rows("s2", np.zeros((1, emb.dim), np.float32), written)
            assert not np.isnan(scores).any(), f"{emb.model_id}: the s2 copy is in no index"
    finally:
        eng.close()


@pytest.mark.slow  # loads the models
def test_a_query_is_embedded_once_per_model_across_scopes_and_recalls(engine: Engine) -> None:
    """A recall reads each scope it may (a team's, then the user's), each with the same words;
    a host may send the same words again. The model runs once per query text."""
    from memory_tencentdb.retrieval import retrieve

    texts = _texts()[:6]
    rows = {scope: _write(engine, scope, texts) for scope in ("team", "me")}
    vec = engine.vectorizer
    assert vec.wait_embedded("team", 120) and vec.wait_embedded("me", 120)
    query = "收集邮票的爱好 / a hobby of collecting stamps"
    with _model_inputs(vec) as seen:
        found = [
            retrieve(engine.store, vec, "l1", scope, query, "hybrid", depth=3)
            for _ in range(2)
            for scope in ("team", "me")
        ]
    assert len(seen) == len(vec.embedders), seen
    for hits, scope in zip(found, ["team", "me"] * 2, strict=True):
        assert hits.vector and {r for r, _ in hits.ranked} <= set(rows[scope])
    assert found[0].ranked == found[2].ranked and found[1].ranked == found[3].ranked

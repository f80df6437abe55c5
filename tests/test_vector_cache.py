"""Vectors of fixed texts kept between runs (memory_tencentdb/embedding/vector_cache.py): what
comes out is what the model gives, whether the cache is fresh, stale, corrupt or shared; the
gateway keeps its reference questions' vectors there, the training scripts their texts'."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from memory_tencentdb.config import load_settings
from memory_tencentdb.embedding import vector_cache
from memory_tencentdb.embedding.vector_cache import RECHECKED
from memory_tencentdb.engine import Engine
from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES
from scripts import vector_cache as training_cache


class FakeModel:
    """A deterministic embedder; ``shift`` stands for a change in how the model is called."""

    model_id = "fake:model"
    dim = 3

    def __init__(self, shift: float = 0.0, cache_dir: Path | None = None) -> None:
        self.shift = shift
        self.cache_dir = cache_dir
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded += texts
        return np.array([[len(t), ord(t[0]), self.shift] for t in texts], dtype=np.float32)


@pytest.fixture(autouse=True)
def _cache_here(tmp_path, monkeypatch):
    monkeypatch.setenv("TDAI_TRAIN_VECTOR_CACHE", str(tmp_path / "train"))


def test_texts_seen_before_are_read_not_embedded(tmp_path):
    texts = ["用户对花生过敏", "The user likes tea", "hi"]
    first = FakeModel()
    assert np.array_equal(vector_cache.embed(first, texts, tmp_path), first.embed(texts))
    again = FakeModel()
    out = vector_cache.embed(again, [*texts, "new one"], tmp_path)
    assert np.array_equal(out, FakeModel().embed([*texts, "new one"]))
    # Only the new text and the few cached ones checked again were embedded.
    assert "new one" in again.embedded and len(again.embedded) <= 1 + RECHECKED


def test_a_model_that_now_embeds_differently_discards_the_cache(tmp_path):
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vector_cache.embed(FakeModel(), texts, tmp_path)
    changed = FakeModel(shift=1.0)
    assert np.array_equal(vector_cache.embed(changed, texts, tmp_path), changed.embed(texts))


def test_a_corrupt_cache_file_is_embedded_again_and_replaced(tmp_path):
    texts = ["用户住在杭州", "The user runs every morning"]
    vector_cache.embed(FakeModel(), texts, tmp_path)
    (cached,) = tmp_path.glob("*.npz")
    cached.write_bytes(b"PK\x03\x04 not a zip at all")
    fresh = FakeModel()
    assert np.array_equal(vector_cache.embed(fresh, texts, tmp_path), FakeModel().embed(texts))
    assert fresh.embedded == texts
    again = FakeModel()
    vector_cache.embed(again, texts, tmp_path)
    assert len(again.embedded) <= RECHECKED  # the rewritten file is read


def test_writers_at_once_leave_one_whole_file(tmp_path):
    """Gateways starting together each write the cache; none reads a half-written one."""
    texts = [f"text {i} 文本" for i in range(200)]
    outs: list[np.ndarray] = []
    threads = [
        threading.Thread(
            target=lambda: outs.append(vector_cache.embed(FakeModel(), texts, tmp_path))
        )
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = FakeModel().embed(texts)
    assert len(outs) == 6 and all(np.array_equal(o, expected) for o in outs)
    assert [p.name for p in tmp_path.iterdir()] == [p.name for p in tmp_path.glob("*.npz")]
    assert len(list(tmp_path.iterdir())) == 1


def test_without_the_cache_every_text_is_embedded(tmp_path):
    model = FakeModel()
    training_cache.embed(model, ["x", "y"])
    fresh = FakeModel()
    training_cache.embed(fresh, ["x", "y"], use_cache=False)
    assert fresh.embedded == ["x", "y"]
    assert vector_cache.embed(FakeModel(), [], tmp_path).shape == (0,)


def _engine(tmp_path: Path, name: str, model: FakeModel, monkeypatch) -> Engine:
    monkeypatch.setattr("memory_tencentdb.vectorizer.load_embedders", lambda cfg: ([model], []))
    settings = load_settings({"TDAI_DATA_DIR": str(tmp_path / name)}, cwd=tmp_path)
    eng = Engine(settings)
    eng.start()
    assert eng.vectorizer.wait_loaded(60) and eng.vectorizer.state == "ready"
    return eng


def test_a_gateway_start_reads_its_reference_vectors_from_the_models_cache(tmp_path, monkeypatch):
    """The reference questions (the relevance cut's null model) are embedded at the first
    start only; later starts embed a few of them to check the cache, and get the same vectors."""
    first_model = FakeModel(cache_dir=tmp_path / "models")
    first = _engine(tmp_path, "a", first_model, monkeypatch)
    try:
        assert first_model.embedded == list(REFERENCE_QUERIES)
        refs = first.vectorizer.references[FakeModel.model_id]
    finally:
        first.close()
    assert list((tmp_path / "models" / "reference-vectors").glob("*.npz"))
    second_model = FakeModel(cache_dir=tmp_path / "models")
    second = _engine(tmp_path, "b", second_model, monkeypatch)
    try:
        assert len(second_model.embedded) <= RECHECKED
        assert np.array_equal(second.vectorizer.references[FakeModel.model_id], refs)
    finally:
        second.close()
    remote = FakeModel()  # no cache directory, as a remote model: asked at every start
    third = _engine(tmp_path, "c", remote, monkeypatch)
    try:
        assert remote.embedded == list(REFERENCE_QUERIES)
    finally:
        third.close()

"""The training scripts' vector cache (scripts/vector_cache.py) gives what the model gives."""

from __future__ import annotations

import numpy as np
import pytest

from scripts import vector_cache


class FakeModel:
    """A deterministic embedder; ``shift`` stands for a change in how the model is called."""

    model_id = "fake:model"

    def __init__(self, shift: float = 0.0) -> None:
        self.shift = shift
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded += texts
        return np.array([[len(t), ord(t[0]), self.shift] for t in texts], dtype=np.float32)


@pytest.fixture(autouse=True)
def _cache_here(tmp_path, monkeypatch):
    monkeypatch.setenv("TDAI_TRAIN_VECTOR_CACHE", str(tmp_path / "cache"))


def test_texts_seen_before_are_read_not_embedded():
    texts = ["用户对花生过敏", "The user likes tea", "hi"]
    first = FakeModel()
    assert np.array_equal(vector_cache.embed(first, texts), first.embed(texts))
    again = FakeModel()
    out = vector_cache.embed(again, [*texts, "new one"])
    assert np.array_equal(out, FakeModel().embed([*texts, "new one"]))
    # Only the new text and the few cached ones checked again were embedded.
    assert "new one" in again.embedded and len(again.embedded) <= 1 + vector_cache.RECHECKED


def test_a_model_that_now_embeds_differently_discards_the_cache():
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vector_cache.embed(FakeModel(), texts)
    changed = FakeModel(shift=1.0)
    assert np.array_equal(vector_cache.embed(changed, texts), changed.embed(texts))


def test_without_the_cache_every_text_is_embedded():
    model = FakeModel()
    vector_cache.embed(model, ["x", "y"])
    fresh = FakeModel()
    vector_cache.embed(fresh, ["x", "y"], use_cache=False)
    assert fresh.embedded == ["x", "y"]

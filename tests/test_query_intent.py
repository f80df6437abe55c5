"""The query-intent classifier behind the relevance gate's world bar (text/query_intent.py):
its shipped weights are what the training script makes of its training set, and it degrades to
"no verdict" for models it has no weights for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_tencentdb.text import query_intent
from memory_tencentdb.text.query_intent_weights import WORLD

ROOT = Path(__file__).resolve().parent.parent


def test_no_weights_for_the_model_means_no_verdict():
    assert query_intent.world_logit({}) is None
    assert query_intent.world_logit({"openai:text-embedding-3-small": np.ones(1536)}) is None


def test_a_vector_of_another_size_is_not_read():
    model = next(iter(WORLD))
    assert query_intent.world_logit({model: np.ones(7, dtype=np.float32)}) is None


def test_the_verdict_is_the_mean_of_the_models_log_odds():
    vectors = {}
    expected = []
    for model, (w, b) in query_intent._weights("WORLD").items():
        v = np.zeros_like(w)
        v[0] = 1.0
        vectors[model] = v
        expected.append(float(w[0]) + b)
    assert query_intent.world_logit(vectors) == pytest.approx(sum(expected) / len(expected))


@pytest.mark.slow
def test_shipped_weights_are_reproduced_by_the_training_script():
    """Retrain from scripts/query_intent_train.json with the bundled models: the same bytes.
    (The training texts' vectors come from earlier runs when the models still give them:
    scripts/vector_cache.py; 86 s -> 11 s here.)"""
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_query_intent.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "shipped weights match" in run.stdout


def test_the_how_to_classifier_degrades_the_same_way():
    assert query_intent.howto_logit({}) is None
    model = next(iter(WORLD))
    assert query_intent.howto_logit({model: np.ones(3, dtype=np.float32)}) is None

"""What kind of question a query is: about the world (its best answer the same whoever asks)
or one a user's memories bear on; and, about the world, a request for a fact or for how to get
something done.

Personal memories help with what depends on the asker ("附近有什么川菜馆推荐", "Can I eat this
cake?") and with questions about the user; they do not help with "What year did the Berlin
Wall fall?", however close "training for the Berlin marathon" sits to it in a model's space.
On a broad scope such chance neighbours are the rule (the reference-question z-score of some
memory clears any fixed bar by chance), so recall asks world questions for stronger evidence.
A how-to ("GitHub Actions cache keeps missing") is a world question whose answer may still
depend on the user's setup ("the team's CI runs on self-hosted runners"), so a memory naming
the same thing counts for more there than for a fact ("Who discovered penicillin?" against
"allergic to penicillin").

Each classifier is a logistic regression per bundled model over the model's own query vector,
trained offline by scripts/train_query_intent.py on labelled queries written for it and on
the messages of the recall sets in tests/fixtures (all dev sets; the acceptance sets are held
back by the reviewers); the weights ship in ``query_intent_weights.py``. A model with
no weights (a remote embedder) has no say; with none at all the answer is None.
"""

from __future__ import annotations

import base64
from functools import cache

import numpy as np

from memory_tencentdb.text import query_intent_weights


@cache
def _weights(name: str) -> dict[str, tuple[np.ndarray, float]]:
    table = getattr(query_intent_weights, name, {})
    return {
        model: (np.frombuffer(base64.b64decode(w), dtype="<f4").astype(np.float32), float(b))
        for model, (w, b) in table.items()
    }


def _mean_logit(name: str, query_vectors: dict[str, np.ndarray]) -> float | None:
    logits = [
        float(np.dot(query_vectors[model], w)) + b
        for model, (w, b) in _weights(name).items()
        if model in query_vectors and query_vectors[model].shape == w.shape
    ]
    return sum(logits) / len(logits) if logits else None


def world_logit(query_vectors: dict[str, np.ndarray]) -> float | None:
    """The mean over the models of the log-odds that the query is about the world (> 0: more
    likely than not), from the query's vectors per model id; None when no model has weights."""
    return _mean_logit("WORLD", query_vectors)


def howto_logit(query_vectors: dict[str, np.ndarray]) -> float | None:
    """For a question about the world: the log-odds that it asks how to get something done
    rather than for a fact (> 0: a how-to); None when no model has weights."""
    return _mean_logit("HOWTO", query_vectors)

"""A learned linear adapter per model that moves a message's vector toward the memories it
bears on, before the model's L1 index is searched.

The bundled models place a message near texts that *say the same thing*, but a per-turn
recall needs the memory a good answer *depends on*: "帮我订下周二上午的机票" should find "the user
has a standing Tuesday-morning clinic", "Suggest a recipe for tonight" a shellfish allergy, a
Chinese question an English memory. Those pairs share a shape (a request about food and a diet,
a date and a standing commitment) that a linear map of the query vector can learn from
labelled (message, memory it bears on) pairs: ``q' = normalise(q + U (Vᵀ q))``, a low-rank
correction of the identity, so with the weights at zero it is the model as shipped.

The memories' vectors are not touched (the indexes stay as they are); the reference questions
(``text.reference_queries``, the relevance decision's background) go through the same map, so
a message's z-score is measured against questions moved alike. The query-intent classifiers
read the raw vector they were trained on.

Trained offline by scripts/train_query_adapter.py on the recall dev sets of tests/fixtures;
the weights ship in ``query_adapter_weights.py``. A model without weights (a remote embedder,
or one the script found no gain for) is used as it is.
"""

from __future__ import annotations

import base64
from functools import cache

import numpy as np

from memory_tencentdb.text import query_adapter_weights


@cache
def _weights() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for model, (u, v, dim, rank) in query_adapter_weights.ADAPTERS.items():
        shape = (int(dim), int(rank))
        out[model] = (_decode(u).reshape(shape), _decode(v).reshape(shape))
    return out


def _decode(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


def has_adapter(model_id: str) -> bool:
    return model_id in _weights()


def adapt(model_id: str, vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (one, or one per row) moved by the model's adapter and normalised; returned
    as they are when the model has none or the dimensions differ."""
    w = _weights().get(model_id)
    if w is None or vectors.shape[-1] != w[0].shape[0]:
        return vectors
    return move(vectors, *w).astype(np.float32)


def move(vectors: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``normalise(q + U (Vᵀ q))`` for each vector (the training script's too)."""
    moved = vectors + (vectors @ v) @ u.T
    return moved / np.maximum(np.linalg.norm(moved, axis=-1, keepdims=True), 1e-12)

"""The order in which per-turn recall offers the candidates that pass its relevance decision: a
small learned scorer instead of the fused ranking's hand-set weights.

Why: fusion (``retrieval.fuse``) sums reciprocal ranks and a z-score bonus whose weights were
set by hand, and with five places to fill it buries the memory a request depends on (a recipe
and a dislike of coriander, a trip and a seasick user, an English memory for a Chinese
question) below ones that merely share its topic. Which evidence deserves how much weight is
something labelled messages can say: the scorer is ``w · standardise(x)`` over, per candidate,

- for each bundled model: its z-score against the reference questions, the log of the
  candidate's place in the model's own ranking, and its cosine similarity;
- the keyword side: the IDF-weighted share of the message's words it holds and the log of its
  place among the keyword hits;
- whether the memory is in the other language than the message, and that flag times each
  model's z-score (only the multilingual model can measure across languages).

``w`` is fitted listwise (a softmax over each message's candidates, the memories it bears on
the target) by scripts/train_recall_order.py on the recall dev sets, every set's candidates
found with a query adapter trained without that set: the evidence as the product meets it on a
user's data it never saw. It only orders. Whether anything is injected, and which candidates
may be, stays recall's relevance decision (recall.decide); the scorer picks the best
``max_results`` of those. Without the models it was trained with (a remote embedder, one
model alone), or while a candidate waits for its vectors, recall keeps the fused order.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from memory_tencentdb import recall_order_weights
from memory_tencentdb.retrieval import CANDIDATES

# What a missing rank counts as: one past the end of a side's candidate list.
ABSENT_RANK = CANDIDATES + 1
# Per model (in recall_order_weights.MODELS order), then the keyword side and the language.
PER_MODEL = ("z", "log_rank", "similarity")
FEATURES = (
    "other_language",
    *(f"{f}:{i}" for i in range(2) for f in PER_MODEL),
    "coverage",
    "log_keyword_rank",
    *(f"other_language_z:{i}" for i in range(2)),
)


def _rank(rank: int | None) -> float:
    return math.log(rank if rank is not None and rank <= CANDIDATES else ABSENT_RANK)


def features(evidence: Any, models: tuple[str, ...]) -> list[float]:
    """One candidate's feature vector (FEATURES order) from its ``retrieval.Evidence``."""
    other = 1.0 if evidence.other_language else 0.0
    z = [evidence.z_by_model.get(m, 0.0) for m in models]
    x = [other]
    for i, m in enumerate(models):
        rank = evidence.rank_by_model.get(m)
        in_list = rank is not None and rank <= CANDIDATES
        x += [z[i], _rank(rank), evidence.similarity.get(m, 0.0) if in_list else 0.0]
    x += [evidence.coverage, _rank(evidence.keyword_rank)]
    x += [other * zi for zi in z]
    return x


def feature_matrix(hits: Any, models: tuple[str, ...] | None = None) -> np.ndarray:
    """Every ranked candidate's features, one row each (the training script's reader too)."""
    models = models or recall_order_weights.MODELS
    return np.array(
        [features(hits.evidence[r], models) for r, _ in hits.ranked], dtype=float
    ).reshape(-1, len(FEATURES))


@cache
def _weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array(recall_order_weights.MEAN, dtype=float),
        np.array(recall_order_weights.SCALE, dtype=float),
        np.array(recall_order_weights.WEIGHTS, dtype=float),
    )


def applies(hits: Any) -> bool:
    """The scorer was trained on exactly these models' evidence, and every candidate has it: a
    memory written a moment ago that the models have not embedded yet has none to read (the
    fused order imputes the models' vote for it, so it is found by its words at once)."""
    return (
        set(hits.query_vectors) == set(recall_order_weights.MODELS)
        and bool(hits.ranked)
        and all(r in hits.evidence for r, _ in hits.ranked)
        and not hits.waiting
    )


def score(x: np.ndarray) -> np.ndarray:
    """The scorer's value for each row of a feature matrix (higher first)."""
    mean, scale, w = _weights()
    return ((x - mean) / scale) @ w


def order(hits: Any) -> list[tuple[int, float]]:
    """``hits.ranked`` best first by the scorer (ties keep the fused order), each with its
    score; the fused ranking as it is when the scorer does not apply."""
    if not applies(hits):
        return list(hits.ranked)
    s = score(feature_matrix(hits))
    idx = np.argsort(-s, kind="stable")
    return [(hits.ranked[i][0], float(s[i])) for i in idx]

"""The one exception every embedder raises, and helpers shared by the providers."""

from __future__ import annotations

import numpy as np


class EmbeddingError(Exception):
    """An embedding could not be produced: model unavailable, request failed, bad answer."""


def truncate(texts: list[str], max_chars: int) -> list[str]:
    """Each text cut to ``max_chars`` code points (``max_chars <= 0`` means no limit)."""
    if max_chars <= 0:
        return [str(t) for t in texts]
    return [str(t)[:max_chars] for t in texts]


def normalise(vectors: np.ndarray) -> np.ndarray:
    """float32 copy with NaN/Inf set to 0 and every row scaled to unit length.

    A row whose norm is (nearly) zero stays zero rather than becoming NaN.
    """
    out = np.nan_to_num(np.asarray(vectors, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if out.ndim != 2:
        raise EmbeddingError(f"expected a 2-D array of vectors, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 1e-10)
    return out

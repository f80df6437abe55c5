"""Where the training scripts keep the bundled models' vectors of their training texts.

Retraining embeds thousands of labelled messages with both models (about 80 of the 90 seconds
``train_query_intent.py --check`` takes here), and the texts rarely change. The cache itself is
the gateway's (:mod:`memory_tencentdb.embedding.vector_cache`: checked against the model before
use); the training texts go under ``TDAI_TRAIN_VECTOR_CACHE`` (default
``~/.cache/memory-tencentdb/train-vectors``). The weights a script derives are the same with or
without it; ``--no-cache`` skips it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from memory_tencentdb.embedding import vector_cache


def cache_dir() -> Path:
    env = os.environ.get("TDAI_TRAIN_VECTOR_CACHE", "").strip()
    return Path(env) if env else Path.home() / ".cache" / "memory-tencentdb" / "train-vectors"


def embed(emb: Any, texts: list[str], use_cache: bool = True) -> np.ndarray:
    """``emb.embed(texts)`` (float32), the vectors of texts seen before read from the cache."""
    return vector_cache.embed(emb, texts, cache_dir() if use_cache else None)

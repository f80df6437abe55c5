"""Per-turn recall: which memories go into the next prompt, and in what words.

Two zones, as hosts use them:

- ``prepend_context``: this turn's memories in ``<relevant-memories>``, placed before the
  user's message. It changes every turn.
- ``append_system_context``: the stable part for the system prompt (persona, scene navigation,
  the tool guide), which changes rarely, so prompt caches keep working.

Everything recalled is escaped so stored text cannot close or forge our tags, and budgets are
counted in code points (``len`` of a Python ``str``), so Chinese is not cut short.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb import recall_order
from memory_tencentdb.found import FoundMemory
from memory_tencentdb.pipeline.layout import scope_root
from memory_tencentdb.pipeline.rules import has_cjk
from memory_tencentdb.retrieval import newer_first_found, retrieve
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import Memory
from memory_tencentdb.text.query_intent import howto_logit, world_logit
from memory_tencentdb.text.sanitize import clean_captured, clip_query, escape_tags, one_line
from memory_tencentdb.vectorizer import Vectorizer

log = logging.getLogger("memory_tencentdb.recall")

MEMORIES_INTRO = "以下是与当前对话相关的长期记忆（仅供参考，不代表当前任务进度）。Long-term memories related to this conversation, for reference only:"
TRUNCATION_MARK = (
    "…（已截断，可用记忆搜索工具查看全文 / truncated, search memory for the full text）"
)
DEFAULT_TOOL_NAMES = {
    "memory_search": "memory_tencentdb_memory_search",
    "conversation_search": "memory_tencentdb_conversation_search",
}

_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="recall")
# Fair share: each model runs one inference at a time, and a long query (a pasted log) holds it
# for up to ~0.5 s. Long queries therefore take turns on a lane of their own, so a flood of them
# can neither fill the ordinary workers nor queue more than one inference ahead of a short query.
LONG_QUERY_CHARS = 500
_long_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recall-long")


def fair_share(query: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` (a search for ``query``) on the long lane when the query is long, else here:
    the search tools' long queries take turns with recall's instead of crowding the models."""
    if len(query or "") <= LONG_QUERY_CHARS:
        return fn(*args, **kwargs)
    return _long_pool.submit(fn, *args, **kwargs).result()


@dataclass
class RecallResult:
    prepend_context: str = ""
    append_system_context: str = ""
    memories: list[FoundMemory] = field(default_factory=list)
    strategy: str = "skipped"
    # How the relevance cut went: candidates considered, how many passed, and whether it ran.
    relevance: dict[str, Any] = field(default_factory=dict)
    # Team scopes were searched too: each memory says which scope it came from.
    across_scopes: bool = False

    @property
    def context(self) -> str:
        """The legacy single field: both zones, stable part first."""
        return "\n\n".join(p for p in (self.append_system_context, self.prepend_context) if p)

    def as_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "prepend_context": self.prepend_context,
            "append_system_context": self.append_system_context,
            "memories": [m.as_json(scope=self.across_scopes) for m in self.memories],
            "strategy": self.strategy,
            "memory_count": len(self.memories),
            "relevance": self.relevance,
        }


def recall(
    store: MemoryStore,
    vectorizer: Vectorizer,
    recall_cfg: Any,
    tz: tzinfo,
    query: str,
    scope: str,
    tool_names: dict[str, str] | None = None,
    team_scopes: tuple[str, ...] = (),
) -> RecallResult:
    """Recall within ``recall_cfg.timeout_ms``; on timeout an empty result, never an error.
    ``team_scopes``: other scopes whose memories join ``scope``'s (the caller may read them)."""
    deadline = time.monotonic() + recall_cfg.timeout_ms / 1000
    pool = _long_pool if len(query or "") > LONG_QUERY_CHARS else _pool
    future = pool.submit(
        _recall, store, vectorizer, recall_cfg, tz, query, scope, tool_names, deadline, team_scopes
    )
    try:
        return future.result(timeout=max(0.001, recall_cfg.timeout_ms / 1000))
    except FutureTimeout:
        log.warning("recall exceeded %d ms; answering without memories", recall_cfg.timeout_ms)
        return RecallResult(strategy="timeout")


def _recall(
    store: MemoryStore,
    vectorizer: Vectorizer,
    cfg: Any,
    tz: tzinfo,
    query: str,
    scope: str,
    tool_names: dict[str, str] | None,
    deadline: float | None = None,
    team_scopes: tuple[str, ...] = (),
) -> RecallResult:
    result = RecallResult()
    if deadline is not None and time.monotonic() >= deadline:
        return RecallResult(strategy="timeout")  # its caller has already answered; skip the work
    clean = clip_query(clean_captured(query or ""))
    if cfg.enabled and len(clean) >= 2:
        relevant, rows, result.strategy, result.relevance = _relevant_in(
            store, vectorizer, cfg, scope, clean
        )
        # Team scopes: each one is searched and cut on its own (its relevance is measured
        # against its own memories), then the survivors compete on score with the scope's own.
        for team in team_scopes:
            more, more_rows, strategy, summary = _relevant_in(store, vectorizer, cfg, team, clean)
            if more and not relevant and not rows:
                result.strategy = strategy
            relevant += more
            rows.update(more_rows)
            result.relevance.setdefault("team_scopes", {})[team] = summary
        if team_scopes:
            relevant.sort(key=lambda kv: (-kv[1], kv[0]))
        result.across_scopes = bool(team_scopes)
        for rowid, score in relevant[: cfg.max_results]:
            row = rows.get(rowid)
            if row is not None and row.status == "active":
                result.memories.append(FoundMemory(row, score))
    # A later statement on the same subject goes ahead of the one it replaced.
    result.memories = newer_first_found(store, result.memories)
    lines = _budget(
        [_memory_line(f.memory, tz) for f in result.memories],
        cfg.max_chars_per_memory,
        cfg.max_total_recall_chars,
    )
    result.memories = result.memories[: len(lines)]
    if lines:
        result.prepend_context = (
            "<relevant-memories>\n"
            + MEMORIES_INTRO
            + "\n\n"
            + "\n".join(lines)
            + "\n</relevant-memories>"
        )
    # Persona and scenes are per scope (the default scope keeps the top-level layout).
    root = scope_root(store.data_dir, scope)
    result.append_system_context = stable_context(root, tool_names)
    return result


def candidates(store: MemoryStore, vectorizer: Vectorizer, cfg: Any, scope: str, clean: str) -> Any:
    """One scope's L1 candidates for a recall, before the relevance cut (also what the Memory
    Hub's "recall explained" shows)."""
    return retrieve(
        store,
        vectorizer,
        "l1",
        scope,
        clean,
        cfg.strategy,
        depth=max(cfg.max_results * 3, 20),
        score_threshold=cfg.score_threshold,
    )


def _relevant_in(
    store: MemoryStore, vectorizer: Vectorizer, cfg: Any, scope: str, clean: str
) -> tuple[list[tuple[int, float]], dict[int, Memory], str, dict[str, Any]]:
    """One scope's candidates that pass the relevance cut, their rows, the strategy that ran
    and the cut's summary."""
    hits = candidates(store, vectorizer, cfg, scope, clean)
    # What ran: with the models not (yet) usable an empty answer was keyword-only.
    ran = cfg.strategy if vectorizer.state == "ready" else "keyword"
    strategy = hits.strategy if hits.ranked else ran
    # The cut needs every candidate's type (instructions are never cut); without measured
    # relevance only the ones shown are read.
    cut = any(e.relevance is not None for e in hits.evidence.values())
    rows = store.l1_rows([r for r, _ in (hits.ranked if cut else hits.ranked[: cfg.max_results])])
    standing = {r for r, row in rows.items() if row.type == "instruction"}
    relevant, summary = relevant_hits(hits, cfg.max_results, standing)
    return relevant, rows, strategy, summary


# The relevance decision, in two sentences: a message gets the first max_results candidates
# (k = 5), in the order of the learned candidate scorer (recall_order.py; session 16, it
# replaced the fused order and the two other-language slots), among those that stand out from
# their own background, a z-score of at least
# FLOOR_Z against the reference questions in the message's language in the better of the two
# models, or that hold most of its rare words (coverage >=
# COVERAGE_PASS). A message the query-intent classifier judges to be about the world
# (text.query_intent, log-odds > WORLD_MAX) gets only memories holding all its rare words when
# it asks for a fact, and when it asks how to do something the latter or a memory sharing one
# of its words at a z of WORLD_FLOOR_Z.
#
# Why this shape: missing what bears on the answer (a diet, an allergy, a rule) costs more than
# one short related line, and k is small, so being generous is cheap. No floor on the
# embeddings alone tells "the memory that bears on it" from "a memory close to it by chance"
# for a question nobody's memory answers (bench/relevance_dev.py separation: any floor on
# cosine or z that lets 10% of the dev unrelated questions through keeps under half of the
# related ones; the world and unrelated questions of the dev sets find a candidate at z 3.5
# median, 7.3 at the 90th percentile, above most related memories), so whether the answer depends on who asks is what
# separates them, and it is the one exception.
#
# Measured (session 11) on every set in tests/fixtures, all dev sets now, through the engine's
# own retrieve (bench/recall_diag.py collect, then replayed offline): the misses of issue 23's
# set (tests/fixtures/blind/recall_issue23.json, 70 memories) were mostly the classifier
# calling personal messages world questions ("Which colours can't I tell apart?", "Where do our
# apps get deployed?": 18 of 120 above 1.0) and cross-language memories ranked 6-30. The
# classifier now also learns from the recall sets' own labelled messages (scripts/
# train_query_intent.py fixture_queries; with issue 23's set held out its related messages
# above 1.0 went 18 -> 6 of 120); its log-odds are smaller since, so WORLD_MAX moved from 1.0:
# 0.5 and 0.6 measure the same on every dev set (issue 23's set paraphrase / inference /
# cross-language / unrelated injecting 38/40, 31/40, 32/40, 6/50; dev gate set world questions
# injecting 2/50; 175-memory scope unrelated 3/30) and the tie goes to recall (0.6); 0.7 lets
# one more world and two more unrelated questions in, 1.0 four and five more, 0.0 costs 2-3
# related per kind. FLOOR_Z 2.0 against 1.5: one related message more per kind, two more of
# the dev unrelated questions injecting; 2.5 loses 4-7 inference pairs.
#
# Session 12: the z-scores are measured against the reference questions in the message's
# language (retrieval.reference_z), 40 per language, which moves them (a narrower background:
# larger across languages, smaller for some same-language matches). Re-measured on every dev
# set (the above plus session 11's blind set, tests/fixtures/blind/
# recall_issue23_session11.json; 552 related messages, 265 unrelated or world; bench/
# recall_diag.py, replayed offline): FLOOR_Z 1.5 finds 453 related and lets 20 unrelated
# inject; 2.0 (the value before) 449 / 19; 1.75 451 / 20; 2.5 436 / 18. Recall goes first
# (issue 23): "推荐一道适合我的零食" for "我对花生过敏" measures z 1.6 in both models
# (tests/test_recall_relevance.py, a scope of three). WORLD_FLOOR_Z 4.0 stays: 4.5 keeps two
# more how-tos that share one word with a memory by chance out ("Go语言里怎么反转一个切片？",
# "用Python怎么反转链表？", 20 -> 17) but loses a lexical pair that names the user's setup
# ("GitHub Actions cache keeps missing" / the team's CI on GitHub Actions, z 4.0-4.5); 5.0
# "PostgreSQL怎么配置主从复制" too. WORLD_MAX 0.6 -> 0.4: with the lower floor more of the
# unrelated messages the classifier leans on as world questions pass on z ("日本新干线最快能跑多
# 快？" at log-odds 0.56); 0.4 finds 451 related (76 cross-language) with 16 unrelated
# injecting against 453 / 77 / 20 at 0.6; 0.3 445 / 74 / 14; 0.2 442 / 74 / 9 (session 11's
# set: paraphrase 31 -> 29 of 35, unrelated injecting 3 -> 2 of 24); 0.0 440 / 74 / 9.
# Re-measured after the classifier's retraining on 528 more queries (session 12; bench/
# recall_diag.py over all dev sets, 552 related / 406 unrelated or world): 0.4 finds 450
# related (78 cross-language) with 18 injecting.
# Session 13: the threshold is read from out-of-set log-odds instead of the dev sets' own
# (which the classifier was trained on): each of the ten recall sets scored by a classifier
# trained without it (scripts/train_query_intent.py --sweep; 600 personal, 259
# world messages). Personal messages called world (their memories cut) / world messages caught:
# 0.4 5.2% / 95.8%; 0.6 3.8% / 94.6%; 0.8 2.7% / 92.7%; 1.0 2.0% / 90.0%. Session 12's blind
# set, scored before it joined the training data, lost 11 of 115 related messages at 0.4 and
# 6 at 0.6, with all 55 unrelated caught at both. Through the engine on every dev set with the
# retrained classifier (bench/recall_diag.py): 0.4 finds 550 related with 26 of 461 unrelated or
# world injecting; 0.6 554 / 40; 0.8 555 / 42; but 0.6 lets 6 of the dev gate set's 50 world
# questions inject (2 at 0.4; tests/test_recall_world_questions.py), over the 10% the issue
# allows for unrelated messages, for 4 related of 600. Kept at 0.4. With session 13's two
# blind sets added to the training data (845 personal, 364 world out of set): 0.4 cuts 4.1% of
# the personal messages and catches 94.8% of the world ones; 0.6 3.2% / 94.2%; 0.8 2.2% / 91.8%.
# Session 14, tried and not kept: a fact question about the world getting no memory at all,
# even one holding its rare words ("Who was Sima Qian?" brings "The user's favourite historian
# is Sima Qian"). On the dev sets unrelated messages injecting went 43 -> 32 of 536 for one
# related message lost, but the classifier also reads impersonal questions about a team's or
# the user's own facts as world questions ("When is the staging cluster frozen?", log-odds 1.5;
# a bare topic, "火锅", 1.1), and those lost the memory that answers them: the holding of most
# rare words is what rescues them.
# Session 15: a fact question about the world passes on words alone only with a memory that
# holds all of them (ALL_WORDS; how-tos and personal messages keep COVERAGE_PASS). The unrelated
# messages that injected on the dev sets were mostly such questions naming a thing a memory also
# names ("Who designed the Inter typeface?" / the user's favourite typeface; "巴赫创作《哥德堡变
# 奏曲》的背景是什么？" / music the user writes to: coverage 0.60-0.73), while the team's and the
# user's own facts asked impersonally hold every word ("When is the staging cluster frozen?",
# "火锅"). Replayed on the 19 dev sets (bench/recall_diag.py, the shipped adapter): unrelated
# or world messages injecting 79 -> 62 of 926, one related message lost (a cross-language
# "where do our API specs live", log-odds 0.47), every other kind unchanged; requiring 0.8 or
# 0.9 instead of all measures the same.
WORLD_MAX = 0.4
FLOOR_Z = 1.5
COVERAGE_PASS = 0.6
WORLD_FLOOR_Z = 4.0
# Every rare word of the message (coverage is a float sum of IDF weights: 1.0 less rounding).
ALL_WORDS = 0.999


def coverage_needed(about_world: bool, how_to: float | None) -> float:
    """The share of the message's rare words a memory must hold to pass on words alone: all of
    them for a fact question about the world (the memory then names everything it asks
    about), COVERAGE_PASS for every other message."""
    fact_about_world = about_world and not (how_to is not None and how_to > 0)
    return ALL_WORDS if fact_about_world else COVERAGE_PASS


@dataclass
class Decision:
    """The relevance decision over one scope's candidates: all of them in the order recall
    offers them (recall_order.py), those that pass, and the summary for the answer."""

    ordered: list[tuple[int, float]]
    passing: list[tuple[int, float]]
    summary: dict[str, Any]


def decide(hits: Any, standing: set[int] | None = None) -> Decision:
    """Which hits pass the relevance decision (above). ``standing`` rows (the user's
    instructions to the assistant, which bear on every answer) always pass. Without a measured
    relevance (keyword-only recall, models not loaded) nothing is cut and the summary says so."""
    standing = standing or set()
    ev = hits.evidence
    measured = any(e.relevance is not None for e in ev.values())
    if not hits.ranked or not measured:
        ranked = list(hits.ranked)
        return Decision(ranked, ranked, {"applied": False, "considered": len(hits.ranked)})
    world = world_logit(hits.query_vectors)
    about_world = world is not None and world > WORLD_MAX
    how_to = howto_logit(hits.query_vectors) if about_world else None

    holding = coverage_needed(about_world, how_to)

    def passes(rowid: int) -> bool:
        e = ev.get(rowid)
        if e is None:
            return False
        if e.coverage >= holding:
            return True
        z = e.relevance_best if e.relevance_best is not None else float("-inf")
        if not about_world:
            return z >= FLOOR_Z
        return e.coverage > 0 and how_to is not None and how_to > 0 and z >= WORLD_FLOOR_Z

    ordered = recall_order.order(hits)
    passing = [(r, s) for r, s in ordered if r in standing or passes(r)]
    summary: dict[str, Any] = {"applied": True, "considered": len(hits.ranked)}
    if world is not None:
        # The query-intent classifiers' verdicts (log-odds): about the world (> WORLD_MAX: only
        # memories naming what it names) and, for such a question, a how-to (> 0).
        summary["world_question"] = round(world, 2)
        if how_to is not None:
            summary["how_to"] = round(how_to, 2)
    return Decision(ordered, passing, summary)


def relevant_hits(
    hits: Any, window: int, standing: set[int] | None = None
) -> tuple[list[tuple[int, float]], dict[str, Any]]:
    """The hits that pass the relevance decision (``decide``), at most ``window`` (every hit
    when nothing was measured to cut on), and the summary for the answer."""
    decision = decide(hits, standing)
    summary = decision.summary
    if not summary["applied"]:
        return decision.passing, summary
    kept = decision.passing[:window]
    summary["passed"] = len(kept)
    if standing:
        summary["standing_instructions"] = sum(1 for r, _ in kept if r in standing)
    if not kept:
        summary["note"] = "nothing stored is related to this query"
    return kept, summary


def stable_context(data_dir: Path, tool_names: dict[str, str] | None) -> str:
    """Persona + scene navigation + tool guide: it changes only when the persona or the scenes
    do, so a host's prompt cache keeps it. The guide is always there (the original left it out
    until something was found: the system part then changed when a scope got its first memory,
    and on every turn whose query found nothing, a one-character one or, keyword-only, one
    with no matching word; bench/injection_bench.py counted such a change)."""
    parts = []
    persona = _read_persona(data_dir)
    if persona:
        parts.append(f"<user-persona>\n{escape_tags(persona)}\n</user-persona>")
    nav = _scene_navigation(data_dir)
    if nav:
        parts.append(f"<scene-navigation>\n{escape_tags(nav)}\n</scene-navigation>")
    parts.append(tool_guide(tool_names))
    return "\n\n".join(parts)


def tool_guide(tool_names: dict[str, str] | None = None) -> str:
    names = {**DEFAULT_TOOL_NAMES, **(tool_names or {})}
    names = {k: escape_tags(one_line(str(v))).replace("`", "'") for k, v in names.items()}
    return (
        "<memory-tools-guide>\n"
        "## Long-term memory tools\n"
        "Memories above are a selection. When you need more, search:\n"
        f"- `{names['memory_search']}`: distilled facts about the user (preferences, rules,"
        " events). Use it first.\n"
        f"- `{names['conversation_search']}`: the original messages of past conversations, to"
        " check details or wording.\n"
        "Use at most 3 memory searches per turn in total (rephrase or switch tool between tries);"
        " after that, answer with what you have.\n"
        "</memory-tools-guide>"
    )


def _read_persona(data_dir: Path) -> str:
    try:
        text = (data_dir / "persona.md").read_text("utf-8")
    except OSError:
        return ""
    marker = text.find("\n## 🗺️ Scene Navigation")
    if marker >= 0:
        text = text[:marker].rstrip().removesuffix("---")
    return text.strip()


def _scene_navigation(data_dir: Path) -> str:
    try:
        scenes = json.loads((data_dir / ".metadata" / "scene_index.json").read_text("utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(scenes, list) or not scenes:
        return ""
    scenes = sorted(
        (s for s in scenes if isinstance(s, dict) and s.get("filename")),
        key=lambda s: -int(s.get("heat") or 0),
    )
    blocks = []
    for s in scenes:
        path = data_dir / "scene_blocks" / str(s["filename"])
        blocks.append(
            f"### Path: {path}\nheat: {int(s.get('heat') or 0)} | updated: {s.get('updated', '')}"
            f"\nSummary: {s.get('summary', '')}"
        )
    return "Scenes the user has been through (open a file for details):\n\n" + "\n\n".join(blocks)


def _memory_line(row: Memory, tz: tzinfo) -> str:
    # One memory, one line: a line break in stored text must not start a forged memory line.
    label = row.type + (f"|{one_line(row.scene_name)}" if row.scene_name else "")
    line = f"- [{escape_tags(label)}] {escape_tags(one_line(row.content))}"
    when = _activity(row, tz)
    return f"{line} ({when})" if when else line


def _activity(row: Memory, tz: tzinfo) -> str:
    """When the memory was true, labelled in the memory's own language."""
    start, end = _fmt_time(row.activity_start, tz), _fmt_time(row.activity_end, tz)
    zh = has_cjk(row.content)
    if start and end:
        return f"活动时间: {start} ~ {end}" if zh else f"when: {start} to {end}"
    if start:
        return f"活动时间: {start}起" if zh else f"since {start}"
    if end:
        return f"活动时间: 至{end}" if zh else f"until {end}"
    first = _fmt_time((row.timestamps or [""])[0] or row.created_at, tz)
    if not first:
        return ""
    return f"活动时间: {first}" if zh else f"when: {first}"


def _fmt_time(value: str, tz: tzinfo) -> str:
    if not value:
        return ""
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return ""
    if "T" not in value and " " not in value:
        return dt.date().isoformat()
    if dt.tzinfo is None:
        return dt.isoformat(timespec="seconds")
    local = dt.astimezone(tz)
    if local.hour == 0 and local.minute == 0 and local.second == 0:
        return local.date().isoformat()
    return local.isoformat(timespec="seconds")


def _budget(lines: list[str], per_memory: int, total: int) -> list[str]:
    """Apply the per-memory and total caps (0 = off), in code points."""
    out: list[str] = []
    used = 0
    mark = TRUNCATION_MARK
    for line in lines:
        if per_memory and per_memory > 0 and len(line) > per_memory:
            if per_memory > len(mark):
                line = line[: per_memory - len(mark)].rstrip() + mark
            else:
                line = line[:per_memory]
        if total and total > 0:
            remaining = total - used - (1 if out else 0)
            if remaining <= 0:
                break
            if len(line) > remaining:
                if remaining >= 40:
                    out.append(line[:remaining])
                break
            used += len(line) + (1 if len(out) else 0)
        out.append(line)
    return out

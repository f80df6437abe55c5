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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH ('.' = here)")
    ap.add_argument("--n", type=int, default=200, help="searches and recalls per tree")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--note", default="", help="what the trees are (commits, changes)")
    ap.add_argument("--out", type=Path, default=RESULTS / "conversation_search.json")
    args = ap.parse_args(argv)
    trees = [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else ".") for t in args.tree]
    src = syn.dataset("both-10k", N_L1, N_L0, log)
    queries = syn.gen_queries(args.warmup + args.n)
    tmp = Path(tempfile.mkdtemp(prefix="conv-search-", dir=OUT if OUT.exists() else None))
    gateways: list[tuple[str, Gateway]] = []
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "code": code_version(),
        "note": args.note,
        # What each tree is, not where it lay (a path of this machine): --note names them.
        "trees": {
            name: "this checkout" if path == "." else "--tree (see note)" for name, path in trees
        },
        "store": f"{N_L1} L1 + {N_L0} L0 in scope {SCOPE!r}, every row embedded by both models",
        "method": "all gateways up at once; each query sent to each gateway in turn:"
        " all the /search/conversations (limit 5), then all the /recall (extractionWaitMs 0)",
        "loadavg_start": loadavg(),
    }
    try:
        for label, path in trees:
            data = tmp / label / "data"
            syn.materialise(src, data, log)
            # "." is this checkout, named: the venv's installed package may be another one.
            tree = str(syn.ROOT) if path == "." else path
            gw = Gateway(data, env=tree_env(tree, False, label), label=f"conv-search-{label}")
            gateways.append((label, gw.start()))
        for label, gw in gateways:
            log(
                f"  {label}: ready in {gw.ready_s:.1f}s, quiet after {gw.wait_quiet()}s;"
                f" vector index {gw.get_health().get('vector_index')}"
            )
        clients = {label: Client(gw.port) for label, gw in gateways}
        search = {label: [] for label, _ in gateways}
        recall = {label: [] for label, _ in gateways}
        top5: dict[str, list[list[str]]] = {label: [] for label, _ in gateways}
        errors = {label: 0 for label, _ in gateways}
        for q in queries[: args.warmup]:
            for c in clients.values():
                c.post("/search/conversations", {"query": q, "scope": SCOPE, "limit": 5})
                c.post("/recall", {"query": q, "scope": SCOPE, "session_key": "bench-cs"})
        cpu: dict[str, dict[str, float]] = {label: {} for label, _ in gateways}

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
                        continue
                    if route == "search":
                        search[label].append(dt)
                        top5[label].append([str(it.get("id")) for it in body.get("items") or []])
                    else:
                        recall[label].append(dt)
            for label, gw in gateways:
                cpu[label][route] = gw.cpu_seconds() - cpu0[label]

        rounds("search")
        rounds("recall")
        first = trees[0][0]
        result["results"] = {}
        for label, gw in gateways:
            same = [
                len(set(a) & set(b)) / max(1, len(b))
                for a, b in zip(top5[label], top5[first], strict=False)
            ]
            result["results"][label] = {
                "search_conversations_ms": stats_ms(search[label]),
                "recall_ms": stats_ms(recall[label]),
                # The gateway's CPU (all threads) per request: barely moved by the machine's load.
                "gateway_cpu_ms_per_search": round(
                    cpu[label]["search"] * 1000 / max(1, len(search[label])), 2
                ),
                "gateway_cpu_ms_per_recall": round(
                    cpu[label]["recall"] * 1000 / max(1, len(recall[label])), 2
                ),
                "search_top5_shared_with_first_tree": round(sum(same) / max(1, len(same)), 3),
                "errors": errors[label],
                "vector_index": gw.get_health().get("vector_index"),
                # After both phases: what the in-memory L0 index costs in RAM.
                "rss_mib_after": gw.rss()["rss_mib"],
            }
        result["loadavg_end"] = loadavg()
    finally:
        for _, gw in gateways:
            gw.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8")
    log(table(result))
    log(f"load {result['loadavg_start']} -> {result['loadavg_end']}; written {args.out}")
    return 0


def table(result: dict) -> str:
    rows = [
        "| tree | /search/conversations p50 / p95 ms (n) | /recall p50 / p95 ms (n)"
        " | gateway CPU ms per search / recall | search top 5 shared with the first tree | RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in result["results"].items():
        s, c = r["search_conversations_ms"], r["recall_ms"]
        rows.append(
            f"| {label} | {s.get('p50')} / {s.get('p95')} ({s['n']}) | {c.get('p50')} /"
            f" {c.get('p95')} ({c['n']}) | {r['gateway_cpu_ms_per_search']} /"
            f" {r['gateway_cpu_ms_per_recall']} |"
            f" {r['search_top5_shared_with_first_tree']} | {r['rss_mib_after']} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())

"""What the vectors of captured tool results buy ``/search/conversations``, and what they cost.

Every message of the 52 recorded agent sessions (tests/fixtures/agent-sessions: user, assistant
and 426 tool results) is captured into one scope of a real gateway (default configuration, both
bundled models), turn by turn as a host would. The gateway's CPU from the first capture until its
embedding backlog is done is the cost; then the queries of a blind set
(tests/fixtures/blind/tool_rows_search.json, written by a helper who read the dataset only) are
asked of ``/search/conversations`` (limit 5, as the hosts' tool asks) with each recall strategy
the gateway offers: hybrid (the default), keyword only and embedding only, each on a gateway
restarted over the same data directory. Per kind of query: R@5 (a target message among the five).

The kinds: ``words`` (a tool result, the query shares its distinctive words), ``meaning`` (a tool
result described without them), ``zh`` (a Chinese query about an English tool result), ``said``
(a user or assistant message). Only aggregate figures are printed; the set itself never is.

Run: ``.venv/bin/python bench/tool_rows_search.py`` (writes bench/results/tool_rows_search.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gateway_bench import process_cpu_s  # noqa: E402

from tests.support.gateway import GatewayProcess  # noqa: E402

SESSIONS = ROOT / "tests" / "fixtures" / "agent-sessions" / "sessions.jsonl"
BLIND = ROOT / "tests" / "fixtures" / "blind" / "tool_rows_search.json"
RESULTS = ROOT / "bench" / "results" / "tool_rows_search.json"
SCOPE = "bench-tool-rows"
STRATEGIES = ("hybrid", "keyword", "embedding")


def turns(messages: list[dict[str, Any]], session: str) -> list[list[dict[str, Any]]]:
    """A session as a host captures it: one request per user turn, each message with an id
    naming its place (``<session>#<index>``) so a search result leads back to it."""
    out: list[list[dict[str, Any]]] = []
    for i, m in enumerate(messages):
        if m.get("role") == "system":
            continue
        if m.get("role") == "user" or not out:
            out.append([])
        out[-1].append({**m, "id": f"{session}#{i}", "timestamp": 1_700_000_000_000 + i})
    return out


def capture_all(gw: GatewayProcess, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    assert gw.proc is not None
    cpu0, t0 = process_cpu_s(gw.proc.pid), time.perf_counter()
    requests = 0
    with gw.client(timeout=60.0) as client:
        for s in sessions:
            for batch in turns(s["messages"], s["id"]):
                r = client.post(
                    "/capture",
                    json={"scope": SCOPE, "session_key": s["id"], "messages": batch},
                )
                r.raise_for_status()
                requests += 1
    captured_s = time.perf_counter() - t0
    gw.wait_embedded(timeout=3600)
    return {
        "capture_requests": requests,
        "capture_s": round(captured_s, 1),
        "until_embedded_s": round(time.perf_counter() - t0, 1),
        "gateway_cpu_s": round(process_cpu_s(gw.proc.pid) - cpu0, 1),
    }


def ask(gw: GatewayProcess, queries: list[dict[str, Any]]) -> dict[str, Any]:
    hits: dict[str, list[int]] = defaultdict(list)
    tool_share: list[float] = []
    with gw.client(timeout=60.0) as client:
        for q in queries:
            r = client.post(
                "/search/conversations", json={"scope": SCOPE, "query": q["query"], "limit": 5}
            )
            r.raise_for_status()
            items = r.json()["items"]
            want = {f"{q['session']}#{t}" for t in q["targets"]}
            got = [str(it.get("message_id")) for it in items]
            hits[q["kind"]].append(int(any(g in want for g in got)))
            if items:
                tool_share.append(sum(it.get("role") == "tool" for it in items) / len(items))
    out = {k: {"n": len(v), "r_at_5": round(sum(v) / len(v), 3)} for k, v in sorted(hits.items())}
    everything = [h for v in hits.values() for h in v]
    out["all"] = {"n": len(everything), "r_at_5": round(sum(everything) / len(everything), 3)}
    out["tool_share_of_results"] = round(sum(tool_share) / max(1, len(tool_share)), 3)
    return out


def check_targets(queries: list[dict[str, Any]], sessions: list[dict[str, Any]]) -> int:
    """Targets whose message is not of the role its kind says (a set/fixture mismatch)."""
    by_id = {s["id"]: s["messages"] for s in sessions}
    bad = 0
    for q in queries:
        for t in q["targets"]:
            role = by_id[q["session"]][t].get("role")
            want = ("user", "assistant") if q["kind"] == "said" else ("tool",)
            bad += role not in want
    return bad


def code_version() -> str:
    """The commit of the package the gateways run (PYTHONPATH's first tree, else this one)."""
    import memory_tencentdb

    tree = Path(memory_tencentdb.__file__).resolve().parents[1]
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=tree, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", type=Path, default=BLIND)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    sessions = [json.loads(line) for line in SESSIONS.read_text("utf-8").splitlines() if line]
    queries = json.loads(args.set.read_text("utf-8"))["queries"]
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "code": code_version(),
        "set": args.set.name,
        "queries": len(queries),
        "targets_of_the_wrong_role": check_targets(queries, sessions),
        "messages": sum(len(s["messages"]) for s in sessions),
        "tool_messages": sum(m.get("role") == "tool" for s in sessions for m in s["messages"]),
        "strategies": {},
    }
    with tempfile.TemporaryDirectory(prefix="tool-rows-") as tmp:
        data = Path(tmp) / "data"
        gw = GatewayProcess(data).start()
        try:
            result["capture"] = capture_all(gw, sessions)
            result["health_embedding"] = gw.wait_healthy().get("embedding", {})
        finally:
            gw.stop()
        for strategy in STRATEGIES:
            gw = GatewayProcess(data, env={"TDAI_RECALL_STRATEGY": strategy}).start()
            try:
                gw.wait_embedded(timeout=600)
                result["strategies"][strategy] = ask(gw, queries)
            finally:
                gw.stop()
            print(strategy, json.dumps(result["strategies"][strategy]), flush=True)
    print(json.dumps(result["capture"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

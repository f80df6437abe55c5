"""Offload benchmark: tokens saved, exact read-back and route latency, over HTTP, on a real gateway.

The shared real sessions (tests/fixtures/agent-sessions/: 11 SWE-agent coding sessions, 41
tau-bench airline sessions) are replayed turn by turn the way a host does it
(tests/support/offload_replay.py): every tool result through ``/offload/tool-result`` (its stub
kept when one is answered), before every model call ``/offload/assemble`` with the list so far
and a token budget. No LLM is configured.

1. Tokens sent over all model calls vs keeping every message verbatim, chained (the original's
   long-session setting: sessions appended into one, one system prompt) and single, at 32k and
   128k budgets. Both sides are counted the same way (cl100k over every text, tool name and
   argument; the tool guide a host adds to its system prompt is counted as sent). Calls over
   budget (engine estimate and independent count), and the share of shortened/dropped results
   that ``/offload/read`` returns byte-exact.
2. ``/offload/assemble`` p50 / p95 / max for lists of 100, 300 and 1,000 messages (prefixes of
   the chained sessions, budget 32k), same list repeated, first call reported apart.
3. ``/offload/tool-result`` p50 / p95 for distinct 50 KB results.

Targets (issue 9): >= 61% saved on the chained coding (SWE-agent) sessions at 32k, 0 over budget,
100% exact read-back, assemble p50 <= 50 ms at 300 messages.

Run: ``.venv/bin/python bench/offload_bench.py`` (``--quick`` for a smoke run, written to
``bench/out/offload-partial.json``; ``--no-latency`` for replays only). Writes
``bench/results/offload.json`` and prints a summary, the RESULTS.md table and where the tokens
sent go (system, user, assistant, verbatim tool results, stubs, canvas, history blocks, guide).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from tests.support.agent_sessions import chain, load_sessions, tool_results  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.offload_replay import (  # noqa: E402
    content_tokens,
    is_canvas,
    is_history_block,
    read_back_problems,
    replay,
)

RESULTS = BENCH / "results"
OUT = BENCH / "out"

_COUNT_CACHE: dict[str, int] = {}


def count(messages: list[dict[str, Any]]) -> int:
    """content_tokens, cached per message (the verbatim prefixes repeat every message)."""
    total = 0
    for m in messages:
        key = json.dumps(m, sort_keys=True, ensure_ascii=False)
        n = _COUNT_CACHE.get(key)
        if n is None:
            n = _COUNT_CACHE[key] = content_tokens([m])
        total += n
    return total


STUB_MARKS = ("[Offloaded tool result", "[No result for this tool call")


def kind_of(m: dict[str, Any]) -> str:
    """Where a sent message's tokens go: the bench prints the totals per kind."""
    if is_canvas(m):
        return "canvas"
    if is_history_block(m):
        return "history"
    role = m.get("role")
    if role in ("tool", "toolResult"):
        c = m.get("content")
        text = c if isinstance(c, str) else "".join(b.get("text", "") for b in c or [])
        return "tool stub" if text.startswith(STUB_MARKS) else "tool verbatim"
    if role == "assistant":
        return "assistant"
    return "system" if role == "system" else "user"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k]


def run_replay(client, msgs, name: str, budget: int, fmt: str = "openai") -> dict[str, Any]:
    system_tokens = 0
    if fmt == "agent":
        system_tokens = count([m for m in msgs if m["role"] == "system"])
    t0 = time.perf_counter()
    rep = replay(
        client,
        msgs,
        session_key=f"agent:bench:{name}-{uuid.uuid4().hex[:6]}",
        scope=f"bench-{name}",
        budget=budget,
        fmt=fmt,
        system_tokens=system_tokens,
    )
    wall = time.perf_counter() - t0
    read_bad = read_back_problems(client, rep)
    prefix = [0]  # tokens of the recording up to each index, every message verbatim
    for m in msgs:
        prefix.append(prefix[-1] + count([m]))
    verbatim = sent = estimated = over_est = over_count = verbatim_over = 0
    levels: dict[str, int] = {}
    where: dict[str, int] = {}
    for call in rep.calls:
        v = prefix[call.at]
        addition = call.answer.get("system_addition") or ""
        guide_tokens = content_tokens([{"content": addition}]) if addition else 0
        s = count(call.answer["messages"]) + system_tokens + guide_tokens
        where["guide"] = where.get("guide", 0) + guide_tokens
        where["system"] = where.get("system", 0) + system_tokens
        for m in call.answer["messages"]:
            k = kind_of(m)
            where[k] = where.get(k, 0) + count([m])
        verbatim += v
        sent += s
        estimated += call.answer["estimated_tokens"]
        over_est += call.answer["estimated_tokens"] > budget
        over_count += s > budget
        verbatim_over += v > budget
        lvl = call.answer.get("level", "?")
        levels[lvl] = levels.get(lvl, 0) + 1
    return {
        "name": name,
        "format": fmt,
        "budget": budget,
        "messages": len(msgs),
        "model_calls": len(rep.calls),
        "tool_results": len(rep.raw_results),
        "tokens_verbatim": verbatim,
        "tokens_sent": sent,
        "tokens_estimated_by_gateway": estimated,
        "saved_share": round(1 - sent / verbatim, 4) if verbatim else 0.0,
        "over_budget_calls_estimate": over_est,
        "over_budget_calls_counted": over_count,
        "verbatim_over_budget_calls": verbatim_over,
        "results_shortened_or_dropped": len(rep.changed_ids),
        "read_back_exact": len(rep.changed_ids) - len(read_bad),
        "read_back_exact_share": (
            round(1 - len(read_bad) / len(rep.changed_ids), 4) if rep.changed_ids else 1.0
        ),
        "levels": levels,
        "tokens_sent_by_kind": dict(sorted(where.items(), key=lambda kv: -kv[1])),
        "assemble_ms_p50": round(pct([c.elapsed_ms for c in rep.calls], 0.5), 2),
        "assemble_ms_max": round(max((c.elapsed_ms for c in rep.calls), default=0), 2),
        "problems": rep.problems[:20] + read_bad[:20],
        "problem_count": len(rep.problems) + len(read_bad),
        "wall_s": round(wall, 1),
    }


def merge(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Single sessions summed into one line."""
    keys = (
        "model_calls",
        "tool_results",
        "tokens_verbatim",
        "tokens_sent",
        "tokens_estimated_by_gateway",
        "over_budget_calls_estimate",
        "over_budget_calls_counted",
        "verbatim_over_budget_calls",
        "results_shortened_or_dropped",
        "read_back_exact",
        "problem_count",
    )
    out: dict[str, Any] = {"name": name, "sessions": len(runs), "budget": runs[0]["budget"]}
    for k in keys:
        out[k] = sum(r[k] for r in runs)
    out["format"] = runs[0]["format"]
    out["saved_share"] = round(1 - out["tokens_sent"] / out["tokens_verbatim"], 4)
    n = out["results_shortened_or_dropped"]
    out["read_back_exact_share"] = round(out["read_back_exact"] / n, 4) if n else 1.0
    levels: dict[str, int] = {}
    for r in runs:
        for k, v in r["levels"].items():
            levels[k] = levels.get(k, 0) + v
    out["levels"] = levels
    where: dict[str, int] = {}
    for r in runs:
        for k, v in r["tokens_sent_by_kind"].items():
            where[k] = where.get(k, 0) + v
    out["tokens_sent_by_kind"] = dict(sorted(where.items(), key=lambda kv: -kv[1]))
    out["problems"] = [p for r in runs for p in r["problems"]][:20]
    return out


def prefix_of(msgs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ~n messages, cut just before an assistant message (a model-call point)."""
    k = min(n, len(msgs))
    while k < len(msgs) and msgs[k]["role"] != "assistant":
        k += 1
    return msgs[:k]


def assemble_latency(client, msgs, n: int, reps: int, budget: int) -> dict[str, Any]:
    lst = prefix_of(msgs, n)
    key, scope = f"agent:bench:lat{n}-{uuid.uuid4().hex[:6]}", "bench-latency"
    live = []
    stubs = {}
    for tr in tool_results(lst):
        r = client.post(
            "/offload/tool-result",
            json={
                "session_key": key,
                "scope": scope,
                "tool_call_id": tr.tool_call_id,
                "tool_name": tr.tool_name,
                "arguments": tr.arguments,
                "result": tr.result,
            },
        )
        r.raise_for_status()
        if r.json().get("replacement") is not None:
            stubs[tr.tool_call_id] = r.json()["replacement"]
    for m in lst:
        if m["role"] == "tool" and m["tool_call_id"] in stubs:
            live.append({**m, "content": stubs[m["tool_call_id"]]})
        else:
            live.append(m)
    body = {"session_key": key, "scope": scope, "messages": live, "token_budget": budget}
    times, levels = [], set()
    first = None
    for i in range(reps + 1):
        t0 = time.perf_counter()
        r = client.post("/offload/assemble", json=body)
        ms = (time.perf_counter() - t0) * 1000
        r.raise_for_status()
        levels.add(r.json().get("level"))
        if i == 0:
            first = ms
        else:
            times.append(ms)
    return {
        "messages": len(lst),
        "input_tokens": count(live),
        "budget": budget,
        "levels": sorted(levels),
        "first_ms": round(first or 0, 2),
        "p50_ms": round(pct(times, 0.5), 2),
        "p95_ms": round(pct(times, 0.95), 2),
        "max_ms": round(max(times), 2),
        "calls": len(times),
        "body_bytes": len(json.dumps(body)),
    }


def tool_result_latency(client, reps: int) -> dict[str, Any]:
    corpus = "\n".join(tr.result for s in load_sessions() for tr in tool_results(s.messages))
    size = 50 * 1024
    times = []
    key, scope = f"agent:bench:tr-{uuid.uuid4().hex[:6]}", "bench-tool-result"
    for i in range(reps + 5):
        off = (i * 7919) % (len(corpus) - size)
        text = f"run {i}\n" + corpus[off : off + size]
        t0 = time.perf_counter()
        r = client.post(
            "/offload/tool-result",
            json={
                "session_key": key,
                "scope": scope,
                "tool_call_id": f"call_bench_{i}",
                "tool_name": "bash",
                "arguments": {"command": f"cat big-{i}.log"},
                "result": text,
            },
        )
        ms = (time.perf_counter() - t0) * 1000
        r.raise_for_status()
        if i >= 5:  # warm-up
            times.append(ms)
    return {
        "result_bytes": size,
        "calls": len(times),
        "p50_ms": round(pct(times, 0.5), 2),
        "p95_ms": round(pct(times, 0.95), 2),
        "max_ms": round(max(times), 2),
    }


def git_commit() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "memory_tencentdb"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return rev + (" (memory_tencentdb/ has uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def table(res: dict[str, Any]) -> str:
    lines = [
        "| run | budget | calls | tokens verbatim | tokens sent | saved | over budget | "
        "read back exact | levels |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["replays"]:
        lv = ", ".join(f"{k} {v}" for k, v in sorted(r["levels"].items()))
        lines.append(
            f"| {r['name']} ({r['format']}) | {r['budget'] // 1000}k | {r['model_calls']} | "
            f"{r['tokens_verbatim']:,} | {r['tokens_sent']:,} | **{r['saved_share']:.1%}** | "
            f"{r['over_budget_calls_estimate']} / {r['over_budget_calls_counted']} | "
            f"{r['read_back_exact']} of {r['results_shortened_or_dropped']} | {lv} |"
        )
    lines += [
        "",
        "| /offload/assemble | messages | input tokens | level | first | p50 | p95 | max |",
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in res["assemble_latency"]:
        lines.append(
            f"| {r['messages']} messages | {r['messages']} | {r['input_tokens']:,} | "
            f"{'/'.join(r['levels'])} | {r['first_ms']} ms | **{r['p50_ms']} ms** | "
            f"{r['p95_ms']} ms | {r['max_ms']} ms |"
        )
    lines.append("\nTokens sent, by kind of message (summed over the run's model calls):\n")
    for r in res["replays"]:
        total = r["tokens_sent"] or 1
        parts = ", ".join(
            f"{k} {v:,} ({v / total:.0%})" for k, v in r.get("tokens_sent_by_kind", {}).items()
        )
        lines.append(f"- {r['name']} ({r['format']}) {r['budget'] // 1000}k: {parts}")
    t = res["tool_result_latency"]
    lines.append(
        f"\n/offload/tool-result, 50 KB result: p50 **{t['p50_ms']} ms**, p95 {t['p95_ms']} ms, "
        f"max {t['max_ms']} ms ({t['calls']} calls)."
    )
    return "\n".join(lines)


def scale(sizes: tuple[int, ...] = (8_000, 32_000, 100_000)) -> dict[str, Any]:
    """Issue 21: one ``/offload/assemble`` of N plain messages (alternating user / assistant,
    ~10 tokens each, budget 8k: almost all leave the context and are recorded), over HTTP on a
    fresh gateway with ``assembleMaxMessages`` raised to allow 100k. Wall time, files and bytes
    written to the scope's refs/ (before issue 21: one file per removed message)."""
    work = Path(tempfile.mkdtemp(prefix="offload-scale-", dir=OUT))
    gw = GatewayProcess(
        work / "data", env={"TDAI_MEMORY__OFFLOAD__ASSEMBLE_MAX_MESSAGES": "200000"}
    )
    gw.start()
    out: dict[str, Any] = {}
    try:
        with gw.client(timeout=900) as c:
            for n in sizes:
                scope = f"scale-{n}"
                msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
                for i in range(n):
                    role = "user" if i % 2 == 0 else "assistant"
                    msgs.append({"role": role, "content": f"message {i} with a few words"})
                body = {"session_key": "s", "scope": scope, "messages": msgs, "token_budget": 8_000}
                t0 = time.perf_counter()
                r = c.post("/offload/assemble", json=body)
                wall = time.perf_counter() - t0
                data_dir = Path(c.get("/offload/guide", params={"scope": scope}).json()["data_dir"])
                refs = list((data_dir / "refs").glob("*"))
                out[str(n)] = {
                    "status": r.status_code,
                    "wall_s": round(wall, 2),
                    "removed": (r.json().get("stats") or {}).get("removed"),
                    "ref_files": len(refs),
                    "ref_bytes": sum(p.stat().st_size for p in refs),
                    "request_bytes": len(json.dumps(body)),
                }
                print(f"  assemble of {n} messages: {out[str(n)]}", flush=True)
    finally:
        gw.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--scale", action="store_true", help="only assemble of 8k/32k/100k messages (issue 21)"
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: SWE chain only, few reps")
    ap.add_argument("--no-latency", action="store_true", help="replays only (iterations)")
    ap.add_argument("--table", type=Path, help="print the RESULTS.md table of a results file")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text("utf-8"))))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    if args.scale:
        res = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": git_commit(),
            "machine": f"{os.cpu_count()} CPU, load {os.getloadavg()}",
            "scale": scale(),
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "offload_scale.json").write_text(json.dumps(res, indent=2) + "\n", "utf-8")
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="offload-bench-", dir=OUT))
    gw = GatewayProcess(work / "data")
    gw.start()
    t_start = time.perf_counter()
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(),
        "machine": f"{os.cpu_count()} CPU, {platform.platform()}, Python {platform.python_version()}",
        "llm": "none",
        "replays": [],
    }
    try:
        with gw.client(timeout=300) as c:
            health = c.get("/health").json()
            res["tokenizer"] = (health.get("offload") or {}).get("tokenizer")
            swe, tau, every = load_sessions("swe"), load_sessions("tau"), load_sessions()
            budgets = (32_000,) if args.quick else (32_000, 128_000)
            chains = [("chained SWE-agent", chain(swe))]
            if not args.quick:
                chains += [("chained tau-bench", chain(tau)), ("chained all 52", chain(every))]
            for budget in budgets:
                for name, msgs in chains:
                    print(f"replay {name} at {budget}", flush=True)
                    res["replays"].append(run_replay(c, msgs, name, budget))
                if args.quick:
                    print(f"replay single SWE-agent sessions at {budget}", flush=True)
                    runs = [
                        run_replay(c, s.messages, f"single-SWE-agent-{i}", budget)
                        for i, s in enumerate(swe)
                    ]
                    res["replays"].append(merge(f"single SWE-agent ({len(swe)})", runs))
                else:
                    print(f"replay chained SWE-agent (AgentMessage) at {budget}", flush=True)
                    res["replays"].append(
                        run_replay(c, chain(swe), "chained SWE-agent", budget, "agent")
                    )
                    for kind, group in (("SWE-agent", swe), ("tau-bench", tau)):
                        print(f"replay single {kind} sessions at {budget}", flush=True)
                        runs = [
                            run_replay(c, s.messages, f"single-{kind}-{i}", budget)
                            for i, s in enumerate(group)
                        ]
                        res["replays"].append(merge(f"single {kind} ({len(group)})", runs))
            reps = 5 if args.quick else 30
            big = chain(every)
            res["assemble_latency"] = []
            for n in () if args.no_latency else (100, 300, 1000):
                print(f"assemble latency, {n} messages", flush=True)
                res["assemble_latency"].append(assemble_latency(c, big, n, reps, 32_000))
            print("tool-result latency, 50 KB", flush=True)
            res["tool_result_latency"] = tool_result_latency(
                c, 3 if args.no_latency else 10 if args.quick else 50
            )
            off = dict(c.get("/health").json().get("offload") or {})
            off.pop("data_dir", None)  # a path of this machine, not a figure
            res["health_offload"] = off
    finally:
        gw.stop()
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    swe32 = next(
        r
        for r in res["replays"]
        if r["name"] == "chained SWE-agent" and r["budget"] == 32_000 and r["format"] == "openai"
    )
    lat300 = next(
        (r for r in res["assemble_latency"] if r["messages"] >= 300), {"p50_ms": float("nan")}
    )
    over = sum(
        r["over_budget_calls_estimate"] + r["over_budget_calls_counted"] for r in res["replays"]
    )
    exact = all(r["read_back_exact_share"] == 1.0 for r in res["replays"])
    res["targets"] = {
        "chained SWE-agent at 32k saves >= 61%": swe32["saved_share"] >= 0.61,
        "0 calls over budget": over == 0,
        "100% exact read-back": exact,
        "assemble p50 <= 50 ms at 300 messages": lat300["p50_ms"] <= 50,
    }
    path = (OUT / "offload-partial.json") if args.quick else (RESULTS / "offload.json")
    path.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(table(res))
    print("\ntargets:")
    for k, v in res["targets"].items():
        print(f"  {'MET    ' if v else 'NOT MET'} {k}")
    print(f"\nwrote {path} ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

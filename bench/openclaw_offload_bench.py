"""Time the OpenClaw bridge's context offload adds: per tool result and per model call.

Starts the real gateway (tests/support/gateway.py), writes the inputs (tool outputs of 2-45 KB in
English and Chinese; the 11 SWE-agent sessions of tests/fixtures/agent-sessions chained into one
session, as OpenClaw AgentMessages), then runs bench/openclaw_offload_bench.node.mjs, which loads
the real bridge with a stand-in for OpenClaw's plugin api and awaits its tool-result middleware
and its context engine's assemble as OpenClaw does: gateway up, slow (2 s, 6 s), down, hung, and
offload off. Node 24 from the OpenClaw test install is used when present, else the node on PATH.

    .venv/bin/python bench/openclaw_offload_bench.py [--quick]

Prints a table and writes bench/results/openclaw_offload.json (``--quick``: bench/out/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.openclaw_overhead import node_binary  # noqa: E402
from tests.openclaw.harness import OPENCLAW_VERSION  # noqa: E402
from tests.support.agent_sessions import chain, load_sessions, to_agent_messages  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.tool_agent import make_text  # noqa: E402

RESULT = ROOT / "bench" / "results" / "openclaw_offload.json"
QUICK_RESULT = ROOT / "bench" / "out" / "openclaw_offload-quick.json"  # never the recorded one
TOKEN_BUDGET = 32_000  # what OpenClaw would hand the engine for a 64 K-token model


def inputs() -> dict:
    docs = [
        ("small-2k-en", make_text(2_000, "en", 1)),
        ("log-20k-en", make_text(20_000, "en", 2)),
        ("log-17k-zh", make_text(8_000, "zh", 3)),
        ("trace-45k-mixed", make_text(30_000, "en", 4) + "\n" + make_text(5_000, "zh", 4)),
    ]
    _, session = to_agent_messages(chain(load_sessions("swe")))
    return {
        "docs": [{"name": name, "text": text} for name, text in docs],
        "session": session,
        "token_budget": TOKEN_BUDGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per scenario")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="oc-offload-bench-") as tmp:
        data = inputs()
        inputs_file = Path(tmp) / "inputs.json"
        inputs_file.write_text(json.dumps(data, ensure_ascii=False), "utf-8")
        gateway = GatewayProcess(Path(tmp) / "data").start()
        try:
            cmd = [node_binary(), str(ROOT / "bench" / "openclaw_offload_bench.node.mjs")]
            if args.quick:
                cmd.append("--quick")
            env = {
                **os.environ,
                "MEMORY_TENCENTDB_GATEWAY_URL": gateway.base_url,
                "MEMORY_TENCENTDB_DATA_DIR": str(gateway.data_dir),
                "MEMORY_TENCENTDB_BENCH_INPUTS": str(inputs_file),
                "OPENCLAW_STATE_DIR": str(Path(tmp) / "openclaw-state"),
            }
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise SystemExit(f"benchmark failed:\n{done.stderr[-4000:]}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            gateway.stop()

    tool_calls = sum(1 for m in data["session"] if m["role"] == "toolResult")
    result = {
        "benchmark": "openclaw_offload",
        "what": (
            "time OpenClaw waits on the bridge's offload: the tool-result middleware per tool "
            "result (/offload/tool-result) and the context engine's assemble per model call "
            "(/offload/assemble)"
        ),
        "bridge_defaults": {
            "tool_result_timeout_ms": 3000,
            "assemble_timeout_ms": 4000,
            "breaker": "3 failures, 30 s",
        },
        "session": {
            "source": "tests/fixtures/agent-sessions: the 11 SWE-agent sessions chained",
            "messages": len(data["session"]),
            "tool_results": tool_calls,
            "token_budget": TOKEN_BUDGET,
        },
        "openclaw_payloads": OPENCLAW_VERSION,
        "quick": args.quick,
        "machine": {
            "node": measured["node"],
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "platform": platform.platform(),
        },
        "tool_results": measured["tool_results"],
        "sessions": measured["sessions"],
    }
    target = QUICK_RESULT if args.quick else RESULT
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=1) + "\n", "utf-8")

    load = result["machine"]["loadavg_1m"]
    print(f"OpenClaw bridge offload overhead (node {measured['node']}, load {load})")
    print("per tool result (middleware -> /offload/tool-result), p50 / p95 ms:")
    names = [d["name"] for d in data["docs"]]
    print(f"{'gateway':10} " + " ".join(f"{n:>20}" for n in names))
    for scenario, r in measured["tool_results"].items():
        cells = [
            f"{r['per_output'][n]['p50_ms']:>9.1f} / {r['per_output'][n]['p95_ms']:>7.1f}"
            for n in names
        ]
        print(f"{scenario:10} " + " ".join(f"{c:>20}" for c in cells))
    print("per model call (engine assemble -> /offload/assemble), replayed session:")
    print(
        f"{'gateway':12} {'calls':>5} {'p50':>9} {'p95':>9} {'max':>9} {'first':>9}"
        f" {'tool p50':>9} {'kept':>6}"
    )
    for scenario, s in measured["sessions"].items():
        a = s["assemble"]
        tool = s["tool_result"]["p50_ms"] if s["tool_result"] else 0.0
        print(
            f"{scenario:12} {s['model_calls']:>5} {a['p50_ms']:>7.1f}ms {a['p95_ms']:>7.1f}ms"
            f" {a['max_ms']:>7.1f}ms {s['first_assemble_ms']:>7.1f}ms {tool:>7.1f}ms"
            f" {s['assembled_share']!s:>6}"
        )
    print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

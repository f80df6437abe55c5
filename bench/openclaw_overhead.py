"""Time the OpenClaw bridge adds to a turn: its hook round trips, gateway up, slow, down, hung.

Starts the real gateway (tests/support/gateway.py) with a few memories in the agent's scope,
then runs bench/openclaw_overhead.node.mjs, which replays recorded OpenClaw 2026.9 hook payloads
through the bridge's handlers, awaited as the host awaits them: before_prompt_build (recall)
then agent_end (capture). Node 24 from the OpenClaw test install is used when present (what
OpenClaw runs on), else the node on PATH.

    .venv/bin/python bench/openclaw_overhead.py [--quick]

Prints a table and writes bench/results/openclaw_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.openclaw.harness import OPENCLAW_VERSION, OpenClawInstall  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402

RESULT = ROOT / "bench" / "results" / "openclaw_overhead.json"
MEMORIES = [
    ("persona", "The user's favorite color is teal."),
    ("instruction", "The user prefers short answers."),
    ("episodic", "The user moved to Lisbon last spring."),
]


def node_binary() -> str:
    install = OpenClawInstall.find()
    if install is not None:
        return str(install.node)
    found = shutil.which("node")
    if found is None:
        raise SystemExit("node not found")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns per scenario")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="oc-bench-") as tmp:
        gateway = GatewayProcess(Path(tmp) / "data").start()
        try:
            with gateway.client() as client:
                for kind, content in MEMORIES:
                    client.post(
                        "/memories",
                        json={
                            "content": content,
                            "type": kind,
                            "session_key": "agent:main:seed",
                            "scope": "main",
                        },
                    ).raise_for_status()
            cmd = [node_binary(), str(ROOT / "bench" / "openclaw_overhead.node.mjs")]
            if args.quick:
                cmd.append("--quick")
            env = {**os.environ, "MEMORY_TENCENTDB_GATEWAY_URL": gateway.base_url}
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"benchmark failed:\n{done.stderr[-4000:]}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            gateway.stop()

    result = {
        "benchmark": "openclaw_overhead",
        "what": "time a turn waits on the OpenClaw bridge: before_prompt_build (/recall) + agent_end (/capture)",
        "bridge_defaults": {
            "recall_timeout_ms": 2500,
            "capture_timeout_ms": 5000,
            "breaker": "3 failures, 30 s",
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
        "scenarios": measured["scenarios"],
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=1) + "\n", "utf-8")

    print(
        f"OpenClaw bridge overhead per turn (node {measured['node']}, load {result['machine']['loadavg_1m']})"
    )
    print(
        f"{'gateway':10} {'turns':>5} {'recall p50':>11} {'capture p50':>12} {'turn p50':>9} {'turn p95':>9} {'first':>9}"
    )
    for name, s in measured["scenarios"].items():
        print(
            f"{name:10} {s['turns']:>5} {s['recall']['p50_ms']:>9.1f}ms {s['capture']['p50_ms']:>10.1f}ms"
            f" {s['per_turn_total']['p50_ms']:>7.1f}ms {s['per_turn_total']['p95_ms']:>7.1f}ms"
            f" {s['first_turn_ms']:>7.1f}ms"
        )
    print(f"wrote {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Per-turn overhead the Hermes provider adds to a turn: prefetch + capture enqueue.

These are the two provider calls that sit on Hermes's turn path (prefetch before the LLM call,
sync_turn right after the reply; sync_turn only enqueues, the capture itself runs on the
provider's own worker). Measured with the real gateway:

- up:      the gateway answers directly (seeded with memories so recall has work to do);
- slow:    every POST is delayed 2 s by a local proxy (GET /health is not), budget 2.5 s;
- stalled: every POST is delayed 10 s: the budget cuts each recall, then the breaker opens;
- down:    nothing listens on the port.

With the real Hermes (``hermes chat -Q -q`` one-shot runs, fake LLM), whole-run wall time:

- one_shot_warm:   a gateway is already running (the baseline);
- one_shot_cold:   none is running: the provider starts one and the first turn waits (within
                   its first-turn budget) for the models; the wait is read from provider.log;
- one_shot_frozen: the gateway is stopped with SIGSTOP: what each run adds over the baseline.

    .venv/bin/python bench/hermes_overhead.py [--quick] [--turns N] [--one-shot-runs N]

Prints a table and writes bench/results/hermes_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_plugin.provider import MemoryTencentdbProvider  # noqa: E402
from tests.hermes.harness import HermesHome, hermes_venv  # noqa: E402
from tests.hermes.slow_proxy import SlowProxy  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess, free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "hermes_overhead.json"
SCOPE = "hermes:bench"
TOPICS = [
    "prefers green tea over coffee",
    "deploys with kubectl to the staging cluster blue-heron",
    "writes Rust at work and Python at home",
    "has a dog called Miso",
    "wants answers in short bullet points",
    "is learning Japanese, JLPT N3 level",
    "runs the nightly backup at 02:00 UTC",
    "uses neovim with the helix keymap",
]
QUERIES = [
    "what should I drink?",
    "how do we deploy?",
    "which language for the CLI tool?",
    "remind me about my pet",
    "how do I like answers formatted?",
    "help me practise Japanese",
    "when does the backup run?",
    "set up my editor",
]


def seed(base_url: str, n: int, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=base_url, headers=headers, timeout=60, trust_env=False) as c:
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            c.post(
                "/memories",
                json={
                    "content": f"User {topic} (note {i})",
                    "type": "persona" if i % 3 else "episodic",
                    "session_key": "bench-seed",
                    "scope": SCOPE,
                },
            ).raise_for_status()


def configure(port: int, home: Path, data_dir: Path) -> None:
    """Point the provider at ``port`` (our gateway's data dir) and forbid it to start one."""
    for key in list(os.environ):
        if key.startswith(("MEMORY_TENCENTDB_", "HERMES_", "TDAI_")):
            del os.environ[key]
    os.environ.update(
        {
            "HERMES_HOME": str(home),
            "TDAI_DATA_DIR": str(data_dir),
            "MEMORY_TENCENTDB_GATEWAY_PORT": str(port),
            "MEMORY_TENCENTDB_AUTO_START": "0",
            "MEMORY_TENCENTDB_SCOPE": SCOPE,
        }
    )


def one_shot(tmp: Path, runs: int) -> dict[str, Any]:
    """Wall time of real ``hermes chat -Q -q`` runs: warm, cold start, frozen gateway."""
    out: dict[str, Any] = {}
    with FakeLLM(default_reply="FAKE-REPLY") as llm:
        home = HermesHome.create(tmp / "one-shot", llm.base_url, free_port())

        def run(text: str) -> float:
            t0 = time.monotonic()
            r = home.chat(text)
            elapsed = time.monotonic() - t0
            if r.returncode != 0:
                raise RuntimeError(r.stdout + r.stderr)
            return elapsed

        def waits() -> list[float]:
            found = re.findall(r"recall waited ([0-9.]+) s", home.provider_log())
            return [float(x) for x in found]

        cold = []
        for i in range(runs):
            cold.append(run(f"我对花生过敏。cold start {i}"))
            for pid in home.started_gateway_pids():  # each run starts from nothing
                deadline = time.monotonic() + 40
                while time.monotonic() < deadline:
                    try:
                        os.kill(pid, 0)
                    except OSError:
                        break
                    time.sleep(0.2)
        out["one_shot_cold"] = {
            "runs_s": [round(x, 2) for x in cold],
            "first_turn_wait_s": waits(),
            "first_turns_ready": home.provider_log().count("(ready: True)"),
            "what": "no gateway running: start it, first turn waits for the models",
        }
        gw = GatewayProcess(home.data_dir, port=home.port).start(timeout=180)
        try:
            warm = [run(f"warm run {i}") for i in range(runs)]
            os.kill(gw.proc.pid, signal.SIGSTOP)
            try:
                frozen = [run(f"frozen run {i}") for i in range(runs)]
            finally:
                os.kill(gw.proc.pid, signal.SIGCONT)
            kept = len(list((home.root / "memory-tencentdb" / "spool").glob("*.json")))
            after = run("back again")  # sends what the frozen runs kept
            left = len(list((home.root / "memory-tencentdb" / "spool").glob("*.json")))
        finally:
            gw.stop()
        base = statistics.median(warm)
        out["one_shot_warm"] = {"runs_s": [round(x, 2) for x in warm], "median_s": round(base, 2)}
        out["one_shot_frozen"] = {
            "runs_s": [round(x, 2) for x in frozen],
            "added_over_warm_median_s": [round(x - base, 2) for x in frozen],
            "writes_kept_on_disk": kept,
            "kept_after_next_run": left,
            "next_run_s": round(after, 2),
        }
    return out


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(p95, 3),
        "max_ms": round(ordered[-1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def run_turns(port: int, home: Path, turns: int, session: str, data_dir: Path) -> dict[str, Any]:
    configure(port, home, data_dir)
    p = MemoryTencentdbProvider()
    p.initialize(session, hermes_home=str(home), agent_identity="bench")
    assert p._gw is not None
    p._gw.supervisor.wait_until_settled(10)
    prefetch_ms: list[float] = []
    enqueue_ms: list[float] = []
    recalled = 0
    transcript: list[dict[str, Any]] = []
    for i in range(turns):
        query = QUERIES[i % len(QUERIES)]
        t0 = time.perf_counter()
        context = p.prefetch(query)
        prefetch_ms.append((time.perf_counter() - t0) * 1000)
        recalled += bool(context)
        reply = f"answer {i}"
        transcript += [
            {"role": "user", "content": query},
            {"role": "assistant", "content": reply},
        ]
        t0 = time.perf_counter()
        p.sync_turn(query, reply, messages=list(transcript))
        enqueue_ms.append((time.perf_counter() - t0) * 1000)
    totals = [a + b for a, b in zip(prefetch_ms, enqueue_ms, strict=True)]
    breaker = p._gw.breaker.snapshot()
    t0 = time.perf_counter()
    p.shutdown()
    shutdown_ms = (time.perf_counter() - t0) * 1000
    return {
        "turns": turns,
        "turns_with_recall": recalled,
        "prefetch": stats(prefetch_ms),
        "capture_enqueue": stats(enqueue_ms),
        "per_turn_total": stats(totals),
        "first_turn_ms": round(totals[0], 3),
        "breaker_at_end": breaker,
        "shutdown_ms": round(shutdown_ms, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer turns, keyword-only gateway")
    ap.add_argument("--turns", type=int, default=0)
    ap.add_argument("--one-shot-runs", type=int, default=3, help="0 skips the hermes runs")
    args = ap.parse_args()
    turns = args.turns or (12 if args.quick else 40)
    slow_turns = max(4, turns // 4)
    tmp = Path(tempfile.mkdtemp(prefix="hermes-overhead-"))
    home = tmp / "hermes-home"
    home.mkdir()
    env = {"TDAI_EMBEDDING_PROVIDER": "none"} if args.quick else {}
    gw = GatewayProcess(tmp / "data", env=env).start(timeout=180)
    results: dict[str, Any] = {}
    try:
        seed(gw.base_url, 40 if args.quick else 200, gw.headers)
        print("measuring: up", flush=True)
        results["up"] = run_turns(gw.port, home, turns, "bench-up", gw.data_dir)
        with SlowProxy(gw.base_url, delay_s=2.0) as proxy:
            print("measuring: slow (2 s)", flush=True)
            results["slow_2s"] = run_turns(proxy.port, home, slow_turns, "bench-slow", gw.data_dir)
        with SlowProxy(gw.base_url, delay_s=10.0) as proxy:
            print("measuring: stalled (10 s)", flush=True)
            results["stalled_10s"] = run_turns(
                proxy.port, home, slow_turns, "bench-stalled", gw.data_dir
            )
        print("measuring: down", flush=True)
        results["down"] = run_turns(free_port(), home, turns, "bench-down", gw.data_dir)
    finally:
        health = httpx.get(gw.base_url + "/health", timeout=10).json()
        gw.stop()
    hermes_runs: dict[str, Any] = {}
    if args.one_shot_runs and (hermes_venv() / "bin" / "hermes").exists():
        print("measuring: hermes chat -q one-shot runs (cold, warm, frozen)", flush=True)
        hermes_runs = one_shot(tmp, args.one_shot_runs)
    out = {
        "benchmark": "hermes_overhead",
        "what": "provider time on the Hermes turn path per turn: prefetch + sync_turn enqueue",
        "recall_budget_s": 2.5,
        "quick": args.quick,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "platform": platform.platform(),
        },
        "gateway": {
            "embedding": health.get("embedding", {}).get("state"),
            "memories": health.get("counts", {}),
        },
        "scenarios": results,
        "hermes_one_shot": hermes_runs,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", "utf-8")
    header = f"{'scenario':<12}{'turns':>6}{'recall':>8}{'prefetch p50':>14}{'p95':>10}"
    header += f"{'enqueue p50':>13}{'turn p95':>10}{'turn max':>10}{'breaker':>10}"
    print(header)
    for name, r in results.items():
        print(
            f"{name:<12}{r['turns']:>6}{r['turns_with_recall']:>8}"
            f"{r['prefetch']['p50_ms']:>12.2f}ms{r['prefetch']['p95_ms']:>8.2f}ms"
            f"{r['capture_enqueue']['p50_ms']:>11.3f}ms{r['per_turn_total']['p95_ms']:>8.1f}ms"
            f"{r['per_turn_total']['max_ms']:>8.1f}ms{r['breaker_at_end']['state']:>10}"
        )
    for name, r in hermes_runs.items():
        print(f"{name:<16} runs {r['runs_s']} s", {k: v for k, v in r.items() if k != "runs_s"})
    print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

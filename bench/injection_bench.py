"""What memory injection costs per turn, and what each placement of the per-turn part does to
the host's prompt cache (issue 23, item 5).

A session as a host runs it, through a real gateway with its default configuration (no LLM:
the rule extractor and the deterministic persona): the developers' chat conversations
(tests/fixtures/dev/conversations.json, 5 conversations zh/en, 15 sessions, 150 user turns)
one host session per fixture session, each user turn ``POST /recall`` (the host's query) and
then ``POST /capture`` (the user's message and the reply), ``POST /session/end`` between
sessions. Each answer's two parts are recorded: the per-turn memories (``prepend_context``) and
the stable part (``append_system_context``: persona, scene navigation, tool guide).

Then, per placement of the per-turn part (the hosts' ``recall.placement`` setting):

- ``prepend``: the per-turn part rides with the user's message (OpenClaw ``prependContext``;
  Hermes's prefetch, which Hermes adds to the user message); the system part carries the
  stable part only.
- ``appendSystem``: the per-turn part is appended to the system part, after the stable part
  (OpenClaw ``appendSystemContext``).

Figures: the tokens memory adds per turn (p50 / p95; cl100k, ``offload.tokens``), how many
turns the system part changed from the turn before (each change invalidates a prompt cache from
the system part on), and the share of each request's tokens that is a prefix of the previous
request of the session (what a prefix prompt cache can reuse). The request model: a fixed host
system prompt of ``--host-system-tokens`` tokens, then the system part memory adds, then the
session's earlier turns as the host keeps them (without the injected memories: neither host
persists them), then this turn's user message with its per-turn part when that rides there.

    python bench/injection_bench.py [--host-system-tokens 3000]

Results: bench/results/injection.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_tencentdb.offload.tokens import TokenCounter  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "dev" / "conversations.json"
RESULTS = ROOT / "bench" / "results"
PLACEMENTS = ("prepend", "appendSystem")
SCOPE = "inject"


def record_session(gw: GatewayProcess) -> list[dict]:
    """Every user turn of the fixture through /recall then /capture; returns per turn the host
    session, the user message, the reply and the two parts of the recall answer."""
    data = json.loads(FIXTURE.read_text("utf-8"))
    turns: list[dict] = []
    with gw.client(timeout=60) as http:
        for conv in data["conversations"]:
            user = next(s["name"] for s in conv["speakers"] if s["role"] == "user")
            for sess in conv["sessions"]:
                key = f"{conv['id']}-{sess['id']}"
                lines = sess["turns"]
                for i, t in enumerate(lines):
                    if t["speaker"] != user:
                        continue
                    reply = next((u["text"] for u in lines[i + 1 :] if u["speaker"] != user), "OK.")
                    body = http.post(
                        "/recall", json={"query": t["text"], "session_key": key, "scope": SCOPE}
                    ).json()
                    turns.append(
                        {
                            "session": key,
                            "user": t["text"],
                            "reply": reply,
                            "per_turn": body.get("prepend_context") or "",
                            "stable": body.get("append_system_context") or "",
                        }
                    )
                    r = http.post(
                        "/capture",
                        json={
                            "session_key": key,
                            "scope": SCOPE,
                            "user_content": t["text"],
                            "assistant_content": reply,
                        },
                    )
                    r.raise_for_status()
                http.post("/session/end", json={"session_key": key, "scope": SCOPE})
                gw.wait_embedded(timeout=300)
    return turns


def requests(turns: list[dict], placement: str, host_system: int, count) -> list[dict]:
    """Per turn: the request as segments ``[(text, tokens)]`` and what memory added."""
    out = []
    history: list[tuple[str, int]] = []
    session = None
    for t in turns:
        if t["session"] != session:
            session, history = t["session"], []
        per_turn = t["per_turn"].strip()
        stable = t["stable"].strip()
        system_mem = (
            stable if placement == "prepend" else "\n\n".join(p for p in (stable, per_turn) if p)
        )
        user = t["user"] if placement != "prepend" or not per_turn else f"{per_turn}\n\n{t['user']}"
        segments = [("<host system prompt>", host_system), (system_mem, count(system_mem))]
        segments += history + [(user, count(user))]
        out.append(
            {
                "segments": segments,
                "system": system_mem,
                "injected": count(stable) + count(per_turn),
                "per_turn_tokens": count(per_turn),
                "stable_tokens": count(stable),
            }
        )
        history = history + [(t["user"], count(t["user"])), (t["reply"], count(t["reply"]))]
    return out


def shared_prefix(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> int:
    """Tokens of ``b`` that are a prefix of ``a``, whole segments at a time (a segment that
    differs ends the prefix: counting its common characters would flatter both placements)."""
    n = 0
    for (ta, _ka), (tb, kb) in zip(a, b, strict=False):
        if ta != tb:
            break
        n += kb
    return n


def pct(values: list[int], q: float) -> int:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else 0


def measure(turns: list[dict], host_system: int, count) -> dict:
    res: dict = {}
    for placement in PLACEMENTS:
        reqs = requests(turns, placement, host_system, count)
        changes = reused = total = 0
        prev = None
        for i, r in enumerate(reqs):
            tokens = sum(k for _, k in r["segments"])
            if i and turns[i]["session"] == turns[i - 1]["session"]:
                changes += r["system"] != prev["system"]
                reused += shared_prefix(prev["segments"], r["segments"])
                total += tokens
            prev = r
        injected = [r["injected"] for r in reqs]
        res[placement] = {
            "turns": len(reqs),
            "injected_tokens_per_turn_p50": pct(injected, 0.5),
            "injected_tokens_per_turn_p95": pct(injected, 0.95),
            "per_turn_part_tokens_p50": pct([r["per_turn_tokens"] for r in reqs], 0.5),
            "per_turn_part_tokens_p95": pct([r["per_turn_tokens"] for r in reqs], 0.95),
            "turns_injecting_per_turn_part": sum(1 for r in reqs if r["per_turn_tokens"]),
            "stable_part_tokens_max": max(r["stable_tokens"] for r in reqs),
            "system_part_changed_turns": changes,
            "turns_after_the_first_of_a_session": sum(
                1 for i in range(1, len(turns)) if turns[i]["session"] == turns[i - 1]["session"]
            ),
            "prefix_reusable_share": round(reused / total, 3) if total else None,
        }
    stable_changes = sum(
        1
        for i in range(1, len(turns))
        if turns[i]["session"] == turns[i - 1]["session"]
        and turns[i]["stable"] != turns[i - 1]["stable"]
    )
    res["stable_part_changed_turns"] = stable_changes
    # Of those, changes of something else than the persona and the scene navigation (the tool
    # guide, or how the parts are put together): the stable part must not have any.
    res["stable_part_changed_turns_outside_persona_and_scenes"] = sum(
        1
        for i in range(1, len(turns))
        if turns[i]["session"] == turns[i - 1]["session"]
        and _rest(turns[i]["stable"]) != _rest(turns[i - 1]["stable"])
    )
    return res


_BLOCKS = re.compile(r"<(user-persona|scene-navigation)>.*?</\1>", re.S)


def _rest(stable: str) -> str:
    """The stable part without its persona and scene navigation blocks."""
    return _BLOCKS.sub("", stable).strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--host-system-tokens", type=int, default=3000)
    ap.add_argument("--out", type=Path, default=RESULTS / "injection.json")
    args = ap.parse_args(argv)
    counter = TokenCounter()
    counter.load()
    gw = GatewayProcess(Path(tempfile.mkdtemp(prefix="inject-")) / "data").start(timeout=180)
    t0 = time.perf_counter()
    try:
        turns = record_session(gw)
    finally:
        gw.stop()
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "fixture": str(FIXTURE.relative_to(ROOT)),
        "tokenizer": counter.name if hasattr(counter, "name") else "cl100k_base",
        "host_system_tokens": args.host_system_tokens,
        "session_seconds": round(time.perf_counter() - t0, 1),
        "sessions": len({t["session"] for t in turns}),
        "per_turn_part_chars_median": statistics.median(len(t["per_turn"]) for t in turns),
        **measure(turns, args.host_system_tokens, counter.count),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

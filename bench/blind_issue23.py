"""Issue 23's blind sets, measured once through real gateways; prints aggregate figures only.

- ``recall``: tests/fixtures/blind/recall_issue23.json (memories, paraphrase / inference /
  cross-language cases, unrelated messages). Every memory is stored with ``POST /memories`` in
  one scope, every message asked of ``POST /recall`` (what a host injects per turn, k = 5):
  R@5 per kind, the share of unrelated messages injecting anything, memories injected per turn.
- ``conversations``: tests/fixtures/blind/locomo_style.json through
  tests/support/quality_eval.conversation_recall (evidence R@10, session R@5 per method), with
  the speaker prefix (names given to /capture) and without it.

The set is never printed: the loader reads the fields by their usual names and only counts.
Run: PYTHONPATH=. .venv/bin/python bench/blind_issue23.py recall|conversations [path]
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.gateway import GatewayProcess  # noqa: E402

BLIND = ROOT / "tests" / "fixtures" / "blind"


def _first(d: dict, names: tuple[str, ...]) -> Any:
    for n in names:
        if n in d and d[n] not in (None, ""):
            return d[n]
    return None


def _cases(data: dict) -> tuple[list[dict], list[dict]]:
    """(memories [{id, text}], cases [{kind, query, gold: [ids]}]) from the usual layouts."""
    mem_raw = _first(data, ("memories", "memory", "corpus"))
    memories = []
    for i, m in enumerate(mem_raw or []):
        if isinstance(m, str):
            memories.append({"id": str(i), "text": m})
        else:
            memories.append(
                {
                    "id": str(_first(m, ("id", "memory_id", "key")) or i),
                    "text": _first(m, ("memory", "text", "content")),
                }
            )
    raw: list[tuple[str | None, Any]] = []
    for key in ("cases", "queries", "messages", "questions", "related"):
        for c in data.get(key) or []:
            raw.append((None, c))
    for key in ("paraphrase", "inference", "cross_language", "cross-language", "unrelated"):
        if isinstance(data.get(key), list):
            for c in data[key]:
                raw.append((key.replace("-", "_"), c))
    cases = []
    for kind, c in raw:
        if isinstance(c, str):
            c = {"query": c}
        k = kind or _first(c, ("kind", "type", "category", "label")) or "?"
        gold = _first(
            c,
            (
                "memory",
                "memory_id",
                "memory_ids",
                "memories",
                "expected",
                "expected_memory",
                "expected_memories",
                "gold",
                "target",
                "relevant",
                "answer_memory",
            ),
        )
        if isinstance(gold, (str, int)):
            gold = [str(gold)]
        gold = [str(g) for g in gold] if isinstance(gold, list) else []
        if str(k).startswith("unrelated"):
            gold = []
        cases.append(
            {
                "kind": str(k),
                "query": _first(c, ("query", "message", "question", "text")),
                "gold": gold,
            }
        )
    return memories, cases


def recall_set(path: Path = BLIND / "recall_issue23.json") -> dict:
    memories, cases = _cases(json.loads(path.read_text("utf-8")))
    known = {m["id"] for m in memories}
    root = Path(tempfile.mkdtemp(prefix="blind23-"))
    gw = GatewayProcess(root / "data", env={"TDAI_MEMORY__RECALL__MAX_RESULTS": "5"})
    gw.start(timeout=120)
    per: dict[str, list[bool]] = defaultdict(list)
    injected: list[int] = []
    chars: list[int] = []
    unresolved = 0
    try:
        with gw.client(timeout=60) as http:
            ids = {}
            for m in memories:
                r = http.post(
                    "/memories",
                    json={
                        "content": m["text"],
                        "type": "persona",
                        "session_key": "b",
                        "scope": "b",
                    },
                )
                assert r.status_code == 201, r.status_code
                ids[m["id"]] = r.json()["id"]
            gw.wait_embedded(timeout=600)
            for c in cases:
                r = http.post(
                    "/recall", json={"query": c["query"], "session_key": "b", "scope": "b"}
                )
                assert r.status_code == 200, r.status_code
                body = r.json()
                got = [m["id"] for m in body["memories"]]
                injected.append(len(got))
                chars.append(len(body["prepend_context"]))
                gold = [ids[g] for g in c["gold"] if g in known]
                if c["gold"] and not gold:
                    unresolved += 1
                    continue
                if not gold:
                    per["unrelated (injecting anything)"].append(bool(got))
                else:
                    per[c["kind"]].append(any(g in got for g in gold))
    finally:
        gw.stop()
    out = {
        "memories": len(memories),
        "cases": len(cases),
        "unresolved_gold": unresolved,
        "per_kind": {k: f"{sum(v)}/{len(v)} = {sum(v) / len(v):.3f}" for k, v in per.items()},
        "memories_injected_per_turn_mean": round(sum(injected) / max(1, len(injected)), 2),
        "prepend_chars_p50": sorted(chars)[len(chars) // 2] if chars else 0,
    }
    related = [x for k, v in per.items() if not k.startswith("unrelated") for x in v]
    out["related_all"] = f"{sum(related)}/{len(related)}"
    return out


def conversation_set(path: Path = BLIND / "locomo_style.json") -> dict:
    from tests.support.quality_eval import conversation_recall

    data = json.loads(path.read_text("utf-8"))
    root = Path(tempfile.mkdtemp(prefix="blind23c-"))
    res = {"with_speaker": conversation_recall(root / "on", data)}
    for conv in data["conversations"]:
        for session in conv["sessions"]:
            for turn in session["turns"]:
                turn["speaker"] = ""  # what hosts send: no name
        conv["speakers"] = []
    res["without_speaker"] = conversation_recall(root / "off", data)
    for r in res.values():
        for m in r["methods"].values():
            for k in [k for k in m if k.startswith("cat:")]:
                m.pop(k)
    return res


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "recall"
    fn = recall_set if what == "recall" else conversation_set
    args = [Path(sys.argv[2])] if len(sys.argv) > 2 else []
    print(json.dumps(fn(*args), ensure_ascii=False, indent=1))

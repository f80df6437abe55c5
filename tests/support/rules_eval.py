"""Measure the no-LLM extractor through the real gateway: each statement is captured as a user
turn, its session ended (L1 runs, rule-based: no LLM is configured), and what was extracted is
read back with ``GET /memories``. Works on any set in the schema of
tests/fixtures/blind/rule_statements.json and reports only aggregate figures, so a blind set
can be measured without anyone reading it.

Scoring (the blind set's own definitions): an expected item is *recalled* when some extracted
active memory contains all its keywords (case-insensitive); *precision* is the share of extracted
memories (negatives' included) that match some expected item of their statement; an
*instruction error* is an instruction-typed memory from a non-rule statement or a negative; a
*change* passes when, after both messages, an active memory holds the current keywords and a
superseded one (history) the old keywords, and the earlier statement is no longer active.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateway import GatewayProcess

ACK = {"zh": "好的，记住了。", "en": "Got it."}


def _has(text: str, keywords: list[str]) -> bool:
    low = text.lower()
    return all(k.lower() in low for k in keywords)


def _say(http: httpx.Client, scope: str, lang: str, text: str) -> None:
    r = http.post(
        "/capture",
        json={
            "scope": scope,
            "session_key": scope,
            "user_content": text,
            "assistant_content": ACK.get(lang, ACK["en"]),
        },
    )
    assert r.status_code == 200, r.text
    r = http.post("/session/end", json={"scope": scope, "session_key": scope, "wait": True})
    assert r.status_code == 200 and r.json().get("flushed") is True, r.text


def _memories(http: httpx.Client, scope: str) -> list[dict[str, Any]]:
    r = http.get("/memories", params={"scope": scope, "history": "true"})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def evaluate(root: Path, data: dict[str, Any], prefix: str = "rules") -> dict[str, Any]:
    """Run the whole set through one gateway; returns aggregate figures (overall and per
    language) plus, per statement id, what failed (for a dev set; never print it for a blind
    one)."""
    gateway = GatewayProcess(root / "data")
    gateway.start(timeout=120)
    try:
        with gateway.client(timeout=60) as http:
            return _evaluate(http, data, prefix)
    finally:
        gateway.stop()


def _evaluate(http: httpx.Client, data: dict[str, Any], prefix: str) -> dict[str, Any]:
    agg: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures: dict[str, str] = {}

    def add(lang: str, key: str, n: int = 1) -> None:
        agg["all"][key] += n
        agg[lang][key] += n

    for st in data.get("statements", []):
        scope = f"{prefix}-{st['id']}"
        _say(http, scope, st["lang"], st["text"])
        mems = [m for m in _memories(http, scope) if m["status"] == "active"]
        lang = st["lang"]
        add(lang, "statements")
        add(lang, "expected", len(st["expected"]))
        add(lang, "extracted", len(mems))
        missed = [
            e for e in st["expected"] if not any(_has(m["content"], e["keywords"]) for m in mems)
        ]
        add(lang, "recalled", len(st["expected"]) - len(missed))
        matching = [
            m for m in mems if any(_has(m["content"], e["keywords"]) for e in st["expected"])
        ]
        add(lang, "precise", len(matching))
        bad = [m for m in mems if m["type"] == "instruction" and not st.get("is_rule")]
        add(lang, "instruction_errors", len(bad))
        if st.get("is_rule"):
            add(lang, "rule_statements")
            add(
                lang, "rules_as_instruction", int(any(m["type"] == "instruction" for m in matching))
            )
        if missed or len(matching) < len(mems) or bad:
            failures[st["id"]] = (
                f"missed {len(missed)}, extra {len(mems) - len(matching)}, bad {len(bad)}"
            )
    for neg in data.get("negatives", []):
        scope = f"{prefix}-{neg['id']}"
        _say(http, scope, neg["lang"], neg["text"])
        mems = [m for m in _memories(http, scope) if m["status"] == "active"]
        add(neg["lang"], "negatives")
        add(neg["lang"], "extracted", len(mems))
        add(neg["lang"], "negative_extractions", len(mems))
        bad = [m for m in mems if m["type"] == "instruction"]
        add(neg["lang"], "instruction_errors", len(bad))
        if mems:
            failures[neg["id"]] = f"negative extracted {len(mems)}"
    for ch in data.get("changes", []):
        scope = f"{prefix}-{ch['id']}"
        _say(http, scope, ch["lang"], ch["before"])
        before = {m["id"] for m in _memories(http, scope)}
        _say(http, scope, ch["lang"], ch["after"])
        mems = _memories(http, scope)
        active = [m for m in mems if m["status"] == "active"]
        old = [m for m in mems if m["status"] == "superseded"]
        current = any(_has(m["content"], ch["current_keywords"]) for m in active)
        history = any(_has(m["content"], ch["old_keywords"]) for m in old)
        # The earlier statement itself still active (not replaced) is stale.
        stale = any(
            m["id"] in before
            and _has(m["content"], ch["old_keywords"])
            and not _has(m["content"], ch["current_keywords"])
            for m in active
        )
        add(ch["lang"], "changes")
        add(ch["lang"], "changes_current", int(current))
        add(ch["lang"], "changes_history", int(history and not stale))
        ok = current and history and not stale
        add(ch["lang"], "changes_passed", int(ok))
        if not ok:
            failures[ch["id"]] = f"current {current}, history {history}, stale {stale}"
    figures = {lang: _figures(counts) for lang, counts in agg.items()}
    return {"figures": figures, "failures": failures}


def _figures(c: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = dict(c)
    out["recall"] = round(c["recalled"] / c["expected"], 3) if c.get("expected") else None
    out["precision"] = round(c["precise"] / c["extracted"], 3) if c.get("extracted") else None
    if c.get("changes"):
        out["change_pass_rate"] = round(c["changes_passed"] / c["changes"], 3)
    return out

"""The three scenarios users tried on the original, in English and Chinese, with an LLM (the
scripted fake) and without one (rule-based extraction). Everything goes through HTTP."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.pipeline.conftest import (
    capture,
    extraction,
    memory,
    recall,
    scope_memories,
    search,
    settle,
    upsert_lines,
    wait_for,
)

LANGS = {
    "en": {
        "habit": "I go for a 5 km run every morning before work.",
        "habit_llm": "The user runs 5 km every morning before work.",
        "habit_query": "What does the user do for exercise in the morning?",
        "habit_word": "5 km",
        "rules_one_turn": (
            "Please remember three rules: always answer in English, never use emojis, "
            "and keep every answer under 200 words."
        ),
        "rules": [
            "Always answer in English.",
            "Never use emojis in your replies.",
            "Keep every answer under 200 words from now on.",
        ],
        "rules_words": ["English", "emojis", "200 words"],
        "rules_query": "How should you format your answers for me?",
        "db": [
            "The project database must be PostgreSQL.",
            "What's the weather like in Paris today?",
            "Can you explain how recursion works?",
            "Actually, let's switch to MySQL.",
        ],
        "db_llm_old": "The project database must be PostgreSQL.",
        "db_llm_new": "The project database is switched to MySQL.",
        "db_llm_merged": "The project database must be MySQL (switched from PostgreSQL).",
        "db_query": "Which database does the project use?",
        "db_search": "project database",
    },
    "zh": {
        "habit": "我每天早上六点起床跑步五公里。",
        "habit_llm": "用户每天早上六点起床跑步五公里。",
        "habit_query": "用户早上做什么运动？",
        "habit_word": "跑步",
        "rules_one_turn": "请记住三条规则：1. 回答一律用中文；2. 不要使用表情符号；3. 每次回答不超过200字。",
        "rules": ["以后回答一律用中文。", "不要使用表情符号。", "每次回答不超过200字。"],
        "rules_words": ["中文", "表情符号", "200字"],
        "rules_query": "你回答我的时候要注意什么？",
        "db": [
            "项目数据库必须用PostgreSQL。",
            "今天巴黎天气怎么样？",
            "给我讲讲递归是怎么回事。",
            "我们换成MySQL吧。",
        ],
        "db_llm_old": "项目数据库必须使用 PostgreSQL。",
        "db_llm_new": "项目数据库改为使用 MySQL。",
        "db_llm_merged": "项目数据库必须使用 MySQL（由 PostgreSQL 切换而来）。",
        "db_query": "项目用的是什么数据库？",
        "db_search": "项目数据库",
    },
}

MODES = ["llm", "rules"]


@pytest.fixture(params=MODES)
def mode(request, llm_gateway, rules_gateway):
    if request.param == "llm":
        llm_gateway.router.clear()
        return "llm", llm_gateway.gw, llm_gateway.router
    return "rules", rules_gateway, None


def _scope() -> str:
    return f"scn-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_stated_habit_recallable_within_10s(mode, lang):
    kind, gw, router = mode
    t = LANGS[lang]
    scope = _scope()
    if router:
        router.push(
            "l1-extraction",
            extraction({"content": t["habit_llm"], "type": "persona", "priority": 80}),
        )
    started = time.monotonic()
    capture(gw, scope, "s-habit", t["habit"], "👍")

    def recalled():
        body = recall(gw, scope, t["habit_query"])
        return body if any(t["habit_word"] in m["content"] for m in body["memories"]) else None

    body = wait_for(recalled, timeout=10, what="the habit in /recall")
    assert time.monotonic() - started < 10
    assert t["habit_word"] in body["prepend_context"]
    settle(gw)
    rows = scope_memories(gw, scope)
    assert len(rows) == 1 and upsert_lines(gw, scope) == 1
    assert rows[0]["origin"] == ("extraction" if kind == "llm" else "rules")
    # The memory traces back to the captured message.
    traced = memory(gw, rows[0]["id"], scope)
    assert [m["content"] for m in traced["trace"]["source_messages"]] == [t["habit"]]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("shape", ["one_turn", "three_turns"])
def test_three_rules_retained_and_recalled_together(mode, lang, shape):
    kind, gw, router = mode
    t = LANGS[lang]
    scope = _scope()
    if shape == "one_turn":
        if router:
            router.push("l1-extraction", extraction(*t["rules"]))
        capture(gw, scope, "s-rules", t["rules_one_turn"])
        settle(gw)
    else:
        for rule in t["rules"]:
            if router:
                router.push("l1-extraction", extraction(rule))
            capture(gw, scope, "s-rules", rule)
            settle(gw)
    rows = scope_memories(gw, scope)
    assert len(rows) == 3, [r["content"] for r in rows]
    assert upsert_lines(gw, scope) == 3
    assert {r["type"] for r in rows} == {"instruction"}
    body = recall(gw, scope, t["rules_query"])
    recalled = " | ".join(m["content"] for m in body["memories"])
    for word in t["rules_words"]:
        assert word in recalled, recalled
        assert word in body["prepend_context"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_database_switch_keeps_history(mode, lang):
    kind, gw, router = mode
    t = LANGS[lang]
    scope = _scope()
    if router:
        router.push(
            "l1-extraction",
            extraction(t["db_llm_old"]),
            "[]",
            json.dumps([{"scene_name": "Chat", "message_ids": ["m2"], "memories": []}]),
            extraction(t["db_llm_new"]),
        )
        router.push(
            "l1-dedup",
            json.dumps(
                [
                    {
                        "record_id": "n1",
                        "action": "update",
                        "target_ids": ["c1"],
                        "merged_content": t["db_llm_merged"],
                        "merged_type": "instruction",
                        "merged_priority": 90,
                    }
                ]
            ),
        )
    for turn in t["db"]:
        capture(gw, scope, "s-db", turn)
        settle(gw)
    if router:
        assert router.pending("l1-extraction") == 0 and router.pending("l1-dedup") == 0

    rows = {r["id"]: r for r in scope_memories(gw, scope)}
    assert len(rows) == 2, [r["content"] for r in rows.values()]
    current = search(gw, scope, t["db_search"])
    assert len(current) == 1, current
    new = current[0]
    assert "MySQL" in new["content"]
    old_id = next(i for i in rows if i != new["id"])
    assert "PostgreSQL" in rows[old_id]["content"]

    # History: the old memory is superseded by the new one, and the trace shows it.
    old = memory(gw, old_id, scope)
    assert old["status"] == "superseded" and old["superseded_by"] == new["id"]
    traced = memory(gw, new["id"], scope)
    assert traced["status"] == "active"
    assert [h["id"] for h in traced["trace"]["history"]] == [old_id]
    assert traced["trace"]["history"][0]["status"] == "superseded"
    assert [m["content"] for m in traced["trace"]["source_messages"]] == [t["db"][3]]

    # Recall shows the current decision only.
    body = recall(gw, scope, t["db_query"])
    contents = [m["content"] for m in body["memories"]]
    assert any("MySQL" in c for c in contents), contents
    assert not any("PostgreSQL" in c and "MySQL" not in c for c in contents), contents

"""Issue 23 through the real gateway: the relevance decision prefers recalling what bears on the
answer (a dietary restriction) over silence, in both languages, per turn (prepend_context), and
still injects nothing for a question no memory bears on."""

from __future__ import annotations

import pytest

from tests.support.gateway import GatewayProcess

SPICY = "我完全不能吃辣，对辣味食物有严格禁忌。"
OTHERS = [
    "我住在杭州西湖区。",
    "I work as a backend engineer and write mostly Go.",
    "我每周六上午去游泳。",
    "My daughter is seven and loves drawing.",
    "我喜欢看科幻小说，最近在读《三体》。",
    "I prefer meetings in the afternoon.",
    "我的猫叫豆豆，是一只橘猫。",
    "The user drives a blue Subaru Outback.",
    "用户在学古筝，每周二晚上上课。",
]
ABOUT_FOOD = [
    "附近有什么川菜馆推荐？",
    "推荐一家重庆火锅",
    "Can you suggest a spicy hotpot place?",
    "今晚吃什么好？",
    "我有什么忌口？",
    "What should I avoid eating?",
]
UNRELATED = ["How do I reverse a linked list?", "光合作用的原理是什么？"]


@pytest.fixture(scope="module")
def spicy_scope(shared_gateway: GatewayProcess) -> str:
    scope = "decision-spicy"
    with shared_gateway.client() as c:
        for text in [SPICY, *OTHERS]:
            r = c.post(
                "/memories",
                json={"content": text, "type": "persona", "session_key": "s", "scope": scope},
            )
            assert r.status_code == 201, r.text
    shared_gateway.wait_embedded(timeout=120)
    return scope


def _recall(gw: GatewayProcess, scope: str, query: str) -> dict:
    with gw.client() as c:
        r = c.post("/recall", json={"query": query, "session_key": "s", "scope": scope})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("query", ABOUT_FOOD)
def test_a_food_question_injects_the_restriction_per_turn(shared_gateway, spicy_scope, query):
    body = _recall(shared_gateway, spicy_scope, query)
    assert body["strategy"] in ("hybrid", "embedding")  # the models ran (no shared word: embedding)
    assert SPICY in [m["content"] for m in body["memories"]], body["relevance"]
    assert SPICY in body["prepend_context"]
    assert len(body["memories"]) <= 5


@pytest.mark.parametrize("query", UNRELATED)
def test_a_question_no_memory_bears_on_injects_nothing(shared_gateway, spicy_scope, query):
    body = _recall(shared_gateway, spicy_scope, query)
    assert body["memories"] == [], body["memories"]
    assert body["prepend_context"] == ""
    assert body["relevance"]["note"] == "nothing stored is related to this query"


# -- what the no-LLM extractor stores (issue 23): third person, each clause's own subject ----


def _say(c, scope: str, text: str) -> None:
    r = c.post(
        "/capture",
        json={"scope": scope, "session_key": "s", "user_content": text, "assistant_content": "OK"},
    )
    assert r.status_code == 200, r.text
    r = c.post("/session/end", json={"scope": scope, "session_key": "s", "wait": True})
    assert r.json()["flushed"] is True


def _active(c, scope: str) -> list[str]:
    items = c.get("/memories", params={"scope": scope}).json()["items"]
    return [m["content"] for m in items if m["status"] == "active"]


def test_a_daughters_lesson_stays_the_daughters(shared_gateway: GatewayProcess, scope: str):
    with shared_gateway.client() as c:
        _say(c, scope, "我女儿在读小学三年级，每周三下午学钢琴。")
        mems = _active(c, scope)
    assert any("女儿" in m and "钢琴" in m for m in mems), mems
    # No memory puts the piano on the user.
    assert not [m for m in mems if "钢琴" in m and "女儿" not in m], mems
    assert not [m for m in mems if "我" in m], mems


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("我对花生过敏。", "用户对花生过敏"),
        ("I'm allergic to peanuts.", "The user is allergic to peanuts"),
        ("I go running every morning.", "The user goes running every morning"),
        ("My name is Ana.", "The user's name is Ana"),
    ],
)
def test_memories_are_about_the_user_in_the_third_person(
    shared_gateway: GatewayProcess, scope: str, said: str, stored: str
):
    with shared_gateway.client() as c:
        _say(c, scope, said)
        mems = _active(c, scope)
        # The user's own words stay in L0.
        l0 = c.post("/search/conversations", json={"query": said, "scope": scope}).json()
    assert any(stored in m for m in mems), mems
    assert said in [i["content"] for i in l0["items"]]


def test_a_writing_rule_and_a_database_switch_are_kept(shared_gateway, scope: str):
    with shared_gateway.client() as c:
        _say(c, scope, "章节标题用陈述句。")
        _say(c, scope, "我们的数据库用MongoDB。")
        _say(c, scope, "我们的数据库从MongoDB换成Cassandra了。")
        items = c.get("/memories", params={"scope": scope, "history": "true"}).json()["items"]
    active = [m["content"] for m in items if m["status"] == "active"]
    assert any("章节标题" in m and "陈述句" in m for m in active), active
    assert any("Cassandra" in m for m in active), active
    assert not [m for m in active if "MongoDB" in m and "Cassandra" not in m], active


def test_the_stable_part_does_not_change_with_what_a_turn_injects(shared_gateway, spicy_scope):
    """The system part (append_system_context) depends on the scope (persona, scenes, whether
    there is anything to search), not on this turn's memories, so prompt caches keep it."""
    food = _recall(shared_gateway, spicy_scope, "推荐一家重庆火锅")
    other = _recall(shared_gateway, spicy_scope, "How do I reverse a linked list?")
    assert food["memories"] and not other["memories"]
    assert food["append_system_context"] == other["append_system_context"] != ""

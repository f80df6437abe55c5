"""Issue 12, "a question unrelated to anything stored injects nothing", for questions about the
world: their best answer is the same whoever asks, so a personal memory that merely sits near
them in a model's space ("The user's sister lives in Melbourne" for "What is the capital of
Australia?") must not be injected. recall.py holds such questions (text.query_intent's verdict)
to a higher bar. Through the real gateway over HTTP, on a small profile and on the developers'
gate set (tests/fixtures/dev/gate_queries.json: 60 memories, 45 related messages, 50 world
questions, most of them touching a stored topic on purpose). The blind set of the same kind is
measured by bench/recall_quality.py, not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tencentdb import recall
from tests.support.gateway import GatewayProcess
from tests.support.recall_eval import post_memories

FIXTURES = Path(__file__).parent / "fixtures"

PROFILE = [
    "The user's sister lives in Melbourne.",
    "用户对海鲜过敏，吃虾会起疹子。",
    "The user is learning to play the cello.",
    "用户在上海一家银行做风控。",
    "The user drives a white Tesla Model 3.",
    "用户每天早上六点去跑步。",
    "The user's daughter is seven and loves dinosaurs.",
    "用户正在备考日语能力考试N2。",
]
# World questions on the topics of the profile that share no indexed word with it.
WORLD = [
    "Which Australian city has the largest population?",
    "How many strings does a violin have?",
    "海洋里最大的哺乳动物是什么？",
    "Who is the founder of the most valuable electric vehicle maker?",
    "恐龙是在哪个地质年代灭绝的？",
    "马拉松比赛的距离为什么是42.195公里？",
    "What is the plural of 'mouse'?",
    "一年有多少个节气？",
]
# Messages whose good answer depends on one memory of the profile (no first person in most).
RELATED = {
    "Any tips for a weekend trip to visit my sister?": "The user's sister lives in Melbourne.",
    "今晚聚餐能点椒盐皮皮虾吗？": "用户对海鲜过敏，吃虾会起疹子。",
    "Which rosin is good for a beginner string player?": "The user is learning to play the cello.",
    "What car do I drive?": "The user drives a white Tesla Model 3.",
    "Suggest a birthday present for my daughter.": "The user's daughter is seven and loves dinosaurs.",
    "我在准备什么考试来着？": "用户正在备考日语能力考试N2。",
}


def _recall(gw: GatewayProcess, scope: str, query: str) -> dict:
    with gw.client() as c:
        r = c.post("/recall", json={"query": query, "session_key": "w", "scope": scope})
    assert r.status_code == 200, r.text
    return r.json()


def _store(gw: GatewayProcess, scope: str, texts: list[str]) -> dict[str, str]:
    """Stored memory id per text."""
    with gw.client() as c:
        ids = post_memories(c, [{"id": t, "memory": t} for t in texts], scope, "w")
    gw.wait_embedded(timeout=120)
    return ids


@pytest.fixture(scope="module")
def profile(shared_gateway: GatewayProcess) -> tuple[GatewayProcess, str]:
    _store(shared_gateway, "world-profile", PROFILE)
    return shared_gateway, "world-profile"


# Known misses of the decision in force (none since issue 23: a question about the world gets
# only memories naming what it names, so "Which Australian city has the largest population?"
# no longer brings the sister in Melbourne).
WORLD_KNOWN_MISS: dict[str, str] = {}


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(q, marks=pytest.mark.xfail(strict=True, reason=WORLD_KNOWN_MISS[q]))
        if q in WORLD_KNOWN_MISS
        else q
        for q in WORLD
    ],
)
def test_world_question_on_a_stored_topic_injects_nothing(profile, query):
    gw, scope = profile
    body = _recall(gw, scope, query)
    assert body["memories"] == [], [m["content"] for m in body["memories"]]
    assert body["relevance"]["note"] == "nothing stored is related to this query"
    assert body["strategy"] in ("hybrid", "embedding")


# Known misses (none since issue 23: "Which rosin is good for a beginner string player?" finds
# the cello, its better model's z-score clearing 2.0 where the smaller one was 1.5).
KNOWN_MISS: dict[str, str] = {}


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(q, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISS[q]))
        if q in KNOWN_MISS
        else q
        for q in sorted(RELATED)
    ],
)
def test_message_that_depends_on_a_memory_injects_it(profile, query):
    gw, scope = profile
    contents = [m["content"] for m in _recall(gw, scope, query)["memories"]]
    assert RELATED[query] in contents, contents


def test_the_answer_says_when_a_question_was_taken_for_one_about_the_world(profile):
    gw, scope = profile
    world = _recall(gw, scope, "How many strings does a violin have?")
    assert world["relevance"]["world_question"] > recall.WORLD_MAX
    assert world["relevance"]["how_to"] < 0  # a fact, not a how-to
    # A question about the user is not taken for one about the world (issue 23: the classifier
    # alone decides, no first-person rule; its verdict is always reported).
    mine = _recall(gw, scope, "Where does my sister live?")
    assert mine["relevance"]["world_question"] <= recall.WORLD_MAX
    assert "how_to" not in mine["relevance"]
    assert "The user's sister lives in Melbourne." in [m["content"] for m in mine["memories"]]


@pytest.fixture(scope="module")
def gate_set(shared_gateway: GatewayProcess) -> dict:
    data = json.loads((FIXTURES / "dev" / "gate_queries.json").read_text("utf-8"))
    texts = {m["id"]: m["memory"] for m in data["memories"]}
    ids = _store(shared_gateway, "world-gate-dev", list(texts.values()))
    got = {}
    for q in data["related"] + data["world"]:
        body = _recall(shared_gateway, "world-gate-dev", q["query"])
        got[q["id"]] = [m["id"] for m in body["memories"]]
    related = sum(ids[texts[q["memory"]]] in got[q["id"]] for q in data["related"])
    world = sum(bool(got[q["id"]]) for q in data["world"])
    injected = sum(len(got[q["id"]]) for q in data["world"])
    return {"related": related, "world": world, "injected": injected, "data": data}


# Measured at the change (bench/RESULTS.md, session 7): before it, 26 of the 50 world questions
# injected something (46 memories in all) and 30 of the 45 related messages got their memory;
# after it 3 (3 memories). Issue 23's decision (recall.relevant_hits): 1-2 world questions inject,
# each a how-to sharing a word with up to k = 5 memories (being generous is the point: k is
# small), and 32-34 of 45 related messages get their memory. Session 14's query adapter
# (text/query_adapter.py) brings the related messages to RELATED_WITH_ADAPTER here; this set
# is among its training data, but out of set too (the adapter trained without it,
# bench/recall_diag.py) 43 of 45 reach their memory in process, against 37 without it. The
# world questions stay where they were. Floors hold that level.
RELATED_WITH_ADAPTER = 40


@pytest.mark.slow
def test_dev_gate_set_world_questions_inject_less(gate_set):
    assert gate_set["world"] <= 3, gate_set["world"]
    assert gate_set["injected"] <= 10, gate_set["injected"]


@pytest.mark.slow
def test_dev_gate_set_related_messages_keep_their_memory(gate_set):
    assert gate_set["related"] >= RELATED_WITH_ADAPTER, gate_set["related"]


# Memories that name a thing of the world, and fact questions about that thing holding most but
# not all of their rare words (60-75% here; recall.coverage_needed: a fact question about the
# world passes on words alone only with a memory holding every one of them; before, 60% did).
NAMED = [
    "The user's favourite typeface is Inter Display; every slide deck they make uses it.",
    "The user has a framed print of Hokusai's The Great Wave in the hallway.",
    "用户写稿时喜欢听巴赫的《哥德堡变奏曲》，尤其是古尔德的录音。",
    "用户最爱的电影是《卧虎藏龙》，看过不下十遍。",
    "用户每年春天都去无锡鼋头渚看樱花。",
]
NAMED_WORLD = [
    "Who designed the Inter Display typeface?",
    "When did Hokusai make The Great Wave?",
    "巴赫创作《哥德堡变奏曲》的背景是什么？",
    "古尔德录的《哥德堡变奏曲》有几个版本？",
]
NAMED_PERSONAL = {
    "Which font should I use for my next deck?": NAMED[0],
    "What hangs in my hallway?": NAMED[1],
    "写稿的时候我一般听什么音乐？": NAMED[2],
    "我最爱的电影是哪部？": NAMED[3],
    "春天我一般去哪儿看花？": NAMED[4],
}


@pytest.fixture(scope="module")
def named(shared_gateway: GatewayProcess) -> tuple[GatewayProcess, str]:
    _store(shared_gateway, "world-named", NAMED)
    return shared_gateway, "world-named"


@pytest.mark.parametrize("query", NAMED_WORLD)
def test_fact_question_about_a_thing_a_memory_names_injects_nothing(named, query):
    gw, scope = named
    body = _recall(gw, scope, query)
    assert body["relevance"]["world_question"] > recall.WORLD_MAX, body["relevance"]
    assert body["memories"] == [], [m["content"] for m in body["memories"]]


@pytest.mark.parametrize("query", sorted(NAMED_PERSONAL))
def test_the_same_thing_asked_about_the_user_brings_the_memory(named, query):
    gw, scope = named
    contents = [m["content"] for m in _recall(gw, scope, query)["memories"]]
    assert NAMED_PERSONAL[query] in contents, contents

"""Issue 12 through the real gateway: relevance instead of quota, ranking independent of the
limit, speakers in L0, the no-LLM extractor on the statements the issue reports, and the
conversation set (hybrid against each of its sides)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess
from tests.support.quality_eval import _capture_conversations, conversation_recall
from tests.support.recall_eval import post_memories
from tests.support.rules_eval import evaluate

FIXTURES = Path(__file__).parent / "fixtures"

# A small scope about one user, as after a few weeks of use.
PROFILE = [
    "用户对花生严重过敏",
    "用户养了一只叫豆豆的橘猫",
    "用户在杭州一家游戏公司做后端开发",
    "用户每周三晚上打羽毛球",
    "用户的女儿今年六岁，在上小学一年级",
    "The user is learning to play the cello",
    "The user drives a blue Subaru Outback",
    "The user's partner is called Sam and works as a nurse",
    "The user prefers window seats on long flights",
    "The user is training for the Berlin marathon in September",
]
RELATED = {
    "我能吃花生酱吗？": "用户对花生严重过敏",
    "我家猫叫什么名字？": "用户养了一只叫豆豆的橘猫",
    "我周中晚上有什么运动安排？": "用户每周三晚上打羽毛球",
    "Which instrument am I practising these days?": "The user is learning to play the cello",
    "What car do I have?": "The user drives a blue Subaru Outback",
    "Which race am I preparing for?": "The user is training for the Berlin marathon in September",
}
UNRELATED = [
    "What is the capital of Australia?",
    "Convert 100 Fahrenheit to Celsius.",
    "Explain the difference between TCP and UDP.",
    "光合作用的原理是什么？",
    "柏林墙是哪一年倒塌的？",
    "用两句话概括《哈姆雷特》的剧情。",
]


@pytest.fixture(scope="module")
def profile_gateway(shared_gateway: GatewayProcess) -> tuple[GatewayProcess, str]:
    scope = "relevance-profile"
    with shared_gateway.client() as c:
        post_memories(c, ({"id": t, "memory": t} for t in PROFILE), scope, "p")
    shared_gateway.wait_embedded(timeout=120)
    return shared_gateway, scope


def _recall(gw: GatewayProcess, scope: str, query: str) -> dict:
    with gw.client() as c:
        r = c.post("/recall", json={"query": query, "session_key": "p", "scope": scope})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("query", UNRELATED)
def test_unrelated_question_injects_nothing_and_says_so(profile_gateway, query):
    gw, scope = profile_gateway
    body = _recall(gw, scope, query)
    assert body["memories"] == [], [m["content"] for m in body["memories"]]
    assert body["prepend_context"] == ""
    assert body["relevance"]["applied"] is True
    assert body["relevance"]["passed"] == 0
    assert body["relevance"]["note"] == "nothing stored is related to this query"
    assert body["strategy"] in ("hybrid", "embedding")  # semantic recall ran


@pytest.mark.parametrize("query", sorted(RELATED))
def test_related_question_injects_the_right_memory(profile_gateway, query):
    gw, scope = profile_gateway
    body = _recall(gw, scope, query)
    contents = [m["content"] for m in body["memories"]]
    assert RELATED[query] in contents, contents
    assert RELATED[query] in body["prepend_context"]
    # Relevance, not quota: the other memories of the scope are not all pushed in as well.
    assert len(contents) < 5, contents


def test_ranking_does_not_depend_on_limit(profile_gateway):
    gw, scope = profile_gateway
    with gw.client() as c:
        for query in ("我的运动习惯", "What do I do in my free time?"):
            short = c.post(
                "/search/memories", json={"query": query, "scope": scope, "limit": 3}
            ).json()
            long = c.post(
                "/search/memories", json={"query": query, "scope": scope, "limit": 10}
            ).json()
            assert [i["id"] for i in long["items"][:3]] == [i["id"] for i in short["items"]]


def test_speaker_and_time_are_indexed_and_shown(shared_gateway: GatewayProcess, scope: str):
    day = int(time.mktime((2026, 3, 2, 12, 0, 0, 0, 0, 0)) * 1000)
    turns = [
        ("user", "Melanie", "I spent Sunday morning painting a sunrise over the lake."),
        ("assistant", "Caroline", "That sounds beautiful, I love sunrises too."),
        ("user", "Melanie", "My son started swimming lessons."),
        ("assistant", "Caroline", "Wow, what an amazing family!"),
    ]
    with shared_gateway.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s1",
                "messages": [
                    {"role": role, "speaker": who, "content": text, "timestamp": day + i * 1000}
                    for i, (role, who, text) in enumerate(turns)
                ],
            },
        )
        assert r.status_code == 200, r.text
        # Body-level names (how an adapter says who the user and the assistant are).
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s2",
                "user_name": "王芳",
                "assistant_name": "小助手",
                "user_content": "我下周六搬家到朝阳区。",
                "assistant_content": "好的，需要我帮你列个清单吗？",
            },
        )
        assert r.status_code == 200, r.text
        shared_gateway.wait_embedded(timeout=120)
        found = c.post(
            "/search/conversations",
            json={"query": "When did Melanie paint a sunrise?", "scope": scope, "limit": 3},
        ).json()
        zh = c.post(
            "/search/conversations", json={"query": "王芳什么时候搬家", "scope": scope}
        ).json()
    top = found["items"][0]
    assert (top["speaker"], top["role"]) == ("Melanie", "user")
    assert "sunrise" in top["content"]
    assert "**[user · Melanie]**" in found["results"]
    assert "2026-03-0" in found["results"]  # when it was said, not when it was captured
    assert zh["items"][0]["speaker"] == "王芳" and "搬家" in zh["items"][0]["content"]
    assert any(i["speaker"] == "小助手" for i in zh["items"])


# -- the no-LLM extractor -----------------------------------------------------------------------

ISSUE_STATEMENTS = {
    "Remember: I only drink decaf coffee.": [["decaf"]],
    "Remember: I am allergic to peanuts.": [["allergic", "peanuts"]],
    "I don't drink caffeine.": [["caffeine"]],
    "我只喝低因咖啡。": [["低因咖啡"]],
    "我的工作项目数据库必须用 PostgreSQL。": [["PostgreSQL"]],
    "包管理器用 pnpm 不用 npm；代码注释用中文；提交记录以中文动词开头": [
        ["pnpm"],
        ["注释", "中文"],
        ["提交记录", "中文动词"],
    ],
}


def _say(c, scope: str, text: str) -> None:
    r = c.post(
        "/capture",
        json={"scope": scope, "session_key": "s", "user_content": text, "assistant_content": "OK"},
    )
    assert r.status_code == 200, r.text
    r = c.post("/session/end", json={"scope": scope, "session_key": "s", "wait": True})
    assert r.json()["flushed"] is True


def _memories(c, scope: str) -> list[dict]:
    return c.get("/memories", params={"scope": scope, "history": "true"}).json()["items"]


@pytest.mark.parametrize("text", sorted(ISSUE_STATEMENTS))
def test_statements_of_the_issue_are_kept(shared_gateway: GatewayProcess, scope: str, text):
    with shared_gateway.client() as c:
        _say(c, scope, text)
        mems = [m for m in _memories(c, scope) if m["status"] == "active"]
    for keywords in ISSUE_STATEMENTS[text]:
        assert any(all(k.lower() in m["content"].lower() for k in keywords) for m in mems), (
            keywords,
            [m["content"] for m in mems],
        )
    if "Remember" in text or text.startswith(("I ", "我只")):
        # A statement about the user is not an instruction to the assistant.
        assert {m["type"] for m in mems} == {"persona"}


@pytest.mark.parametrize(
    ("before", "after", "new", "old"),
    [
        (
            "我的工作项目数据库必须用 PostgreSQL。",
            "我们决定把项目数据库改用 MySQL 了。",
            "MySQL",
            "PostgreSQL",
        ),
        (
            "Our backend uses MongoDB.",
            "We've moved off MongoDB to Postgres.",
            "Postgres",
            "MongoDB",
        ),
    ],
)
def test_a_change_makes_the_new_value_current(shared_gateway, scope, before, after, new, old):
    with shared_gateway.client() as c:
        _say(c, scope, before)
        _say(c, scope, after)
        mems = _memories(c, scope)
        recalled = c.post(
            "/search/memories", json={"query": "database", "scope": scope, "limit": 5}
        ).json()
    active = [m for m in mems if m["status"] == "active"]
    assert any(new in m["content"] for m in active)
    assert not any(old in m["content"] and new not in m["content"] for m in active)
    gone = [m for m in mems if m["status"] == "superseded"]
    assert any(old in m["content"] for m in gone), "the old value is kept as history"
    assert all(old not in i["content"] or new in i["content"] for i in recalled["items"])


def test_chit_chat_becomes_no_instruction(shared_gateway: GatewayProcess, scope: str):
    with shared_gateway.client() as c:
        for text in ("You must have had some great ideas.", "你一定很累吧。", "Wow, what a pic!"):
            _say(c, scope, text)
        assert [m for m in _memories(c, scope) if m["type"] == "instruction"] == []


@pytest.mark.slow
def test_rule_blind_set_precision_and_recall(tmp_path: Path):
    """The blind set (written before the rules, never read while writing them): aggregate
    figures only. Measured 0.868 recall / 0.940 precision at the time of writing."""
    data = json.loads((FIXTURES / "blind" / "rule_statements.json").read_text("utf-8"))
    figures = evaluate(tmp_path, data)["figures"]["all"]
    assert figures["recall"] >= 0.85, figures
    assert figures["precision"] >= 0.85, figures
    assert figures["instruction_errors"] <= 3, figures


# -- conversations ----------------------------------------------------------------------------


@pytest.mark.slow
def test_hybrid_beats_keyword_and_matches_embedding_on_conversations(tmp_path: Path):
    data = json.loads((FIXTURES / "dev" / "conversations.json").read_text("utf-8"))
    res = conversation_recall(tmp_path, data)["methods"]
    kw, emb, hyb = (res[m]["all"] for m in ("keyword", "embedding", "hybrid"))
    assert hyb["evidence_r10"] > kw["evidence_r10"], res
    assert hyb["session_r5"] > kw["session_r5"], res
    assert hyb["evidence_r10"] >= emb["evidence_r10"], res
    assert hyb["session_r5"] >= emb["session_r5"], res


# -- recency and time ---------------------------------------------------------------------------


def test_later_statement_on_the_same_subject_ranks_first(shared_gateway: GatewayProcess, scope):
    with shared_gateway.client() as c:
        for text in (
            "The user's favourite colour is blue",
            "The user works from home on Fridays",
            "The user's favourite colour is green",
        ):
            r = c.post(
                "/memories",
                json={"content": text, "type": "persona", "session_key": "p", "scope": scope},
            )
            assert r.status_code == 201, r.text
        shared_gateway.wait_embedded(timeout=60)
        body = c.post(
            "/recall",
            json={"query": "What is my favourite colour?", "session_key": "p", "scope": scope},
        ).json()
        found = c.post(
            "/search/memories",
            json={"query": "favourite colour blue", "scope": scope, "limit": 5},
        ).json()
    colours = [m["content"] for m in body["memories"] if "colour" in m["content"]]
    assert colours[0] == "The user's favourite colour is green", colours
    listed = [i["content"] for i in found["items"] if "colour" in i["content"]]
    assert listed[0] == "The user's favourite colour is green", listed


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("I met my new neighbor Anna yesterday.", "2026-03-03", None),
        ("我上周去成都出差了。", "2026-02-23", "2026-03-01"),
    ],
)
def test_relative_dates_resolve_against_the_message_time(
    shared_gateway: GatewayProcess, scope, text, start, end
):
    said = int(time.mktime((2026, 3, 4, 12, 0, 0, 0, 0, -1)) * 1000)  # a Wednesday
    with shared_gateway.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s",
                "messages": [
                    {"role": "user", "content": text, "timestamp": said},
                    {"role": "assistant", "content": "OK", "timestamp": said + 1000},
                ],
            },
        )
        assert r.status_code == 200, r.text
        assert c.post("/session/end", json={"scope": scope, "session_key": "s"}).json()["flushed"]
        mems = _memories(c, scope)
    assert len(mems) == 1, mems
    meta = mems[0]["metadata"]
    assert meta.get("activity_start_time") == start, meta
    assert meta.get("activity_end_time") == end, meta


# -- across languages -------------------------------------------------------------------------

# Scopes holding memories in one language asked about in the other (a user who switches
# language between sessions). Before the relevance cut these were injected; a cut that drops
# an allergy because it was stated in Chinese and asked about in English is worse than useless.
CROSS_SCOPES = {
    "xl-three": [
        "我对花生过敏，平时喜欢吃川菜。",
        "I prefer tea over coffee.",
        "I live in Munich.",
    ],
    "xl-six": [
        "I am allergic to peanuts.",
        "I live in Munich with my wife.",
        "我住在杭州西湖区。",
        "我对海鲜过敏。",
        "I prefer tea over coffee.",
        "我喜欢周末去爬山。",
    ],
    "xl-pairs": [
        "我养了一只叫豆豆的橘猫。",
        "I work as a nurse at a children's hospital.",
        "我每周三晚上打羽毛球。",
        "My daughter is six years old.",
        "我开一辆蓝色的斯巴鲁。",
        "I am vegetarian and never eat meat.",
        "我对青霉素过敏。",
        "I am learning to play the cello.",
    ],
}
# Not asserted: "What car do I drive?" for "我开一辆蓝色的斯巴鲁。" measured 1.9 to 2.0, on the bar.
CROSS_RELATED = [
    ("xl-three", "what food am I allergic to", "花生"),
    ("xl-three", "Can I eat peanut butter?", "花生"),
    ("xl-three", "我住在哪里", "Munich"),
    ("xl-three", "推荐一道适合我的零食", "花生"),
    ("xl-six", "What should I do this weekend?", "爬山"),
    ("xl-six", "我喝咖啡还是茶？", "tea"),
    ("xl-pairs", "What is my cat's name?", "豆豆"),
    ("xl-pairs", "我是做什么工作的？", "nurse"),
    ("xl-pairs", "What sport do I play?", "羽毛球"),
    ("xl-pairs", "我女儿几岁了？", "daughter"),
    # A known miss (both models' z under 2.0 against all 40 references) until session 12: the
    # references in the question's language and FLOOR_Z 1.5 find it.
    ("xl-pairs", "今晚给我推荐一道菜", "vegetarian"),
    ("xl-pairs", "Which medicine am I allergic to?", "青霉素"),
    ("xl-pairs", "我在学什么乐器？", "cello"),
]
CROSS_UNRELATED = [
    ("xl-three", "What is the capital of Australia?"),
    ("xl-three", "解释一下TCP和UDP的区别。"),
    ("xl-six", "How do I reverse a linked list in Python?"),
    ("xl-six", "给我讲讲量子计算的基本原理。"),
    ("xl-pairs", "Explain how a compiler works."),
    ("xl-pairs", "长城有多长？"),
]


def _own_gateway(tmp_path_factory: pytest.TempPathFactory, name: str, scopes: dict[str, list[str]]):
    """A gateway holding only ``scopes`` (each memory stored over HTTP, then embedded)."""
    gw = GatewayProcess(tmp_path_factory.mktemp(name) / "data").start()
    try:
        with gw.client() as c:
            for scope, texts in scopes.items():
                post_memories(c, ({"id": t, "memory": t} for t in texts), scope, "p")
        gw.wait_embedded(timeout=120)
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="module")
def cross_gateway(tmp_path_factory: pytest.TempPathFactory):
    """A gateway of its own: a scope's scores are centred on its mean shrunk toward the mean of
    all scopes, so on the shared gateway these figures (and the strict xfail below) moved with
    whatever the other tests had stored by then."""
    yield from _own_gateway(tmp_path_factory, "cross", CROSS_SCOPES)


@pytest.mark.parametrize(("scope_name", "query", "needle"), CROSS_RELATED)
def test_memory_in_the_other_language_is_recalled(cross_gateway, scope_name, query, needle):
    body = _recall(cross_gateway, scope_name, query)
    contents = [m["content"] for m in body["memories"]]
    assert any(needle in c for c in contents), (query, contents, body["relevance"])
    assert needle in body["prepend_context"]


@pytest.mark.parametrize(("scope_name", "query"), CROSS_UNRELATED)
def test_unrelated_question_injects_nothing_in_either_language(cross_gateway, scope_name, query):
    body = _recall(cross_gateway, scope_name, query)
    assert body["memories"] == [], [m["content"] for m in body["memories"]]
    assert body["relevance"]["passed"] == 0


# -- compounds split into statements (the no-LLM extractor, through capture) ---------------------

# Stored in the third person since issue 23 (the user's words stay in L0): "我" inside a system
# prompt reads as the assistant.
COMPOUNDS = {
    "我对花生过敏，平时喜欢吃川菜。": ["用户对花生过敏", "用户平时喜欢吃川菜"],
    "我对海鲜过敏，并且不吃辣。": ["用户对海鲜过敏", "用户不吃辣"],
    "我喜欢喝茶，而且每天早上跑步。": ["用户喜欢喝茶", "用户每天早上跑步"],
    "我住在杭州西湖区；每周三晚上打羽毛球。": ["用户住在杭州西湖区", "用户每周三晚上打羽毛球"],
    "I live in Berlin and I prefer tea over coffee.": [
        "The user lives in Berlin",
        "The user prefers tea over coffee",
    ],
    # One statement: the second clause is about the cat, not the user.
    "我养了一只猫，叫豆豆。": ["用户养了一只猫，叫豆豆"],
}


@pytest.mark.parametrize("text", sorted(COMPOUNDS))
def test_compound_statement_becomes_one_memory_per_clause(shared_gateway, scope, text):
    with shared_gateway.client() as c:
        _say(c, scope, text)
        mems = sorted(
            m["content"].rstrip("。.") for m in _memories(c, scope) if m["status"] == "active"
        )
    assert mems == sorted(COMPOUNDS[text]), mems


def test_captured_zh_allergy_is_recalled_for_an_english_question(shared_gateway, scope):
    with shared_gateway.client() as c:
        for text in (
            "我对花生过敏，平时喜欢吃川菜。",
            "I prefer tea over coffee.",
            "I live in Munich.",
        ):
            _say(c, scope, text)
        shared_gateway.wait_embedded(timeout=120)
    for query in ("Can I eat peanut butter?", "what food am I allergic to"):
        body = _recall(shared_gateway, scope, query)
        assert any("花生" in m["content"] for m in body["memories"]), (query, body["relevance"])
    body = _recall(shared_gateway, scope, "What is the capital of Australia?")
    assert body["memories"] == [], [m["content"] for m in body["memories"]]


# -- session 3: replies found with their question, more phrasings kept -------------------------

# Dev conversation questions whose evidence is a reply that shares nothing with the question but
# follows the turn that does ("Did the landlord fix Nora's heating?" -> "Finally, after three
# months of emails."). Before the reply context they ranked 28th and 20th of each conversation.
REPLY_QUESTIONS = {"q031": "c2-s2-t18", "q065": "c4-s1-t12"}


def test_a_reply_is_found_with_the_turn_it_answers(shared_gateway: GatewayProcess, scope: str):
    data = json.loads((FIXTURES / "dev" / "conversations.json").read_text("utf-8"))
    questions = {q["id"]: q for q in data["questions"] if q["id"] in REPLY_QUESTIONS}
    wanted = {q["conversation"] for q in questions.values()}
    convs = [dict(c, id=f"{scope}-{c['id']}") for c in data["conversations"] if c["id"] in wanted]
    with shared_gateway.client() as c:
        _capture_conversations(c, {"conversations": convs})
        shared_gateway.wait_embedded(timeout=300)
        for qid, evidence in REPLY_QUESTIONS.items():
            q = questions[qid]
            body = c.post(
                "/search/conversations",
                json={"query": q["question"], "scope": f"conv-{scope}-{q['conversation']}"},
            ).json()
            ids = [it["message_id"] for it in body["items"]]
            assert evidence in ids[:5], (q["question"], [it["content"] for it in body["items"]])


# Phrasings the first rules did not know (fronted topics and times, a when-clause on the
# assistant's work, polite rules, "X is my go-to Y", a number ending the sentence), with the
# memory type each must become; and look-alikes that must stay unremembered.
MORE_PHRASINGS = {
    "咖啡我只喝美式。": ("美式", "persona"),
    "周末我一般会带孩子去公园。": ("公园", "persona"),
    "给我写邮件的时候用正式的语气。": ("正式", "instruction"),
    "On weekends I usually go hiking with my dog.": ("hiking", "persona"),
    "When you write code for me, use type hints.": ("type hints", "instruction"),
    "I'd prefer that you don't use bullet points.": ("bullet points", "instruction"),
    "My new phone is a Pixel 9.": ("Pixel 9", "persona"),
}
NOT_STATEMENTS = [
    "晚上我想吃火锅。",
    "这个我不太清楚。",
    "When you get a chance, send me the report.",
]


@pytest.mark.parametrize("text", sorted(MORE_PHRASINGS))
def test_more_phrasings_are_kept(shared_gateway: GatewayProcess, scope: str, text):
    needle, kind = MORE_PHRASINGS[text]
    with shared_gateway.client() as c:
        _say(c, scope, text)
        mems = [m for m in _memories(c, scope) if m["status"] == "active"]
    assert [(needle in m["content"], m["type"]) for m in mems] == [(True, kind)], mems


def test_look_alikes_are_not_kept(shared_gateway: GatewayProcess, scope: str):
    with shared_gateway.client() as c:
        for text in NOT_STATEMENTS:
            _say(c, scope, text)
        assert [m["content"] for m in _memories(c, scope)] == []


# -- tiny one-topic scopes ----------------------------------------------------------------------

# A new user's first memories are often a few statements on one subject (a value restated with
# a detail that differs). Scores used to be centred on the scope's mean shrunk toward the mean of
# all scopes: when both are near the memories themselves (a fresh gateway whose few scopes say
# the same kind of thing) the centred vectors keep only what differs (the marker), and "What is
# my favorite color?" injected nothing ("nothing stored is related"). One marker per memory, as
# in the OpenClaw suite that first showed it.
TINY_SCOPES = {
    "tiny-en-1": ["The user's favorite color is teal-4e1a."],
    "tiny-en-2": [
        "The user's favorite color is teal-7f3a.",
        "The user's favorite color is teal-b2c9.",
    ],
    "tiny-en-3": [
        "The user's favorite color is teal-0d5e.",
        "The user's favorite color is teal-91fa.",
        "The user's favorite color is teal-c6b3.",
    ],
    "tiny-zh-1": ["用户最喜欢的颜色是青绿色-4e1a。"],
    "tiny-zh-2": ["用户最喜欢的颜色是青绿色-7f3a。", "用户最喜欢的颜色是青绿色-b2c9。"],
    "tiny-zh-3": [
        "用户最喜欢的颜色是青绿色-0d5e。",
        "用户最喜欢的颜色是青绿色-91fa。",
        "用户最喜欢的颜色是青绿色-c6b3。",
    ],
}
TINY_QUESTIONS = {
    "en": ("What is my favorite color? Check your memory.", "teal-"),
    "zh": ("我最喜欢什么颜色？查一下你的记忆。", "青绿色-"),
}
TINY_UNRELATED = ["What is the capital of Australia?", "光合作用的原理是什么？"]


@pytest.fixture(scope="module")
def tiny_gateway(tmp_path_factory: pytest.TempPathFactory):
    """A gateway of its own holding only the tiny scopes, so what other tests store cannot
    change the figures (the failure needs every scope to be this small)."""
    yield from _own_gateway(tmp_path_factory, "tiny", TINY_SCOPES)


@pytest.mark.both_backends
@pytest.mark.parametrize("scope_name", sorted(TINY_SCOPES))
def test_tiny_one_topic_scope_recalls_its_memory(tiny_gateway, scope_name):
    query, needle = TINY_QUESTIONS[scope_name.split("-")[1]]
    body = _recall(tiny_gateway, scope_name, query)
    contents = [m["content"] for m in body["memories"]]
    assert any(needle in c for c in contents), (query, contents, body["relevance"])
    assert needle in body["prepend_context"]


@pytest.mark.both_backends
@pytest.mark.parametrize("scope_name", sorted(TINY_SCOPES))
def test_tiny_scope_unrelated_question_injects_nothing(tiny_gateway, scope_name):
    for query in TINY_UNRELATED:
        body = _recall(tiny_gateway, scope_name, query)
        assert body["memories"] == [], (query, [m["content"] for m in body["memories"]])
        assert body["relevance"]["applied"] is True

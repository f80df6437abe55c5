"""The rule-based extractor (no LLM): clear statements in, nothing from questions or chatter."""

from __future__ import annotations

import pytest

from memory_tencentdb.pipeline import rules

EXTRACTED = [
    ("I go for a 5 km run every morning before work.", "habit", "persona"),
    ("I prefer dark mode in every editor.", "preference", "persona"),
    ("I'm allergic to peanuts.", "preference", "persona"),
    ("My name is Ana.", "fact", "persona"),
    ("I work at Acme as a data engineer.", "fact", "persona"),
    ("Always answer in English.", "rule", "instruction"),
    ("Never use emojis in your replies.", "rule", "instruction"),
    ("From now on, keep answers short.", "rule", "instruction"),
    ("The project database must be PostgreSQL.", "constraint", "instruction"),
    ("Let's switch to MySQL.", "switch", "instruction"),
    ("我每天早上六点起床跑步五公里。", "habit", "persona"),
    ("我喜欢喝美式咖啡。", "preference", "persona"),
    ("我住在杭州。", "fact", "persona"),
    ("以后回答一律用中文。", "rule", "instruction"),
    ("不要使用表情符号。", "rule", "instruction"),
    ("项目数据库必须用PostgreSQL。", "constraint", "instruction"),
    ("我们换成MySQL吧。", "switch", "instruction"),
]

IGNORED = [
    "What's the weather like in Paris today?",
    "Can you explain how recursion works?",
    "Write a poem about cats.",
    "Fix this bug please.",
    "Thanks!",
    "/reset",
    "今天巴黎天气怎么样？",
    "给我讲讲递归是怎么回事。",
    "帮我写一首诗",
    "你能以后都用中文回答吗？",
    "Never mind, it works now.",
    "I have a quick question about the deploy.",
    "I'm a bit tired today.",
    "My code is broken again.",
    "我有个问题想问你。",
    "我是说上一个版本。",
    "我的代码又报错了。",
]


@pytest.mark.parametrize(("text", "kind", "type_"), EXTRACTED)
def test_clear_statements_are_extracted(text, kind, type_):
    found = rules.extract(text)
    assert [(m.kind, m.type) for m in found] == [(kind, type_)]


@pytest.mark.parametrize("text", IGNORED)
def test_questions_requests_and_chatter_are_ignored(text):
    assert rules.extract(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "Please remember three rules: always answer in English, never use emojis, and keep "
        "every answer under 200 words.",
        "请记住三条规则：1. 回答一律用中文；2. 不要使用表情符号；3. 每次回答不超过200字。",
        "以后回答都用中文，不要使用表情符号，代码注释必须用英文。",
        "- Always use type hints\n- Never commit to main\n- Prefer pytest over unittest",
    ],
)
def test_several_rules_in_one_message_become_several_memories(text):
    found = rules.extract(text)
    assert len(found) == 3, [m.content for m in found]
    assert all(m.type == "instruction" for m in found)


def test_slots_and_switches():
    (pg,) = rules.extract("The project database must be PostgreSQL.")
    assert pg.slot == ("project database", "PostgreSQL")
    (sw,) = rules.extract("Let's switch the database to MySQL instead.")
    assert (sw.switch_to, sw.slot) == ("MySQL", ("database", "MySQL"))
    assert rules.same_subject("project database", "database")
    assert rules.same_subject("项目数据库", "数据库")
    assert not rules.same_subject("favourite colour", "database")
    (zh,) = rules.extract("把数据库换成MySQL。")
    assert (zh.switch_to, zh.slot) == ("MySQL", ("数据库", "MySQL"))


@pytest.mark.parametrize(
    ("said", "stored"),
    [
        ("我对花生过敏", "用户对花生过敏"),
        ("我的生日是三月十二日", "用户的生日是三月十二日"),
        ("我女儿每周三学钢琴", "用户的女儿每周三学钢琴"),
        ("我们团队用飞书沟通", "用户的团队用飞书沟通"),
        ("我们家的猫叫豆豆", "用户家的猫叫豆豆"),
        ("自我介绍要简短", "自我介绍要简短"),
        ("I'm allergic to peanuts", "The user is allergic to peanuts"),
        ("I don't eat pork", "The user does not eat pork"),
        ("I usually watch movies on Fridays", "The user usually watches movies on Fridays"),
        (
            "I study Japanese and I play tennis",
            "The user studies Japanese and the user plays tennis",
        ),
        ("I've been vegetarian for three years", "The user has been vegetarian for three years"),
        ("I used to live in Paris", "The user used to live in Paris"),
        ("My wife's name is Sam", "The user's wife's name is Sam"),
        ("Call me Ana", "Call the user Ana"),
        ("Always answer in English", "Always answer in English"),
    ],
)
def test_memories_are_written_in_the_third_person(said, stored):
    assert rules.third_person(said) == stored


def test_a_clause_keeps_its_own_subject():
    found = rules.extract("我女儿在读小学三年级，每周三下午学钢琴。")
    assert [m.content for m in found] == ["用户的女儿在读小学三年级，每周三下午学钢琴。"]
    found = rules.extract("我女儿今年六岁。每周三学钢琴。")
    assert all("女儿" in m.content for m in found if "钢琴" in m.content), found

"""Everyday questions that are about nobody in particular: the null model of the relevance cut.

A memory's similarity to a query means little on its own (small models put every text in a
narrow cone, and some memories are close to everything). What it is measured against instead is
how similar the same memory is to these questions, which no memory answers: a memory that
stands well above its similarity to them (a z-score) is related to the query; one that does not
is noise that should not be injected. Both languages, many subjects, the shapes of real asks.
Written for this purpose; the dev set of unrelated queries that calibrated the cut
(tests/fixtures/dev/unrelated_queries.json) is a different list.
"""

from __future__ import annotations

REFERENCE_QUERIES = (
    "How do I centre a div in CSS?",
    "What's the weather like in Tokyo in spring?",
    "Can you explain how vaccines work?",
    "Write a short poem about autumn leaves.",
    "What is the square root of 144?",
    "Who painted the Mona Lisa?",
    "How long should I boil an egg?",
    "Recommend a good science fiction book.",
    "What causes the northern lights?",
    "How do I undo the last git commit?",
    "What is the population of Canada?",
    "Explain recursion to a beginner.",
    "What's the difference between a virus and a bacterium?",
    "Draft an email asking for a meeting next week.",
    "How does a car engine work?",
    "What are the rules of chess?",
    "Tell me a fun fact about octopuses.",
    "How do I make a list comprehension in Python?",
    "What time zone is London in?",
    "Why is the sky blue?",
    "帮我写一段自我介绍。",
    "怎么用Excel做数据透视表？",
    "地球到月球有多远？",
    "推荐几部好看的电影。",
    "如何提高英语口语？",
    "长城有多长？",
    "帮我把这段话翻译成英文。",
    "什么是区块链？",
    "怎么煮一碗好吃的面条？",
    "明天会下雨吗？",
    "解释一下相对论。",
    "Python和Java有什么区别？",
    "三角形的内角和是多少？",
    "世界上最高的山是哪座？",
    "给我讲个笑话。",
    "怎么写一份工作周报？",
    "为什么天空是蓝色的？",
    "什么是机器学习？",
    "如何安装Docker？",
    "唐朝是哪一年建立的？",
)

"""Paraphrase recall on the embedded default, measured through the real gateway over HTTP.

The set (tests/fixtures/recall_paraphrase_pairs.json) pairs each memory, an L1-style fact about
the user, with a query that asks about or restates that same fact in other words and shares no
content word with it: keyword search alone cannot find it, only semantic recall can. Unlike
recall_pairs.json (mostly inference pairs: a need against a constraint), these are plain
paraphrases. The set was written blind, before any model or gateway had seen it. Every memory of
recall_pairs.json is stored alongside as a distractor; the bar is R@5 >= 0.80.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tencentdb.text.tokenize import query_terms
from tests.support.recall_eval import rank, store_and_recall

FIXTURES = Path(__file__).parent / "fixtures"
DATASET = FIXTURES / "recall_paraphrase_pairs.json"
DISTRACTORS = FIXTURES / "recall_pairs.json"
SCOPE = "recall-paraphrase"
TOP = 5


def _load() -> dict:
    return json.loads(DATASET.read_text("utf-8"))


def _distractors() -> list[dict]:
    other = json.loads(DISTRACTORS.read_text("utf-8"))
    return other["pairs"] + other["lexical"] + other["distractors"]


# -- the data set itself ----------------------------------------------------------------------


def test_dataset_shape():
    pairs = _load()["pairs"]
    assert len(pairs) == 40
    zh = sum(p["lang"] == "zh" for p in pairs)
    assert 0.4 <= zh / len(pairs) <= 0.6, "about half Chinese, half English"
    items = pairs + _distractors()
    assert len({i["id"] for i in items}) == len(items), "ids are unique, distractors included"
    memories = [i["memory"] for i in items]
    assert len(set(memories)) == len(memories), "memories are unique, distractors included"


def test_pairs_share_no_content_word():
    for p in _load()["pairs"]:
        q = set(query_terms(p["query"]))
        assert q, f"{p['id']}: the query has no content word at all"
        shared = q & set(query_terms(p["memory"]))
        assert not shared, f"{p['id']}: query and memory share {sorted(shared)}"


# -- through the gateway ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def recalled(tmp_path_factory) -> dict[str, dict]:
    """Store the paraphrase memories and every memory of recall_pairs.json, then recall each
    paraphrase query."""
    pairs = _load()["pairs"]
    return store_and_recall(
        tmp_path_factory.mktemp("recall-paraphrase"),
        pairs + _distractors(),
        pairs,
        top=TOP,
        scope=SCOPE,
        session_key="recall-paraphrase",
    )


@pytest.mark.slow
def test_paraphrase_pairs_recall_at_5(recalled):
    pairs = _load()["pairs"]
    ranks = {p["id"]: rank(recalled, p["id"]) for p in pairs}
    hits = [i for i, r in ranks.items() if r is not None and r <= TOP]
    misses = {p["id"]: f"{p['query']} -> {p['memory']}" for p in pairs if p["id"] not in hits}
    assert len(hits) / len(pairs) >= 0.8, (
        f"R@5 {len(hits)}/{len(pairs)} = {len(hits) / len(pairs):.3f} < 0.80; missed: "
        + json.dumps(misses, ensure_ascii=False, indent=1)
    )

"""Hosts' own models serving memory, through a real gateway with no ``TDAI_LLM_*`` (issue 24).

One gateway, a keys file with two principals (agent-a, agent-b), each handing over its own fake
"host model" by ``POST /llm/host-model``. What must hold: each model receives only the
conversations of scopes its principal may write; the memories, scenes and persona come from its
replies; the key never shows; a failing model (429, 500, malformed JSON, wrong shape, too slow)
leaves the rules' memories now, and once it answers again the chunk is redone and arbitrated
against them: one active memory per fact, none lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_tencentdb.pipeline.prompts import L1_SYSTEM
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.host_model_fake import Fact, HostModelFake
from tests.support.wait import wait_for

KEY_A = "key-agent-a-0123456789"
KEY_B = "key-agent-b-0123456789"
SECRET_A = "sk-host-secret-AAAA-1234"
SECRET_B = "sk-host-secret-BBBB-5678"
FAST = {
    **KEYWORD_ONLY,
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
    "TDAI_LLM__HOST_REST_SECONDS": "1",
    "TDAI_LLM_TIMEOUT_MS": "1500",  # not "configured": only the tasks' deadline
}
# The model's wording differs from what the rules store for the same sentence (third person since
# issue 23: "The user's favourite colour is teal."), so its redo is an update of the rules' memory.
FACTS_A = [
    Fact("cello", "The user plays the cello every Sunday.", "cello"),
    Fact("Oslo", "The user's sister lives in Oslo.", "Oslo"),
    Fact("teal", "The user likes the colour teal best.", "teal"),
    Fact("B-17", "The user parks in spot B-17.", "B-17"),
    Fact("bicycle", "The user rides a red bicycle.", "bicycle"),
    Fact("Lisbon", "The user has a trip to Lisbon in May.", "Lisbon"),
    Fact("Kyoto", "The user went to university in Kyoto.", "Kyoto"),
]
FACTS_B = [Fact("成都", "用户住在成都。", "成都"), Fact("花生", "用户对花生过敏。", "花生")]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("host-model") / "data"
    data.mkdir(parents=True)
    keys = {
        "principals": {
            "agent-a": {"key": KEY_A},
            "agent-b": {"key": KEY_B, "scopes": ["agent-b", "zh-*"]},
        }
    }
    (data / "keys.json").write_text(json.dumps(keys), "utf-8")
    fa, fb = FakeLLM().start(), FakeLLM().start()
    gw = GatewayProcess(data, env=FAST).start()
    try:
        yield {
            "gw": gw,
            "a": HostModelFake(fa, FACTS_A),
            "b": HostModelFake(fb, FACTS_B),
        }
    finally:
        gw.stop()
        fa.stop()
        fb.stop()


def client(gw: GatewayProcess, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=gw.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def hand_over(gw: GatewayProcess, key: str, fake: FakeLLM, secret: str, source: str) -> dict:
    with client(gw, key) as c:
        r = c.post(
            "/llm/host-model",
            json={
                "source": source,
                "base_url": fake.base_url,
                "api_key": secret,
                "model": f"{source}-own-model",
                "max_context": 128000,
            },
        )
    assert r.status_code == 200, r.text
    return r.json()


def turn(gw: GatewayProcess, key: str, scope: str, session: str, text: str) -> None:
    with client(gw, key) as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": session,
                "user_content": text,
                "assistant_content": "Noted.",
            },
        )
        assert r.status_code == 200, r.text
        r = c.post("/session/end", json={"scope": scope, "session_key": session, "wait": True})
        assert r.status_code == 200, r.text


def memories(gw: GatewayProcess, key: str, scope: str, history: bool = False) -> list[dict]:
    with client(gw, key) as c:
        r = c.get("/memories", params={"scope": scope, "history": str(history).lower()})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def health(gw: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gw.base_url + "/health", timeout=10).json()


def texts(reqs: list[dict]) -> str:
    return json.dumps([r.get("messages") for r in reqs], ensure_ascii=False)


def test_hand_over_refuses_bad_input_and_never_shows_the_key(env):
    gw = env["gw"]
    with client(gw, KEY_A) as c:
        bad = [
            ({"source": "hermes", "base_url": "http://x/v1"}, "model"),
            ({"source": "vim", "base_url": "http://x/v1", "model": "m"}, "source"),
            ({"source": "hermes", "base_url": "ftp://x", "model": "m"}, "base_url"),
            (
                {"source": "hermes", "base_url": "http://x/v1", "model": "m", "max_context": "9"},
                "max_context",
            ),
        ]
        for body, field in bad:
            r = c.post("/llm/host-model", json=body)
            assert r.status_code == 422 and field in r.json()["error"], (body, r.text)
    r = httpx.post(gw.base_url + "/llm/host-model", json={"source": "hermes"}, timeout=10)
    assert r.status_code == 401
    assert health(gw)["llm"]["host_models"] == []  # nothing was registered by a bad request

    assert hand_over(gw, KEY_A, env["a"].fake, SECRET_A, "hermes") == {"used": True}
    assert hand_over(gw, KEY_B, env["b"].fake, SECRET_B, "openclaw") == {"used": True}
    llm = health(gw)["llm"]
    assert llm["configured"] is False
    shown = {m["principal"]: m for m in llm["host_models"]}
    assert (
        shown["agent-a"]["model"] == "hermes-own-model" and shown["agent-a"]["host"] == "127.0.0.1"
    )
    assert "hermes-own-model" in llm["serving"] and "openclaw-own-model" in llm["serving"]
    assert llm["budget"]["calls_limit"] == 300 and llm["budget"]["tokens_limit"] == 600_000
    text = httpx.get(gw.base_url + "/health", timeout=10).text
    assert SECRET_A not in text and SECRET_B not in text and str(env["a"].fake.port) not in text
    assert SECRET_A not in gw.log()
    # `memory-tencentdb status` says which model serves memory, what waits, the budget left.
    run = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "status"],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("memory llm:")), "")
    assert "hermes-own-model (hermes, agent-a)" in line and " calls, " in line, run.stdout
    assert SECRET_A not in run.stdout + run.stderr


def test_each_principals_model_gets_only_its_own_scopes_conversations(env):
    gw, a, b = env["gw"], env["a"], env["b"]
    hand_over(gw, KEY_A, a.fake, SECRET_A, "hermes")
    hand_over(gw, KEY_B, b.fake, SECRET_B, "openclaw")
    turn(
        gw, KEY_A, "agent-a", "s-a1", "I play the cello every Sunday, and my sister lives in Oslo."
    )
    turn(gw, KEY_B, "zh-b", "s-b1", "我住在成都，而且我对花生过敏。")
    # An owner-only scope: neither principal may write it, so neither model sees it.
    with client(gw, gw.token or "") as c:
        r = c.post(
            "/capture",
            json={
                "scope": "owner-only",
                "session_key": "o1",
                "user_content": "I love espresso.",
                "assistant_content": "ok",
            },
        )
        assert r.status_code == 200
        c.post("/session/end", json={"scope": "owner-only", "session_key": "o1", "wait": True})

    got_a = {m["content"] for m in memories(gw, KEY_A, "agent-a")}
    assert got_a == {FACTS_A[0].content, FACTS_A[1].content}, got_a
    got_b = {m["content"] for m in memories(gw, KEY_B, "zh-b")}
    assert got_b == {FACTS_B[0].content, FACTS_B[1].content}, got_b

    seen_a, seen_b = texts(a.memory_requests()), texts(b.memory_requests())
    assert "cello" in seen_a and "成都" not in seen_a and "espresso" not in seen_a
    assert "成都" in seen_b and "cello" not in seen_b and "espresso" not in seen_b
    # The owner-only scope was served by the rules.
    owner = memories(gw, gw.token or "", "owner-only")
    assert owner and all(m["origin"] == "rules" for m in owner), owner

    # L2 scenes and the persona come from the host model's replies.
    root_a = _scope_root(gw, "agent-a")
    wait_for(lambda: (root_a / "scene_blocks" / "host-model.md").exists(), what="scene file")
    scene = (root_a / "scene_blocks" / "host-model.md").read_text("utf-8")
    assert "HOST-SCENE" in scene and "cello" in scene
    wait_for(lambda: (root_a / "persona.md").exists(), what="persona")
    assert "HOST-PERSONA" in (root_a / "persona.md").read_text("utf-8")
    assert a.memory_requests("l2-scenes") and a.memory_requests("l3-persona")
    # The recall of agent-a's next turn carries them.
    with client(gw, KEY_A) as c:
        r = c.post("/recall", json={"scope": "agent-a", "session_key": "s-a2", "query": "cello"})
    ctx = json.dumps(r.json(), ensure_ascii=False)
    assert "HOST-PERSONA" in ctx and FACTS_A[0].content in ctx


@pytest.mark.parametrize(
    ("mode", "trigger"),
    [
        ("429", "teal"),
        ("500", "B-17"),
        ("malformed", "bicycle"),
        ("shape", "Lisbon"),
        ("slow", "Kyoto"),
    ],
)
def test_failing_model_leaves_the_rules_result_then_the_redo_reconciles(env, mode, trigger):
    gw, a = env["gw"], env["a"]
    hand_over(gw, KEY_A, a.fake, SECRET_A, "hermes")
    scope = "agent-a"
    fact = next(f for f in FACTS_A if f.trigger == trigger)
    sentence = {
        "teal": "My favourite colour is teal.",
        "B-17": "My parking spot is B-17.",
        "bicycle": "My bicycle is red.",
        "Lisbon": "I fly to Lisbon in May.",
        "Kyoto": "I studied in Kyoto.",
    }[trigger]
    a.mode, a.slow_s = mode, 4.0
    try:
        t0 = time.monotonic()
        turn(gw, KEY_A, scope, f"fail-{mode}", sentence)
        took = time.monotonic() - t0
        # The turn's capture + session end never waited for the model beyond its deadline.
        assert took < 8, took
        rules = [m for m in memories(gw, KEY_A, scope) if trigger in m["content"]]
        assert rules, f"{mode}: the rules stored nothing for {sentence!r}"
        assert all(m["origin"] == "rules" for m in rules), rules
        h = health(gw)["llm"]
        model = next(m for m in h["host_models"] if m["principal"] == "agent-a")
        assert model["failures"] >= 1 and model["last_error"], model
        assert SECRET_A not in json.dumps(h)
    finally:
        a.mode = None

    def reconciled() -> list[dict]:
        active = [m for m in memories(gw, KEY_A, scope) if trigger in m["content"]]
        return active if active and all(m["content"] == fact.content for m in active) else []

    active = wait_for(reconciled, timeout=30, what=f"{mode}: the redo with the model")
    assert len(active) == 1, active  # nothing duplicated
    # Nothing lost: the rules' version is kept as history, superseded by the model's.
    every = [m for m in memories(gw, KEY_A, scope, history=True) if trigger in m["content"]]
    assert any(m["origin"] == "rules" and m["status"] == "superseded" for m in every), every
    assert health(gw)["llm"]["redo_waiting"] == 0


def test_a_host_model_speaking_anthropic_messages_serves_and_fails_like_any(env):
    """``"api": "anthropic"``: the gateway asks ``{base_url}/v1/messages`` (Anthropic's shape,
    x-api-key); the memories are its replies; a 429 rests it and a non-JSON answer keeps the
    rules, each redone once it answers again. The owner hands it over for a scope only the
    owner may write, so the two agents' models stay out of it."""
    gw = env["gw"]
    owner = gw.token or ""
    with client(gw, owner) as c:
        r = c.post(
            "/llm/host-model",
            json={"source": "hermes", "base_url": "http://x", "model": "m", "api": "gemini"},
        )
        assert r.status_code == 422 and "api" in r.json()["error"], r.text
    facts = [
        Fact("cello", "The user plays the cello every Sunday.", "cello"),
        Fact("成都", "用户住在成都。", "成都"),
        FACTS_A[2],  # teal
        FACTS_A[4],  # bicycle
    ]
    with FakeLLM() as fake:
        model = HostModelFake(fake, facts)
        root = fake.base_url.removesuffix("/v1")
        with client(gw, owner) as c:
            r = c.post(
                "/llm/host-model",
                json={"source": "hermes", "base_url": root, "api_key": SECRET_A,
                      "model": "claude-own", "api": "anthropic"},
            )  # fmt: skip
        assert r.json() == {"used": True}, r.text
        scope = "anthropic-owner"
        try:
            turn(gw, owner, scope, "an-1", "I play the cello every Sunday. 我住在成都。")
            got = {m["content"]: m["origin"] for m in memories(gw, owner, scope)}
            assert got == {facts[0].content: "extraction", facts[1].content: "extraction"}, got
            asked = model.memory_requests("l1-extraction")
            assert asked and all(q["_path"] == "/v1/messages" for q in model.memory_requests())
            assert asked[0]["system"] == L1_SYSTEM and asked[0]["_headers"]["x-api-key"] == SECRET_A
            assert {m["role"] for m in asked[0]["messages"]} == {"user"}
            shown = next(m for m in health(gw)["llm"]["host_models"] if m["model"] == "claude-own")
            assert shown["api"] == "anthropic" and SECRET_A not in json.dumps(shown)

            for mode, trigger, sentence in (
                ("429", "teal", "My favourite colour is teal."),
                ("malformed", "bicycle", "My bicycle is red."),
            ):
                fact = next(f for f in facts if f.trigger == trigger)
                model.mode = mode
                try:
                    turn(gw, owner, scope, f"an-{mode}", sentence)
                    rules = [m for m in memories(gw, owner, scope) if trigger in m["content"]]
                    assert rules and all(m["origin"] == "rules" for m in rules), (mode, rules)
                    shown = next(
                        m for m in health(gw)["llm"]["host_models"] if m["model"] == "claude-own"
                    )
                    assert shown["failures"] >= 1 and shown["last_error"], shown
                finally:
                    model.mode = None

                def redone(f: Fact = fact, t: str = trigger) -> bool:
                    now = [m["content"] for m in memories(gw, owner, scope) if t in m["content"]]
                    return now == [f.content]

                wait_for(redone, timeout=30, what=f"anthropic {mode}: the redo")
        finally:
            with client(gw, owner) as c:
                c.delete("/llm/host-model")


def test_past_the_daily_budget_the_rules_serve_visibly_and_the_turns_wait(tmp_path):
    env = {**FAST, "TDAI_LLM__DAILY_CALL_BUDGET": "1"}
    with FakeLLM() as fake:
        model = HostModelFake(fake, FACTS_A)
        gw = GatewayProcess(tmp_path / "data", env=env).start()
        try:
            key = gw.token or ""
            assert hand_over(gw, key, fake, SECRET_A, "hermes") == {"used": True}
            turn(gw, key, "default", "b1", "I play the cello every Sunday.")
            turn(gw, key, "default", "b2", "My favourite colour is teal.")
            got = {m["content"]: m["origin"] for m in memories(gw, key, "default")}
            assert got[FACTS_A[0].content] == "extraction", got  # the one call the day allows
            teal = [c for c in got if "teal" in c]
            assert teal and all(got[c] == "rules" for c in teal), got
            assert len(model.memory_requests()) == 1
            llm = health(gw)["llm"]
            assert llm["budget"]["spent"] and llm["budget"]["calls_left"] == 0, llm
            assert "budget is spent" in llm["serving"], llm
            assert llm["redo_waiting"] == 1, llm  # the model redoes it when the day turns
        finally:
            gw.stop()


def _scope_root(gw: GatewayProcess, scope: str) -> Path:
    from memory_tencentdb.pipeline.layout import scope_root

    return scope_root(gw.data_dir, scope)

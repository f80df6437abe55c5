"""OpenClaw's own model distils memory under a long-lived `openclaw gateway run` (issue 24).

The fake LLM is OpenClaw's configured default model (``fake/fake-1``), our gateway has no
``TDAI_LLM_*``. Turns go through the OpenClaw Gateway (``openclaw agent`` without ``--local``),
so the bridge lives in that one process across turns. What must hold: the bridge hands the model
over and our extraction requests reach the fake; when our gateway restarts while OpenClaw lives
(an idle exit, a crash) the next turn hands the model over again and is extracted by it.

The same Gateway then serves a "forget that I said ..." turn: the model calls
memory_tencentdb_forget (through Tool Search's ``tool_call`` when the tool is not offered
directly), the gateway forgets that memory and no other, and the model reads what was removed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial

import httpx
import pytest

from memory_tencentdb.pipeline.prompts import L1_SYSTEM
from tests.openclaw.gateway_run import OpenClawGateway
from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID, OpenClawHome, require_openclaw
from tests.openclaw.offload_support import plugin_call
from tests.support import wait
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.host_model_fake import Fact, HostModelFake
from tests.support.recall_eval import post_memories
from tests.support.tool_agent import tools

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

FAST = {
    **KEYWORD_ONLY,
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
    "TDAI_LLM__HOST_REST_SECONDS": "1",
}
FACTS = [
    Fact("cello", "The user plays the cello every Sunday.", "cello"),
    Fact("乌龙茶", "用户下午喝乌龙茶。", "乌龙茶"),
]
SCOPE = "main"


def memories(gw: GatewayProcess) -> dict[str, str]:
    with gw.client() as c:
        r = c.get("/memories", params={"scope": SCOPE})
    assert r.status_code == 200, r.text
    return {m["content"]: m["origin"] for m in r.json()["items"]}


wait_for = partial(wait.wait_for, timeout=60.0)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    install = require_openclaw()
    tmp = tmp_path_factory.mktemp("oc-gw-host-model")
    with FakeLLM() as llm:
        fake = HostModelFake(llm, FACTS)
        gw = GatewayProcess(tmp / "data", env=FAST).start()
        home = OpenClawHome(install, tmp / "oc", llm.base_url)
        home.install_plugin(BRIDGE_DIR, BRIDGE_ID, {"port": gw.port, "dataDir": str(gw.data_dir)})
        oc = OpenClawGateway(home)
        try:
            yield oc, gw, fake
        finally:
            oc.stop()
            gw.stop()


def test_gateway_run_hands_the_model_over_and_keeps_it_across_a_memory_gateway_restart(setup):
    oc, gw, fake = setup
    oc.turn("I play the cello every Sunday.", "agent:main:gw-hm-1")
    extraction = wait_for(lambda: fake.memory_requests("l1-extraction"), what="extraction")
    assert extraction[0]["messages"][0]["content"] == L1_SYSTEM
    assert extraction[0]["model"] == "fake-1"
    got = wait_for(lambda: memories(gw), what="memories")
    assert got == {FACTS[0].content: "extraction"}, got
    serving = httpx.get(gw.base_url + "/health", timeout=10).json()["llm"]["serving"]
    assert "fake-1 (openclaw" in serving, serving

    # Our gateway restarts (idle exit, crash) while OpenClaw lives: it holds no model now.
    gw.restart()
    health = httpx.get(gw.base_url + "/health", timeout=10).json()["llm"]
    assert health["host_models"] == [], health
    before = len(fake.memory_requests("l1-extraction"))
    oc.turn("记住：我下午总是喝乌龙茶。", "agent:main:gw-hm-2")
    # The same long-lived bridge handed the model over again with that turn.
    wait_for(lambda: len(fake.memory_requests("l1-extraction")) > before, what="extraction again")
    got = wait_for(
        lambda: (m := memories(gw)).get(FACTS[1].content) == "extraction" and m,
        what="the second fact, extracted by the model",
    )
    assert FACTS[0].content in got
    assert oc.proc.poll() is None  # one OpenClaw process served both turns


def test_forget_tool_in_a_gateway_run_turn(setup):
    oc, gw, fake = setup
    seeded = [
        {"id": "phone", "memory": "用户的旧手机号是 138 0000 1234"},
        {"id": "walnuts", "memory": "The user is allergic to walnuts"},
    ]
    with gw.client() as c:
        ids = list(post_memories(c, seeded, SCOPE, "agent:main:x").values())
    start = len(fake.chat_turns())
    fake.push_chat(
        lambda body: tools(
            plugin_call(body, "memory_tencentdb_forget", "callforget", {"query": "旧手机号"})
        ),
        {"content": "好的，已经忘掉了。"},
    )
    done = oc.send(
        "忘掉我的旧手机号", "agent:main:forget-gw", asked=lambda: fake.chat_pending() < 2
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert fake.chat_pending() == 0, "the turn took both scripted replies"
    results = [
        m
        for r in fake.chat_turns()[start:]
        for m in r["messages"]
        if m.get("role") == "tool" and m.get("tool_call_id") == "callforget"
    ]
    assert results, "the forget call's result never reached the model"
    text = json.dumps(results[0], ensure_ascii=False)
    assert "Forgot 1 memory" in text and "138 0000 1234" in text, text
    with gw.client() as c:
        assert c.get(f"/memories/{ids[0]}", params={"scope": SCOPE}).json()["status"] == "deleted"
        assert c.get(f"/memories/{ids[1]}", params={"scope": SCOPE}).json()["status"] == "active"

"""Hermes's own model distils memory in Hermes gateway mode, a long-lived host (issue 24).

hermes-agent 0.19.0's ``hermes gateway run`` serves locally without a messaging platform through
its ``api_server`` platform (``API_SERVER_ENABLED``: an OpenAI-compatible ``/v1/chat/completions``
on 127.0.0.1, a key of 16+ characters); each request is a turn of the session named by
``X-Hermes-Session-Id``, run by the same Hermes process with our provider loaded once. The fake LLM
is Hermes's configured model; our gateway has no ``TDAI_LLM_*``. What must hold: the provider
hands the model over and our extraction requests reach the fake; after our gateway restarts while
Hermes lives, the next turn hands it over again and is extracted by the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import httpx
import pytest

from memory_tencentdb.pipeline.prompts import L1_SYSTEM
from tests.support import wait
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.host_model_fake import Fact, HostModelFake

from .gateway_mode import HermesGateway
from .harness import HermesHome

pytestmark = pytest.mark.hermes

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


wait_for = partial(wait.wait_for, timeout=60.0)


@pytest.fixture
def setup(tmp_path, hermes) -> Iterator[tuple]:
    with FakeLLM(default_reply="FAKE-REPLY") as llm:
        fake = HostModelFake(llm, FACTS)
        gw = GatewayProcess(tmp_path / "data", env=FAST).start()
        home = HermesHome.create(tmp_path, llm.base_url, gw.port)
        home.data_dir = gw.data_dir
        home.extra_env["MEMORY_TENCENTDB_AUTO_START"] = "0"  # the test's gateway, never another
        hg = None
        try:
            hg = HermesGateway(home)
            yield hg, gw, fake, home
        finally:
            if hg is not None:
                hg.stop()
            gw.stop()


def test_gateway_mode_hands_the_model_over_and_keeps_it_across_a_memory_gateway_restart(setup):
    hg, gw, fake, home = setup
    scope = home.default_scope()

    def memories() -> dict[str, str]:
        with gw.client() as c:
            r = c.get("/memories", params={"scope": scope})
        assert r.status_code == 200, r.text
        return {m["content"]: m["origin"] for m in r.json()["items"]}

    hg.turn("I play the cello every Sunday.", "gw-hm-1")
    extraction = wait_for(lambda: fake.memory_requests("l1-extraction"), what="extraction")
    assert extraction[0]["messages"][0]["content"] == L1_SYSTEM
    assert extraction[0]["model"] == "fake-model"
    assert wait_for(memories, what="memories") == {FACTS[0].content: "extraction"}

    gw.restart()  # our gateway restarts (idle exit, crash) while Hermes lives
    assert httpx.get(gw.base_url + "/health", timeout=10).json()["llm"]["host_models"] == []
    before = len(fake.memory_requests("l1-extraction"))
    hg.turn("记住：我下午总是喝乌龙茶。", "gw-hm-2")
    wait_for(lambda: len(fake.memory_requests("l1-extraction")) > before, what="extraction again")
    got = wait_for(
        lambda: (m := memories()).get(FACTS[1].content) == "extraction" and m,
        what="the second fact, extracted by the model",
    )
    assert FACTS[0].content in got
    assert hg.proc.poll() is None  # one Hermes process served both turns

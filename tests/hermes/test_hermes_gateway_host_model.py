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

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from memory_tencentdb.pipeline.prompts import L1_SYSTEM
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess, free_port
from tests.support.host_model_fake import Fact, HostModelFake

from .harness import HermesHome, hermes_venv

pytestmark = pytest.mark.hermes

FAST = {
    "TDAI_EMBEDDING_PROVIDER": "none",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
    "TDAI_LLM__HOST_REST_SECONDS": "1",
}
FACTS = [
    Fact("cello", "The user plays the cello every Sunday.", "cello"),
    Fact("乌龙茶", "用户下午喝乌龙茶。", "乌龙茶"),
]
API_KEY = "api-server-key-0123456789abcdef"  # Hermes refuses keys under 16 characters


class HermesGateway:
    """``hermes gateway run`` with the api_server platform on a free loopback port."""

    def __init__(self, home: HermesHome) -> None:
        self.port = free_port()
        env = home.env(
            API_SERVER_ENABLED="true",
            API_SERVER_HOST="127.0.0.1",
            API_SERVER_PORT=str(self.port),
            API_SERVER_KEY=API_KEY,
        )
        self.log = (home.root / "hermes-gateway.log").open("ab")
        self.proc = subprocess.Popen(
            [str(hermes_venv() / "bin" / "hermes"), "gateway", "run"],
            env=env, cwd=str(home.root), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "hermes gateway run exited"
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError("hermes gateway run never answered /health")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def turn(self, message: str, session: str) -> float:
        t0 = time.monotonic()
        r = httpx.post(
            f"{self.url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {API_KEY}", "X-Hermes-Session-Id": session},
            json={"model": "hermes-agent", "messages": [{"role": "user", "content": message}]},
            timeout=180,
        )
        assert r.status_code == 200, r.text[-2000:]
        assert r.json()["choices"][0]["message"]["content"] == "FAKE-REPLY", r.text[-2000:]
        return time.monotonic() - t0

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def wait_for(fn, timeout: float = 60.0, what: str = ""):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


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

"""The offload's LLM tasks on the hosts' own models (issue 24), through a real gateway with no
``TDAI_LLM_*``: two principals each hand over a fake model (``POST /llm/host-model``) that answers
our offload tasks (tests/support/offload_llm.py).

What must hold: a tool result is answered at once with its extractive row; its L1 summary then
arrives from the model of the principal that may write the scope (never the other one's); the
calls are charged to the day's memory budget; a model answering 429 or malformed JSON leaves the
extractive row (visible in ``/health``) and the summary arrives once the model answers again.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from tests.support import wait
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.offload_llm import OffloadResponder

KEY_A = "key-agent-a-0123456789"
KEY_B = "key-agent-b-0123456789"
FAST = {
    **KEYWORD_ONLY,
    "TDAI_LLM__HOST_REST_SECONDS": "1",
    "TDAI_LLM_TIMEOUT_MS": "1500",  # not "configured": only the tasks' deadline
}
RESULT = "\n".join(f"src/mod_{i}.py:{i}: ERROR undefined name 'tok{i}'" for i in range(300))
ZH_RESULT = "\n".join(f"第{i}步：编译失败，缺少依赖 libfoo{i}.so" for i in range(300))


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("offload-host-model") / "data"
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
        ra, rb = OffloadResponder(fa).as_host_model(), OffloadResponder(fb).as_host_model()
        for key, fake, source in ((KEY_A, fa, "hermes"), (KEY_B, fb, "openclaw")):
            with client(gw, key) as c:
                r = c.post(
                    "/llm/host-model",
                    json={"source": source, "base_url": fake.base_url, "model": f"{source}-m"},
                )
                assert r.json() == {"used": True}, r.text
        yield {"gw": gw, "a": ra, "b": rb}
    finally:
        gw.stop()
        fa.stop()
        fb.stop()


def client(gw: GatewayProcess, key: str, timeout: float = 30) -> httpx.Client:
    return httpx.Client(
        base_url=gw.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout
    )


def post_result(c: httpx.Client, scope: str, call_id: str, text: str = RESULT) -> dict:
    t0 = time.monotonic()
    r = c.post(
        "/offload/tool-result",
        json={"session_key": "s", "scope": scope, "tool_call_id": call_id,
              "tool_name": "bash", "arguments": {"command": "make"}, "result": text},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert time.monotonic() - t0 < 3, "the answer waited for the model"
    return r.json()


def row(c: httpx.Client, scope: str, call_id: str) -> dict:
    r = c.post("/offload/read", json={"scope": scope, "tool_call_id": call_id})
    assert r.status_code == 200, r.text
    return r.json()["row"]


def health(gw: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gw.base_url + "/health", timeout=10).json()


wait_for = partial(wait.wait_for, timeout=30.0)


def prompts(responder: OffloadResponder) -> str:
    return json.dumps(
        [r.get("messages") for r in responder.requests("offload-l1")], ensure_ascii=False
    )


def test_l1_summaries_come_from_the_scopes_own_host_model(env):
    gw, a, b = env["gw"], env["a"], env["b"]
    calls_before = health(gw)["llm"]["budget"]["calls_left"]
    with client(gw, KEY_A) as ca, client(gw, KEY_B) as cb:
        first = post_result(ca, "agent-a", "call_hm_a1")
        assert first["replacement"] and first["node_id"]
        assert row(ca, "agent-a", "call_hm_a1")["summary_by"] in ("rules", "llm")
        post_result(cb, "zh-b", "call_hm_b1", ZH_RESULT)
        for c, scope, cid in ((ca, "agent-a", "call_hm_a1"), (cb, "zh-b", "call_hm_b1")):
            got = wait_for(
                lambda c=c, scope=scope, cid=cid: (
                    (r := row(c, scope, cid))["summary_by"] == "llm" and r
                ),
                what=f"{cid} summarised by the host model",
            )
            assert got["summary"].startswith(f"LLM summary of {cid}")
    # Each principal's model saw only its own scope's tool output, with our system prompt.
    seen_a, seen_b = prompts(a), prompts(b)
    assert "call_hm_a1" in seen_a and "libfoo" not in seen_a and "call_hm_b1" not in seen_a
    assert "call_hm_b1" in seen_b and "undefined name" not in seen_b
    assert "You summarise tool results" in seen_a
    h = health(gw)
    assert h["offload"]["llm"] is True and h["offload"]["llm_source"] == "host-model"
    assert h["llm"]["budget"]["calls_left"] < calls_before  # the same day's memory budget


@pytest.mark.parametrize("mode", ["http429", "malformed"])
def test_a_failing_model_keeps_the_extractive_row_then_completes_later(env, mode):
    gw, a = env["gw"], env["a"]
    cid = f"call_hm_fail_{mode}"
    a.mode = mode
    try:
        with client(gw, KEY_A) as c:
            post_result(c, "agent-a", cid)
            wait_for(
                lambda: a.served["offload-l1"] and health(gw)["offload"]["last_error"]["l1"],
                what="the failed L1 call",
            )
            got = row(c, "agent-a", cid)
            assert got["summary_by"] == "rules" and "ERROR" in got["summary"]
            h = health(gw)
            model = next(m for m in h["llm"]["host_models"] if m["principal"] == "agent-a")
            assert model["failures"] >= 1 and model["last_error"], model
            assert h["offload"]["llm_waiting"]["deferred"] >= 1, h["offload"]
            if mode == "http429":  # `memory-tencentdb status` counts it among the waiting tasks
                run = subprocess.run(
                    [sys.executable, "-m", "memory_tencentdb", "status"],
                    env=gw.env(), capture_output=True, text=True, timeout=60,
                )  # fmt: skip
                line = next(x for x in run.stdout.splitlines() if x.startswith("memory llm:"))
                assert re.search(r"; [1-9]\d* task\(s\) waiting;", line), line
    finally:
        a.mode = "good"
    with client(gw, KEY_A) as c:
        got = wait_for(
            lambda: (r := row(c, "agent-a", cid))["summary_by"] == "llm" and r,
            what=f"{mode}: the summary once the model answers again",
        )
    assert got["summary"].startswith(f"LLM summary of {cid}")
    wait_for(lambda: health(gw)["offload"]["llm_waiting"]["deferred"] == 0, what="nothing deferred")


def test_a_result_before_the_hand_over_is_summarised_once_the_model_arrives(env):
    """A host hands its model over as its session starts, but a tool result may come first (the
    hand-over is not awaited): its task waits (up to 60 s) and runs once the model is there."""
    gw = env["gw"]
    owner = gw.token or ""
    with FakeLLM() as fo, client(gw, owner) as c:
        late = OffloadResponder(fo).as_host_model()
        post_result(c, "late-scope", "call_hm_late", ZH_RESULT)
        time.sleep(2.5)  # the worker has looked for a model and found none allowed
        assert row(c, "late-scope", "call_hm_late")["summary_by"] == "rules"
        assert health(gw)["offload"]["llm_waiting"]["deferred"] >= 1
        r = c.post(
            "/llm/host-model",
            json={"source": "hermes", "base_url": fo.base_url, "model": "owner-m"},
        )
        assert r.json() == {"used": True}, r.text
        try:
            got = wait_for(
                lambda: (x := row(c, "late-scope", "call_hm_late"))["summary_by"] == "llm" and x,
                what="the summary once the model is handed over",
            )
            assert got["summary"].startswith("LLM summary of call_hm_late")
            assert "第1步" in prompts(late)  # the owner's model got this scope's output
            # The other principals' models never saw it (neither may write late-scope).
            assert "call_hm_late" not in prompts(env["a"]) + prompts(env["b"])
        finally:
            c.delete("/llm/host-model")

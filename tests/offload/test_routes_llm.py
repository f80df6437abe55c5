"""The offload's LLM path over HTTP: a real gateway, the fake LLM (tests/support/offload_llm.py).

Good replies refine rows (L1) and redraw the canvas (L2) in the background, with hostile labels
re-escaped; malformed, truncated, non-JSON, failing and slow replies leave the rule-based rows
and canvas in place, answers never wait for the LLM, and nothing is lost.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.offload_llm import OffloadResponder

RESULT = "\n".join(f"src/mod_{i}.py:{i}: ERROR undefined name 'tok{i}'" for i in range(400))
ZH_RESULT = "\n".join(f"第{i}步：编译失败，缺少依赖 libfoo{i}.so" for i in range(300))


@pytest.fixture(scope="module")
def llm_gw(tmp_path_factory: pytest.TempPathFactory):
    with FakeLLM() as fake:
        responder = OffloadResponder(fake)
        env = {
            "TDAI_LLM_BASE_URL": fake.base_url,
            "TDAI_LLM_API_KEY": "x",
            "TDAI_LLM_TIMEOUT_MS": "2500",
            **KEYWORD_ONLY,
        }
        gw = GatewayProcess(tmp_path_factory.mktemp("offload-llm") / "data", env=env).start()
        try:
            yield gw, responder
        finally:
            gw.stop()


def post_result(c, scope, call_id, text=RESULT, session="s"):
    r = c.post(
        "/offload/tool-result",
        json={"session_key": session, "scope": scope, "tool_call_id": call_id,
              "tool_name": "bash", "arguments": {"command": "make"}, "result": text},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()


def drained(c, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        off = c.get("/health").json()["offload"]
        if not any(off["backlog"].values()):
            return off
        time.sleep(0.1)
    raise AssertionError(f"offload LLM backlog not drained: {off}")


def row(c, scope, call_id) -> dict:
    r = c.post("/offload/read", json={"scope": scope, "tool_call_id": call_id})
    assert r.status_code == 200, r.text
    return r.json()


def test_good_replies_refine_rows_and_redraw_a_safe_canvas(llm_gw, scope):
    gw, responder = llm_gw
    responder.mode, responder.delay, responder.hostile = "good", 0.0, True
    with gw.client() as c:
        ids = [f"call_llm_{i}" for i in range(4)]
        for i, cid in enumerate(ids):
            post_result(c, scope, cid, RESULT if i % 2 else ZH_RESULT)
        off = drained(c)
        assert off["llm"] is True and off["last_error"]["l1"] is None
        for i, cid in enumerate(ids):
            got = row(c, scope, cid)
            assert got["content"] == (RESULT if i % 2 else ZH_RESULT)
            assert got["row"]["summary_by"] == "llm"
            assert got["row"]["summary"].startswith(f"LLM summary of {cid}")
        assert off["last_error"]["l2"] is None, off
        active = c.get("/offload/canvases", params={"scope": scope, "session_key": "s"}).json()[
            "active"
        ]
        text = Path(active["path"]).read_text()
        assert text.startswith("%% {") and text.splitlines()[1] == "flowchart TD"
        assert "#quot;pytest#quot;" in text and '"pytest"' not in text
        nodes = re.findall(r"^\s+(\S+?)\[", text, re.M)
        assert nodes and all(re.fullmatch(r"\d{3}-N\d+", n) for n in nodes)
        for cid in ids:
            assert row(c, scope, cid)["row"]["node_id"] in nodes


@pytest.mark.parametrize("mode", ["malformed", "truncated", "raw", "http500"])
def test_bad_replies_keep_rule_based_rows(llm_gw, scope, mode):
    gw, responder = llm_gw
    responder.mode, responder.delay, responder.hostile = mode, 0.0, False
    with gw.client() as c:
        for i in range(4):
            out = post_result(c, scope, f"call_bad_{i}")
            assert out["replacement"] and out["node_id"]
        off = drained(c)
        assert off["last_error"]["l1"], off
        for i in range(4):
            got = row(c, scope, f"call_bad_{i}")
            assert got["content"] == RESULT and got["row"]["summary_by"] == "rules"
            assert "ERROR" in got["row"]["summary"]
        canvas = c.post(
            "/offload/read", json={"scope": scope, "canvas": "active", "session_key": "s"}
        )
        assert canvas.json()["text"].count('["') == 4  # the deterministic canvas stayed
        responder.mode = "good"
        post_result(c, scope, "call_bad_recovered")
        assert drained(c)["last_error"]["l1"] is None  # the error clears once the LLM answers


def test_slow_llm_never_delays_answers(llm_gw, scope):
    gw, responder = llm_gw
    responder.mode, responder.delay = "good", 8.0  # past the 2.5 s client timeout
    try:
        with gw.client(timeout=6.0) as c:  # an answer waiting on the LLM would time out here
            for i in range(3):
                post_result(c, scope, f"call_slow_{i}")
            msgs = [
                {"role": "user", "content": "构建失败了，帮我看看"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_slow_0", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\": \"make\"}"}}]},
                {"role": "tool", "tool_call_id": "call_slow_0", "content": RESULT},
                {"role": "user", "content": "继续修复 libfoo 依赖"},
            ]  # fmt: skip
            r = c.post("/offload/assemble", json={"session_key": "s", "scope": scope,
                       "messages": msgs, "token_budget": 4000, "prompt": msgs[-1]["content"]})  # fmt: skip
            assert r.status_code == 200 and r.json()["estimated_tokens"] <= 4000
            assert row(c, scope, "call_slow_0")["content"] == RESULT
    finally:
        responder.delay = 0.0
        with gw.client() as c:
            drained(c, 90)


def test_llm_new_task_judgement_moves_the_steps_recorded_meanwhile(llm_gw, scope):
    """L1.5 by LLM arrives after the prompt's first steps: those steps move to the task it chose
    (they stayed on the old canvas before: the judgement counted only from the next tool call)."""
    gw, responder = llm_gw
    responder.mode = "good"
    with gw.client(timeout=30) as c:
        first = "Fix the failing login tests in auth/session.py"
        c.post("/offload/assemble", json={"session_key": "s", "scope": scope, "token_budget": 8000,
               "messages": [{"role": "user", "content": first}], "prompt": first})  # fmt: skip
        old = post_result(c, scope, "call_mv_0")["node_id"].split("-N")[0]
        drained(c)
        # The embedding takes the next prompt for the same task; the (slow) LLM says: new task.
        responder.l15 = {"taskCompleted": True, "isLongTask": True, "isContinuation": False,
                         "continuationMmdFile": None, "newTaskLabel": "login-docs"}  # fmt: skip
        responder.delay = 1.0
        try:
            second = "Fix the failing login tests docs: document auth/session.py login flow"
            c.post("/offload/assemble", json={"session_key": "s", "scope": scope,
                   "token_budget": 8000, "messages": [{"role": "user", "content": second}],
                   "prompt": second})  # fmt: skip
            meanwhile = [post_result(c, scope, f"call_mv_{i}")["node_id"] for i in (1, 2)]
            assert all(n.startswith(f"{old}-N") for n in meanwhile), meanwhile  # embedding
            drained(c, 60)
        finally:
            responder.l15, responder.delay = None, 0.0
        moved = [row(c, scope, f"call_mv_{i}")["row"]["node_id"] for i in (1, 2)]
        assert all(not n.startswith(f"{old}-N") for n in moved), moved
        listing = c.get("/offload/canvases", params={"scope": scope, "session_key": "s"}).json()
        active = listing["active"]
        assert active["file"][:3] == moved[0][:3] and active["node_count"] == 2
        old_canvas = next(h for h in listing["history"] if h["file"].startswith(old))
        text = Path(old_canvas["path"]).read_text("utf-8")
        assert re.findall(r"\b\d{3}-N\d+\b", text) == [f"{old}-N1"], text  # only its own step
        assert row(c, scope, "call_mv_0")["row"]["node_id"] == f"{old}-N1"
        after = post_result(c, scope, "call_mv_3")["node_id"]
        assert after.startswith(moved[0][:3])  # and the task goes on there


def test_llm_backlog_resumes_at_start_without_a_request(tmp_path):
    """Rows the LLM had not refined when the gateway stopped are refined after a restart
    before any offload request touches their session (not only at its next use)."""
    with FakeLLM() as fake:
        responder = OffloadResponder(fake, mode="http500")
        env = {"TDAI_LLM_BASE_URL": fake.base_url, "TDAI_LLM_API_KEY": "x",
               "TDAI_LLM_TIMEOUT_MS": "2500", **KEYWORD_ONLY}  # fmt: skip
        gw = GatewayProcess(tmp_path / "data", env=env).start()
        ids = [f"call_resume_{i}" for i in range(3)]
        try:
            with gw.client(timeout=30) as c:
                for i in ids:
                    post_result(c, "resume-scope", i, text=ZH_RESULT, session="agent:main:r1")
                drained(c, 60)
                for i in ids:
                    assert row(c, "resume-scope", i)["row"]["summary_by"] == "rules"
        finally:
            gw.stop()
        responder.mode = "good"
        before = len(responder.requests("offload-l1"))
        gw = GatewayProcess(tmp_path / "data", env=env).start()
        try:
            deadline = time.monotonic() + 30
            asked: set[str] = set()
            while time.monotonic() < deadline and not set(ids) <= asked:
                for req in responder.requests("offload-l1")[before:]:
                    asked |= set(re.findall(r"call_resume_\d", json.dumps(req)))
                time.sleep(0.2)
            assert set(ids) <= asked, asked  # asked before any request of ours
            with gw.client(timeout=30) as c:
                drained(c, 60)
                for i in ids:
                    assert row(c, "resume-scope", i)["row"]["summary_by"] == "llm"
        finally:
            gw.stop()

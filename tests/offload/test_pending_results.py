"""``pending_tool_call_ids`` on ``/offload/assemble`` (issue 21, item 4): OpenClaw appends the
current turn after the engine's list, so the gateway never sees that turn's (stubbed) results
in ``messages``. Named as pending, they count as in the context: the canvas shows every step
(as Hermes's, whose list holds them) and the guide comes with the first stub.

One gateway for the module, a scope per test; the sequence is OpenClaw's: the turn's
pre-prompt assemble with the prompt, the middleware's tool results, then tool-loop assembles.
"""

from __future__ import annotations

import pytest

from tests.support.inprocess import InProcessGateway

PROMPT = "检查构建日志并修复失败的测试 / check the build logs and fix the failing tests"


def log(i: int) -> str:
    return "\n".join(f"step {i} line {k}: 第{k}行 编译 module_{k}.py OK" for k in range(400))


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = InProcessGateway(tmp_path_factory.mktemp("pending") / "data").start()
    yield g
    g.stop()


@pytest.fixture
def client(gw: InProcessGateway):
    with gw.client() as c:
        yield c


def assemble(client, scope: str, **extra) -> dict:
    body = {
        "session_key": "agent:main:p",
        "scope": scope,
        "messages": [],
        "token_budget": 100_000,
        "format": "agent",
        "current_turn_follows": True,
        **extra,
    }
    r = client.post("/offload/assemble", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_current_turns_results_count_as_in_the_context(client, scope):
    first = assemble(client, scope, prompt=PROMPT)  # the turn's pre-prompt call
    assert first["system_addition"] == ""
    ids = [f"call_step_{i}" for i in range(8)]
    for i, cid in enumerate(ids):
        r = client.post(
            "/offload/tool-result",
            json={
                "session_key": "agent:main:p",
                "scope": scope,
                "tool_call_id": cid,
                "tool_name": "exec",
                "arguments": {"command": f"make test-{i}"},
                "result": log(i),
            },
        )
        assert r.status_code == 200 and r.json()["offloaded"] is True, r.text
    without = assemble(client, scope)  # before this change: the newest step only, no guide
    with_pending = assemble(client, scope, pending_tool_call_ids=[c.replace("_", "") for c in ids])
    assert without["canvas"]["node_count"] == with_pending["canvas"]["node_count"] == 8
    assert without["canvas"]["shown_nodes"] < 8
    assert with_pending["canvas"]["shown_nodes"] == 8, with_pending["canvas"]
    assert without["system_addition"] == ""
    assert "memory_tencentdb_offload_read" in with_pending["system_addition"]
    canvas = with_pending["messages"][-1]["content"][0]["text"]
    assert canvas.startswith("<current_task_context") and canvas.count("make test-") == 8
    assert with_pending["estimated_tokens"] <= 100_000


def test_pending_ids_are_checked_and_bounded(client, scope):
    r = client.post(
        "/offload/assemble",
        json={
            "session_key": "agent:main:p",
            "scope": scope,
            "messages": [],
            "token_budget": 1000,
            "current_turn_follows": True,
            "pending_tool_call_ids": ["x"] * 1001,
        },
    )
    assert r.status_code == 422 and "pending_tool_call_ids" in r.text
    # Unknown ids, or ids without current_turn_follows, change nothing.
    out = assemble(client, scope, pending_tool_call_ids=["call_never_seen"])
    assert out["system_addition"] == "" and out["messages"] == []

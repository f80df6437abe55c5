"""Offload files across a gateway restart: rows, canvas and task state come back as they were,
and a corrupt journal line is moved aside to ``.corrupt`` (counted in /health), never dropped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.gateway import GatewayProcess


def test_restart_keeps_rows_canvas_and_moves_corrupt_lines_aside(start_gateway, scope):
    gw: GatewayProcess = start_gateway()
    body = {"session_key": "agent:main:main", "scope": scope, "tool_name": "bash"}
    with gw.client() as c:
        c.post("/offload/assemble", json={**body, "messages": [{"role": "user", "content": "修复登录测试"}],
               "token_budget": 4000, "prompt": "修复登录测试"})  # fmt: skip
        first = c.post("/offload/tool-result", json={**body, "tool_call_id": "call_1",
                       "result": "错误：登录失败\n" * 400}).json()  # fmt: skip
        before = c.get(
            "/offload/canvases", params={"scope": scope, "session_key": body["session_key"]}
        ).json()
        root = Path(c.get("/offload/guide", params={"scope": scope}).json()["data_dir"])
    journal = next(root.glob("offload-*.jsonl"))
    assert journal.name == "offload-agent%3Amain%3Amain.jsonl"  # ":" escaped, injectively
    gw.kill()  # no shutdown hooks: what was answered must already be on disk
    with journal.open("ab") as f:
        f.write(b'{"tool_call_id": "call_half", "summ\n')
    gw.start()
    with gw.client() as c:
        after = c.get(
            "/offload/canvases", params={"scope": scope, "session_key": body["session_key"]}
        ).json()
        assert after["active"]["text"] == before["active"]["text"]
        assert after["active"]["task_goal"] == "修复登录测试"
        got = c.post("/offload/read", json={"scope": scope, "tool_call_id": "call_1"}).json()
        assert got["content"] == "错误：登录失败\n" * 400 and got["result_ref"] == first["ref"]
        second = c.post("/offload/tool-result", json={**body, "tool_call_id": "call_2",
                        "result": "ok\n" * 2000}).json()  # fmt: skip
        assert second["node_id"] == first["node_id"][:3] + "-N2"  # same task, next node
        assert c.get("/health").json()["offload"]["corrupt_lines"] == 1
    rows = [json.loads(x)["tool_call_id"] for x in journal.read_text().splitlines()]
    assert rows == ["call_1", "call_2"]
    assert "call_half" in journal.with_name(journal.name + ".corrupt").read_text()
    state = json.loads(next((root / "sessions").glob("*.json")).read_text())
    assert state["session_key"] == "agent:main:main" and state["boundaries"]


def test_heuristic_token_mode_is_reported(start_gateway, scope):
    gw: GatewayProcess = start_gateway(
        env={"TDAI_MEMORY__OFFLOAD__L3_TOKEN_COUNT_MODE": "heuristic"}
    )
    with gw.client() as c:
        tok = c.get("/health").json()["offload"]["tokenizer"]
        assert tok["exact"] is False and tok["name"] == "estimate (configured)"
        out = c.post("/offload/tool-result", json={"session_key": "s", "scope": scope,
                     "tool_call_id": "c1", "tool_name": "bash", "result": "x" * 8000}).json()  # fmt: skip
        assert out["offloaded"] is True and 1500 < out["tokens"] < 3000  # ~3.6 chars a token

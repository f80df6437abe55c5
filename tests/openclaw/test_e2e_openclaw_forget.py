"""The real OpenClaw (`openclaw agent --local`): "forget that I said ..." reaches the gateway
through memory_tencentdb_forget (found with Tool Search's `tool_call`), and the model reads what
was removed."""

from __future__ import annotations

import json

import pytest

from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID, OpenClawHome, require_openclaw
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]


def test_forget_tool_in_a_real_openclaw_turn(tmp_path, bridge_gateway: GatewayProcess) -> None:
    install = require_openclaw()
    agent = "main"
    with bridge_gateway.client() as c:
        ids = []
        for text in ("用户的旧手机号是 138 0000 1234", "The user is allergic to walnuts"):
            r = c.post(
                "/memories",
                json={
                    "content": text,
                    "type": "persona",
                    "session_key": "agent:main:x",
                    "scope": agent,
                },
            )
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
    with FakeLLM(default_reply="OK.") as llm:
        home = OpenClawHome(install, tmp_path / "oc", llm.base_url)
        home.install_plugin(
            BRIDGE_DIR,
            BRIDGE_ID,
            {"port": bridge_gateway.port, "dataDir": str(bridge_gateway.data_dir)},
        )
        llm.push(
            {
                "tool_calls": [
                    {
                        "name": "tool_call",
                        "arguments": {
                            "id": "memory_tencentdb_forget",
                            "args": {"query": "旧手机号"},
                        },
                    }
                ]
            },
            "好的，已经忘掉了。",
        )
        done = home.agent("忘掉我的旧手机号", "agent:main:forget-e2e", timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        requests = llm.chat_requests()
    assert len(requests) >= 2
    tool_results = json.dumps(
        [m for m in requests[1]["messages"] if m.get("role") == "tool"], ensure_ascii=False
    )
    assert "Forgot 1 memory" in tool_results and "138 0000 1234" in tool_results, tool_results
    with bridge_gateway.client() as c:
        assert c.get(f"/memories/{ids[0]}", params={"scope": agent}).json()["status"] == "deleted"
        assert c.get(f"/memories/{ids[1]}", params={"scope": agent}).json()["status"] == "active"

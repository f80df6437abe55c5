"""The real Hermes: "forget that I said ..." reaches the gateway through memory_tencentdb_forget,
and the tool's answer tells the model exactly what was removed (zh and en)."""

from __future__ import annotations

import json

import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

from .harness import HermesHome, main_requests

pytestmark = pytest.mark.hermes


def _tool_answer(request: dict) -> dict:
    for m in reversed(request.get("messages", [])):
        if m.get("role") == "tool":
            return json.loads(m["content"])
    raise AssertionError(f"no tool result in {request.get('messages')}")


def test_forget_tool_in_a_real_hermes_chat(home: HermesHome, llm):
    gw = GatewayProcess(home.data_dir, env=KEYWORD_ONLY, port=home.port).start()
    try:
        scope = home.default_scope()
        ids = {}
        with gw.client() as c:
            for key, text in (
                ("address", "The user's old address is 12 Rose Street, Leeds"),
                ("food", "用户不吃香菜"),
                ("keep", "The user works as a radiographer"),
            ):
                r = c.post(
                    "/memories",
                    json={"content": text, "type": "persona", "session_key": "s", "scope": scope},
                )
                assert r.status_code == 201, r.text
                ids[key] = r.json()["id"]
        for query, key in (("old address Rose Street", "address"), ("不吃香菜", "food")):
            llm.push(
                {"tool_calls": [{"name": "memory_tencentdb_forget", "arguments": {"query": query}}]}
            )
            before = len(main_requests(llm))
            r = home.chat(f"Please forget this: {query}")
            assert r.returncode == 0, r.stderr
            reqs = main_requests(llm)[before:]
            assert "memory_tencentdb_forget" in {t["function"]["name"] for t in reqs[0]["tools"]}
            answer = _tool_answer(reqs[1])
            assert answer["forgotten"] == [ids[key]], answer
            assert answer["matched"][0]["id"] == ids[key]
        with gw.client() as c:
            for key in ("address", "food"):
                shown = c.get(f"/memories/{ids[key]}", params={"scope": scope}).json()
                assert shown["status"] == "deleted"
            hits = c.post(
                "/search/memories", json={"query": "Rose Street 香菜", "scope": scope}
            ).json()
            assert "Rose" not in hits["results"] and "香菜" not in hits["results"]
            kept = c.get(f"/memories/{ids['keep']}", params={"scope": scope}).json()
            assert kept["status"] == "active"
    finally:
        gw.stop()

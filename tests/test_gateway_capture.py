"""Capture through the gateway's routes (in process): files first, database second; tool calls and
injected blocks; resent message ids once. Restarts, crashes and reindex: in
``test_gateway_capture_restarts.py``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.inprocess import InProcessGateway


def _jsonl(data_dir: Path, folder: str) -> list[dict]:
    rows = []
    for f in sorted((data_dir / folder).glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text("utf-8").splitlines() if line.strip()]
    return rows


def _search(
    gw: InProcessGateway, route: str, query: str, scope: str, limit: int = 10
) -> list[dict]:
    with gw.client() as c:
        r = c.post(route, json={"query": query, "scope": scope, "limit": limit})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_capture_zh_en_lands_in_files_and_database(app_gateway: InProcessGateway, scope: str):
    gw = app_gateway
    turns = [
        ("我每天早上六点起床跑步五公里", "很棒的习惯！"),
        ("I keep my dotfiles in a private GitHub repository", "Noted."),
    ]
    with gw.client() as c:
        for user, assistant in turns:
            r = c.post(
                "/capture",
                json={
                    "session_key": "sess-1",
                    "session_id": "run-1",
                    "scope": scope,
                    "user_content": user,
                    "assistant_content": assistant,
                },
            )
            assert r.status_code == 200, r.text
            assert r.json()["l0_recorded"] == 2

    lines = [row for row in _jsonl(gw.data_dir, "conversations") if row.get("scope") == scope]
    assert [row["content"] for row in lines] == [turns[0][0], turns[0][1], turns[1][0], turns[1][1]]
    assert {row["sessionKey"] for row in lines} == {"sess-1"}
    assert all(row["record_id"].startswith("l0_") for row in lines)

    found = _search(gw, "/search/conversations", "跑步", scope)
    assert found and found[0]["content"] == turns[0][0]
    found = _search(gw, "/search/conversations", "dotfiles GitHub", scope)
    assert found[0]["content"] == turns[1][0]


def test_turn_with_tool_calls_and_injected_blocks(app_gateway: InProcessGateway, scope: str):
    """Tool calls and results are kept; our own injected memory blocks are stripped."""
    messages = [
        {
            "role": "user",
            "content": "<relevant-memories>\n- [persona] old memory text\n</relevant-memories>\n"
            "What's the weather in Shenzhen?",
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "深圳"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "get_weather",
            "content": "深圳：多云，26°C",
        },
        {"role": "assistant", "content": [{"type": "text", "text": "深圳今天多云，26°C。"}]},
        {"role": "system", "content": "never stored"},
        {"role": "user", "content": "/reset"},
    ]
    with app_gateway.client() as c:
        r = c.post("/capture", json={"session_key": "tools", "scope": scope, "messages": messages})
    assert r.status_code == 200, r.text
    assert r.json()["l0_recorded"] == 4
    rows = [row for row in _jsonl(app_gateway.data_dir, "conversations") if row["scope"] == scope]
    assert [row["role"] for row in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[0]["content"] == "What's the weather in Shenzhen?"
    assert "old memory text" not in json.dumps(rows, ensure_ascii=False)
    assert (
        "get_weather" in rows[1]["content"]
        and rows[1]["extra"]["tool_calls"][0]["name"] == "get_weather"
    )
    assert rows[2]["extra"]["tool_call_id"] == "call_1"
    hits = _search(app_gateway, "/search/conversations", "多云", scope)
    assert {h["role"] for h in hits} >= {"tool", "assistant"}


def test_resent_message_ids_are_captured_once(app_gateway: InProcessGateway, scope: str):
    body = {
        "session_key": "retry",
        "scope": scope,
        "messages": [
            {"role": "user", "content": "please remember the build uses Bazel", "id": "u-1"},
            {"role": "assistant", "content": "Got it.", "id": "a-1"},
        ],
    }
    with app_gateway.client() as c:
        assert c.post("/capture", json=body).json()["l0_recorded"] == 2
        assert c.post("/capture", json=body).json()["l0_recorded"] == 0

"""Capture through HTTP: files first, database second, nothing lost across restarts or crashes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway import GatewayProcess
from tests.support.postgres import backend_under_test

pytestmark = pytest.mark.both_backends  # `make test` runs this suite on PostgreSQL too


def _jsonl(data_dir: Path, folder: str) -> list[dict]:
    rows = []
    for f in sorted((data_dir / folder).glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text("utf-8").splitlines() if line.strip()]
    return rows


def _search(gw: GatewayProcess, route: str, query: str, scope: str, limit: int = 10) -> list[dict]:
    with gw.client() as c:
        r = c.post(route, json={"query": query, "scope": scope, "limit": limit})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_capture_zh_en_lands_in_files_and_database(shared_gateway: GatewayProcess, scope: str):
    gw = shared_gateway
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


def test_turn_with_tool_calls_and_injected_blocks(shared_gateway: GatewayProcess, scope: str):
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
    with shared_gateway.client() as c:
        r = c.post("/capture", json={"session_key": "tools", "scope": scope, "messages": messages})
    assert r.status_code == 200, r.text
    assert r.json()["l0_recorded"] == 4
    rows = [
        row for row in _jsonl(shared_gateway.data_dir, "conversations") if row["scope"] == scope
    ]
    assert [row["role"] for row in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[0]["content"] == "What's the weather in Shenzhen?"
    assert "old memory text" not in json.dumps(rows, ensure_ascii=False)
    assert (
        "get_weather" in rows[1]["content"]
        and rows[1]["extra"]["tool_calls"][0]["name"] == "get_weather"
    )
    assert rows[2]["extra"]["tool_call_id"] == "call_1"
    hits = _search(shared_gateway, "/search/conversations", "多云", scope)
    assert {h["role"] for h in hits} >= {"tool", "assistant"}


def test_resent_message_ids_are_captured_once(shared_gateway: GatewayProcess, scope: str):
    body = {
        "session_key": "retry",
        "scope": scope,
        "messages": [
            {"role": "user", "content": "please remember the build uses Bazel", "id": "u-1"},
            {"role": "assistant", "content": "Got it.", "id": "a-1"},
        ],
    }
    with shared_gateway.client() as c:
        assert c.post("/capture", json=body).json()["l0_recorded"] == 2
        assert c.post("/capture", json=body).json()["l0_recorded"] == 0


def test_restart_crash_and_reindex_lose_nothing(start_gateway, scope: str):
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "local"})
    facts = [
        "用户的猫叫年糕，是一只橘猫",
        "The user's team deploys every Thursday afternoon",
        "用户在上海工作，通勤坐地铁二号线",
        "The user prefers PostgreSQL over MySQL for new projects",
    ]
    with gw.client() as c:
        for i, fact in enumerate(facts):
            r = c.post(
                "/memories",
                json={"content": fact, "type": "persona", "session_key": "s", "scope": scope},
            )
            assert r.status_code == 201, r.text
            c.post(
                "/capture",
                json={
                    "session_key": "s",
                    "scope": scope,
                    "user_content": f"记一下：{fact}",
                    "assistant_content": f"OK #{i}",
                },
            )
    queries = ["宠物", "猫", "deploy schedule", "database choice", "上班通勤"]

    def snapshot() -> dict:
        out = {}
        for q in queries:
            out[("m", q)] = [h["id"] for h in _search(gw, "/search/memories", q, scope)]
            out[("c", q)] = [h["id"] for h in _search(gw, "/search/conversations", q, scope)]
        return out

    # A crash right after an acknowledged capture: the answer meant durable.
    with gw.client() as c:
        c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": scope,
                "user_content": "最后一句话",
                "assistant_content": "收到",
            },
        )
    gw.kill()
    gw.start()
    assert _search(gw, "/search/conversations", "最后一句话", scope)[0]["content"] == "最后一句话"

    gw.wait_embedded()
    before = snapshot()
    assert before[("m", "猫")][0] == _search(gw, "/search/memories", "年糕", scope)[0]["id"]
    if backend_under_test() == "postgres":
        return  # `reindex` rebuilds SQLite's memory.db from the files: nothing to rebuild here

    gw.stop()
    env = gw.env()
    done = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "reindex"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "10 messages, 4 memories" in done.stdout
    gw.start()
    gw.wait_embedded()
    after = snapshot()
    assert after == before

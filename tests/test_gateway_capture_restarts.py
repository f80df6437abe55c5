"""Capture survives restarts, a crash (SIGKILL) and a reindex: nothing is lost, on a real
gateway process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.gateway import GatewayProcess
from tests.support.postgres import backend_under_test


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

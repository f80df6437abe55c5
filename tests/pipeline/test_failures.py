"""LLM errors, timeouts, malformed and truncated replies, a killed gateway, session end.

In every case: nothing captured is lost, nothing is extracted twice, and the work is retried
until it completes. The cursor only moves past work that succeeded.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC

import pytest

from tests.pipeline.conftest import (
    FAST,
    LLMGateway,
    TaskRouter,
    capture,
    extraction,
    health,
    llm_env,
    quiet,
    scope_dir,
    scope_memories,
    settle,
    upsert_lines,
    wait_for,
)
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

# Idle timeout 20 s (so a session end visibly flushes and warm-up thresholds are exact),
# retries after 1 s, LLM timeout 1.5 s, timezone UTC+8.
FAILURE_ENV = {
    **KEYWORD_ONLY,
    "TDAI_TIMEZONE": "+08:00",
    "TDAI_LLM_TIMEOUT_MS": "1500",
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "20",
}


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMGateway]:
    fake = FakeLLM().start()
    router = TaskRouter(fake)
    gw = GatewayProcess(
        tmp_path_factory.mktemp("pipeline-failures") / "data", env=llm_env(fake, **FAILURE_ENV)
    ).start()
    yield LLMGateway(gw, fake, router)
    gw.stop()
    fake.stop()


def _scope() -> str:
    return f"fail-{uuid.uuid4().hex[:8]}"


def _l0(gw: GatewayProcess, scope: str) -> list[dict]:
    rows = []
    for f in sorted((gw.data_dir / "conversations").glob("*.jsonl")):
        rows += [json.loads(x) for x in f.read_text("utf-8").splitlines() if x.strip()]
    return [r for r in rows if r.get("scope") == scope]


def _stage(gw: GatewayProcess, stage: str = "l1") -> dict:
    return health(gw)["pipeline"]["stages"][stage]


def _expect_one_memory(gw: GatewayProcess, scope: str, content: str) -> dict:
    rows = wait_for(lambda: scope_memories(gw, scope), timeout=20, what="the memory")
    settle(gw)
    rows = scope_memories(gw, scope)
    assert [r["content"] for r in rows] == [content]
    assert upsert_lines(gw, scope) == 1  # written once, never twice
    return rows[0]


def test_llm_http_errors_are_retried_until_success(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    before = _stage(gw)["failures"]
    router.push("l1-extraction", *([{"status": 500, "body": "upstream exploded"}] * 3))
    router.push("l1-extraction", extraction("Always cite sources in answers."))
    capture(gw, scope, "s1", "Always cite your sources.", "Will do.")

    def failed_once():
        st = _stage(gw)
        return st if st["failures"] > before else None

    st = wait_for(failed_once, timeout=10, what="a recorded L1 failure")
    assert "HTTP 500" in st["last_error"]
    mem = _expect_one_memory(gw, scope, "Always cite sources in answers.")
    assert len(mem["source_message_ids"]) == 1
    # Nothing captured was lost while the LLM was failing.
    assert [r["content"] for r in _l0(gw, scope)] == ["Always cite your sources.", "Will do."]
    final = health(gw)
    assert final["pipeline"]["stages"]["l1"]["failing"] is False
    assert not any("pipeline l1" in d for d in final["degraded"])
    # Token usage is counted per task; the API key never shows up in the log.
    usage = final["pipeline"]["llm_usage"]["l1-extraction"]
    assert usage["calls"] >= 2 and usage["completion_tokens"] > 0
    assert "Bearer x" not in gw.log()


def test_llm_timeout_is_retried(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    router.push("l1-extraction", {"delay": 4, "content": extraction("Too late.")})
    router.push("l1-extraction", extraction("Use metric units."))
    capture(gw, scope, "s1", "Please always use metric units.")
    st = wait_for(
        lambda: (s := _stage(gw))["last_error"] and "no answer within" in s["last_error"] and s,
        timeout=10,
        what="the timeout to be recorded",
    )
    assert "1.5s" in st["last_error"]
    _expect_one_memory(gw, scope, "Use metric units.")


def test_malformed_replies_are_retried(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    before = _stage(gw)["failures"]
    router.push(
        "l1-extraction",
        {"raw": "<html>502 Bad Gateway</html>"},  # not a chat-completions body at all
        "I'm sorry, I cannot produce JSON right now.",  # prose, no JSON
        extraction("Reply in British English."),
    )
    capture(gw, scope, "s1", "Always reply in British English.")
    _expect_one_memory(gw, scope, "Reply in British English.")
    assert _stage(gw)["failures"] - before == 2


def test_truncated_json_is_a_clear_failure_then_retried(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    full = extraction("Never deploy on Fridays.")
    router.push("l1-extraction", full[: len(full) // 2], full)
    capture(gw, scope, "s1", "Never deploy on Fridays.")
    _expect_one_memory(gw, scope, "Never deploy on Fridays.")
    assert "truncated" in _stage(gw)["last_error"]


def test_sloppy_json_is_repaired_without_a_retry(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    before = _stage(gw)["failures"]
    sloppy = (
        "Here you go:\n```json\n"
        '[{"scene_name": "Setup", "memories": [\n'
        '  {"content": "Editor: Vim\twith\nrelative numbers", "type": "persona", "priority": 70,},\n'
        "]},]\n```\nHope this helps!"
    )
    router.push("l1-extraction", sloppy)
    capture(gw, scope, "s1", "I use Vim with relative line numbers.")
    mem = _expect_one_memory(gw, scope, "Editor: Vim\twith\nrelative numbers")
    assert mem["type"] == "persona" and mem["priority"] == 70
    assert _stage(gw)["failures"] == before


def test_session_end_flushes_and_waits(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    router.push("l1-extraction", extraction("Prefers tabs over spaces."))
    capture(gw, scope, "s1", "I prefer tabs over spaces.")
    wait_for(lambda: scope_memories(gw, scope), what="first turn extracted")
    settle(gw)
    # Second turn: below the warm-up threshold, so it waits for the 20 s idle timer...
    router.push("l1-extraction", extraction("Lives in Lisbon."))
    capture(gw, scope, "s1", "I live in Lisbon.")
    time.sleep(0.5)
    assert len(scope_memories(gw, scope)) == 1
    assert health(gw)["pipeline"]["backlog"]["l1_messages"] >= 2
    # ...unless the session ends: then L1 runs at once and the call returns when it is done.
    started = time.monotonic()
    with gw.client() as c:
        assert c.post("/session/end", json={"scope": scope, "session_key": "s1"}).json() == {
            "flushed": True
        }
    assert time.monotonic() - started < 10
    assert sorted(r["content"] for r in scope_memories(gw, scope)) == [
        "Lives in Lisbon.",
        "Prefers tabs over spaces.",
    ]


def test_warm_up_thresholds_then_every_n(failing: LLMGateway):
    """L1 after the 1st, then 2 more, then 4 more, then every 5 conversations (everyN)."""
    gw, router = failing.gw, failing.router
    scope = _scope()
    runs = []
    for i in range(1, 13):
        before = len(router.requests("l1-extraction"))
        capture(gw, scope, "s-warm", f"Turn number {i} about nothing in particular.")
        quiet(gw)
        if len(router.requests("l1-extraction")) > before:
            runs.append(i)
    assert runs == [1, 3, 7, 12]


def test_activity_times_follow_the_configured_timezone(failing: LLMGateway):
    gw, router = failing.gw, failing.router
    scope = _scope()
    router.push(
        "l1-extraction",
        extraction(
            {
                "content": "Flew to Tokyo.",
                "type": "episodic",
                "priority": 80,
                "metadata": {"activity_start_time": "2026-03-01T09:00:00"},
            }
        ),
    )
    capture(gw, scope, "s-tz", "I flew to Tokyo on March 1st at 9 in the morning.")
    (mem,) = wait_for(lambda: scope_memories(gw, scope), what="the memory")
    assert mem["metadata"]["activity_start_time"] == "2026-03-01T09:00:00+08:00"
    prompt = router.requests("l1-extraction")[-1]["messages"][1]["content"]
    assert "(UTC+08:00)" in prompt and "+08:00]: I flew to Tokyo" in prompt
    with gw.client() as c:
        body = c.post("/recall", json={"query": "Tokyo trip", "scope": scope, "session_key": "x"})
    # An English memory carries an English label (issue 23: labels in the memory's language).
    assert "since 2026-03-01T09:00:00+08:00" in body.json()["prepend_context"]


def test_killed_mid_run_resumes_without_loss_or_duplicates(start_gateway, tmp_path):
    with FakeLLM() as fake:
        router = TaskRouter(fake)
        env = llm_env(fake, **FAILURE_ENV)
        gw = start_gateway(env=env)
        scope = _scope()
        # The first extraction hangs; the gateway is killed while waiting for it.
        router.push("l1-extraction", {"delay": 20, "content": extraction("Stale answer.")})
        router.push("l1-extraction", extraction("Owns a cat named Miso."))
        capture(gw, scope, "s1", "I have a cat named Miso.", "Cute!")
        wait_for(lambda: router.requests("l1-extraction"), what="the extraction call")
        gw.kill()
        assert scope_memories(gw, scope) == []
        gw.start()
        _expect_one_memory(gw, scope, "Owns a cat named Miso.")
        assert [r["content"] for r in _l0(gw, scope)] == ["I have a cat named Miso.", "Cute!"]
        # After another restart nothing is extracted again.
        n_calls = len(router.requests("l1-extraction"))
        gw.restart()
        settle(gw)
        time.sleep(1.0)
        assert len(router.requests("l1-extraction")) == n_calls
        assert upsert_lines(gw, scope) == 1


def test_half_applied_plan_is_replayed_not_re_extracted(start_gateway, tmp_path):
    """A crash between writing a chunk's first memory and its second: the saved plan is
    replayed on restart (same ids, no duplicate lines), and the chunk is not extracted again."""
    from memory_tencentdb.pipeline import state
    from memory_tencentdb.store.records import L0Input, memory_from_journal
    from memory_tencentdb.store.sqlite.store import Store

    data = tmp_path / "crashed"
    store = Store(data, UTC)
    rows = store.record_messages(
        [
            L0Input(
                "default", "s1", "", "user", "I prefer green tea to coffee.", 1_700_000_000_000
            ),
            L0Input("default", "s1", "", "assistant", "Noted!", 1_700_000_000_001),
        ]
    )
    rowid = store.max_l0_seq()

    def op(mid: str, content: str) -> dict:
        return {
            "record": {
                "id": mid,
                "scope": "default",
                "content": content,
                "type": "persona",
                "priority": 70,
                "session_key": "s1",
                "source_message_ids": [rows[0].id],
                "timestamps": ["2023-11-14T22:13:20+00:00"],
                "status": "active",
                "origin": "rules",
            },
            "supersedes": [],
        }

    plan = {
        "to_rowid": rowid,
        "scene": "",
        "ops": [op("m_plan_1", "PLAN one."), op("m_plan_2", "PLAN two.")],
    }
    state.save_plan(store, "default", "s1", plan)
    store.write_memory(memory_from_journal(plan["ops"][0]["record"]))  # applied before the "crash"
    store.close()

    gw = start_gateway(env={**FAST, **KEYWORD_ONLY}, data_dir=data)
    settle(gw)
    rows = scope_memories(gw, "default")
    assert sorted(r["id"] for r in rows) == ["m_plan_1", "m_plan_2"]  # no rule re-extraction
    assert upsert_lines(gw, "default") == 2
    with gw.client() as c:
        item = c.get("/memories/m_plan_2").json()
    assert item["trace"]["source_messages"][0]["content"] == "I prefer green tea to coffee."


def test_reindex_neither_re_extracts_nor_re_scenes(start_gateway):
    """``reindex`` rebuilds memory.db (new rowids, empty pipeline tables): the pipeline must
    pick up where it was, not extract the history again or feed old memories to the scenes."""
    import subprocess
    import sys

    gw = start_gateway(env={**FAST, **KEYWORD_ONLY})
    scope = _scope()
    capture(gw, scope, "s1", "I prefer green tea to coffee.", "Noted.")
    settle(gw, l2=True)
    capture(gw, scope, "s1", "Never use emojis in your replies.", "Understood.")
    settle(gw, l2=True)
    index_file = scope_dir(gw, scope) / ".metadata" / "scene_index.json"
    scenes_before = json.loads(index_file.read_text("utf-8"))
    lines_before = upsert_lines(gw, scope)
    assert lines_before == 2
    gw.stop()
    subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "reindex"],
        env=gw.env(),
        check=True,
        capture_output=True,
        timeout=120,
    )
    gw.start()
    settle(gw, l2=True)
    time.sleep(1.5)
    settle(gw, l2=True)
    assert upsert_lines(gw, scope) == lines_before
    assert json.loads(index_file.read_text("utf-8")) == scenes_before
    # And the pipeline still works after the rebuild.
    capture(gw, scope, "s1", "I live in Porto.", "Nice city.")
    settle(gw, l2=True)
    assert upsert_lines(gw, scope) == lines_before + 1

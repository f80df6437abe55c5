"""A misbehaving LLM never blocks /offload/assemble past its deadline and never loses a row:
malformed JSON, truncated JSON, a non-JSON body, HTTP 500, replies past the client's timeout
and a slow LLM. Each falls back to the no-LLM result, visibly (/health), and recovers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent_sessions import chain, load_sessions
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.mermaid import require_validator
from tests.support.offload_llm import OffloadResponder
from tests.support.offload_replay import read_back_problems, replay

LLM_TIMEOUT_MS = 2000
# Far longer than any assemble may take: a route that waited for the LLM would show it.
TIMEOUT_DELAY_S = 8.0
SLOW_DELAY_S = 1.5
# What /offload/assemble may take here at most, whatever the LLM does (generous for a loaded
# 2-core machine; the LLM delays above are what a blocking route would add on top).
ASSEMBLE_DEADLINE_S = 2.5


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[FakeLLM, OffloadResponder]]:
    with FakeLLM() as fake:
        yield fake, OffloadResponder(fake)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, llm) -> Iterator[GatewayProcess]:
    fake, _ = llm
    env = {
        "TDAI_LLM_BASE_URL": fake.base_url,
        "TDAI_LLM_API_KEY": "x",
        "TDAI_LLM_TIMEOUT_MS": str(LLM_TIMEOUT_MS),
        **KEYWORD_ONLY,
    }
    g = GatewayProcess(tmp_path_factory.mktemp("offload-llm-fail") / "data", env=env).start()
    yield g
    g.stop()


def _offload_health(gw: GatewayProcess) -> dict:
    return gw.wait_healthy().get("offload") or {}


def _wait_idle(gw: GatewayProcess, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    off: dict = {}
    while time.monotonic() < deadline:
        off = _offload_health(gw)
        if not any((off.get("backlog") or {}).values()):
            return off
        time.sleep(0.25)
    raise TimeoutError(f"offload backlog not drained: {off}")


def _rows(gw: GatewayProcess, scope: str) -> list[dict]:
    out = []
    for p in (gw.data_dir / "offload").glob(f"{scope}-*/offload-*.jsonl"):
        out += [json.loads(line) for line in p.read_text("utf-8").splitlines() if line.strip()]
    return out


MODES = [
    ("malformed", 0.0),
    ("truncated", 0.0),
    ("raw", 0.0),
    ("http500", 0.0),
    ("good", TIMEOUT_DELAY_S),  # valid replies, but only after the client gave up
    ("good", SLOW_DELAY_S),  # valid replies, slowly
]


@pytest.mark.parametrize(("mode", "delay"), MODES, ids=[f"{m}-{d:g}s" for m, d in MODES])
def test_llm_failure_never_blocks_assemble_or_loses_rows(gw, llm, mode: str, delay: float):
    _, responder = llm
    responder.mode, responder.delay = mode, delay
    scope = f"fail-{mode}-{int(delay)}-{uuid.uuid4().hex[:6]}"
    msgs = load_sessions("swe")[2].messages  # 12 tool calls, 13 model calls, 8.7k tokens
    with gw.client(timeout=60) as c:
        rep = replay(c, msgs, session_key=f"agent:fail:{scope}", scope=scope, budget=3000)
        slow = [
            f"[{call.at}] {call.elapsed_ms:.0f} ms ({call.answer.get('level')})"
            for call in rep.calls
            if call.elapsed_ms > ASSEMBLE_DEADLINE_S * 1000
        ]
        assert not slow, f"assemble blocked by the LLM ({mode}, delay {delay}s): {slow}"
        assert not rep.problems, rep.problems[:10]
        assert rep.changed_ids
        problems = read_back_problems(c, rep)
        assert not problems, problems[:10]
    responder.delay = 0.0  # let the background work finish
    off = _wait_idle(gw)
    # (rows named msg-... are user/assistant messages that left the context: not tool calls)
    rows = {
        r["tool_call_id"]: r for r in _rows(gw, scope) if not r["tool_call_id"].startswith("msg-")
    }
    # A failed LLM call falls back to the no-LLM row: every call has one, with a summary and a ref.
    assert sorted(rows) == sorted(rep.raw_results)
    for rid, row in rows.items():
        assert row["summary"].strip(), rid
        assert row["result_ref"], rid
    with gw.client() as c:
        assert not read_back_problems(c, rep)
    if mode != "good" or delay * 1000 > LLM_TIMEOUT_MS:  # a failure is visible in /health
        errors = off.get("last_error") or {}
        assert any(errors.get(k) for k in ("l1", "l15", "l2")), off


def test_health_error_clears_once_the_llm_answers_again(gw, llm) -> None:
    _, responder = llm
    responder.mode, responder.delay = "malformed", 0.0
    scope = f"recover-{uuid.uuid4().hex[:6]}"
    swe = load_sessions("swe")
    with gw.client(timeout=60) as c:
        replay(c, swe[3].messages, session_key=f"agent:rec:{scope}-a", scope=scope, budget=4000)
        off = _wait_idle(gw)
        assert any((off.get("last_error") or {}).values()), off
        responder.mode = "good"
        replay(c, swe[7].messages, session_key=f"agent:rec:{scope}-b", scope=scope, budget=4000)
        replay(c, swe[9].messages, session_key=f"agent:rec:{scope}-c", scope=scope, budget=4000)
    off = _wait_idle(gw)
    errors = off.get("last_error") or {}
    assert not errors.get("l1"), off
    assert not errors.get("l15"), off


def test_hostile_llm_canvas_labels_still_parse(gw, llm) -> None:
    """An LLM canvas with quotes, brackets, pipes and `end` in its labels is made safe (or
    replaced by the deterministic canvas): the file on disk still parses."""
    _, responder = llm
    responder.mode, responder.delay, responder.hostile = "good", 0.0, True
    scope = f"hostile-{uuid.uuid4().hex[:6]}"
    l2_before = responder.served["offload-l2"]
    try:
        with gw.client(timeout=60) as c:
            rep = replay(
                c,
                chain(load_sessions("swe")[:3]),
                session_key=f"agent:hostile:{scope}",
                scope=scope,
                budget=8000,
            )
            assert not rep.problems, rep.problems[:10]
        _wait_idle(gw)
    finally:
        responder.hostile = False
    assert responder.served["offload-l2"] > l2_before  # the LLM drew these canvases
    validator = require_validator()
    files = sorted((gw.data_dir / "offload").glob(f"{scope}-*/mmds/*.mmd"))
    assert files
    # The LLM's labels made it into the files (escaped), not just the fallback canvas.
    assert any("pytest" in f.read_text("utf-8") and "登录" in f.read_text("utf-8") for f in files)
    bad = [r for r in validator.check(files) if not r.ok]
    assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad[:5])


def test_all_canvas_files_of_this_module_parse(gw, llm) -> None:
    """Every canvas this module's gateway drew parses as Mermaid: the other tests' and those of
    a session replayed here with a failing, then an answering LLM (the fallback canvas and the
    LLM's own), so that run alone it still checks some."""
    _, responder = llm
    validator = require_validator()
    scope = f"canvas-{uuid.uuid4().hex[:6]}"
    sessions = load_sessions("swe")
    with gw.client(timeout=60) as c:
        for i, mode in enumerate(("malformed", "good")):
            responder.mode, responder.delay = mode, 0.0
            msgs = sessions[3 + i].messages
            rep = replay(c, msgs, session_key=f"agent:canvas:{mode}", scope=scope, budget=3000)
            assert not rep.problems, rep.problems[:10]
            _wait_idle(gw)
    files = sorted(gw.data_dir.rglob("mmds/*.mmd"))
    mine = [f for f in files if f.is_relative_to(gw.data_dir / "offload") and scope in str(f)]
    assert mine, "no canvas drawn here"
    bad = [r for r in validator.check(files) if not r.ok]
    assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad[:10])

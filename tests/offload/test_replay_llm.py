"""The replay of test_replay.py with an LLM (the scripted fake): the LLM's L1 summaries, L1.5
judgements and L2 canvases are used, and everything the no-LLM run promises still holds:
every list within budget and valid, one canvas, every shortened/dropped result byte-exact."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.offload.zh_session import zh_session
from tests.support.agent_sessions import chain, load_sessions
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.mermaid import require_validator
from tests.support.offload_llm import OffloadResponder
from tests.support.offload_replay import Replay, content_tokens, read_back_problems, replay


def llm_env(fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {"TDAI_LLM_BASE_URL": fake.base_url, "TDAI_LLM_API_KEY": "x", **KEYWORD_ONLY, **extra}


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[FakeLLM, OffloadResponder]]:
    with FakeLLM() as fake:
        yield fake, OffloadResponder(fake)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, llm) -> Iterator[GatewayProcess]:
    fake, _ = llm
    g = GatewayProcess(tmp_path_factory.mktemp("offload-llm") / "data", env=llm_env(fake)).start()
    yield g
    g.stop()


def wait_offload_idle(gw: GatewayProcess, timeout: float = 60.0) -> dict:
    """Until the background L1/L1.5/L2 work is done (backlog all zero)."""
    deadline = time.monotonic() + timeout
    off: dict = {}
    while time.monotonic() < deadline:
        off = gw.wait_healthy().get("offload") or {}
        if not any((off.get("backlog") or {}).values()):
            return off
        time.sleep(0.2)
    raise TimeoutError(f"offload backlog not drained: {off}")


def rows_by_file(gw: GatewayProcess, scope: str) -> dict[str, list[dict]]:
    return {
        p.name: [json.loads(line) for line in p.read_text("utf-8").splitlines() if line.strip()]
        for p in (gw.data_dir / "offload").glob(f"{scope}-*/offload-*.jsonl")
    }


@pytest.fixture(scope="module")
def runs(gw: GatewayProcess) -> dict[str, Replay]:
    out: dict[str, Replay] = {}
    with gw.client(timeout=120) as c:
        for i, s in enumerate(load_sessions()):
            budget = max(3000, int(content_tokens(s.messages) * (0.35, 0.7)[i % 2]))
            out[s.id] = replay(
                c,
                s.messages,
                session_key=f"agent:llm:{i}-{uuid.uuid4().hex[:6]}",
                scope="llm-single",
                budget=budget,
            )
        out["chain-swe-32k"] = replay(
            c,
            chain(load_sessions("swe")),
            session_key=f"agent:llm:chain-{uuid.uuid4().hex[:6]}",
            scope="llm-chain",
            budget=32_000,
        )
        msgs = chain(load_sessions("swe")[:5])
        out["chain-swe5-agent"] = replay(
            c,
            msgs,
            session_key=f"agent:llm:agent-{uuid.uuid4().hex[:6]}",
            scope="llm-agent",
            budget=12_000,
            fmt="agent",
            system_tokens=content_tokens([msgs[0]]),
        )
        out["zh"] = replay(
            c,
            zh_session(),
            session_key=f"agent:llm:zh-{uuid.uuid4().hex[:6]}",
            scope="llm-zh",
            budget=6000,
        )
    wait_offload_idle(gw)
    return out


def test_replays_with_llm_stay_valid_and_read_back(gw: GatewayProcess, runs, llm) -> None:
    _, responder = llm
    problems = []
    with gw.client(timeout=60) as c:
        for name, rep in runs.items():
            # Read back only after the LLM rewrote the rows: its rewrites must lose nothing.
            for p in rep.problems + read_back_problems(c, rep):
                problems.append(f"{name[-40:]}: {p}")
    assert not problems, "\n".join(problems[:40])
    assert sum(len(r.changed_ids) for r in runs.values()) > 50
    assert {"mild", "aggressive"} <= set().union(*(r.levels() for r in runs.values()))
    # The LLM path really ran.
    assert responder.served["offload-l1"] > 0, responder.served
    assert responder.served["offload-l15"] > 0, responder.served


def test_llm_summaries_reach_the_rows(gw: GatewayProcess, runs) -> None:
    files = rows_by_file(gw, "llm-single") | rows_by_file(gw, "llm-chain")
    rows = [r for rs in files.values() for r in rs]
    assert rows
    by_llm = [r for r in rows if r.get("summary_by") == "llm"]
    assert by_llm, "no row carries an LLM summary"
    for r in by_llm[:50]:
        assert r["summary"].startswith("LLM summary of "), r
        assert r["result_ref"]  # the path back to the raw text survived the rewrite
    for name, rs in files.items():
        ids = [r["tool_call_id"] for r in rs]
        assert len(ids) == len(set(ids)), name  # rewrites never duplicated a row


def test_llm_canvases_parse_as_mermaid(gw: GatewayProcess, runs) -> None:
    validator = require_validator()
    files = sorted(gw.data_dir.rglob("mmds/*.mmd"))
    assert files
    bad = [r for r in validator.check(files) if not r.ok]
    assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad[:10])

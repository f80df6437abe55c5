"""Replay the real recorded sessions through a real gateway's offload routes, with no LLM.

Each of the 52 sessions alone (at budgets tight enough to force mild, aggressive and emergency
compression), and sessions chained into one long session (as the original measured), in
OpenAI format and in OpenClaw AgentMessage format, plus a session with Chinese tool outputs.
Every assembled list must be within its budget and a valid request with exactly one canvas
message; every result that was shortened or dropped must come back byte-exact from
/offload/read; every canvas file written must parse as a Mermaid flowchart.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.offload.zh_session import zh_session
from tests.support.agent_sessions import Session, chain, load_sessions
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.mermaid import require_validator
from tests.support.offload_replay import (
    Replay,
    content_tokens,
    is_history_block,
    read_back_problems,
    replay,
)

# Budget = this share of the session's own tokens (cycled over the sessions), never below what
# the system prompt plus the largest user message need: from "fits easily" to "a third fits".
SHARES = (0.35, 0.6, 0.9, 1.5)
_CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    # Keyword-only: offload is under test, not the vectors' background fill.
    g = GatewayProcess(tmp_path_factory.mktemp("offload-replay") / "data", env=KEYWORD_ONLY).start()
    yield g
    g.stop()


def budget_for(s: Session, i: int) -> int:
    total = content_tokens(s.messages)
    floor = content_tokens([m for m in s.messages if m["role"] == "system"]) + max(
        content_tokens([m]) for m in s.messages if m["role"] == "user"
    )
    return max(floor + 1500, int(total * SHARES[i % len(SHARES)]))


def _key(tag: str) -> str:
    return f"agent:replay:{tag}-{uuid.uuid4().hex[:8]}"


def _run_all_single(gw: GatewayProcess, fmt: str) -> dict[str, Replay]:
    out = {}
    with gw.client(timeout=60) as c:
        for i, s in enumerate(load_sessions()):
            msgs = s.messages
            system_tokens = 0
            if fmt == "agent":  # OpenClaw hands the system prompt apart from the messages
                system_tokens = content_tokens([m for m in msgs if m["role"] == "system"])
            rep = replay(
                c,
                msgs,
                session_key=_key(f"single-{i}"),
                scope=f"replay-{fmt}",
                budget=budget_for(s, i),
                fmt=fmt,
                system_tokens=system_tokens,
            )
            rep.problems.extend(read_back_problems(c, rep))
            out[s.id] = rep
    return out


@pytest.fixture(scope="module")
def singles_openai(gw: GatewayProcess) -> dict[str, Replay]:
    return _run_all_single(gw, "openai")


@pytest.fixture(scope="module")
def singles_agent(gw: GatewayProcess) -> dict[str, Replay]:
    return _run_all_single(gw, "agent")


def _report(runs: dict[str, Replay]) -> str:
    lines = []
    for sid, rep in runs.items():
        for p in rep.problems[:5]:
            lines.append(f"{sid[-40:]} (budget {rep.budget}): {p}")
    return "\n".join(lines[:60])


@pytest.mark.parametrize("fmt", ["openai", "agent"])
def test_every_single_session_stays_valid_and_reads_back(
    fmt: str, request: pytest.FixtureRequest
) -> None:
    runs: dict[str, Replay] = request.getfixturevalue(f"singles_{fmt}")
    assert len(runs) == 52
    assert sum(len(r.calls) for r in runs.values()) > 400  # every model call was assembled
    problems = _report(runs)
    assert not problems, problems


@pytest.mark.parametrize("fmt", ["openai", "agent"])
def test_single_sessions_force_every_level(fmt: str, request: pytest.FixtureRequest) -> None:
    runs: dict[str, Replay] = request.getfixturevalue(f"singles_{fmt}")
    seen = set().union(*(r.levels() for r in runs.values()))
    assert {"none", "mild", "aggressive", "emergency"} <= seen, seen
    # The tightest budgets really shrank something and it all came back (checked above).
    assert sum(len(r.changed_ids) for r in runs.values()) > 50


@pytest.mark.parametrize("fmt", ["openai", "agent"])
def test_assembled_lists_are_not_underestimated(fmt: str, request: pytest.FixtureRequest) -> None:
    """estimated_tokens is what the budget is checked against: it may not be below an
    independent count of the texts it sent (cl100k, no per-message overhead)."""
    runs: dict[str, Replay] = request.getfixturevalue(f"singles_{fmt}")
    bad = []
    for sid, rep in runs.items():
        for call in rep.calls:
            sent = content_tokens(call.answer["messages"]) + rep.system_tokens
            if sent > call.answer["estimated_tokens"] or sent > rep.budget:
                bad.append(
                    f"{sid[-30:]} at [{call.at}]: texts {sent} tokens, estimated "
                    f"{call.answer['estimated_tokens']}, budget {rep.budget}"
                )
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize(
    ("which", "budget", "fmt"),
    [
        ("swe", 32_000, "openai"),
        ("swe", 128_000, "openai"),
        ("swe", 32_000, "agent"),
        ("all", 32_000, "openai"),
    ],
)
def test_chained_sessions(gw: GatewayProcess, which: str, budget: int, fmt: str) -> None:
    sessions = load_sessions(None if which == "all" else which)
    msgs = chain(sessions)
    system_tokens = 0
    if fmt == "agent":
        system_tokens = content_tokens([m for m in msgs if m["role"] == "system"])
    with gw.client(timeout=120) as c:
        rep = replay(
            c,
            msgs,
            session_key=_key(f"chain-{which}-{budget}-{fmt}"),
            scope=f"chain-{which}",
            budget=budget,
            fmt=fmt,
            system_tokens=system_tokens,
        )
        problems = rep.problems + read_back_problems(c, rep)
    assert len(rep.calls) == sum(1 for m in msgs if m["role"] == "assistant")
    assert not problems, "\n".join(problems[:30])
    if budget == 32_000:
        # The chain is larger than 32k (SWE-agent 56k, all 52 sessions 276k): the context
        # really filled and was shrunk.
        assert content_tokens(msgs) > 1.5 * budget
        assert rep.levels() & {"aggressive", "emergency"}, rep.levels()
        assert rep.changed_ids
        # Under pressure, the tasks that left the context are still named (history metadata).
        pressed = [c for c in rep.calls if c.answer["level"] in ("aggressive", "emergency")]
        with_history = [c for c in pressed if any(map(is_history_block, c.answer["messages"]))]
        assert with_history, "no <history_task_context> under aggressive/emergency"


_UNSENT: dict[str, tuple[Replay, list[str]]] = {}


def _unsent_run(gw: GatewayProcess, fmt: str) -> tuple[Replay, list[str]]:
    """A host whose tool-result hook was off (or whose gateway was down at the time) sends only
    /offload/assemble. Cached per format: two tests look at one run."""
    if fmt not in _UNSENT:
        msgs = chain(load_sessions("swe")[:6]) + zh_session()[1:]
        system_tokens = content_tokens([msgs[0]]) if fmt == "agent" else 0
        with gw.client(timeout=120) as c:
            rep = replay(
                c,
                msgs,
                session_key=_key(f"unsent-{fmt}"),
                scope=f"unsent-{fmt}",
                budget=16_000,
                fmt=fmt,
                system_tokens=system_tokens,
                send_results=False,
            )
            _UNSENT[fmt] = (rep, read_back_problems(c, rep))
    return _UNSENT[fmt]


@pytest.mark.parametrize("fmt", ["openai", "agent"])
def test_results_never_sent_to_tool_result_are_recorded_before_they_leave(
    gw: GatewayProcess, fmt: str
) -> None:
    """What /offload/assemble alone shortens or drops still reads back byte-exact."""
    rep, read_problems = _unsent_run(gw, fmt)
    assert not rep.tool_answers  # nothing went through /offload/tool-result
    problems = [p for p in rep.problems if "canvas messages" not in p] + read_problems
    assert not problems, "\n".join(problems[:20])
    assert len(rep.changed_ids) > 20


@pytest.mark.parametrize("fmt", ["openai", "agent"])
def test_canvas_from_the_first_step_without_tool_result_calls(gw: GatewayProcess, fmt: str) -> None:
    rep, _ = _unsent_run(gw, fmt)
    canvas_problems = [p for p in rep.problems if "canvas messages" in p]
    assert not canvas_problems, "\n".join(canvas_problems[:10])


def test_zh_tool_outputs(gw: GatewayProcess) -> None:
    msgs = zh_session()
    with gw.client(timeout=60) as c:
        rep = replay(c, msgs, session_key=_key("zh"), scope="zh", budget=6000)
        problems = rep.problems + read_back_problems(c, rep)
        assert not problems, "\n".join(problems)
        big = [rid for rid, raw in rep.raw_results.items() if len(raw) > 8000]
        assert big and set(big) <= rep.changed_ids  # the large zh outputs left the context
        for rid in big:
            ans = rep.tool_answers[rid]
            # Stub and summary carry the Chinese text intact (extractive, no mojibake).
            assert _CJK.search(ans["summary"]), ans["summary"]
            assert "\ufffd" not in ans["summary"] + ans["replacement"]
            assert rid in ans["replacement"]  # the stub says how to read the original back
            row = c.post(
                "/offload/read", json={"scope": "zh", "tool_call_id": rid}
            ).json()  # without the session key: found in the scope
            assert row["content"] == rep.raw_results[rid]
            assert row["content"].encode("utf-8") == rep.raw_results[rid].encode("utf-8")


def test_every_canvas_file_parses_as_mermaid(
    gw: GatewayProcess,
    singles_openai: dict[str, Replay],
    singles_agent: dict[str, Replay],
    tmp_path: Path,
) -> None:
    validator = require_validator()
    files = sorted(gw.data_dir.rglob("mmds/*.mmd"))
    assert len(files) >= 2  # the single-session scopes (both formats) have canvases
    bad = [r for r in validator.check(files) if not r.ok]
    assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad[:10])
    node_id = re.compile(r"^\s*(\d{3})-N\d+\b")
    for f in files:
        prefix = f.name[:3]
        for line in f.read_text("utf-8").splitlines():
            m = node_id.match(line)
            if m:
                assert m.group(1) == prefix, f"{f.name}: node {line.strip()[:40]}"

"""Offload under a long-lived ``openclaw gateway run`` (issues 21 and 24), OpenClaw 2026.9.x in
its default configuration (Tool Search on), with the config ``scripts/install-openclaw.sh
--offload`` writes (``install_offload``), a 40k-token model window (OpenClaw hands the engine the
window minus its 16k reserve) and our own gateway. Every turn is an ``openclaw agent`` run
without ``--local``: it runs inside the one Gateway process, where the plugin, its context engine
and its tools were loaded once (test_e2e_openclaw_offload.py and test_e2e_openclaw_readback.py
drive ``openclaw agent --local``, where the agent runs inside the CLI).

One Gateway plays three sessions, one after the other:

1. **The replay** (the OpenClaw half of tests/hermes/test_hermes_offload_replay.py): the three
   SWE-agent / CTF sessions of the Hermes replay (bench/hermes_offload_bench.SWE_QUICK, our DEV
   data), chained in one session: each recorded user message one turn, each recorded tool call a
   real ``exec cat`` printing the recorded output; then a turn that reads every stubbed result
   back by the name its stub gives. What the fake model received must show: every request
   carries the turn's user message and OpenClaw's whole system prompt; no request over the
   window; one canvas per distinct task of the replay, exactly; every stubbed result read back
   byte-exact (the pages joined) through OpenClaw's own tool.
2. **Two results in one turn**: a 12 KB en ``read`` and 17,000 zh characters through ``exec
   cat``, then the model reads each back by the name its stub gives (following every page), then
   answers. Every request carries the turn's user message; both results arrive as stubs from the
   next model call on; the read tool is offered by name and every read is answered uncut; the
   pages of each joined are the original byte for byte.

3. **A session past the aggressive threshold**: each of three turns pastes a long zh/en log,
   runs two tools and gets a long answer, so the third turn's history crosses the aggressive
   threshold. OpenClaw's budget for the history (read from the ``/offload/assemble`` calls: the
   bridge talks to our gateway through a transparent proxy for the whole module) is under the
   window minus the reserve, the third turn's history is cut to it and named in a history
   block, every model call of the turn keeps one canvas, and the turn is answered.

All three ran as ``openclaw agent --local`` turns before (eight OpenClaw starts, ~18 CPU-s each,
and a Gateway of its own for the second): one Gateway for all costs ~20 CPU-s to start and ~2 a
turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.hermes_offload_bench import SWE_QUICK, pick, replay_turns, task_count, task_of
from memory_tencentdb.offload.canvas import parse_meta
from tests.openclaw.gateway_run import OpenClawGateway
from tests.openclaw.harness import BRIDGE_ID, OpenClawHome, agent_output, require_openclaw
from tests.openclaw.offload_support import (
    BACKGROUND,
    HISTORY_MARK,
    UNAVAILABLE,
    FaultyProxy,
    background_run,
    canvas_count,
    install_offload,
    is_stub,
    oc_exec,
    oc_read,
    offered_directly,
    tool_text,
    user_texts,
)
from tests.openclaw.test_e2e_openclaw_readback import PageReader
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess
from tests.support.offload_replay import canvas_goal, task_key
from tests.support.tool_agent import (
    READ_TOOL,
    ToolAgent,
    count_tokens,
    make_text,
    messages_tokens,
    prompt_tokens,
    text_of,
    tools,
)

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

SCOPE = "oc-gw-offload"
WINDOW = 40_000
REPLAY_SESSION = "agent:main:replay"
TWO_SESSION = "agent:main:gw-offload"
TWO_PROMPT = "请检查这两份日志 / please check these two logs (gateway run)"
BUDGET_SESSION = "agent:main:budget"
RESERVE = 16_384  # OpenClaw's default compaction reserve (settings compaction.reserveTokens)


@dataclass
class Replay:
    sessions: list[Any]
    keys: list[str]  # each turn's task, as its canvas goal must name it
    outputs: dict[str, str]  # call id -> the recorded output
    per_turn: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    stubbed: list[str] = field(default_factory=list)
    reader: PageReader | None = None
    readback: Any = None  # the read-back turn's `openclaw agent` run
    canvases: list[str] = field(default_factory=list)


@dataclass
class TwoResults:
    items: dict[str, str]  # call id -> the original
    reader: PageReader
    done: Any = None
    requests: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Budget:
    turns: list[Any] = field(default_factory=list)  # each turn's `openclaw agent` run
    requests: list[list[dict[str, Any]]] = field(default_factory=list)  # each turn's model calls
    # (path, request, answer) of each turn's offload calls of this session, through the proxy
    exchanges: list[list[tuple[str, Any, Any]]] = field(default_factory=list)


@dataclass
class Played:
    gateway: GatewayProcess
    replay: Replay
    two: TwoResults
    budget: Budget
    logs: str


def play_replay(oc: OpenClawGateway, agent: ToolAgent, tmp: Path, gw: GatewayProcess) -> Replay:
    sessions = pick(SWE_QUICK)
    turns: list[tuple[str, list[Any]]] = []
    keys: list[str] = []
    for i, s in enumerate(sessions):
        more = [(t.prompt, t.steps) for t in replay_turns(s, f"s{i}", tmp / "outputs", oc_exec)]
        turns += more
        keys += [task_key(task_of(s))] * len(more)
    outputs = {p.stem: p.read_text("utf-8") for p in (tmp / "outputs").glob("*.txt")}
    replay = Replay(sessions, keys, outputs)
    for prompt, steps in turns:
        start = agent.mark()
        agent.push(*steps)
        done = oc.send(prompt, REPLAY_SESSION, asked=lambda s=start: agent.mark() > s, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:] + oc.logs()[-3000:]
        agent.clear()
        replay.per_turn.append((prompt, turn_requests(agent, start)))

    # Every result that was ever a stub, read back by the name the stub gives.
    replay.stubbed = sorted(
        {
            cid
            for _, reqs in replay.per_turn
            for r in reqs
            for cid in outputs
            if is_stub(tool_text(r, cid), outputs[cid])
        }
    )
    replay.reader = PageReader(replay.stubbed, "REPLAY-READBACK-DONE", prefix="callrpread")
    agent.push(*[replay.reader] * (4 * len(replay.stubbed) + 8))
    replay.readback = oc.send(
        "请把被折叠的工具结果全部读回 / read every stub back", REPLAY_SESSION, timeout=600
    )
    agent.clear()
    # The replay's canvases, before the other session adds its own.
    replay.canvases = sorted(
        p.name
        for p in (gw.data_dir / "offload").glob("*/mmds/*.mmd")
        if not any(o in parse_meta(p.read_text("utf-8")).task_goal for o in BACKGROUND)
    )
    return replay


def play_two_results(oc: OpenClawGateway, agent: ToolAgent, home: OpenClawHome) -> TwoResults:
    work = home.root / "work"
    work.mkdir()
    # The en file under what OpenClaw's ``read`` hands over at a 40k window (~15,800 characters,
    # then "[Read output capped ...]"): it must reach the model's read-back whole.
    en, zh = make_text(12_000, "en", 81), make_text(17_000, "zh", 82)
    (work / "build-log-en.txt").write_text(en, "utf-8")
    (work / "部署日志-zh.txt").write_text(zh, "utf-8")
    two = TwoResults(
        {"callgwen": en, "callgwzh": zh},
        PageReader(["callgwen", "callgwzh"], "GW-READBACK-DONE", prefix="callgwread"),
    )
    start = agent.mark()
    agent.push(
        tools(oc_read(str(work / "build-log-en.txt"), "callgwen")),
        tools(oc_exec(f"cat {work / '部署日志-zh.txt'}", "callgwzh")),
        *[two.reader] * 20,
    )
    two.done = oc.send(TWO_PROMPT, TWO_SESSION, timeout=300)
    agent.clear()
    two.requests = turn_requests(agent, start)
    return two


# The budget session: what each turn pastes, which tools run, what the model answers.
BUDGET_MARK = "第{0}轮：请分析这段日志 / turn {0}: analyse this log"
SYSTEM_ROLES = ("system", "developer")


def budget_answer(turn: int) -> str:
    return make_text(12_000, "en", 70 + turn) + "\n" + make_text(3_000, "zh", 70 + turn)


def play_budget(
    oc: OpenClawGateway, agent: ToolAgent, home: OpenClawHome, proxy: FaultyProxy
) -> Budget:
    work = home.root / "budget"
    work.mkdir()
    budget = Budget()
    for k in range(3):
        paste = make_text(3_000, "en", 40 + k) + "\n" + make_text(1_200, "zh", 40 + k)
        steps: list[Any] = []
        for half, seed in (("a", 50), ("b", 60)):
            path = work / f"budget-{k}-{half}.txt"
            path.write_text(make_text(3_200, "en", seed + k), "utf-8")
            steps.append(tools(oc_read(str(path), f"callbudget{k}{half}")))
        start, first = agent.mark(), len(proxy.exchanges)
        agent.push(*steps, budget_answer(k))
        message = f"{BUDGET_MARK.format(k + 1)}\n{paste}"
        done = oc.send(message, BUDGET_SESSION, asked=lambda s=start: agent.mark() > s, timeout=400)
        agent.clear()
        budget.turns.append(done)
        budget.requests.append(turn_requests(agent, start))
        budget.exchanges.append(
            [
                (path, q, a)
                for path, q, a in proxy.exchanges[first:]
                if isinstance(q, dict) and q.get("session_key") == BUDGET_SESSION
            ]
        )
    return budget


def turn_requests(agent: ToolAgent, start: int) -> list[dict[str, Any]]:
    """The turn's model calls since ``start``, without OpenClaw's background runs (BACKGROUND),
    which may come between them: not calls of the turn."""
    aside = agent.aside or (lambda body: False)
    return [r for r in agent.main_requests()[start:] if not aside(r)]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    install = require_openclaw()
    tmp = tmp_path_factory.mktemp("oc-gw-offload")
    # A gateway of its own: the canvases in its data directory are these sessions' only.
    gw = GatewayProcess(tmp / "data").start()
    try:
        with FakeLLM() as llm, FaultyProxy(gw.port, "pass") as proxy:
            agent = ToolAgent(llm)
            agent.aside = background_run
            home = OpenClawHome(install, tmp / "home", llm.base_url)
            cfg = install_offload(home, gw, SCOPE)
            cfg["models"]["providers"]["fake"]["models"][0]["contextWindow"] = WINDOW
            cfg["plugins"]["entries"][BRIDGE_ID]["config"]["port"] = proxy.port
            home.write_config(cfg)
            oc = OpenClawGateway(home)
            try:
                oc.wait_listening()
                replay = play_replay(oc, agent, tmp, gw)
                two = play_two_results(oc, agent, home)
                budget = play_budget(oc, agent, home, proxy)
                assert oc.proc.poll() is None, "one OpenClaw Gateway served every turn"
            finally:
                oc.stop()
            yield Played(gw, replay, two, budget, oc.logs())
    finally:
        gw.stop()


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(
        text_of(m.get("content"))
        for m in request.get("messages") or []
        if m.get("role") in ("system", "developer")
    )


def read_stored(gw: GatewayProcess, cid: str, session: str) -> str:
    with gw.client() as c:
        body = {"tool_call_id": cid, "scope": SCOPE, "session_key": session}
        stored = c.post("/offload/read", json=body)
    assert stored.status_code == 200, stored.text
    return stored.json()["content"]


def assert_read_whole(reader: PageReader) -> None:
    assert all(reader.offered), "the read tool was not in the model's tool list"
    for answer in reader.answers:
        assert "not found" not in answer[:200], answer[:300]
        assert "more characters truncated" not in answer and "chars truncated" not in answer


def test_replay_keeps_the_task_one_canvas_per_task_and_reads_back_whole(played: Played) -> None:
    replay = played.replay
    done = replay.readback
    assert done.returncode == 0 and "REPLAY-READBACK-DONE" in done.stdout, done.stderr[-3000:]
    assert "--local" not in " ".join(done.args)

    problems: list[str] = []
    absent: list[str] = []
    for n, (prompt, reqs) in enumerate(replay.per_turn):
        assert reqs, f"turn {n} made no request"
        first = system_text(reqs[0])
        for k, r in enumerate(reqs):
            now = system_text(r)
            if "[Truncated" in now or len(now) < 0.9 * len(first):
                problems.append(f"turn {n} request {k}: system prompt cut ({len(now)} chars)")
            if not any(prompt.strip()[:200] in u for u in user_texts(r)):
                absent.append(f"turn {n} request {k}")
            goal = canvas_goal(user_texts(r))
            if goal is not None and replay.keys[n] not in goal:
                problems.append(f"turn {n} request {k}: canvas goal {goal[:80]!r} not the turn's")
            if prompt_tokens(r) > WINDOW:
                problems.append(f"turn {n} request {k}: {prompt_tokens(r)} tokens over {WINDOW}")
    requests = sum(len(reqs) for _, reqs in replay.per_turn)
    assert not absent, (
        f"the turn's user message absent in {len(absent)} of {requests}: {absent[:5]}"
    )
    assert not problems, problems[:10]
    assert len(replay.canvases) == task_count(replay.sessions), replay.canvases

    assert replay.stubbed, "nothing was stubbed: the replay did not exercise offload"
    assert replay.reader is not None
    assert_read_whole(replay.reader)
    exact_file = 0
    for cid in replay.stubbed:
        joined = "".join(replay.reader.pages[cid])
        # What OpenClaw showed the model as the result itself, where a request held it whole:
        # OpenClaw masks secret-looking tokens ("pypi-...") in every tool result, ours included,
        # so the read-back equals that, and the stored original otherwise.
        shown = next(
            (
                t
                for _, reqs in replay.per_turn
                for r in reqs
                if (t := tool_text(r, cid)) is not None and not is_stub(t, replay.outputs[cid])
            ),
            None,
        )
        expected = read_stored(played.gateway, cid, REPLAY_SESSION) if shown is None else shown
        assert joined.encode("utf-8") == expected.encode("utf-8"), (cid, len(joined))
        exact_file += joined == replay.outputs[cid]
    print(
        f"\n  real OpenClaw gateway run, default config, {WINDOW}-token window:"
        f" {len(replay.per_turn)} turns, {requests} model calls, {len(replay.canvases)} canvases"
        f" for {task_count(replay.sessions)} tasks, {len(replay.stubbed)} stubs read back whole"
        f" ({exact_file} equal to the recorded output byte for byte; the rest as OpenClaw's exec"
        f" handed them over); {READ_TOOL} offered directly"
    )


def test_two_results_are_stubs_from_the_next_call_and_read_back_whole(played: Played) -> None:
    two = played.two
    done, requests = two.done, two.requests
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:] + played.logs[-3000:]
    assert "GW-READBACK-DONE" in done.stdout, out[-3000:] + played.logs[-3000:]
    assert "--local" not in " ".join(done.args)

    # The turn's request is in every model call of the turn.
    assert len(requests) >= 4, len(requests)
    for k, request in enumerate(requests):
        assert any(TWO_PROMPT in t for t in user_texts(request)), (k, user_texts(request)[-1][:500])

    # Both results are stubs from the model call after the one that asked for them.
    for k, (cid, text) in enumerate(two.items.items()):
        for request in requests[k + 1 :]:
            assert is_stub(tool_text(request, cid), text), (
                cid,
                (tool_text(request, cid) or "")[:400],
            )

    # The read tool by the stub's name, every read answered whole, pages byte-exact.
    assert_read_whole(two.reader)
    for cid, text in two.items.items():
        joined = "".join(two.reader.pages[cid])
        original = read_stored(played.gateway, cid, TWO_SESSION)
        assert joined.encode("utf-8") == original.encode("utf-8"), (cid, len(joined))
        if cid == "callgwen":
            assert joined == text  # OpenClaw's `read` hands the file over unchanged
    print(
        f"\n  openclaw gateway run: {len(requests)} model calls; "
        + ", ".join(f"{cid}: {len(two.reader.pages[cid])} pages" for cid in two.items)
        + f"; {READ_TOOL} offered directly: {all(two.reader.offered)}"
    )
    assert offered_directly(requests[-1], READ_TOOL)


# --- a session that crosses the aggressive threshold -------------------------------------------


def prompt_index(request: dict[str, Any], marker: str) -> int:
    """Index of the user message holding this turn's prompt (OpenClaw adds its own after it)."""
    msgs = request["messages"]
    return max(
        i for i, m in enumerate(msgs) if m["role"] == "user" and marker in text_of(m.get("content"))
    )


def history_tokens(request: dict[str, Any], marker: str) -> int:
    """Tokens of what the context engine assembled: the messages before the prompt, no system."""
    before = request["messages"][: prompt_index(request, marker)]
    return messages_tokens({"messages": [m for m in before if m["role"] not in SYSTEM_ROLES]})


def test_session_past_the_aggressive_threshold_stays_in_budget_and_goes_on(
    played: Played,
) -> None:
    b = played.budget
    for done in b.turns:
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:] + played.logs[-3000:]
        assert "--local" not in " ".join(done.args)
    assert UNAVAILABLE not in played.logs
    calls = [(q, a) for path, q, a in b.exchanges[2] if path == "/offload/assemble"]
    assert calls, "the context engine never asked the gateway in turn 3"
    pre, answer = calls[0]  # before the prompt: OpenClaw's budget for the whole history
    budget = pre["token_budget"]
    assert budget < WINDOW - RESERVE, budget
    # What turn 3 would carry verbatim (a lower bound): turn 2's last request, its answer.
    last2 = b.requests[1][-1]
    marker2 = BUDGET_MARK.format(2)
    verbatim = (
        history_tokens(last2, marker2)
        + messages_tokens({"messages": last2["messages"][prompt_index(last2, marker2) :]})
        + count_tokens(budget_answer(1))
    )
    assert verbatim > 0.85 * budget, (verbatim, budget, "the session never crossed the line")
    assert answer["level"] in ("aggressive", "emergency"), (answer["level"], answer["stats"])
    assert answer["stats"]["removed"] > 0 and answer["estimated_tokens"] <= budget
    marker3 = BUDGET_MARK.format(3)
    for request in b.requests[2]:  # every model call of the turn, the tool loop's included
        assert history_tokens(request, marker3) <= budget, (
            history_tokens(request, marker3),
            budget,
        )
        before = json.dumps(
            request["messages"][: prompt_index(request, marker3)], ensure_ascii=False
        )
        assert HISTORY_MARK in before, "what left the context is named in a history block"
    every = [r for reqs in b.requests for r in reqs]
    assert canvas_count(every[0]) <= 1
    for k, request in enumerate(every[1:], start=1):  # after the first tool result
        assert canvas_count(request) == 1, (k, json.dumps(request["messages"])[-3000:])
    for request in every:
        assert prompt_tokens(request) <= WINDOW
    assert budget_answer(2).splitlines()[0] in agent_output(b.turns[2]), "turn 3 was answered"
    print(
        f"\n  openclaw gateway run, past the aggressive threshold: OpenClaw's history budget"
        f" {budget} tokens (window {WINDOW}); turn 3 assembled at level {answer['level']},"
        f" {answer['stats']['removed']} messages left the context,"
        f" {answer['estimated_tokens']} tokens; {len(every)} model calls in 3 turns"
    )

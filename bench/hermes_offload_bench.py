"""Context offload in the real Hermes: tokens sent on vs off, and what the seams cost per turn.

Everything runs through real ``hermes chat -Q -q`` one-shot runs (hermes-agent 0.19.0 in its own
venv) resuming one session turn after turn, our real gateway, and a fake LLM that replays
recorded tool calls (tests/support/tool_agent.py). Offload is switched with
``scripts/install-hermes.sh --offload|--no-offload`` and ``offload_token_budget``.

1. **Tokens** (``replay``): recorded agent sessions of tests/fixtures/agent-sessions/ (SWE-agent
   coding sessions chained into one long Hermes session, and a multi-turn tau-bench session).
   Each recorded user message is one Hermes turn; each recorded tool call becomes a ``terminal``
   call that prints the recorded output (so Hermes's tool result carries it); the recorded text
   reply ends the turn. Tokens sent = cl100k tokens of every request the fake LLM received
   (messages, and the tool schemas Hermes sends on every call, reported apart), offload on vs off.
2. **Overhead** (``overhead``): a small turn (3 tool calls: 12,000 en / 3,000 zh / 200 en
   characters) with the gateway up, slow (every POST delayed 10 s, past every seam deadline) and
   down (nothing listening), offload on vs off; the seams' cost = on minus off, as the median
   wall time of a whole run and as the time inside the turn (first to last model call).

    .venv/bin/python bench/hermes_offload_bench.py [--quick] [--budget 32000] [--runs N]

Prints tables and writes bench/results/hermes_offload.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hermes.harness import HermesHome, hermes_venv  # noqa: E402
from tests.hermes.offload_support import (  # noqa: E402
    FaultProxy,
    canvas_messages,
    chat,
    is_stub,
    session_of,
    switch_offload,
)
from tests.support.agent_sessions import Session, load_sessions  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess, free_port  # noqa: E402
from tests.support.tool_agent import (  # noqa: E402
    ToolAgent,
    messages_tokens,
    prompt_tokens,
    say,
    terminal,
    text_of,
    tools,
    tools_tokens,
    write_doc,
)

RESULTS = ROOT / "bench" / "results" / "hermes_offload.json"
COMPACTION = re.compile(r"offload compaction of session \S+: (\d+) -> (\d+) messages")

# Sessions replayed (ids of tests/fixtures/agent-sessions/sessions.jsonl, by prefix).
SWE_QUICK = [
    "trajectories_demonstrations_ctf_web_i_go",
    "trajectories_demonstrations_replay__mars",
    "tests_test_data_trajectories_gpt4__swe-b",
]
SWE_FULL = [
    *SWE_QUICK,
    "trajectories_demonstrations_ctf_crypto_B",
    "trajectories_demonstrations_ctf_forensic",
]
TAU = ["gpt-4o-airline-task2-trial1"]
TASK = re.compile(r"ISSUE:\n(.*)|named \"([^\"]*)\"")


def task_of(session: Session) -> str:
    """A SWE-agent session's task: its issue's title line, or its CTF challenge's name (two
    sessions solving the same issue are one task; the template around it differs)."""
    prompt = next(text_of(m.get("content")) for m in session.messages if m.get("role") == "user")
    m = TASK.search(prompt)
    return m.group(0) if m else prompt[:300]


def task_count(sessions: list[Session]) -> int:
    """Distinct tasks of a replay (what one canvas per task must come to)."""
    return len({task_of(s) for s in sessions})


@dataclass
class Turn:
    prompt: str
    steps: list[Any]


def pick(prefixes: list[str]) -> list[Session]:
    sessions = load_sessions()
    out = []
    for prefix in prefixes:
        found = [s for s in sessions if s.id.startswith(prefix) and s not in out]
        if not found:
            raise SystemExit(f"no recorded session starts with {prefix!r}")
        out.append(found[0])
    return out


def replay_turns(
    session: Session,
    tag: str,
    outputs: Path,
    make_call: Callable[[str, str], dict[str, Any]] = terminal,
) -> list[Turn]:
    """A recorded session as host turns: its tool outputs printed by ``cat`` (``make_call``
    builds the host's shell tool call from a command and a call id: Hermes ``terminal`` by
    default, OpenClaw ``exec``). Call ids carry no underscores: OpenClaw strips them."""
    turns: list[Turn] = []
    k = 0
    for m in session.messages:
        role = m.get("role")
        if role == "user":
            turns.append(Turn(text_of(m.get("content")) or "(empty)", []))
        elif role == "assistant" and turns:
            calls = m.get("tool_calls") or []
            if calls:
                if turns[-1].steps and "content" in turns[-1].steps[-1]:
                    turns.append(Turn("Please go on.", []))  # tools after a text reply
                batch = []
                for c in calls:
                    k += 1
                    cid = f"call{tag}x{k}"
                    out = next(
                        (
                            text_of(t.get("content"))
                            for t in session.messages
                            if t.get("role") == "tool" and t.get("tool_call_id") == c.get("id")
                        ),
                        "",
                    )
                    path = write_text(outputs / f"{cid}.txt", out)
                    batch.append(make_call(f"cat {path}", cid))
                turns[-1].steps.append(tools(*batch))
            elif not turns[-1].steps or "content" not in turns[-1].steps[-1]:
                turns[-1].steps.append(say(text_of(m.get("content")) or "ok"))
    for t in turns:
        if not t.steps or "content" not in t.steps[-1]:
            t.steps.append(say("done"))
    return turns


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def make_home(
    tmp: Path,
    llm: FakeLLM,
    gw_port: int,
    data_dir: Path,
    offload: bool,
    budget: int,
    window: int = 128_000,
) -> HermesHome:
    tmp.mkdir(parents=True, exist_ok=True)
    home = HermesHome.create(tmp, llm.base_url, gw_port)
    if window != 128_000:  # the model's window as Hermes knows it (its compressor's trigger)
        cfg = home.root / "config.yaml"
        cfg.write_text(
            cfg.read_text("utf-8").replace("context_length: 128000", f"context_length: {window}"),
            "utf-8",
        )
    home.data_dir = data_dir
    home.extra_env["MEMORY_TENCENTDB_AUTO_START"] = "0"
    switch_offload(home, offload, offload_token_budget=budget)
    return home


def run_turns(home: HermesHome, agent: ToolAgent, turns: list[Turn]) -> dict[str, Any]:
    """Every turn as one resumed ``hermes chat -Q -q`` run; what the model received."""
    session = ""
    walls = []
    failures = []
    start = agent.mark()
    turn_reqs: list[tuple[str, list[dict[str, Any]]]] = []
    for t in turns:
        turn_start = agent.mark()
        agent.push(*t.steps)
        run, wall = chat(home, t.prompt, resume=session or None, timeout=600)
        walls.append(wall)
        if run.returncode != 0 or "Traceback" in run.stdout + run.stderr:
            failures.append((run.stdout + run.stderr)[-2000:])
        try:
            session = session or session_of(run)
        except AssertionError:
            failures.append("no session id")
        agent.clear()  # a turn Hermes ended early must not shift the next one
        turn_reqs.append((t.prompt, agent.main_requests()[turn_start:]))
    reqs = agent.main_requests()[start:]
    with agent.fake._lock:
        others = [r for r in agent.fake.requests if not r.get("tools")]
    return {
        "requests": reqs,
        "turns": turn_reqs,
        "side_requests": others,
        "walls": walls,
        "failures": failures,
    }


def token_figures(reqs: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    totals = [prompt_tokens(r) for r in reqs]
    msgs = [messages_tokens(r) for r in reqs]
    return {
        "model_calls": len(reqs),
        "tokens_sent": sum(totals),
        "message_tokens": sum(msgs),
        "tool_schema_tokens": sum(tools_tokens(r) for r in reqs),
        "max_request_tokens": max(totals, default=0),
        "over_budget": sum(1 for n in totals if n > budget),
        "stubbed_results": len(
            {
                m.get("tool_call_id")
                for r in reqs
                for m in r.get("messages") or []
                if m.get("role") == "tool" and is_stub(text_of(m.get("content")))
            }
        ),
        "calls_with_canvas": sum(1 for r in reqs if canvas_messages(r)),
    }


def replay(
    gw: GatewayProcess, tmp: Path, name: str, sessions: list[Session], budget: int
) -> dict[str, Any]:
    """The sessions as one Hermes session, offload off then on."""
    turns: list[Turn] = []
    for i, s in enumerate(sessions):
        turns += replay_turns(s, f"s{i}", tmp / name / "outputs")
    tool_calls = sum(len(st.get("tool_calls") or []) for t in turns for st in t.steps)
    out: dict[str, Any] = {
        "sessions": [s.id for s in sessions],
        "turns": len(turns),
        "tool_calls": tool_calls,
        "budget": budget,
    }
    for mode in ("off", "on"):
        with FakeLLM() as llm:
            agent = ToolAgent(llm)
            home = make_home(tmp / name / mode, llm, gw.port, gw.data_dir, mode == "on", budget)
            t0 = time.monotonic()
            got = run_turns(home, agent, turns)
            figures = token_figures(got["requests"], budget)
            figures["wall_s"] = round(time.monotonic() - t0, 1)
            figures["run_wall_median_s"] = round(statistics.median(got["walls"]), 2)
            figures["failures"] = got["failures"]
            figures["compactions"] = [
                [int(a), int(b)] for a, b in COMPACTION.findall(home.provider_log())
            ]
            out[mode] = figures
        print(
            f"  {name} offload {mode}: {json.dumps({k: v for k, v in figures.items() if k != 'failures'})}"
        )
    off, on = out["off"]["tokens_sent"], out["on"]["tokens_sent"]
    out["saved"] = round(1 - on / off, 4) if off else None
    off_m, on_m = out["off"]["message_tokens"], out["on"]["message_tokens"]
    out["saved_messages"] = round(1 - on_m / off_m, 4) if off_m else None
    return out


# --- issue 21: the real host, ours vs Hermes's own compressor ----------------------------


def task_absent(turns: list[tuple[str, list[dict[str, Any]]]]) -> int:
    """Requests whose turn's request (the user message the turn began with) is not in them."""
    n = 0
    for prompt, reqs in turns:
        key = prompt.strip()[:200]
        for r in reqs:
            users = [
                text_of(m.get("content")) for m in r.get("messages") or [] if m["role"] == "user"
            ]
            n += not any(u.startswith(key) for u in users)
    return n


def system_cut(turns: list[tuple[str, list[dict[str, Any]]]]) -> int:
    """Requests whose system prompt differs from the first request of the same run."""

    def system(r: dict[str, Any]) -> str:
        return "\n".join(
            text_of(m.get("content")) for m in r.get("messages") or [] if m["role"] == "system"
        )

    return sum(1 for _, reqs in turns for r in reqs[1:] if reqs and system(r) != system(reqs[0]))


def issue21(
    gw: GatewayProcess, tmp: Path, sessions: list[Session], only: set[str] | None = None
) -> dict[str, Any]:
    """The same replay and window through: verbatim (offload off, 128k window: nothing
    compacts), Hermes's built-in compressor (offload off, context_length 64000, the smallest
    window Hermes accepts; the fake LLM answers its summary calls), and our engine at budgets
    12000 / 30000 / 64000 (MEMORY_TENCENTDB_OFFLOAD_TOKEN_BUDGET, window 128k)."""
    turns: list[Turn] = []
    for i, s in enumerate(sessions):
        turns += replay_turns(s, f"s{i}", tmp / "i21" / "outputs")
    out: dict[str, Any] = {
        "sessions": [s.id for s in sessions],
        "tasks": task_count(sessions),
        "turns": len(turns),
        "tool_calls": sum(len(st.get("tool_calls") or []) for t in turns for st in t.steps),
        "runs": {},
    }
    runs = [
        ("verbatim", False, 0, 128_000),
        ("hermes_builtin_64k", False, 0, 64_000),
        ("ours_12k", True, 12_000, 128_000),
        ("ours_30k", True, 30_000, 128_000),
        ("ours_64k", True, 64_000, 128_000),
    ]
    for name, on, budget, window in runs:
        if only and name not in only:
            continue
        with FakeLLM() as llm:
            agent = ToolAgent(llm)
            home = make_home(tmp / "i21" / name, llm, gw.port, gw.data_dir, on, budget, window)
            root = gw.data_dir / "offload"
            before = set(root.iterdir()) if root.is_dir() else set()
            t0 = time.monotonic()
            got = run_turns(home, agent, turns)
            limit = budget or window
            figures = token_figures(got["requests"], limit)
            figures.update(
                budget=budget,
                window=window,
                wall_s=round(time.monotonic() - t0, 1),
                failures=len(got["failures"]),
                task_absent=task_absent(got["turns"]),
                system_changed=system_cut(got["turns"]),
                summary_calls=sum(
                    1 for r in got["side_requests"] if "summar" in json.dumps(r).lower()
                ),
                compactions_ours=len(COMPACTION.findall(home.provider_log())) if on else 0,
            )
            if on:  # the scope this run's Hermes home made (one per home)
                new = set((gw.data_dir / "offload").iterdir()) - before
                figures["canvases"] = sum(len(list((p / "mmds").glob("*.mmd"))) for p in new)
            out["runs"][name] = figures
        print(f"  issue21 {name}: {json.dumps(figures)}", flush=True)
    verbatim = out["runs"].get("verbatim", {}).get("tokens_sent")
    for f in out["runs"].values():
        f["saved_vs_verbatim"] = round(1 - f["tokens_sent"] / verbatim, 4) if verbatim else None
    return out


# --- overhead -----------------------------------------------------------------------------


def overhead_turn(docs: dict[str, Path]) -> list[Any]:
    return [
        tools(terminal(f"cat {docs['en_12000']}", "call_oh_en12000")),
        tools(
            terminal(f"cat {docs['zh_3000']}", "call_oh_zh3000"),
            terminal(f"cat {docs['en_200']}", "call_oh_en200"),
        ),
        say("OVERHEAD-DONE"),
    ]


def overhead(gw: GatewayProcess, tmp: Path, runs: int, budget: int) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    docs = {
        "en_12000": write_doc(tmp, "en_12000.txt", 12_000, "en", 1),
        "zh_3000": write_doc(tmp, "zh_3000.txt", 3_000, "zh", 2),
        "en_200": write_doc(tmp, "en_200.txt", 200, "en", 3),
    }
    out: dict[str, Any] = {}
    for scenario in ("up", "slow", "down"):
        out[scenario] = {}
        for mode in ("off", "on"):
            proxy = (
                FaultProxy(gw.base_url, mode="slow", delay_s=10.0) if scenario == "slow" else None
            )
            port = gw.port if scenario == "up" else proxy.port if proxy else free_port()
            walls, inner, completed = [], [], 0
            with FakeLLM() as llm:
                agent = ToolAgent(llm)
                if proxy:
                    proxy.__enter__()
                try:
                    home = make_home(
                        tmp / f"{scenario}-{mode}", llm, port, gw.data_dir, mode == "on", budget
                    )
                    for i in range(runs):
                        start = len(agent.arrivals)
                        agent.push(*overhead_turn(docs))
                        run, wall = chat(
                            home, f"Check the three logs, run {i}. 看日志。", timeout=600
                        )
                        agent.clear()
                        arrivals = agent.arrivals[start:]
                        ok = run.returncode == 0 and "OVERHEAD-DONE" in run.stdout
                        completed += int(ok and "Traceback" not in run.stdout + run.stderr)
                        walls.append(wall)
                        if len(arrivals) >= 2:
                            inner.append(arrivals[-1] - arrivals[0])
                finally:
                    if proxy:
                        proxy.__exit__(None, None, None)
            out[scenario][mode] = {
                "runs": runs,
                "completed": completed,
                "wall_s": [round(w, 2) for w in walls],
                "wall_median_s": round(statistics.median(walls), 2),
                "inner_s": [round(x, 3) for x in inner],
                "inner_median_s": round(statistics.median(inner), 3) if inner else None,
            }
            print(f"  overhead {scenario} offload {mode}: {out[scenario][mode]}")
        on, off = out[scenario]["on"], out[scenario]["off"]
        out[scenario]["added_wall_s"] = round(on["wall_median_s"] - off["wall_median_s"], 2)
        if on["inner_median_s"] is not None and off["inner_median_s"] is not None:
            out[scenario]["added_inner_s"] = round(on["inner_median_s"] - off["inner_median_s"], 3)
    return out


# --- main ---------------------------------------------------------------------------------


def git_head() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 SWE sessions, 2 runs per overhead case"
    )
    parser.add_argument("--budget", type=int, default=32_000, help="offload_token_budget")
    parser.add_argument(
        "--runs", type=int, default=0, help="runs per overhead case (default 2 quick, 3)"
    )
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument(
        "--issue21",
        action="store_true",
        help="only the issue 21 comparison: the 11 SWE sessions, Hermes's compressor vs ours",
    )
    parser.add_argument("--issue21-runs", default="", help="comma-separated run names to redo")
    args = parser.parse_args()
    if not (hermes_venv() / "bin" / "hermes").exists():
        raise SystemExit(f"hermes-agent venv missing at {hermes_venv()} (make hosts)")
    runs = args.runs or (2 if args.quick else 3)
    t0 = time.time()
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_head(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_before": os.getloadavg(),
        "quick": args.quick,
        "budget": args.budget,
    }
    with tempfile.TemporaryDirectory(prefix="hermes-offload-bench-") as tmp_s:
        tmp = Path(tmp_s)
        gw = GatewayProcess(tmp / "gw" / "data").start()
        try:
            if args.issue21:
                swe = [s for s in load_sessions() if "airline" not in s.id]
                only = {x for x in args.issue21_runs.split(",") if x}
                result["issue21"] = issue21(gw, tmp, swe, only or None)
                save(result)
                args.skip_replay = args.skip_overhead = True
            if not args.skip_replay:
                result["replay"] = {
                    "swe_chained": replay(
                        gw, tmp, "swe", pick(SWE_QUICK if args.quick else SWE_FULL), args.budget
                    ),
                    "tau_multi_turn": replay(gw, tmp, "tau", pick(TAU), args.budget),
                }
                save(result)  # a later failure must not lose these figures
            if not args.skip_overhead:
                result["overhead"] = overhead(gw, tmp / "overhead", runs, args.budget)
        finally:
            gw.stop()
    result["load_after"] = os.getloadavg()
    result["elapsed_s"] = round(time.time() - t0, 1)
    save(result)
    print_tables(result)
    print(f"wrote {RESULTS.relative_to(ROOT)} ({result['elapsed_s']} s)")


def save(result: dict[str, Any]) -> None:
    """Write the results file; a part this run skipped keeps its figures from the last run."""
    out = dict(result)
    try:
        previous = json.loads(RESULTS.read_text("utf-8"))
    except (OSError, ValueError):
        previous = {}
    for part in ("replay", "overhead", "issue21"):
        if part not in out and part in previous:
            out[part] = previous[part]
            out[f"{part}_from"] = previous.get(f"{part}_from") or {
                "date": previous.get("date"),
                "commit": previous.get("commit"),
            }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")


def print_tables(result: dict[str, Any]) -> None:
    if "replay" in result:
        print(
            "\n| replay | turns | tool calls | model calls | tokens sent off | on | saved | messages only saved | max request off / on | over budget off / on | stubbed | compactions |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, r in result["replay"].items():
            off, on = r["off"], r["on"]
            print(
                f"| {name} | {r['turns']} | {r['tool_calls']} | {off['model_calls']} / {on['model_calls']} | "
                f"{off['tokens_sent']:,} | {on['tokens_sent']:,} | {pct(r['saved'])} | {pct(r['saved_messages'])} | "
                f"{off['max_request_tokens']:,} / {on['max_request_tokens']:,} | {off['over_budget']} / {on['over_budget']} | "
                f"{on['stubbed_results']} | {len(on['compactions'])} |"
            )
    if "overhead" in result:
        print("\n| gateway | run wall off | on | added | in-turn off | on | added | completed on |")
        print("|---|---|---|---|---|---|---|---|")
        for scenario, o in result["overhead"].items():
            off, on = o["off"], o["on"]
            print(
                f"| {scenario} | {off['wall_median_s']} s | {on['wall_median_s']} s | {o['added_wall_s']:+} s | "
                f"{off['inner_median_s']} s | {on['inner_median_s']} s | {o.get('added_inner_s', 0):+} s | "
                f"{on['completed']}/{on['runs']} |"
            )


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


if __name__ == "__main__":
    main()

"""Host compaction vs our offload, in the real hosts, on the same replay and the same window.

What a user would otherwise run (issue 21, Benchmark): real Hermes with its built-in compressor,
real OpenClaw with its own compaction, against our engine; and verbatim (nothing compacts) as the
reference for tokens saved. Per host, three arms on the same replay and the same model window:

1. ``verbatim``: our memory plugin installed, offload off, the host's compaction switched off
   (Hermes ``compression.enabled: false``; OpenClaw ``agents.defaults.compaction.enabled: false``,
   whose preflight / overflow-recovery compaction stays, so any summary call there is reported).
2. ``host``: offload off, the host's compaction as it ships (Hermes's default context engine, the
   compressor, threshold 50 % of the window; OpenClaw's default compaction at window minus its
   16,384-token reserve). The fake LLM answers the hosts' summary calls with a plausible
   structured summary (OpenClaw's required headings, the pending ask, identifiers).
3. ``ours``: ``scripts/install-hermes.sh --offload`` / ``scripts/install-openclaw.sh --offload``
   (our context engine), budget = the window (the default) unless ``--ours-budget`` is given.

The replay: the recorded SWE-agent / CTF sessions of tests/fixtures/agent-sessions chained into one
host session, one recorded user message per turn (``hermes chat -Q -q --resume`` / ``openclaw
agent --local``); each recorded tool call is a shell ``cat`` of its recorded output (Hermes
``terminal``, OpenClaw ``exec``), the recorded text reply ends the turn. Counted from the fake
LLM's request log, the same cl100k tokenizer for every arm (tests/support/tool_agent.py):
model calls, prompt tokens sent (messages + tool schemas; the hosts' summary calls apart and in the
total), compactions (host: its summary calls; ours: Hermes's engine compactions from the provider
log, OpenClaw's assemble answers that removed more messages than the previous one), requests
whose turn's user message is absent (its first 200 characters, outside our canvas / history
blocks), requests over the window.

    .venv/bin/python bench/host_compaction_bench.py [--quick] [--host hermes|openclaw|both]
        [--hermes-window 64000] [--openclaw-window 32000] [--ours-budget 0]

``--quick``: 3 sessions instead of 11, written to bench/out/host_compaction-quick.json. Prints a
table and writes bench/results/host_compaction.json (each host's part kept from the last run when
this run skips it). Full run on 2 shared CPUs: Hermes ~30 min, OpenClaw ~30 min (arms in parallel).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.hermes_offload_bench import (  # noqa: E402
    COMPACTION,
    SWE_QUICK,
    Turn,
    git_head,
    make_home,
    pick,
    replay_turns,
    task_count,
)
from tests.hermes.harness import hermes_venv  # noqa: E402
from tests.hermes.offload_support import chat, is_background_review, session_of  # noqa: E402
from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID, OpenClawHome, OpenClawInstall  # noqa: E402
from tests.openclaw.offload_support import FaultyProxy, oc_exec  # noqa: E402
from tests.support.agent_sessions import Session, load_sessions  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.tool_agent import (  # noqa: E402
    Reply,
    ToolAgent,
    prompt_tokens,
    say,
    terminal,
    text_of,
)

RESULTS = ROOT / "bench" / "results" / "host_compaction.json"
DUMPS = ROOT / "bench" / "out" / "host_compaction"  # the summary calls, for reading them
CANVAS = ("<current_task_context", "</current_task_context>")
HISTORY = ("<history_task_context", "</history_task_context>")
KEY_CHARS = 200  # the part of a turn's user message that must be in every request of the turn
# The fake's summary quotes less than that of a request (a summary naming the goal does not
# count as the request being there).
GOAL_CHARS = 120
FLUSH = "Pre-compaction memory flush"  # OpenClaw's own memory-flush run before a compaction


# --- the replay ---------------------------------------------------------------------------


def all_turns(
    sessions: list[Session], outputs: Path, make_call: Callable[[str, str], dict[str, Any]]
) -> list[Turn]:
    turns: list[Turn] = []
    for i, s in enumerate(sessions):
        turns += replay_turns(s, f"s{i}", outputs, make_call)
    return turns


# --- the model ----------------------------------------------------------------------------


def request_text(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m.get("content")) for m in body.get("messages") or [])


# What each host's own compaction prompt says (Hermes agent/context_compressor.py; OpenClaw's
# summarizer: "context summarization assistant", "context checkpoint", its turn-prefix summary,
# and its safeguard mode's required sections).
SUMMARY_MARKS = (
    "You are a summarization agent",
    "context checkpoint",
    "context summarization assistant",
    "Summarize the prefix",
    "Produce a compact, factual summary",
    "## Pending user asks",
)


def is_summary_call(body: dict[str, Any]) -> bool:
    """A host's own compaction call: no tools offered, the host's summary prompt; never our
    gateway's memory work on the host's model (``X-Memory-Source: host-model``)."""
    if body.get("tools") or (body.get("_headers") or {}).get("x-memory-source") == "host-model":
        return False
    text = request_text(body)
    return any(mark in text for mark in SUMMARY_MARKS)


# A superset of what OpenClaw's safeguard checks a summary keeps literally (URLs, absolute paths,
# numbers with a point, ids with 8+ hex digits or 6+ digits): the fake keeps them all.
_IDENT = re.compile(
    r"https?://\S+|/[\w.\-]{2,}(?:/[\w.\-]+)+|\b\d+\.\d+\b|[A-Za-z0-9_\-]*(?:[A-Fa-f0-9]{8,}|\d{6,})[A-Za-z0-9_\-]*"
)


def summary_of(body: dict[str, Any]) -> str:
    """A plausible summary in the shape the hosts ask for (OpenClaw's five required sections and
    its default mode's Goal / Progress): the goal (at most GOAL_CHARS of the last request), the
    identifiers of the conversation, and no pending ask (the turn's request stays with the
    turn: a summary of a turn's prefix must not mark it pending, OpenClaw's safeguard checks)."""
    text = request_text(body)
    users = [text_of(m.get("content")) for m in body.get("messages") or [] if m["role"] == "user"]
    goal = (users[-1] if users else "").strip()[:GOAL_CHARS] or "Continue the task."
    seen: dict[str, None] = {}
    for m in _IDENT.finditer(text[:400_000]):
        value = m.group(0).strip("([{\"'`<").rstrip(")]\"'`,;:.!?<>")
        if len(value) >= 4:
            seen.setdefault(value, None)
        if len(seen) >= 200:
            break
    return "\n".join(
        [
            "## Goal",
            goal,
            "## Progress",
            "- Reproduced the problem, read the relevant files, ran the commands shown.",
            "## Decisions",
            "- Work from the files and outputs shown; keep changes minimal.",
            "## Open TODOs",
            "- Finish the fix and run the checks again.",
            "## Constraints/Rules",
            "- Run the tests before submitting.",
            "## Pending user asks",
            "None.",
            "## Exact identifiers",
            *(f"- {s}" for s in seen),
        ]
    )


class ReplayAgent(ToolAgent):
    """The tool agent of the replay; answers the hosts' summary calls with a summary, and lets
    the hosts' own side runs (Hermes's background review, OpenClaw's memory flush) through
    without taking a step."""

    def respond(self, body: dict[str, Any]) -> Reply:
        if (body.get("_headers") or {}).get("x-memory-source") == "host-model":
            return say(self.fake.default_reply)  # our gateway's memory work: not JSON, rules
        if is_summary_call(body):
            reply = summary_of(body)
            body["_summary_reply"] = reply  # kept in the fake's log, for the dump
            return say(reply)
        return super().respond(body)


def dump(name: str, summaries: list[dict[str, Any]]) -> None:
    """The host's summary calls of one arm (what it asked, what the fake answered)."""
    DUMPS.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "messages": [
                {"role": m.get("role"), "text": text_of(m.get("content"))[:4000]}
                for m in r.get("messages") or []
            ],
            "prompt_tokens": prompt_tokens(r),
            "reply": r.get("_summary_reply"),
        }
        for r in summaries
    ]
    (DUMPS / f"{name}.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")


def side_run(body: dict[str, Any]) -> bool:
    if is_background_review(body):
        return True
    users = [text_of(m.get("content")) for m in body.get("messages") or [] if m["role"] == "user"]
    return bool(users) and users[-1].lstrip().startswith(FLUSH)


# --- counting -----------------------------------------------------------------------------


def without_blocks(text: str) -> str:
    """A user message's text without our canvas and history blocks (they may quote the goal)."""
    for start, end in (CANVAS, HISTORY):
        while True:
            a = text.find(start)
            if a < 0:
                break
            b = text.find(end, a)
            text = text[:a] + (text[b + len(end) :] if b >= 0 else "")
    return text


def task_present(prompt: str, request: dict[str, Any]) -> bool:
    key = prompt.strip()[:KEY_CHARS]
    return any(
        key in without_blocks(text_of(m.get("content")))
        for m in request.get("messages") or []
        if m.get("role") == "user"
    )


def figures(
    turn_reqs: list[tuple[str, list[dict[str, Any]]]],
    summaries: list[dict[str, Any]],
    side: int,
    window: int,
) -> dict[str, Any]:
    reqs = [r for _, rs in turn_reqs for r in rs]
    sizes = [prompt_tokens(r) for r in reqs]
    summary_tokens = sum(prompt_tokens(r) for r in summaries)
    return {
        "model_calls": len(reqs),
        "tokens_sent": sum(sizes),
        "summary_calls": len(summaries),
        "summary_tokens": summary_tokens,
        "tokens_total": sum(sizes) + summary_tokens,
        "max_request_tokens": max(sizes, default=0),
        "over_window": sum(1 for n in sizes if n > window),
        "task_absent": sum(
            1 for prompt, rs in turn_reqs for r in rs if not task_present(prompt, r)
        ),
        "side_runs": side,
    }


def split_requests(
    agent: ToolAgent, start: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(the replay's own model calls, the host's summary calls, side-run calls) after ``start``
    (an index into the fake's request log)."""
    with agent.fake._lock:
        log = list(agent.fake.requests[start:])
    chats = [r for r in log if r.get("_path", "").endswith("/chat/completions")]
    main = [r for r in chats if r.get("tools") and not side_run(r)]
    summaries = [r for r in chats if is_summary_call(r)]
    side = sum(1 for r in chats if r.get("tools") and side_run(r))
    return main, summaries, side


def other_calls(agent: ToolAgent) -> dict[str, int]:
    """Tool-less calls that are not the host's compaction: our gateway's memory work on the
    host's model, and the host's titles and the like."""
    with agent.fake._lock:
        log = [r for r in agent.fake.requests if r.get("_path", "").endswith("/chat/completions")]
    rest = [r for r in log if not r.get("tools") and not is_summary_call(r)]
    ours = sum(1 for r in rest if (r.get("_headers") or {}).get("x-memory-source") == "host-model")
    return {"memory_host_model": ours, "other_host": len(rest) - ours}


# --- Hermes -------------------------------------------------------------------------------


def hermes_arm(
    gw: GatewayProcess, tmp: Path, turns: list[Turn], arm: str, window: int, budget: int
) -> dict[str, Any]:
    with FakeLLM() as llm:
        agent = ReplayAgent(llm, aside=side_run)
        home = make_home(tmp / arm, llm, gw.port, gw.data_dir, arm == "ours", budget, window)
        if arm == "verbatim":
            cfg = home.root / "config.yaml"
            cfg.write_text(cfg.read_text("utf-8") + "compression:\n  enabled: false\n", "utf-8")
        session, failures = "", 0
        turn_reqs: list[tuple[str, list[dict[str, Any]]]] = []
        summaries: list[dict[str, Any]] = []
        side = 0
        t0 = time.monotonic()
        for t in turns:
            start = len(llm.requests)
            agent.push(*t.steps)
            run, _ = chat(home, t.prompt, resume=session or None, timeout=900)
            failures += run.returncode != 0 or "Traceback" in run.stdout + run.stderr
            try:
                session = session or session_of(run)
            except AssertionError:
                failures += 1
            agent.clear()  # a turn the host ended early must not shift the next one
            main, summ, s = split_requests(agent, start)
            turn_reqs.append((t.prompt, main))
            summaries += summ
            side += s
        out = figures(turn_reqs, summaries, side, window)
        out.update(
            window=window,
            budget=budget if arm == "ours" else None,
            failures=failures,
            wall_s=round(time.monotonic() - t0, 1),
            compactions=len(COMPACTION.findall(home.provider_log()))
            if arm == "ours"
            else len(summaries),
        )
        out["other_calls"] = other_calls(agent)
        dump(f"hermes-{arm}", summaries)
    print(f"  hermes {arm}: {json.dumps(out)}", flush=True)
    return out


def hermes(gw: GatewayProcess, tmp: Path, sessions: list[Session], args: Any) -> dict[str, Any]:
    turns = all_turns(sessions, tmp / "outputs", lambda cmd, cid: terminal(cmd, cid))
    out: dict[str, Any] = {
        "host": "hermes-agent 0.19.0 (`hermes chat -Q -q`, --resume)",
        "window": args.hermes_window,
        "turns": len(turns),
        "tool_calls": sum(len(st.get("tool_calls") or []) for t in turns for st in t.steps),
        "arms": {},
    }
    for arm in args.arms.split(","):
        name = arm if arm != "ours" or not args.ours_budget else f"ours_budget_{args.ours_budget}"
        out["arms"][name] = hermes_arm(gw, tmp, turns, arm, args.hermes_window, args.ours_budget)
    return out


# --- OpenClaw -----------------------------------------------------------------------------


def openclaw_arm(
    install: OpenClawInstall,
    gw: GatewayProcess,
    tmp: Path,
    turns: list[Turn],
    arm: str,
    window: int,
    quality_guard: bool = False,
) -> dict[str, Any]:
    with FakeLLM() as llm, FaultyProxy(gw.port, "pass") as proxy:
        agent = ReplayAgent(llm, aside=side_run)
        home = OpenClawHome(install, tmp / arm, llm.base_url)
        scope = f"host-compaction-oc-{arm}"
        config = {"port": proxy.port, "dataDir": str(gw.data_dir), "scope": scope}
        if arm == "ours":
            done = subprocess.run(
                [
                    "bash", str(ROOT / "scripts" / "install-openclaw.sh"), "--offload",
                    "--port", str(proxy.port), "--data-dir", str(gw.data_dir),
                ],
                env={**home.env(), "OPENCLAW": home.cli_command()},
                capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"install-openclaw.sh --offload failed:\n{done.stderr[-3000:]}")
            cfg = home.read_config()
            cfg["plugins"]["entries"][BRIDGE_ID]["config"]["scope"] = scope
        else:
            home.install_plugin(BRIDGE_DIR, BRIDGE_ID, {**config, "offload": {"enabled": False}})
            cfg = home.read_config()
            cfg.setdefault("plugins", {}).setdefault("slots", {})["contextEngine"] = "legacy"
        defaults = cfg.setdefault("agents", {}).setdefault("defaults", {})
        if arm == "verbatim":
            defaults["compaction"] = {"enabled": False}
        elif quality_guard:
            pass  # OpenClaw's default: the safeguard's summary audit on (--quality-guard)
        else:
            # OpenClaw's safeguard audits a summary against its own extraction of the latest
            # ask and identifiers (exact JSON of the request, 12 identifiers); a fake is not a
            # summarizer, so that audit is off (every compaction would fail and end the turn).
            defaults["compaction"] = {"qualityGuard": {"enabled": False}}
        cfg["models"]["providers"]["fake"]["models"][0]["contextWindow"] = window
        home.write_config(cfg)
        key = f"agent:main:hc-{arm}"
        failures, reasons = 0, []
        turn_reqs: list[tuple[str, list[dict[str, Any]]]] = []
        summaries: list[dict[str, Any]] = []
        side = 0
        t0 = time.monotonic()
        for t in turns:
            start = len(llm.requests)
            agent.push(*t.steps)
            done = home.agent(t.prompt, key, timeout=900)
            if done.returncode != 0:
                failures += 1
                reasons.append((done.stdout + done.stderr)[-400:])
            agent.clear()
            main, summ, s = split_requests(agent, start)
            turn_reqs.append((t.prompt, main))
            summaries += summ
            side += s
        out = figures(turn_reqs, summaries, side, window)
        folds, previous = 0, 0
        for path, _request, answer in proxy.exchanges:
            if path == "/offload/assemble" and isinstance(answer, dict):
                removed = int((answer.get("stats") or {}).get("removed") or 0)
                folds += removed > previous
                previous = removed
        out.update(
            window=window,
            failures=failures,
            failure_tails=reasons[:3],
            wall_s=round(time.monotonic() - t0, 1),
            compactions=folds if arm == "ours" else len(summaries),
        )
        out["other_calls"] = other_calls(agent)
        dump(f"openclaw-{arm}", summaries)
    print(f"  openclaw {arm}: {json.dumps(out)}", flush=True)
    return out


def openclaw(gw: GatewayProcess, tmp: Path, sessions: list[Session], args: Any) -> dict[str, Any]:
    install = OpenClawInstall.find()
    if install is None:
        raise SystemExit("OpenClaw not installed (make hosts)")
    turns = all_turns(sessions, tmp / "outputs", lambda cmd, cid: oc_exec(cmd, cid))
    out: dict[str, Any] = {
        "host": "openclaw 2026.9.6 (`openclaw agent --local`, one session key)",
        "window": args.openclaw_window,
        "turns": len(turns),
        "tool_calls": sum(len(st.get("tool_calls") or []) for t in turns for st in t.steps),
        "arms": {},
    }
    arms = args.arms.split(",")
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:  # each turn costs ~20-35 s
        futures = {
            a: pool.submit(
                openclaw_arm, install, gw, tmp, turns, a, args.openclaw_window, args.quality_guard
            )
            for a in arms
        }
        out["arms"] = {a: futures[a].result() for a in arms}
    return out


# --- main ---------------------------------------------------------------------------------


def saved(part: dict[str, Any]) -> dict[str, Any]:
    verbatim = part["arms"].get("verbatim", {}).get("tokens_total")
    for f in part["arms"].values():
        f["saved_vs_verbatim"] = round(1 - f["tokens_total"] / verbatim, 4) if verbatim else None
    return part


_save_lock = threading.Lock()


def save(result: dict[str, Any]) -> None:
    """Write the results file; a host this run skipped keeps its figures from the last run."""
    with _save_lock:
        try:
            previous = json.loads(RESULTS.read_text("utf-8"))
        except (OSError, ValueError):
            previous = {}
        out = {**previous, **{k: v for k, v in result.items() if v is not None}}
        for host in ("hermes", "openclaw"):  # arms this run skipped keep their last figures
            old, new = previous.get(host), result.get(host)
            if old and new and old.get("sessions") == new.get("sessions"):
                new["arms"] = {**old.get("arms", {}), **new["arms"]}
            if out.get(host):
                saved(out[host])
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")


def print_table(result: dict[str, Any]) -> None:
    print(
        "\n| host | arm | window | turns failed | model calls | tokens sent (calls) | host summary"
        " calls (tokens) | total | saved vs verbatim | compactions | task absent | over window |"
        " max request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for host in ("hermes", "openclaw"):
        part = result.get(host)
        if not part:
            continue
        for arm, f in part["arms"].items():
            saved_ = f["saved_vs_verbatim"]
            print(
                f"| {host} | {arm} | {f['window']:,} | {f['failures']} | {f['model_calls']} |"
                f" {f['tokens_sent']:,} | {f['summary_calls']} ({f['summary_tokens']:,}) |"
                f" {f['tokens_total']:,} |"
                f" {'–' if saved_ is None else f'{saved_ * 100:.1f}%'} | {f['compactions']} |"
                f" {f['task_absent']} | {f['over_window']} | {f['max_request_tokens']:,} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 sessions instead of 11")
    parser.add_argument("--host", choices=("hermes", "openclaw", "both"), default="both")
    parser.add_argument(
        "--hermes-window",
        type=int,
        default=64_000,
        help="the model's context window in Hermes (its minimum: 64000)",
    )
    parser.add_argument(
        "--openclaw-window",
        type=int,
        default=32_000,
        help="the model's context window in OpenClaw (its compaction: window - 16,384 reserve)",
    )
    parser.add_argument(
        "--ours-budget", type=int, default=0, help="Hermes offload_token_budget (0: the window)"
    )
    parser.add_argument("--parallel", type=int, default=3, help="OpenClaw arms at once")
    parser.add_argument(
        "--quality-guard",
        action="store_true",
        help="keep OpenClaw's summary audit on (its default; the fake's summaries fail it);"
        " figures go to bench/results/host_compaction_guard.json",
    )
    parser.add_argument(
        "--arms", default="verbatim,host,ours", help="which arms to run (the others are kept)"
    )
    args = parser.parse_args()
    global RESULTS
    if args.quality_guard:
        RESULTS = ROOT / "bench" / "results" / "host_compaction_guard.json"
    if args.quick:  # a smoke run never overwrites the recorded figures
        RESULTS = ROOT / "bench" / "out" / "host_compaction-quick.json"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the gateway on a kill
    if args.host in ("hermes", "both") and not (hermes_venv() / "bin" / "hermes").exists():
        raise SystemExit(f"hermes-agent venv missing at {hermes_venv()} (make hosts)")
    swe = [s for s in load_sessions() if "airline" not in s.id]
    sessions = pick(SWE_QUICK) if args.quick else swe
    t0 = time.time()
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_head(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_before": os.getloadavg(),
        "quick": args.quick,
        "sessions": [s.id for s in sessions],
        "tasks": task_count(sessions),
        "tokenizer": "cl100k (tests/support/tool_agent.py count_tokens)",
    }
    with tempfile.TemporaryDirectory(prefix="host-compaction-bench-") as tmp_s:
        tmp = Path(tmp_s)
        gw = GatewayProcess(tmp / "gw" / "data").start()
        try:
            for host, run in (("hermes", hermes), ("openclaw", openclaw)):
                if args.host in (host, "both"):
                    started = time.time()
                    part = {**result, **run(gw, tmp / host, sessions, args)}
                    part["elapsed_s"] = round(time.time() - started, 1)
                    part["load_after"] = os.getloadavg()
                    save({host: part})
        finally:
            gw.stop()
    print_table(json.loads(RESULTS.read_text("utf-8")))
    print(f"wrote {RESULTS.relative_to(ROOT)} ({round(time.time() - t0, 1)} s)")


if __name__ == "__main__":
    main()

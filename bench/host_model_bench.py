"""The host's own model distilling memory (issue 24): what it costs the turn, and the model.

1. **One-shot overhead** (real ``hermes chat -Q -q``): whole-run wall time with the host-model
   hand-over on (``host_llm`` true, the default) and off, alternating, with a gateway already
   running (its start-up is the same either way and would drown the difference). The fake LLM is
   Hermes's own model; memory work runs in the gateway after the run, so it should cost the
   turn nothing but the resolution thread.
2. **Memory LLM work per 100 turns** of a zh/en chat conversation (``bench/_synthetic.py``
   ``gen_l0``: reminders, preferences, questions; 2-4 sentence answers), driven over HTTP as the
   one-shot hosts do: 10 sessions of 10 turns, each with its own gateway (hand-over at start,
   recall + capture per turn, session end, then the drain at exit that runs L2 and the persona).
   Calls are counted per task from the fake's log (``X-Memory-Task``); tokens are cl100k counts of
   each request's messages and of the reply (bpe-openai, as offload counts) (the fake's replies are shaped like a real model's:
   one memory per user statement, one scene rewrite, one persona).

3. **Memory LLM work per 100 turns of the shared agent sessions** (tests/fixtures/agent-sessions,
   the project's shared data set), offload on: the pipeline's and the offload's calls (L1 summaries,
   L1.5 boundaries, L2 canvases) per task, on one long-lived gateway.
4. **Long-lived overhead**: Hermes gateway mode (``hermes gateway run``, its api_server platform),
   host model on vs off, per-turn time from request to answer.
   The same under ``openclaw gateway run`` (``hostLlm.enabled`` true / false), turns by
   ``openclaw agent`` without ``--local``.
5. **One-shot overhead with offload**: ``hermes chat -Q -q`` with ``--offload`` and a tool call,
   on vs off: the offload's tasks reach the model while the turn runs.

    .venv/bin/python bench/host_model_bench.py [--quick] [--only PART,...]

Writes bench/results/host_model.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._synthetic import gen_l0  # noqa: E402
from tests.hermes.harness import HermesHome, hermes_venv  # noqa: E402
from tests.support.fake_llm import FakeLLM  # noqa: E402
from tests.support.gateway import GatewayProcess, free_port  # noqa: E402
from tests.support.offload_llm import OFFLOAD_TASKS, OffloadResponder  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "host_model.json"
TASK = "x-memory-task"


def _tokens() -> Any:
    """cl100k counts, as the offload counts them (bpe-openai's bundled encoding)."""
    from memory_tencentdb.offload.tokens import TokenCounter

    counter = TokenCounter("cl100k_base")
    counter.load()
    return counter.count


class ModelLike:
    """The fake's answers to memory tasks, shaped like a real model's, with token usage."""

    def __init__(self, fake: FakeLLM) -> None:
        self.count = _tokens()
        self.fake = fake
        self.offload = OffloadResponder(fake)  # its answers only; respond below stays ours
        fake.respond = self.respond  # type: ignore[method-assign]
        fake.usage = lambda body: {  # type: ignore[assignment]
            "prompt_tokens": body.get("_pt", 0),
            "completion_tokens": body.get("_ct", 0),
            "total_tokens": body.get("_pt", 0) + body.get("_ct", 0),
        }

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        task = (body.get("_headers") or {}).get(TASK)
        text = json.dumps(body.get("messages") or [], ensure_ascii=False)
        if task in OFFLOAD_TASKS:  # offload tasks: valid JSON naming the ids it was given
            reply = self.offload._good(task, body)
        else:
            reply = self._answer(task, text) if task else "OK."
        body["_pt"], body["_ct"] = self.count(text), self.count(reply)
        return {"content": reply}

    def _answer(self, task: str, text: str) -> str:
        if task == "l1-extraction":
            new = text.split("=== New messages", 1)[-1]
            said = re.findall(r"\[m\d+\] \[user\] \[[^\]]*\]: ([^\\]{4,120})", new)
            mems = [
                {"content": f"The user said: {s.strip()}", "type": "episodic", "priority": 50}
                for s in said
            ]
            return json.dumps(
                [{"scene_name": "Chat", "message_ids": [], "memories": mems}], ensure_ascii=False
            )
        if task == "l1-dedup":
            ids = re.findall(r'record_id\\": \\"(n\d+)', text)
            return json.dumps([{"record_id": i, "action": "store"} for i in ids])
        if task == "l2-scenes":
            body = "## Basics\n" + "\n".join(f"- fact {i}" for i in range(12))
            return json.dumps(
                {
                    "actions": [
                        {"action": "update" if "chat.md" in text else "create", "file": "chat.md",
                         "summary": "chat", "body": body}
                    ],
                    "persona_update": None,
                }
            )  # fmt: skip
        if task == "l3-persona":
            return json.dumps(
                {"persona": "# User profile\n" + "\n".join("- trait" for _ in range(15))}
            )
        return "[]"


def per_100_turns(sessions: int, turns: int) -> dict[str, Any]:
    conversation = gen_l0(2 * sessions * turns, seed=24)
    pairs = [(conversation[i][1], conversation[i + 1][1]) for i in range(0, len(conversation), 2)]
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        data = Path(tmp) / "data"
        env = {"TDAI_EMBEDDING_PROVIDER": "none"}
        started = time.monotonic()
        for s in range(sessions):
            gw = GatewayProcess(data, env=env).start()
            with gw.client() as c:
                c.post("/llm/host-model", json={"source": "hermes", "base_url": fake.base_url,
                                                "api_key": "sk-bench", "model": "bench"})  # fmt: skip
                key = f"bench-{s}"
                for user, answer in pairs[s * turns : (s + 1) * turns]:
                    c.post("/recall", json={"scope": "bench", "session_key": key, "query": user})
                    c.post("/capture", json={"scope": "bench", "session_key": key,
                                             "user_content": user, "assistant_content": answer})  # fmt: skip
                c.post("/session/end", json={"scope": "bench", "session_key": key, "wait": True})
                c.post("/admin/shutdown", json={"drain_s": 60})
            assert gw.proc is not None
            gw.proc.wait(90)
        elapsed = time.monotonic() - started
        reqs = [r for r in fake.requests if (r.get("_headers") or {}).get(TASK)]
        calls = Counter(r["_headers"][TASK] for r in reqs)
        prompt = sum(r.get("_pt", 0) for r in reqs)
        completion = sum(r.get("_ct", 0) for r in reqs)
    n = sessions * turns
    scale = 100 / n
    return {
        "turns": n,
        "sessions": sessions,
        "calls_per_100_turns": round(sum(calls.values()) * scale, 1),
        "calls_by_task_per_100_turns": {k: round(v * scale, 1) for k, v in sorted(calls.items())},
        "prompt_tokens_per_100_turns": round(prompt * scale),
        "completion_tokens_per_100_turns": round(completion * scale),
        "tokens_per_100_turns": round((prompt + completion) * scale),
        "wall_s": round(elapsed, 1),
    }


def _summary(reqs: list[dict[str, Any]], turns: int) -> dict[str, Any]:
    calls = Counter(r["_headers"][TASK] for r in reqs)
    prompt = sum(r.get("_pt", 0) for r in reqs)
    completion = sum(r.get("_ct", 0) for r in reqs)
    scale = 100 / turns
    offload = sum(v for k, v in calls.items() if k in OFFLOAD_TASKS)
    return {
        "calls_per_100_turns": round(sum(calls.values()) * scale, 1),
        "offload_calls_per_100_turns": round(offload * scale, 1),
        "calls_by_task_per_100_turns": {k: round(v * scale, 1) for k, v in sorted(calls.items())},
        "prompt_tokens_per_100_turns": round(prompt * scale),
        "completion_tokens_per_100_turns": round(completion * scale),
        "tokens_per_100_turns": round((prompt + completion) * scale),
    }


def _turns(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A session's messages cut at each user message: one host turn each (system left out)."""
    out: list[list[dict[str, Any]]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "user" or not out:
            out.append([])
        out[-1].append(m)
    return out


def agent_sessions_per_100_turns(limit: int | None) -> dict[str, Any]:
    """The shared agent sessions (tests/fixtures/agent-sessions: 11 SWE-agent, 41 tau-bench) on
    one long-lived gateway with offload, as a host drives it: per turn (a user message and the
    agent's work up to the next one) a recall, an assemble with the turn's prompt (the L1.5
    judgement), each tool result to /offload/tool-result, and the capture of its text messages;
    a session end per session, then the drain. Memory LLM calls of the pipeline and the offload
    are counted per task (budget raised so the demand is measured, not the cap)."""
    from tests.support.agent_sessions import load_sessions, tool_results, unique_tool_ids

    sessions = load_sessions()[:limit] if limit else load_sessions()
    env = {"TDAI_EMBEDDING_PROVIDER": "none", "TDAI_LLM__DAILY_CALL_BUDGET": "100000",
           "TDAI_LLM__DAILY_TOKEN_BUDGET": "100000000"}  # fmt: skip
    n_turns = n_tools = 0
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        gw = GatewayProcess(Path(tmp) / "data", env=env).start()
        started = time.monotonic()
        with gw.client(timeout=120) as c:
            c.post("/llm/host-model", json={"source": "hermes", "base_url": fake.base_url,
                                            "api_key": "sk-bench", "model": "bench"})  # fmt: skip
            for sess in sessions:
                msgs = unique_tool_ids(sess.messages)
                results = {t.tool_call_id: t for t in tool_results(msgs)}
                key, history = f"agent-{sess.id}", [m for m in msgs if m["role"] == "system"]
                for turn in _turns(msgs):
                    n_turns += 1
                    prompt = _text(turn[0].get("content")) if turn[0]["role"] == "user" else ""
                    if prompt:
                        c.post("/recall", json={"scope": "bench", "session_key": key,
                                                "query": prompt[:2000]})  # fmt: skip
                    c.post("/offload/assemble", json={
                        "scope": "bench", "session_key": key, "messages": history + turn[:1],
                        "token_budget": 200_000, "prompt": prompt[:4000]})  # fmt: skip
                    for m in turn:
                        t = results.get(m.get("tool_call_id") or "")
                        if m["role"] == "tool" and t is not None:
                            n_tools += 1
                            c.post("/offload/tool-result", json={
                                "scope": "bench", "session_key": key,
                                "tool_call_id": t.tool_call_id, "tool_name": t.tool_name,
                                "arguments": t.arguments, "result": t.result})  # fmt: skip
                    said = [
                        {"role": m["role"], "content": _text(m.get("content"))}
                        for m in turn
                        if m["role"] in ("user", "assistant") and _text(m.get("content")).strip()
                    ]
                    if said:
                        c.post("/capture", json={"scope": "bench", "session_key": key,
                                                 "messages": said})  # fmt: skip
                    history += turn
                c.post("/session/end", json={"scope": "bench", "session_key": key, "wait": True})
            c.post("/admin/shutdown", json={"drain_s": 120})
        assert gw.proc is not None
        gw.proc.wait(180)
        elapsed = time.monotonic() - started
        reqs = [r for r in fake.requests if (r.get("_headers") or {}).get(TASK)]
    return {
        "sessions": len(sessions),
        "turns": n_turns,
        "tool_results": n_tools,
        **_summary(reqs, n_turns),
        "wall_s": round(elapsed, 1),
    }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def long_lived_overhead(turns: int) -> dict[str, Any]:
    """Hermes gateway mode (``hermes gateway run`` + its api_server platform, tests/hermes/
    gateway_mode.py): two long-lived Hermes processes, host model on and off
    (``MEMORY_TENCENTDB_HOST_LLM``), on one memory gateway; one session each, turns alternating,
    each timed from request to answer. Memory work runs in the gateway between turns."""
    if not (hermes_venv() / "bin" / "hermes").exists():
        return {"skipped": "hermes venv missing (make hosts)"}
    from tests.hermes.gateway_mode import HermesGateway

    conversation = gen_l0(2 * turns, seed=11)
    times: dict[str, list[float]] = {"on": [], "off": []}
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        gw = GatewayProcess(Path(tmp) / "data", env={"TDAI_EMBEDDING_PROVIDER": "none"}).start()
        hosts: dict[str, Any] = {}
        try:
            for mode in ("on", "off"):
                home = HermesHome.create(Path(tmp) / mode, fake.base_url, gw.port)
                home.data_dir = gw.data_dir
                home.extra_env["MEMORY_TENCENTDB_AUTO_START"] = "0"
                home.extra_env["MEMORY_TENCENTDB_HOST_LLM"] = "1" if mode == "on" else "0"
                hosts[mode] = HermesGateway(home)
            for mode in ("on", "off"):
                hosts[mode].turn("warm-up: hello", f"bench-{mode}", expect=None)
            for i in range(turns):
                user = conversation[2 * i][1]
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    times[mode].append(hosts[mode].turn(user, f"bench-{mode}", expect=None))
            memory_calls = sum(1 for r in fake.requests if (r.get("_headers") or {}).get(TASK))
        finally:
            for h in hosts.values():
                h.stop()
            gw.stop()
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "turns_each": turns,
        "median_turn_s_on": round(on, 3),
        "median_turn_s_off": round(off, 3),
        "overhead_s": round(on - off, 3),
        "p90_turn_s": {
            k: round(sorted(v)[max(0, int(len(v) * 0.9) - 1)], 3) for k, v in times.items()
        },
        "memory_llm_calls_during_turns": memory_calls,
    }


def long_lived_openclaw_overhead(turns: int) -> dict[str, Any]:
    """``openclaw gateway run`` (tests/openclaw/gateway_run.py): two long-lived OpenClaw
    Gateways, the bridge's ``hostLlm.enabled`` true and false, on one memory gateway; turns by
    ``openclaw agent`` (no ``--local``), alternating, each timed whole (the CLI's own start-up,
    several seconds, is in both)."""
    from tests.openclaw.gateway_run import OpenClawGateway
    from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID, OpenClawHome, OpenClawInstall

    install = OpenClawInstall.find()
    if install is None:
        return {"skipped": "openclaw missing (make hosts)"}
    conversation = gen_l0(2 * turns, seed=12)
    times: dict[str, list[float]] = {"on": [], "off": []}
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        gw = GatewayProcess(Path(tmp) / "data", env={"TDAI_EMBEDDING_PROVIDER": "none"}).start()
        hosts: dict[str, Any] = {}
        try:
            for mode in ("on", "off"):
                home = OpenClawHome(install, Path(tmp) / f"oc-{mode}", fake.base_url)
                cfg = {"port": gw.port, "dataDir": str(gw.data_dir)}
                cfg["hostLlm"] = {"enabled": mode == "on"}
                home.install_plugin(BRIDGE_DIR, BRIDGE_ID, cfg)
                hosts[mode] = OpenClawGateway(home)
            for mode in ("on", "off"):
                hosts[mode].turn("warm-up: hello", f"agent:main:bench-{mode}")
            for i in range(turns):
                user = conversation[2 * i][1]
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    times[mode].append(hosts[mode].turn(user, f"agent:main:bench-{mode}"))
            memory_calls = sum(1 for r in fake.requests if (r.get("_headers") or {}).get(TASK))
        finally:
            for h in hosts.values():
                h.stop()
            gw.stop()
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "turns_each": turns,
        "median_turn_s_on": round(on, 2),
        "median_turn_s_off": round(off, 2),
        "overhead_s": round(on - off, 2),
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "memory_llm_calls_during_turns": memory_calls,
    }


def one_shot_offload_overhead(runs: int) -> dict[str, Any]:
    """Real ``hermes chat -Q -q`` runs with ``--offload``, each calling a tool (``terminal``
    printing a 3,000-character log), gateway already running, host model on vs off
    (alternating). On, the tool result's offload L1 summary and the L1.5 judgement go to the
    same model while the turn runs: the case where memory work overlaps the turn."""
    if not (hermes_venv() / "bin" / "hermes").exists():
        return {"skipped": "hermes venv missing (make hosts)"}
    from tests.hermes.offload_support import switch_offload
    from tests.support.tool_agent import ToolAgent, say, terminal, tools, write_doc

    times: dict[str, list[float]] = {"on": [], "off": []}
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        agent = ToolAgent(fake)
        model = ModelLike(fake)  # memory tasks; the agent's own calls go to the ToolAgent
        agent_respond, model_respond = agent.respond, model.respond
        fake.respond = lambda b: (  # type: ignore[method-assign]
            model_respond(b) if (b.get("_headers") or {}).get(TASK) else agent_respond(b)
        )
        home = HermesHome.create(Path(tmp), fake.base_url, free_port())
        gw = GatewayProcess(home.data_dir, env={"TDAI_EMBEDDING_PROVIDER": "none"}, port=home.port)
        gw.start()
        switch_offload(home, True, offload_token_budget=28_000)
        doc = write_doc(Path(tmp), "build.log", 3_000, "en", 3)
        try:
            agent.push(tools(terminal(f"cat {doc}")), say("DONE"))
            home.chat("warm-up: check the build log")
            for i in range(runs):
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    agent.push(tools(terminal(f"cat {doc}")), say("DONE"))
                    t0 = time.monotonic()
                    r = home.chat(
                        f"Check the build log, run {i} {mode}. 请检查构建日志。",
                        MEMORY_TENCENTDB_HOST_LLM="1" if mode == "on" else "0",
                    )
                    times[mode].append(time.monotonic() - t0)
                    assert r.returncode == 0, r.stdout + r.stderr
            calls = Counter(
                r["_headers"][TASK] for r in fake.requests if (r.get("_headers") or {}).get(TASK)
            )
        finally:
            gw.stop()
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "runs_each": runs,
        "median_run_s_on": round(on, 2),
        "median_run_s_off": round(off, 2),
        "overhead_s": round(on - off, 2),
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "memory_llm_calls_by_task": dict(sorted(calls.items())),
    }


def one_shot_overhead(runs: int) -> dict[str, Any]:
    if not (hermes_venv() / "bin" / "hermes").exists():
        return {"skipped": "hermes venv missing (make hosts)"}
    with FakeLLM(default_reply="FAKE-REPLY") as fake, tempfile.TemporaryDirectory() as tmp:
        ModelLike(fake)
        home = HermesHome.create(Path(tmp), fake.base_url, free_port())
        gw = GatewayProcess(home.data_dir, env={"TDAI_EMBEDDING_PROVIDER": "none"}, port=home.port)
        gw.start()
        times: dict[str, list[float]] = {"on": [], "off": []}
        try:
            home.chat("warm-up: hello")  # the first run compiles and caches; not counted
            for i in range(runs):
                for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    t0 = time.monotonic()
                    r = home.chat(
                        f"I play the cello on Sundays, run {i} {mode}.",
                        MEMORY_TENCENTDB_HOST_LLM="1" if mode == "on" else "0",
                    )
                    times[mode].append(time.monotonic() - t0)
                    assert r.returncode == 0, r.stdout + r.stderr
            memory_calls = sum(1 for r in fake.requests if (r.get("_headers") or {}).get(TASK))
        finally:
            gw.stop()
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {
        "runs_each": runs,
        "median_run_s_on": round(on, 2),
        "median_run_s_off": round(off, 2),
        "overhead_s": round(on - off, 2),
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "memory_llm_calls_during_runs": memory_calls,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--only",
        default="chat,agent,long_lived,long_lived_openclaw,one_shot,one_shot_offload",
        help="comma-separated parts: chat, agent, long_lived, long_lived_openclaw, one_shot,"
        " one_shot_offload"
        " (the others are kept from the results file)",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    out: dict[str, Any] = json.loads(RESULTS.read_text("utf-8")) if RESULTS.exists() else {}
    out["host"] = {"python": platform.python_version(), "machine": platform.machine()}
    if "chat" in only:
        out["per_100_turns"] = per_100_turns(10 if not args.quick else 4, 10)
    if "agent" in only:
        out["agent_sessions"] = agent_sessions_per_100_turns(None if not args.quick else 12)
    if "long_lived" in only:
        out["long_lived"] = long_lived_overhead(20 if not args.quick else 8)
    if "long_lived_openclaw" in only:
        out["long_lived_openclaw"] = long_lived_openclaw_overhead(8 if not args.quick else 3)
    if "one_shot_offload" in only:
        out["one_shot_offload"] = one_shot_offload_overhead(4 if not args.quick else 2)
    if "one_shot" in only:
        out["one_shot"] = one_shot_overhead(4 if not args.quick else 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

"""Context offload end to end with the real OpenClaw 2026.9.x (Node 24), a tool-using fake model
and our gateway (issue 11).

Five throwaway OpenClaw homes, played three at a time (every `agent --local` turn costs 17-35 s):

- "on": installed with `scripts/install-openclaw.sh --offload` (flag, entry, context-engine slot).
  Turn 1: the model reads and runs four large outputs (20 KB en `read`, 17 KB zh `exec cat`, a 7 KB
  zh/en `read`, 30 KB en `exec cat`), then reads the zh one back with
  `memory_tencentdb_offload_read` (through Tool Search's `tool_call`, as OpenClaw offers plugin
  tools), then answers. Turn 2: one answer.
- "off": the same turn with `offload.enabled: false` and the slot on `legacy`: the reference for
  the originals and for "behaviour unchanged".
- "down", "slow", "error": offload on, but the gateway is not listening / takes longer than every
  offload deadline / answers 500 on the offload routes. Three tool calls and an answer each.
  "down" also has a typo and a wrongly typed value in its bridge config (warnings only), and its
  turn waits in the spool.

A session past the aggressive threshold (a 40k window) is played under ``openclaw gateway run``
in test_e2e_openclaw_gateway_offload.py, beside the replay.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.openclaw.harness import (
    BRIDGE_DIR,
    BRIDGE_ID,
    REPO,
    OpenClawHome,
    OpenClawInstall,
    agent_output,
    require_openclaw,
)
from tests.openclaw.offload_support import (
    CANVAS_MARK,
    HISTORY_MARK,
    UNAVAILABLE,
    FaultyProxy,
    canvas_count,
    is_stub,
    oc_exec,
    oc_read,
    read_back,
    request_text,
    tool_text,
    unwrap_tool_call,
)
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess, free_port
from tests.support.tool_agent import (
    READ_TOOL,
    ToolAgent,
    make_text,
    text_of,
    tools,
)

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

SESSION = "agent:main:offload-e2e"


# --- the documents the tools return ---------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    """One tool output: the call that produces it and the exact text OpenClaw hands back."""

    call_id: str
    name: str
    text: str

    def call(self, root: Path) -> dict[str, Any]:
        path = root / self.name
        if self.call_id.startswith("callexec"):
            return oc_exec(f"cat {path}", self.call_id)
        return oc_read(str(path), self.call_id)


def mixed(chars: int, seed: int) -> str:
    half = chars // 2
    return make_text(half, "en", seed) + "\n" + make_text(chars - half - 1, "zh", seed)


BIG = [
    Doc("callreaden", "build-log-en.txt", make_text(20_000, "en", 11)),
    Doc("callexeczh", "部署日志-zh.txt", make_text(8_000, "zh", 12)),
    Doc("callreadmix", "notes-mixed.txt", mixed(4_500, 13)),
    Doc("callexecen", "trace-en.txt", make_text(30_000, "en", 14)),
]
ZH = BIG[1]  # the one the model reads back
READBACK_ID = "callreadback"


def write_docs(root: Path, docs: list[Doc]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (root / doc.name).write_text(doc.text, "utf-8")


# --- one home and its turns -------------------------------------------------------------------


@dataclass
class Played:
    home: OpenClawHome
    agent: ToolAgent
    turns: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)  # main_requests() index where each turn began
    scope: str = ""
    installed: subprocess.CompletedProcess[str] | None = None
    proxy_hits: dict[str, int] = field(default_factory=dict)

    def requests(self, turn: int | None = None) -> list[dict[str, Any]]:
        reqs = self.agent.main_requests()
        if turn is None:
            return reqs
        end = self.marks[turn + 1] if turn + 1 < len(self.marks) else len(reqs)
        return reqs[self.marks[turn] : end]

    def output(self, turn: int) -> str:
        return agent_output(self.turns[turn])

    def logs(self) -> str:
        return "\n".join(d.stdout + d.stderr for d in self.turns)

    def dump(self, path: Path) -> None:
        """Everything the run saw, for reading a failure without playing it again."""
        data = {
            "marks": self.marks,
            "requests": self.requests(),
            "turns": [
                {"rc": d.returncode, "stdout": d.stdout, "stderr": d.stderr} for d in self.turns
            ],
        }
        path.write_text(json.dumps(data, ensure_ascii=False), "utf-8")

    def play(self, message: str, session: str = SESSION) -> None:
        self.marks.append(len(self.agent.main_requests()))
        started = time.monotonic()
        self.turns.append(self.home.agent(message, session, timeout=400))
        self.seconds.append(time.monotonic() - started)


def bridge_config(gateway: GatewayProcess, scope: str, port: int | None = None, **extra: Any):
    return {
        "port": port or gateway.port,
        "dataDir": str(gateway.data_dir),
        "scope": scope,
        **extra,
    }


def set_slot(home: OpenClawHome, value: str | None) -> None:
    cfg = home.read_config()
    slots = cfg.setdefault("plugins", {}).setdefault("slots", {})
    if value is None:
        slots.pop("contextEngine", None)
    else:
        slots["contextEngine"] = value
    home.write_config(cfg)


def new_home(install: OpenClawInstall, root: Path, name: str, llm: FakeLLM) -> OpenClawHome:
    return OpenClawHome(install, root / name, llm.base_url)


def turn_one_steps(root: Path, docs: list[Doc], *, read_back_zh: bool) -> list[Any]:
    steps: list[Any] = [tools(doc.call(root)) for doc in docs]
    if read_back_zh:
        steps.append(read_back(ZH.call_id, READBACK_ID))
    steps.append("第一轮完成：四份日志都看过了。Turn 1 done.")
    return steps


def play_on(install, root, gateway) -> Played:
    llm = FakeLLM().start()
    home = new_home(install, root, "on", llm)
    played = Played(home, ToolAgent(llm), scope="oc-offload-on")
    work = home.root / "work"
    write_docs(work, BIG)
    played.installed = subprocess.run(
        [
            "bash", str(REPO / "scripts" / "install-openclaw.sh"), "--offload",
            "--port", str(gateway.port), "--data-dir", str(gateway.data_dir),
        ],
        env={**home.env(), "OPENCLAW": home.cli_command()},
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if played.installed.returncode != 0:
        return played
    cfg = home.read_config()
    cfg["plugins"]["entries"][BRIDGE_ID]["config"]["scope"] = played.scope
    home.write_config(cfg)
    played.agent.push(*turn_one_steps(work, BIG, read_back_zh=True))
    played.play("请检查这四份日志 / please check these four logs")
    played.agent.push("第二轮：总结完毕。Turn 2 summary done.")
    played.play("再总结一下 / summarise again")
    return played


def play_off(install, root, gateway) -> Played:
    llm = FakeLLM().start()
    home = new_home(install, root, "off", llm)
    played = Played(home, ToolAgent(llm), scope="oc-offload-off")
    work = home.root / "work"
    write_docs(work, BIG)
    home.install_plugin(
        BRIDGE_DIR, BRIDGE_ID, bridge_config(gateway, played.scope, offload={"enabled": False})
    )
    set_slot(home, "legacy")
    played.agent.push(*turn_one_steps(work, BIG, read_back_zh=False))
    played.play("请检查这四份日志 / please check these four logs")
    return played


BAD_KEYS = {"recal": {}, "capture": {"timeoutMs": "soon"}}
FAULTY_PROMPT = "请检查这三份日志 / please check these three logs"


def play_faulty(install, root, gateway, name: str) -> Played:
    """Offload on with the slot, and a gateway that is down, slow or failing (500)."""
    llm = FakeLLM().start()
    home = new_home(install, root, name, llm)
    played = Played(home, ToolAgent(llm), scope=f"oc-offload-{name}")
    work = home.root / "work"
    docs = BIG[:3]
    write_docs(work, docs)

    def run(port: int) -> None:
        config = bridge_config(gateway, played.scope, port=port, offload={"enabled": True})
        if name == "down":  # and a typo and a wrongly typed value: warnings, never a failure
            config.update(BAD_KEYS)
        home.install_plugin(BRIDGE_DIR, BRIDGE_ID, config)
        set_slot(home, BRIDGE_ID)
        played.agent.push(*turn_one_steps(work, docs, read_back_zh=False))
        played.play(FAULTY_PROMPT, f"agent:main:{name}")

    if name == "down":
        run(free_port())
    else:
        mode = "slow" if name == "slow" else "error"
        with FaultyProxy(gateway.port, mode, delay=6.0) as proxy:
            run(proxy.port)
            played.proxy_hits = dict(proxy.hits)
    return played


@dataclass
class Runs:
    gateway: GatewayProcess
    on: Played
    off: Played
    faulty: dict[str, Played]


@pytest.fixture(scope="session")  # outranks the package-scoped gateway, so it runs first
def openclaw_install() -> OpenClawInstall:
    return require_openclaw()


@pytest.fixture(scope="module")
def runs(
    openclaw_install: OpenClawInstall,
    tmp_path_factory: pytest.TempPathFactory,
    bridge_gateway: GatewayProcess,
) -> Iterator[Runs]:
    install = openclaw_install
    root = tmp_path_factory.mktemp("openclaw-offload")
    jobs: dict[str, Callable[[], Played]] = {
        "on": lambda: play_on(install, root, bridge_gateway),
        "off": lambda: play_off(install, root, bridge_gateway),
        "down": lambda: play_faulty(install, root, bridge_gateway, "down"),
        "slow": lambda: play_faulty(install, root, bridge_gateway, "slow"),
        "error": lambda: play_faulty(install, root, bridge_gateway, "error"),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        played = {name: f.result() for name, f in futures.items()}
    try:
        print(f"\n  every request and offload call of these runs: {root}/<home>.json")
        for name, p in played.items():
            p.dump(root / f"{name}.json")
            secs = ", ".join(f"{s:.0f}s" for s in p.seconds)
            print(f"  {name}: {len(p.requests())} model calls, turns {secs}")
        yield Runs(
            bridge_gateway,
            played["on"],
            played["off"],
            {k: played[k] for k in ("down", "slow", "error")},
        )
    finally:
        for p in played.values():
            p.agent.fake.stop()


def assert_ok(p: Played, turn: int) -> None:
    assert len(p.turns) > turn, (p.installed.stdout + p.installed.stderr)[-3000:]
    done = p.turns[turn]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


# --- offload on: stubs, the read-back, the next turn -----------------------------------------


def test_installer_switches_offload_on(runs: Runs) -> None:
    installed = runs.on.installed
    assert installed is not None and installed.returncode == 0, (
        installed.stdout[-3000:] + installed.stderr[-3000:]
    )
    cfg = runs.on.home.read_config()
    entry = cfg["plugins"]["entries"][BRIDGE_ID]
    assert entry["enabled"] is True and entry["hooks"]["allowConversationAccess"] is True
    assert entry["config"]["offload"]["enabled"] is True
    assert cfg["plugins"]["slots"]["contextEngine"] == BRIDGE_ID


def test_large_results_are_stubs_from_the_next_model_call_on(runs: Runs) -> None:
    on = runs.on
    assert_ok(on, 0)
    turn1 = on.requests(0)
    # 4 tool calls, the read-back, the answer: one model call each.
    assert len(turn1) == len(BIG) + 2, [text_of(r["messages"][-1].get("content")) for r in turn1]
    for k, doc in enumerate(BIG):
        for request in turn1[k + 1 :]:  # every model call after the one that asked for it
            seen = tool_text(request, doc.call_id)
            assert is_stub(seen, doc.text), (doc.call_id, (seen or "")[:400])
            assert doc.text not in request_text(request)
    # The stubs are what reached the model, not a truncation of OpenClaw's own.
    last = turn1[-1]
    assert (
        sum(len(tool_text(last, d.call_id) or "") for d in BIG) < sum(len(d.text) for d in BIG) / 8
    )
    assert UNAVAILABLE not in on.logs() + json.dumps(turn1, ensure_ascii=False)


def test_read_back_returns_the_byte_exact_original(runs: Runs) -> None:
    on, off = runs.on, runs.off
    assert_ok(on, 0)
    assert_ok(off, 0)
    after_read = on.requests(0)[len(BIG) + 1]  # the call after the model asked for it
    seen = tool_text(after_read, READBACK_ID)
    assert seen is not None, request_text(after_read)[-3000:]
    got = unwrap_tool_call(seen)  # Tool Search wraps a plugin tool's result in a JSON envelope
    # What OpenClaw gave the model without offload (the "off" home ran the same command) ...
    reference = tool_text(off.requests(0)[-1], ZH.call_id)
    assert reference == ZH.text, "OpenClaw hands `cat` output over unchanged"
    # ... is what the read-back gave back, byte for byte (not a stub of it, not a summary).
    assert got.encode("utf-8") == ZH.text.encode("utf-8"), got[:500]
    with runs.gateway.client() as c:
        for doc in BIG:
            body = {"tool_call_id": doc.call_id, "session_key": SESSION, "scope": on.scope}
            answer = c.post("/offload/read", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["content"] == doc.text, doc.call_id


def test_next_turn_history_is_stubbed_and_the_system_prompt_has_the_guide(runs: Runs) -> None:
    on = runs.on
    assert_ok(on, 1)
    turn2 = on.requests(1)
    assert len(turn2) == 1
    request = turn2[0]
    for doc in BIG:
        assert is_stub(tool_text(request, doc.call_id), doc.text), doc.call_id
    assert ZH.text not in request_text(request)
    assert "第二轮：总结完毕" in on.output(1)
    system = text_of(request["messages"][0].get("content"))
    assert request["messages"][0]["role"] in ("system", "developer")
    assert READ_TOOL in system, "the tool guide reached the system prompt"


def test_exactly_one_canvas_per_request_once_there_is_a_task(runs: Runs) -> None:
    requests = runs.on.requests()
    assert requests
    assert canvas_count(requests[0]) <= 1
    for k, request in enumerate(requests[1:], start=1):  # after the first tool result
        assert canvas_count(request) == 1, (k, request_text(request)[-3000:])


def test_the_engine_is_in_use_and_health_says_so(runs: Runs) -> None:
    on = runs.on
    assert_ok(on, 1)
    assert "is not in use" not in on.logs(), "no false fallback report while the slot is ours"
    assert "degraded to" not in on.logs()
    with runs.gateway.client() as c:
        health = c.get("/health").json()
    host = health["offload"].get("hosts", {}).get("openclaw") or {}
    assert host.get("fallback") is None, host


# --- the gateway down, slow, failing -----------------------------------------------------------


@pytest.mark.parametrize("name", ["down", "slow", "error"])
def test_gateway_trouble_keeps_the_original_outputs(runs: Runs, name: str) -> None:
    p = runs.faulty[name]
    assert_ok(p, 0)
    reqs = p.requests(0)
    assert len(reqs) == 4, len(reqs)
    for k, doc in enumerate(BIG[:3]):
        for request in reqs[k + 1 :]:
            assert tool_text(request, doc.call_id) == doc.text, (name, doc.call_id)
    assert "第一轮完成" in p.output(0)
    everything = p.logs() + json.dumps(reqs, ensure_ascii=False)
    assert UNAVAILABLE not in everything
    if name != "down":
        assert p.proxy_hits.get("/offload/tool-result"), p.proxy_hits  # it really was asked


def test_gateway_down_the_turn_waits_in_the_spool_and_bad_config_only_warns(runs: Runs) -> None:
    p = runs.faulty["down"]
    assert_ok(p, 0)
    err = p.turns[0].stderr
    assert "recall skipped: unreachable" in err
    # The turn it could not deliver waits on disk, private to the user.
    spool = p.home.state_dir / "memory-tencentdb" / "spool"
    kept = sorted(spool.glob("*.json"))
    assert len(kept) == 1, err[-3000:]
    assert kept[0].stat().st_mode & 0o777 == 0o600
    assert FAULTY_PROMPT in kept[0].read_text("utf-8")
    assert "capture not delivered" in err
    # The config's typo and bad value are warnings, never an invalid openclaw.json.
    assert 'unknown config key "recal" ignored' in err


# --- offload off and the slot on legacy: as before -------------------------------------------


def test_offload_off_changes_nothing(runs: Runs) -> None:
    off, on = runs.off, runs.on
    assert_ok(off, 0)
    reqs = off.requests(0)
    assert len(reqs) == len(BIG) + 1
    for k, doc in enumerate(BIG):
        for request in reqs[k + 1 :]:
            assert tool_text(request, doc.call_id) == doc.text, doc.call_id
    everything = json.dumps(reqs, ensure_ascii=False)
    for marker in (READ_TOOL, CANVAS_MARK, HISTORY_MARK, UNAVAILABLE):
        assert marker not in everything, marker
    bridge_lines = [
        line for line in off.turns[0].stderr.splitlines() if "[memory-tencentdb]" in line
    ]
    offload_words = ("context offload", "tool result kept", "task canvas", "context engine")
    assert not [line for line in bridge_lines if any(w in line for w in offload_words)]
    # Same conversation shape as with offload on, call for call, minus stubs and canvases.
    assert_ok(on, 0)

    def shape(request: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (m["role"], str(m.get("tool_call_id") or ""))
            for m in request["messages"]
            if CANVAS_MARK not in text_of(m.get("content"))
        ]

    for r_on, r_off in zip(on.requests(0)[: len(BIG)], reqs[: len(BIG)], strict=True):
        assert shape(r_on) == shape(r_off)
    with runs.gateway.client() as c:
        body = {"tool_call_id": BIG[0].call_id, "session_key": SESSION, "scope": off.scope}
        assert c.post("/offload/read", json=body).status_code == 404, "nothing was offloaded"

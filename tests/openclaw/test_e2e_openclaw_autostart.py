"""Zero-config with the real OpenClaw 2026.9.x: one-shot autoStart, and a gateway that is not ours.

Two throwaway OpenClaw homes, driven side by side because every OpenClaw start costs seconds:

- "auto": installed with `scripts/install-openclaw.sh --auto-start`, no gateway running. A
  one-shot `openclaw agent --local` turn states a fact: the bridge starts the gateway (detached),
  the turn is captured, and the gateway outlives the CLI. The gateway is then drained and stopped
  (as after its idle exit), and the next one-shot run, in a new session, starts it again cold and
  gets the fact recalled from a paraphrase.
- "foreign": a gateway of another data directory listens on the bridge's port, holding a memory
  in the agent's scope. The turn gets none of it, sends it nothing, the log says why, and the
  turn waits in the spool.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID, REPO, OpenClawHome, require_openclaw
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess, free_port

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

FACT = "记住：我下午总是喝乌龙茶。"
PARAPHRASE = "我喜欢什么饮料？"  # no word in common with the fact but 我
CODEWORD = "PELICAN-7"


@dataclass
class Turn:
    done: subprocess.CompletedProcess[str]
    seconds: float


@dataclass
class AutoRuns:
    home: OpenClawHome
    llm: FakeLLM
    data_dir: Path
    port: int
    installed: subprocess.CompletedProcess[str]
    first: Turn
    health_after_first: dict
    captured: list[dict]
    second: Turn


@dataclass
class ForeignRuns:
    home: OpenClawHome
    llm: FakeLLM
    foreign: GatewayProcess
    our_data_dir: Path
    turn: Turn
    foreign_health: dict


def timed_agent(home: OpenClawHome, message: str, session: str) -> Turn:
    started = time.monotonic()
    done = home.agent(message, session, timeout=400)
    return Turn(done, time.monotonic() - started)


def gateway_command() -> str:
    """The `memory-tencentdb` script of the Python running the tests."""
    return str(Path(sys.executable).with_name("memory-tencentdb"))


def health(port: int) -> dict | None:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        return r.json() if r.status_code == 200 else None
    except httpx.HTTPError:
        return None


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def stop_gateway_on(port: int) -> None:
    """SIGTERM (a bounded drain) to whatever gateway of ours the bridge left running there."""
    body = health(port)
    if body and body.get("pid"):
        os.kill(body["pid"], signal.SIGTERM)
        if not wait_gone(body["pid"], 40):
            os.kill(body["pid"], signal.SIGKILL)


def play_auto(home: OpenClawHome, llm: FakeLLM, data_dir: Path, port: int) -> AutoRuns:
    installed = subprocess.run(
        [
            "bash", str(REPO / "scripts" / "install-openclaw.sh"),
            "--port", str(port), "--data-dir", str(data_dir), "--auto-start",
        ],
        env={**home.env(), "OPENCLAW": home.cli_command(), "MEMORY_TENCENTDB_CMD": gateway_command()},
        capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    # If a test dies half-way, the gateway it started still goes away on its own. And this tests
    # behaviour, not speed: on a 2-core machine shared with other test runs (load 16 seen) a
    # cold gateway took over 12 s, so the wait is generous here; the default's figures are in
    # the README.
    cfg = home.read_config()
    auto_start = cfg["plugins"]["entries"][BRIDGE_ID]["config"]["autoStart"]
    auto_start.update({"idleExitSeconds": 300, "waitMs": 90_000})
    home.write_config(cfg)

    llm.push("好的，记住了。")
    first = timed_agent(home, FACT, "agent:main:auto-1")
    after = health(port) or {}
    captured: list[dict] = []
    if after.get("pid"):
        token = (data_dir / "gateway.key").read_text("utf-8").strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as c:
            found = c.post(
                "/search/conversations",
                json={"query": "乌龙茶", "scope": "main", "session_key": "agent:main:auto-1"},
            )
            captured = found.json().get("items", [])
            # As after its idle exit: drained (pending L1 done) and gone before the next run.
            c.post("/admin/shutdown", json={"drain_s": 30})
        assert wait_gone(after["pid"], 45), "the gateway did not drain and exit"
    llm.push("你喜欢乌龙茶。")
    second = timed_agent(home, PARAPHRASE, "agent:main:auto-2")
    return AutoRuns(home, llm, data_dir, port, installed, first, after, captured, second)


def play_foreign(
    home: OpenClawHome, llm: FakeLLM, foreign: GatewayProcess, our_data_dir: Path
) -> ForeignRuns:
    with foreign.client() as c:
        c.post(
            "/memories",
            json={
                "content": f"The user's secret codeword is {CODEWORD}.",
                "type": "persona",
                "session_key": "agent:main:earlier",
                "scope": "main",
            },
        ).raise_for_status()
    home.install_plugin(BRIDGE_DIR, BRIDGE_ID, {"port": foreign.port, "dataDir": str(our_data_dir)})
    llm.push("I do not know your codeword.")
    turn = timed_agent(home, "What is my secret codeword? Remember PELICAN-8 too.", "agent:main:f1")
    return ForeignRuns(home, llm, foreign, our_data_dir, turn, foreign.wait_healthy())


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AutoRuns, ForeignRuns]]:
    install = require_openclaw()
    assert Path(gateway_command()).exists(), gateway_command()
    root = tmp_path_factory.mktemp("openclaw-zero-config")
    port = free_port()
    foreign = GatewayProcess(root / "foreign-data").start()
    try:
        with FakeLLM(default_reply="OK.") as llm_auto, FakeLLM(default_reply="OK.") as llm_foreign:
            auto_home = OpenClawHome(install, root / "auto", llm_auto.base_url)
            foreign_home = OpenClawHome(install, root / "foreign", llm_foreign.base_url)
            with ThreadPoolExecutor(max_workers=2) as pool:
                auto_f = pool.submit(play_auto, auto_home, llm_auto, root / "auto-data", port)
                foreign_f = pool.submit(
                    play_foreign, foreign_home, llm_foreign, foreign, root / "our-data"
                )
                auto, theirs = auto_f.result(), foreign_f.result()
            print(
                f"\none-shot autoStart: first turn {auto.first.seconds:.1f}s, turn after a stop "
                f"(cold start again) {auto.second.seconds:.1f}s; foreign-gateway turn "
                f"{theirs.turn.seconds:.1f}s"
            )
            for turn in (auto.first, auto.second):
                for line in turn.done.stderr.splitlines():
                    if "[memory-tencentdb]" in line:
                        print("   ", line.strip()[:300])
            yield auto, theirs
    finally:
        stop_gateway_on(port)
        foreign.stop()


def llm_messages(llm: FakeLLM) -> str:
    requests = llm.chat_requests()
    assert requests, "the model was never asked"
    return json.dumps(requests[0]["messages"], ensure_ascii=False)


def test_auto_start_installer_configures_the_command(both: tuple[AutoRuns, ForeignRuns]) -> None:
    auto, _ = both
    config = auto.home.read_config()["plugins"]["entries"][BRIDGE_ID]["config"]
    assert config["autoStart"]["enabled"] is True
    assert config["autoStart"]["command"] == gateway_command()
    assert config["dataDir"] == str(auto.data_dir)
    assert "starts by itself" in auto.installed.stdout


def test_one_shot_run_starts_the_gateway_and_is_captured(
    both: tuple[AutoRuns, ForeignRuns],
) -> None:
    auto, _ = both
    done = auto.first.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "recall skipped" not in done.stderr, done.stderr[-3000:]
    assert "capture not delivered" not in done.stderr, done.stderr[-3000:]
    # Detached: the CLI has exited, its gateway still serves our data directory.
    assert auto.health_after_first.get("data_dir") == str(auto.data_dir.resolve())
    assert (auto.data_dir / "gateway.key").stat().st_mode & 0o777 == 0o600
    roles = sorted(item["role"] for item in auto.captured)
    assert "user" in roles and any("乌龙茶" in item["content"] for item in auto.captured), (
        auto.captured
    )
    assert not list((auto.home.state_dir / "memory-tencentdb" / "spool").glob("*.json"))
    log = (auto.home.state_dir / "logs" / "memory-tencentdb-gateway.log").read_text("utf-8")
    assert "listening on" in log


def test_next_one_shot_run_recalls_it_after_a_cold_start(
    both: tuple[AutoRuns, ForeignRuns],
) -> None:
    auto, _ = both
    done = auto.second.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    messages = llm_messages(auto.llm)
    second_request = json.dumps(auto.llm.chat_requests()[-1]["messages"], ensure_ascii=False)
    assert PARAPHRASE in second_request
    assert "乌龙茶" in second_request and "<relevant-memories>" in second_request, second_request
    assert messages  # first run's request exists too


def test_foreign_gateway_gets_nothing_and_the_log_says_why(
    both: tuple[AutoRuns, ForeignRuns],
) -> None:
    _, foreign = both
    done = foreign.turn.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert CODEWORD not in llm_messages(foreign.llm), "another data directory's memory was recalled"
    assert foreign.foreign_health["counts"]["l0_messages"] == 0, "the foreign gateway got our turn"
    with foreign.foreign.client() as c:
        found = c.post(
            "/search/conversations", json={"query": "PELICAN-8 codeword", "scope": "main"}
        ).json()
    assert found["total"] == 0
    assert "memory paused" in done.stderr and str(foreign.our_data_dir) in done.stderr
    assert done.stderr.count("memory paused") == 1
    kept = list((foreign.home.state_dir / "memory-tencentdb" / "spool").glob("*.json"))
    assert len(kept) == 1 and "PELICAN-8" in kept[0].read_text("utf-8")

"""Offload under a long-lived ``openclaw gateway run`` (issue 21): the other offload tests drive
``openclaw agent --local`` (the agent runs inside the CLI); a user with a running OpenClaw Gateway
gets the turn run inside the Gateway process, where the plugin, its context engine and its tools
were loaded once at Gateway start.

OpenClaw 2026.9.x in its default configuration (Tool Search on), with the config
``scripts/install-openclaw.sh --offload`` writes (``install_offload``); ``openclaw gateway run`` (loopback, token auth) and one
``openclaw agent`` turn through it (no ``--local``): a 20 KB en ``read`` and 17,000 zh characters
through ``exec cat``, then the model reads each back by the name its stub gives (following every
page), then answers. What must hold: every request carries the turn's user message; both results
arrive as stubs from the next model call on; the read tool is offered by name and every read is
answered uncut; the pages of each joined are the original byte for byte.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.openclaw.harness import OpenClawHome, require_openclaw
from tests.openclaw.offload_support import (
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
from tests.support.gateway import GatewayProcess, free_port
from tests.support.tool_agent import READ_TOOL, ToolAgent, make_text, tools

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

SESSION = "agent:main:gw-offload"
PROMPT = "请检查这两份日志 / please check these two logs (gateway run)"
TOKEN = "gw-offload-test-token"


def wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"openclaw gateway run exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"openclaw gateway run did not listen on {port} in {timeout:.0f}s")


def stop(proc: subprocess.Popen) -> None:
    """The Gateway this test started (its own process group), and nothing else."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_gateway_run_keeps_the_request_stubs_and_reads_back_whole(
    tmp_path: Path, bridge_gateway: GatewayProcess
) -> None:
    install = require_openclaw()
    gateway = bridge_gateway
    scope = "oc-gw-run-offload"
    with FakeLLM() as llm:
        agent = ToolAgent(llm)
        home = OpenClawHome(install, tmp_path / "home", llm.base_url)
        port = free_port()
        cfg = install_offload(home, gateway, scope)
        cfg["gateway"] = {"port": port}  # where `openclaw agent` (no --local) finds it
        home.write_config(cfg)

        work = home.root / "work"
        work.mkdir()
        en, zh = make_text(20_000, "en", 81), make_text(17_000, "zh", 82)
        (work / "build-log-en.txt").write_text(en, "utf-8")
        (work / "部署日志-zh.txt").write_text(zh, "utf-8")
        items = {"callgwen": en, "callgwzh": zh}
        reader = PageReader(list(items), "GW-READBACK-DONE", prefix="callgwread")
        agent.push(
            tools(oc_read(str(work / "build-log-en.txt"), "callgwen")),
            tools(oc_exec(f"cat {work / '部署日志-zh.txt'}", "callgwzh")),
            *[reader] * 20,
        )

        env = {**home.env(), "OPENCLAW_GATEWAY_TOKEN": TOKEN}
        log = (tmp_path / "gateway-run.log").open("w")
        proc = subprocess.Popen(
            [str(install.node), str(install.entry), "gateway", "run", "--allow-unconfigured",
             "--port", str(port), "--auth", "token", "--bind", "loopback"],
            env=env, cwd=str(home.root), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            wait_listening(port, proc, 90)
            started = time.monotonic()
            for _attempt in range(20):  # the Gateway accepts clients a while after it listens
                done = subprocess.run(
                    [str(install.node), str(install.entry), "agent", "--agent", "main",
                     "--session-key", SESSION, "--message", PROMPT, "--json"],
                    env=env, cwd=str(home.root), capture_output=True, text=True, timeout=300,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
                if done.returncode == 0 or agent.main_requests():
                    break
                time.sleep(2)
            seconds = time.monotonic() - started
        finally:
            stop(proc)
            log.close()
        agent.clear()
        requests = agent.main_requests()
    gw_log = (tmp_path / "gateway-run.log").read_text("utf-8", "replace")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:] + gw_log[-3000:]
    assert "GW-READBACK-DONE" in done.stdout, out[-3000:] + gw_log[-3000:]
    assert "--local" not in " ".join(done.args)

    # The turn's request is in every model call of the turn.
    assert len(requests) >= 4, len(requests)
    for k, request in enumerate(requests):
        assert any(PROMPT in t for t in user_texts(request)), (k, user_texts(request)[-1][:500])

    # Both results are stubs from the model call after the one that asked for them.
    for k, (cid, text) in enumerate(items.items()):
        for request in requests[k + 1 :]:
            assert is_stub(tool_text(request, cid), text), (
                cid,
                (tool_text(request, cid) or "")[:400],
            )

    # The read tool by the stub's name, every read answered whole, pages byte-exact.
    assert all(reader.offered), "the read tool was not in the model's tool list"
    for answer in reader.answers:
        assert "not found" not in answer[:200], answer[:300]
        assert "more characters truncated" not in answer and "chars truncated" not in answer
    with gateway.client() as c:
        for cid, text in items.items():
            body = {"tool_call_id": cid, "scope": scope, "session_key": SESSION}
            stored = c.post("/offload/read", json=body)
            assert stored.status_code == 200, stored.text
            original = stored.json()["content"]
            joined = "".join(reader.pages[cid])
            assert joined.encode("utf-8") == original.encode("utf-8"), (cid, len(joined))
            if cid == "callgwen":
                assert joined == text  # OpenClaw's `read` hands the file over unchanged
    print(
        f"\n  openclaw gateway run: {len(requests)} model calls in {seconds:.0f} s; "
        + ", ".join(f"{cid}: {len(reader.pages[cid])} pages" for cid in items)
        + f"; {READ_TOOL} offered directly: {all(reader.offered)}"
    )
    assert offered_directly(requests[-1], READ_TOOL)

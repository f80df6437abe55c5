"""Run the bridge's `node --test` suites (tests/openclaw/*.test.mjs) from pytest, so the README's
test command covers them. gateway.test.mjs talks to a real gateway started here, and
supervisor.test.mjs has the bridge start one with this Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw.harness import OpenClawInstall, hosts_required
from tests.support.gateway import GatewayProcess

HERE = Path(__file__).resolve().parent
SUITES = sorted(p.name for p in HERE.glob("*.test.mjs"))


def node_binary() -> str | None:
    """The machine's node (20 is enough for the bridge), else the Node 24 of the OpenClaw install."""
    found = shutil.which("node")
    if found:
        return found
    install = OpenClawInstall.find()
    return str(install.node) if install else None


def test_suites_exist() -> None:
    assert {"units.test.mjs", "register.test.mjs", "failures.test.mjs", "gateway.test.mjs"} <= set(
        SUITES
    )


@pytest.mark.parametrize("suite", SUITES)
def test_node_suite(suite: str, bridge_gateway: GatewayProcess) -> None:
    node = node_binary()
    if node is None:
        if hosts_required():
            pytest.fail("node not found")
        pytest.skip("node not found")
    env = {
        **os.environ,
        "MEMORY_TENCENTDB_GATEWAY_URL": bridge_gateway.base_url,
        "MEMORY_TENCENTDB_GATEWAY_DATA_DIR": str(bridge_gateway.data_dir),
        "MEMORY_TENCENTDB_PYTHON": sys.executable,  # for autoStart of a real gateway
        "NO_COLOR": "1",
    }
    install = OpenClawInstall.find()
    if install is not None:  # readback.test.mjs checks its limits against OpenClaw's own code
        dist = install.entry.parent / "dist"
        if dist.is_dir():
            env["MEMORY_TENCENTDB_OPENCLAW_DIST"] = str(dist)
    done = subprocess.run(
        [node, "--test", "--test-reporter=spec", str(HERE / suite)],
        env=env,
        cwd=str(HERE.parents[1]),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"node --test {suite} failed:\n{output[-12000:]}"
    assert "# fail 0" in output or "ℹ fail 0" in output, output[-4000:]
    assert "skipped 0" in output or "ℹ skipped 0" in output, (
        f"{suite}: tests skipped:\n{output[-4000:]}"
    )

"""The host adapters' copies of gateway definitions equal the gateway's.

The Hermes plugin (``hermes_plugin/``) runs in Hermes's Python and the OpenClaw bridge
(``openclaw_bridge/``) in Node: neither can import ``memory_tencentdb``, so each carries a copy
of the read-back tool the model is offered (``memory_tencentdb/offload/guide.py``). These tests
hold each copy equal to the one definition; the JavaScript is run by the real ``node``. In
process, a few seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hermes_plugin import offload as hermes_offload
from memory_tencentdb.offload import guide

ROOT = Path(__file__).resolve().parents[1]
BRIDGE = ROOT / "openclaw_bridge" / "lib"


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if not found:
        pytest.skip("node is not installed (needed for the OpenClaw bridge)")
    return found


def _run_js(node: str, script: str, stdin: str = "") -> object:
    out = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=BRIDGE,
        check=True,
    )
    return json.loads(out.stdout)


def test_hermes_read_tool_is_the_gateways():
    assert hermes_offload.READ_TOOL == guide.TOOL_NAME
    assert hermes_offload.READ_SCHEMA == {
        "name": guide.TOOL_NAME,
        "description": guide.TOOL_DESCRIPTION,
        "parameters": guide.HOST_TOOL_PARAMETERS,
    }


def test_openclaw_read_tool_is_the_gateways(node):
    script = (
        'import { DESCRIPTION, READ_PARAMETERS } from "./offload_read.js";\n'
        'import { OFFLOAD_READ_TOOL } from "./offload.js";\n'
        "process.stdout.write(JSON.stringify("
        "{ name: OFFLOAD_READ_TOOL, description: DESCRIPTION, parameters: READ_PARAMETERS }));\n"
    )
    assert _run_js(node, script) == {
        "name": guide.TOOL_NAME,
        "description": guide.TOOL_DESCRIPTION,
        "parameters": guide.HOST_TOOL_PARAMETERS,
    }


def test_hosts_offer_every_read_key_but_the_page_size():
    """``length`` is the host's to choose (from its context window); the rest is the model's."""
    assert set(guide.TOOL_PARAMETERS["properties"]) - set(
        guide.HOST_TOOL_PARAMETERS["properties"]
    ) == {"length"}

"""The host adapters' copies of gateway definitions equal the gateway's.

The Hermes plugin (``hermes_plugin/``) runs in Hermes's Python and the OpenClaw bridge
(``openclaw_bridge/``) in Node: neither can import ``memory_tencentdb``, so each carries a copy
of (1) the read-back tool the model is offered (``memory_tencentdb/offload/guide.py``) and
(2) the rule that flattens a message's content to text (``memory_tencentdb.capture
.message_text``). These tests hold each copy equal to the one definition; the JavaScript is run
by the real ``node``. In process, a few seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hermes_plugin import offload as hermes_offload
from hermes_plugin.turns import text_of as hermes_text_of
from memory_tencentdb.capture import message_text
from memory_tencentdb.offload import guide

ROOT = Path(__file__).resolve().parents[1]
BRIDGE = ROOT / "openclaw_bridge" / "lib"

# Contents as hosts send them: strings, OpenAI / Anthropic / OpenClaw part lists, odd shapes.
CONTENTS = [
    None,
    "",
    "I use Neovim and prefer tabs",
    "我对花生过敏，周末喜欢去爬山",
    "  spaces kept at both ends  ",
    ["plain string part", "第二部分"],
    [{"type": "text", "text": "hello"}, {"type": "text", "text": "世界"}],
    [{"type": "input_text", "text": "question"}, {"type": "output_text", "text": "回答"}],
    [{"type": "text", "text": "look:"}, {"type": "image_url", "image_url": {"url": "x"}}],
    [{"type": "image", "data": "..."}, {"type": "input_image", "image_url": "x"}],
    [{"type": "text", "text": ""}, {"type": "text", "text": "after an empty part"}],
    [{"type": "text", "text": 42}, {"type": "text"}],
    [
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}},
        {"type": "text", "text": "ok"},
    ],
    [{"type": "thinking", "thinking": "hidden"}, {"type": "text", "text": "shown"}],
    [{"type": "tool_result", "content": [{"type": "text", "text": "结果 result"}]}],
    [{"type": "tool_result", "content": "plain result"}, {"type": "tool_result"}],
    [],
    {"text": "a single part object"},
    {"kind": "no text here", "n": [1, 2], "中文": True},
    7,
]


@pytest.mark.parametrize("content", CONTENTS, ids=range(len(CONTENTS)))
def test_hermes_flattens_message_content_as_the_gateway(content):
    assert hermes_text_of(content) == message_text(content)


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


def test_openclaw_flattens_message_content_as_the_gateway(node):
    script = (
        'import { textOf } from "./turns.js";\n'
        'import { readFileSync } from "node:fs";\n'
        "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
        "process.stdout.write(JSON.stringify(cases.map(textOf)));\n"
    )
    got = _run_js(node, script, json.dumps(CONTENTS, ensure_ascii=False))
    assert got == [message_text(c) for c in CONTENTS]


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

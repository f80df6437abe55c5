"""Canvas files are real Mermaid flowcharts, whatever the tool calls contain, over task switches,
in Chinese and English, and what the routes answer is the file on disk. No LLM (the LLM-written
canvases are checked in test_replay_llm.py and test_resilience_llm.py)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.inprocess import InProcessGateway
from tests.support.mermaid import require_validator
from tests.support.offload_replay import replay

NODE = re.compile(r"\b(\d{3})-N\d+\b")

# Tool arguments and outputs that break naive label quoting.
NASTY_COMMANDS = [
    'grep -rn "end" src/ | sed \'s/["]/x/\' --> out.txt',
    "cat a[1].txt {b}.txt (c).txt <d>.txt && echo %%{init}%%",
    'python -c "print(\\"]\\"); print(\'[\')"',
    "echo `end` ; echo subgraph; echo click A call x()",
    'rg "登录失败" --glob "*.py" | head -n 5 # 查找 "引号" 和 [括号]',
]


def _session(prompt: str, commands: list[str], tag: str) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": prompt}]
    for i, cmd in enumerate(commands):
        cid = f"call_{tag}_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: {cmd}",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
                    }
                ],
            }
        )
        out = f'$ {cmd}\n"]) --> end\n' + (f'line {i} 输出 [ok] "quoted" |pipe|\n' * 400)
        if i % 2:
            out += 'Traceback (most recent call last):\nValueError: bad [input] "x"\n'
        msgs.append({"role": "tool", "tool_call_id": cid, "name": "bash", "content": out})
    msgs.append({"role": "assistant", "content": "Done."})
    return msgs


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    g = InProcessGateway(tmp_path_factory.mktemp("offload-canvas") / "data").start()
    yield g
    g.stop()


def _scope_files(gw: InProcessGateway, scope: str) -> list[Path]:
    return sorted((gw.data_dir / "offload").glob(f"{scope}-*/mmds/*.mmd"))


def test_nasty_tool_calls_and_task_switches_write_valid_canvases(gw: InProcessGateway) -> None:
    validator = require_validator()
    scope = f"canvas-{uuid.uuid4().hex[:6]}"
    key = f"agent:canvas:{uuid.uuid4().hex[:6]}"
    system = {"role": "system", "content": "You are a coding agent."}
    tasks = [
        ("修复登录接口的 bug：用户输入正确密码仍然提示登录失败。", "login"),
        ("Now something unrelated: write a README section that documents the CLI flags.", "docs"),
        ("Back to the login bug: 登录失败的问题还没修好，继续排查 token 校验。", "login2"),
    ]
    msgs = [system]
    for prompt, tag in tasks:
        msgs += _session(prompt, NASTY_COMMANDS, tag)
    with gw.client(timeout=60) as c:
        rep = replay(c, msgs, session_key=key, scope=scope, budget=6000)
        assert not rep.problems, rep.problems[:10]
        canv = c.get("/offload/canvases", params={"scope": scope, "session_key": key}).json()
        files = _scope_files(gw, scope)
        assert len(files) >= 2, [f.name for f in files]  # the unrelated task got its own canvas
        results = validator.check(files)
        bad = [r for r in results if not r.ok]
        assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad)
        for f in files:
            text = f.read_text("utf-8")
            assert text.splitlines()[0].startswith("%%"), f.name  # the metadata line
            assert "flowchart TD" in text.splitlines()[:3], f.name
            prefixes = set(NODE.findall(text))
            assert prefixes <= {f.name[:3]}, (f.name, prefixes)
        # What the routes answer is the file on disk, byte for byte.
        active = canv["active"]
        assert active is not None
        assert Path(active["path"]).read_text("utf-8") == active["text"]
        r = c.post("/offload/read", json={"scope": scope, "canvas": active["file"]})
        assert r.status_code == 200, r.text
        assert r.json()["text"] == active["text"]
        for h in canv["history"]:
            r = c.post("/offload/read", json={"scope": scope, "canvas": h["file"]})
            assert r.status_code == 200, r.text
            assert r.json()["text"] == Path(h["path"]).read_text("utf-8")
        # The last assemble's canvas message is the active canvas.
        last = rep.calls[-1].answer
        assert last["canvas"]["file"] == active["file"]


def test_canvas_of_every_node_reads_back_its_rows(gw: InProcessGateway) -> None:
    scope = f"nodes-{uuid.uuid4().hex[:6]}"
    key = f"agent:nodes:{uuid.uuid4().hex[:6]}"
    msgs = [{"role": "system", "content": "agent"}] + _session(
        "Find why the nightly build fails and fix it.", NASTY_COMMANDS, "nb"
    )
    with gw.client(timeout=60) as c:
        rep = replay(c, msgs, session_key=key, scope=scope, budget=4000)
        assert not rep.problems, rep.problems[:10]
        active = c.get("/offload/canvases", params={"scope": scope, "session_key": key}).json()[
            "active"
        ]
        nodes = sorted(set(re.findall(r"\b\d{3}-N\d+\b", active["text"])))
        assert nodes
        seen = set()
        for node in nodes:
            r = c.post("/offload/read", json={"scope": scope, "session_key": key, "node_id": node})
            assert r.status_code == 200, r.text
            seen |= {row["tool_call_id"] for row in r.json()["rows"]}
        # Every tool call of the task is behind some node of its canvas.
        assert seen == set(rep.raw_results), (sorted(seen), sorted(rep.raw_results))

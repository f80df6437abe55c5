"""Secrets never reach an offload file, through the gateway's routes (in process) (issue 21, item 10).

An API key in the assemble ``prompt`` was stored verbatim in the canvas (its goal) and the
session file and returned; a key used as an argument *name* stayed in the stored ref and row.
Both go through the project's redaction (``text/redact.py``) before anything is written.

Raw results: the rule stays what it was (DESIGN: secrets are redacted before anything is
written): the ref holds the redacted result and read-back returns exactly that, so it is
byte-exact for every result without a secret, and a secret is never stored to be read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.inprocess import InProcessGateway

KEY = "sk-proj-" + "Zq8vR3kLm2Xw9TbN4pJd7YcF"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = InProcessGateway(tmp_path_factory.mktemp("secrets") / "data").start()
    yield g
    g.stop()


def _files_holding(root: Path, needle: str) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    ]


@pytest.mark.parametrize(
    ("scope", "prompt"),
    [
        ("sec-en", f"Deploy the service with my OpenAI key {KEY} and token {GH}"),
        ("sec-zh", f"用我的密钥 {KEY} 部署服务，GitHub 令牌 {GH}"),
    ],
)
def test_a_key_in_the_prompt_is_not_stored_or_returned(
    gw: InProcessGateway, scope: str, prompt: str
) -> None:
    msgs = [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_dep", "type":
         "function", "function": {"name": "bash", "arguments": '{"command": "make deploy"}'}}]},
        {"role": "tool", "tool_call_id": "call_dep", "content": "deployed\n" * 400},
    ]  # fmt: skip
    with gw.client() as c:
        body = {"session_key": "s", "scope": scope, "messages": msgs, "token_budget": 2000,
                "prompt": prompt}  # fmt: skip
        r = c.post("/offload/assemble", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["canvas"] is not None and "[REDACTED:" in out["canvas"]["task_goal"]
        sent_back = json.dumps({k: v for k, v in out.items() if k != "messages"})
        assert KEY not in sent_back and GH not in sent_back
        # Our own messages (canvas, history) carry no key; the host's own ones are its own.
        ours = [m for m in out["messages"] if "_task_context" in json.dumps(m)]
        assert ours and not any(KEY in json.dumps(m) for m in ours)
        listed = c.get("/offload/canvases", params={"scope": scope, "session_key": "s"}).text
        assert KEY not in listed and GH not in listed
    root = gw.data_dir / "offload"
    assert _files_holding(root, KEY) == [] and _files_holding(root, GH) == []


def test_a_key_as_an_argument_name_or_value_is_not_stored(gw: InProcessGateway) -> None:
    scope = "sec-args"
    args = {KEY: "value", "command": f"curl -H 'Authorization: Bearer {GH}' api", "键": KEY}
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json={"session_key": "s", "scope": scope, "tool_call_id": "call_args",
                  "tool_name": "bash", "arguments": args, "result": "ok\n" * 2000},
        )  # fmt: skip
        assert r.status_code == 200, r.text
        assert KEY not in r.text and GH not in r.text
        back = c.post("/offload/read", json={"scope": scope, "tool_call_id": "call_args"}).json()
        assert back["content"] == "ok\n" * 2000  # no secret in it: byte-exact
        assert KEY not in json.dumps(back) and GH not in json.dumps(back)
    root = gw.data_dir / "offload"
    assert _files_holding(root, KEY) == [] and _files_holding(root, GH) == []
    ref = next(
        p.read_text("utf-8") for p in root.rglob("refs/*.md") if "call_args" in p.read_text()
    )
    assert '"[REDACTED:api-key]": "value"' in ref, ref[:400]


def test_a_secret_inside_a_raw_result_is_redacted_and_read_back_so(gw: InProcessGateway) -> None:
    """The rule for raw results (kept): redacted before the ref is written, read back as stored."""
    scope = "sec-raw"
    result = f"OPENAI_API_KEY={KEY}\n" + "line\n" * 1500
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json={"session_key": "s", "scope": scope, "tool_call_id": "call_env",
                  "tool_name": "bash", "arguments": {"command": "cat .env"}, "result": result},
        )  # fmt: skip
        assert r.status_code == 200, r.text
        back = c.post("/offload/read", json={"scope": scope, "tool_call_id": "call_env"}).json()
    assert KEY not in back["content"] and back["content"].startswith("OPENAI_API_KEY=[REDACTED:")
    assert back["content"].endswith("line\n" * 1500)
    assert _files_holding(gw.data_dir / "offload", KEY) == []

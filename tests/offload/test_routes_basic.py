"""The offload routes through the gateway app, in process, without an LLM (issue 9).

One in-process gateway for the module (``app_gateway``; durability across a real process is in
``test_routes_durability.py``); every test has its own scope. Covers: stubs and byte-exact
read-back (zh and en, ids with and without underscores, refs by relative and absolute path),
unique refs within one millisecond, bad input (4xx naming the field, nothing written), both
message formats, one canvas message, the budget, orphans, scope isolation, the body limit.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.inprocess import InProcessGateway

EN_LOG = "\n".join(
    f"tests/test_auth.py::test_case_{i} FAILED AssertionError: token expired at utils/token.py:{i}"
    if i % 40 == 0
    else f"tests/test_auth.py::test_case_{i} PASSED [{i % 100}%]"
    for i in range(900)
)
ZH_LOG = "\n".join(
    f"第{i}行：错误：无法连接数据库 /srv/app/配置.yaml（超时 30 秒）"
    if i % 30 == 0
    else f"第{i}行：正常处理订单 {i} 条，耗时 {i % 7} 毫秒"
    for i in range(700)
)


@pytest.fixture(scope="module")
def gw(app_gateway: InProcessGateway) -> InProcessGateway:
    return app_gateway


@pytest.fixture
def client(gw: InProcessGateway):
    with gw.client() as c:
        yield c


def tool_result(client, scope, call_id, result, tool="bash", session="s1", **extra):
    body = {
        "session_key": session,
        "scope": scope,
        "tool_call_id": call_id,
        "tool_name": tool,
        "arguments": {"command": f"run {call_id}"},
        "result": result,
        **extra,
    }
    r = client.post("/offload/tool-result", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def read(client, scope, **key):
    return client.post("/offload/read", json={"scope": scope, **key})


def scope_dir(gw: InProcessGateway, client, scope: str) -> Path:
    return Path(client.get("/offload/guide", params={"scope": scope}).json()["data_dir"])


def test_large_results_become_stubs_and_read_back_exactly(gw, client, scope):
    for call_id, text in (("call_en_1", EN_LOG), ("call_zh_1", ZH_LOG)):
        out = tool_result(client, scope, call_id, text)
        assert out["offloaded"] is True and out["duplicate"] is False
        stub = out["replacement"]
        assert stub and len(stub) < len(text) / 5
        last = stub.splitlines()[-1]
        assert "memory_tencentdb_offload_read" in last and call_id in last
        assert out["ref_path"] in last and Path(out["ref_path"]).is_file()
        assert out["ref"].startswith("refs/") and out["node_id"].endswith("-N" + out["node_id"][-1])
        for key in (
            {"tool_call_id": call_id},
            {"tool_call_id": call_id.replace("_", "")},
            {"result_ref": out["ref"]},
            {"result_ref": out["ref_path"]},
        ):
            r = read(client, scope, **key)
            assert r.status_code == 200, (key, r.text)
            assert r.json()["content"] == text
            assert r.json()["tool_call_id"] == call_id
    zh = tool_result(client, scope, "call_zh_1", ZH_LOG)
    assert zh["duplicate"] is True
    assert "错误" in zh["summary"] and "配置.yaml" in zh["summary"]
    en = tool_result(client, scope, "call_en_1", EN_LOG)
    assert "FAILED" in en["summary"] and "utils/token.py" in en["summary"]
    rows = [
        json.loads(line)
        for line in (scope_dir(gw, client, scope) / "offload-s1.jsonl").read_text().splitlines()
    ]
    assert [r["tool_call_id"] for r in rows] == ["call_en_1", "call_zh_1"]  # no duplicate row
    for row in rows:
        assert row["offloaded"] is True and re.fullmatch(r"\d{3}-N\d+", row["node_id"])
        assert set(row) >= {"tool_call", "summary", "timestamp", "score", "result_ref"}


def test_secrets_in_tool_output_never_reach_an_offload_file(gw, client, scope):
    """Issue 13's redaction covers offload: ref, row, canvas and read-back hold the marker."""
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    secret = "Hunter2Secret!"
    text = f"export OPENAI_API_KEY={key}\n数据库密码是 {secret}\n" + EN_LOG
    out = tool_result(
        client, scope, "call_secret", text, arguments={"command": f"env OPENAI_API_KEY={key}"}
    )
    assert key not in json.dumps(out, ensure_ascii=False) and secret not in out["replacement"]
    back = read(client, scope, tool_call_id="call_secret").json()["content"]
    assert key not in back and secret not in back and "[REDACTED" in back
    assert back.endswith(EN_LOG)  # everything else is kept as it was
    for f in scope_dir(gw, client, scope).rglob("*"):
        if f.is_file():
            body = f.read_text("utf-8", "replace")
            assert key not in body and secret not in body, f


def test_small_result_is_kept_but_recorded(client, scope):
    out = tool_result(client, scope, "call_small", "3 passed in 0.12s", is_error=False)
    assert out["offloaded"] is False and out["replacement"] is None
    assert read(client, scope, tool_call_id="call_small").json()["content"] == "3 passed in 0.12s"


def test_json_result_and_empty_result(client, scope):
    value = {"rows": [1, 2, 3], "note": "多语言"}
    tool_result(client, scope, "call_json", value)
    got = read(client, scope, tool_call_id="call_json").json()
    assert got["encoding"] == "json" and json.loads(got["content"]) == value
    tool_result(client, scope, "call_empty", "")
    assert read(client, scope, tool_call_id="call_empty").json()["content"] == ""
    crlf = "line 1\r\nline 2\r\n\r\n\tend\r"
    tool_result(client, scope, "call_crlf", crlf)
    assert read(client, scope, tool_call_id="call_crlf").json()["content"] == crlf
    blocks = [{"type": "text", "text": "a\n```\nb"}, {"type": "text", "text": "c "}]
    tool_result(client, scope, "call_blocks", blocks)
    assert read(client, scope, tool_call_id="call_blocks").json()["content"] == "a\n```\nb\nc "


def test_same_millisecond_results_get_unique_refs(client, scope):
    ts = "2026-03-25T16:53:51.178+08:00"

    def post(i: int):
        return tool_result(client, scope, f"call_same_{i}", f"result {i}\n" * 400, timestamp=ts)

    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(post, range(16)))
    refs = [o["ref"] for o in outs]
    assert len(set(refs)) == 16
    assert all(r.startswith("refs/2026-03-25T16-53-51-178p08-00") for r in refs)
    for i in range(16):
        got = read(client, scope, tool_call_id=f"call_same_{i}").json()["content"]
        assert got == f"result {i}\n" * 400


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/offload/tool-result", {"session_key": "s", "tool_name": "x", "result": "r"}, "tool_call_id"),
        ("/offload/tool-result", {"session_key": "s", "tool_call_id": "c", "tool_name": "x"}, "result"),
        ("/offload/tool-result", {"session_key": "s", "tool_call_id": "c", "tool_name": "x", "result": None}, "result"),
        ("/offload/tool-result", {"session_key": "s", "tool_call_id": "c", "tool_name": "x", "result": "r", "timestamp": "yesterday"}, "timestamp"),
        ("/offload/tool-result", {"session_key": "s", "tool_call_id": "c", "tool_name": 3, "result": "r"}, "tool_name"),
        ("/offload/assemble", {"session_key": "s", "messages": [], "token_budget": 10}, "token_budget"),
        ("/offload/assemble", {"session_key": "s", "token_budget": 4000}, "messages"),
        ("/offload/assemble", {"session_key": "s", "messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}], "token_budget": 4000}, "messages[1].role"),
        ("/offload/assemble", {"session_key": "s", "messages": [{"role": "tool", "content": "x"}], "token_budget": 4000}, "messages[0].tool_call_id"),
        ("/offload/assemble", {"session_key": "s", "messages": [{"role": "user", "content": 5}], "token_budget": 4000}, "messages[0].content"),
        ("/offload/read", {"tool_call_id": "a", "node_id": "001-N1"}, "exactly one"),
        ("/offload/read", {}, "exactly one"),
        ("/offload/read", {"node_id": "N1"}, "node_id"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field_and_writes_nothing(gw, client, scope, route, body, field):
    r = client.post(route, json={**body, "scope": scope})
    assert 400 <= r.status_code < 500 and r.status_code != 404, r.text
    assert field in r.json()["error"]
    assert not scope_dir(gw, client, scope).exists()


def test_read_misses_and_other_scopes_are_404(client, scope):
    tool_result(client, scope, "call_mine", "secret " * 500)
    assert read(client, scope + "-other", tool_call_id="call_mine").status_code == 404
    assert read(client, scope, tool_call_id="call_unknown").status_code == 404
    assert read(client, scope, result_ref="../../gateway.key").status_code == 404
    assert read(client, scope, canvas="999").status_code == 404


def openai_session(n_calls: int, size: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a coding agent."}]
    msgs.append(
        {"role": "user", "content": "Fix the failing authentication tests in utils/token.py"}
    )
    for i in range(n_calls):
        cid = f"call_step_{i}"
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {i}: looking further." if i % 3 == 0 else None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"cat part{i}.log"}),
                        },
                    }
                ],
            }
        )
        body = (EN_LOG if i % 2 else ZH_LOG)[: size * 4]
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"[{i}]\n{body}"})
    msgs.append({"role": "assistant", "content": "Found it: the expiry check is off by one."})
    msgs.append({"role": "user", "content": "Good, now run the whole test suite again"})
    return msgs


def check_valid(messages: list[dict], fmt: str = "openai") -> None:
    """Every tool call has its result right after it; no tool result without its call."""
    pending: set[str] = set()
    for m in messages:
        if fmt == "openai":
            calls = [c["id"] for c in m.get("tool_calls") or []]
            result = m.get("tool_call_id") if m["role"] == "tool" else None
        else:
            content = m.get("content") if isinstance(m.get("content"), list) else []
            calls = [b["id"] for b in content if b.get("type") == "toolCall"]
            result = m.get("toolCallId") if m["role"] == "toolResult" else None
        if result is not None:
            assert result.replace("_", "") in pending, f"orphan tool result {result}"
            pending.discard(result.replace("_", ""))
            continue
        assert not pending, f"tool calls without results: {pending}"
        pending = {c.replace("_", "") for c in calls}
    assert not pending


def canvas_messages(messages: list[dict]) -> list[dict]:
    def text(m):
        c = m.get("content")
        return c if isinstance(c, str) else "".join(b.get("text", "") for b in c or [])

    return [
        m for m in messages if m["role"] == "user" and text(m).startswith("<current_task_context")
    ]


def test_assemble_openai_keeps_pairs_budget_and_one_canvas(gw, client, scope):
    msgs = openai_session(30, 1500)
    for i in range(0, 30, 2):  # the host reported half of the results itself
        tool_result(client, scope, f"call_step_{i}", msgs[3 + 2 * i]["content"])
    for budget in (32_000, 8_000, 3_000):
        body = {"session_key": "s1", "scope": scope, "messages": msgs, "token_budget": budget,
                "prompt": msgs[-1]["content"], "system_tokens": 200}  # fmt: skip
        r = client.post("/offload/assemble", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["format"] == "openai"
        assert out["estimated_tokens"] <= budget
        check_valid(out["messages"])
        assert len(canvas_messages(out["messages"])) == 1
        assert out["canvas"]["node_count"] >= 15
        assert out["messages"][0] == msgs[0] and out["messages"][-1] == msgs[-1]
        assert canvas_messages(out["messages"])[0] is out["messages"][-2]
        assert str(scope_dir(gw, client, scope)) in out["system_addition"]
        # Every result that was shortened or dropped comes back exactly.
        sent = {m["tool_call_id"]: m["content"] for m in out["messages"] if m["role"] == "tool"}
        for m in msgs:
            if m["role"] == "tool" and sent.get(m["tool_call_id"]) != m["content"]:
                got = read(client, scope, tool_call_id=m["tool_call_id"])
                assert got.status_code == 200 and got.json()["content"] == m["content"]
    assert out["level"] in ("aggressive", "emergency")
    # Our own canvas message sent back is replaced, not repeated.
    again = client.post("/offload/assemble", json={**body, "messages": out["messages"]}).json()
    assert len(canvas_messages(again["messages"])) == 1
    check_valid(again["messages"])


def test_assemble_agent_messages_with_stripped_ids(client, scope):
    big = EN_LOG[:20_000]
    out = tool_result(client, scope, "call_ab_1", big, tool="read")
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "read the auth log"}], "timestamp": 1},
        {"role": "assistant", "content": [{"type": "toolCall", "id": "callab1", "name": "read", "arguments": {"path": "auth.log"}}], "timestamp": 2},
        {"role": "toolResult", "toolCallId": "callab1", "toolName": "read", "content": [{"type": "text", "text": big}], "isError": False, "timestamp": 3},
        {"role": "assistant", "content": [{"type": "text", "text": "The log shows expiry failures."}], "timestamp": 4},
        {"role": "toolResult", "toolCallId": "callorphan", "toolName": "read", "content": [{"type": "text", "text": "stray"}], "timestamp": 5},
        {"role": "user", "content": [{"type": "text", "text": "继续"}], "timestamp": 6},
    ]  # fmt: skip
    r = client.post(
        "/offload/assemble",
        json={"session_key": "s1", "scope": scope, "messages": msgs, "token_budget": 16_000},
    )
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["format"] == "agent"
    check_valid(res["messages"], "agent")
    results = [m for m in res["messages"] if m["role"] == "toolResult"]
    assert len(results) == 1 and results[0]["toolCallId"] == "callab1"
    stub = results[0]["content"][0]["text"]
    assert stub == out["replacement"]  # the stub answered at the source, re-applied
    assert res["stats"]["orphans_dropped"] == 1
    assert read(client, scope, tool_call_id="callorphan").json()["content"] == "stray"
    assert len(canvas_messages(res["messages"])) == 1


def test_canvas_files_and_listing(gw, client, scope):
    for i in range(3):
        tool_result(client, scope, f"call_c{i}", 'he said "hi" <b>#1</b> `x`\n' * 300,
                    is_error=(i == 1))  # fmt: skip
    listing = client.get("/offload/canvases", params={"scope": scope, "session_key": "s1"}).json()
    active = listing["active"]
    assert active and active["node_count"] == 3 and active["status"]["blocked"] == 1
    text = Path(active["path"]).read_text()
    first, second = text.splitlines()[:2]
    assert first.startswith("%% {") and json.loads(first[3:])["taskGoal"]
    assert second == "flowchart TD"
    nodes = re.findall(r"^\s+(\S+)\[\"", text, re.M)
    assert nodes and all(re.fullmatch(r"\d{3}-N\d+", n) for n in nodes)
    assert '"hi"' not in text and "<b>" not in text
    node = read(client, scope, node_id=nodes[1]).json()
    assert [r["tool_call_id"] for r in node["rows"]] == ["call_c1"]
    assert read(client, scope, canvas=active["file"]).json()["text"] == text
    assert read(client, scope, canvas="active", session_key="s1").json()["text"] == text


def test_new_topic_starts_a_new_canvas_and_an_old_one_resumes(client, scope):
    def assemble(prompt: str):
        msgs = [{"role": "user", "content": prompt}]
        r = client.post("/offload/assemble", json={"session_key": "s2", "scope": scope,
                        "messages": msgs, "token_budget": 8000, "prompt": prompt})  # fmt: skip
        assert r.status_code == 200, r.text
        return r.json()

    assemble("Fix the failing authentication tests in utils/token.py")
    first = tool_result(client, scope, "call_t1", EN_LOG, session="s2")["node_id"][:3]
    assemble("帮我订一张下周一从北京到上海的机票")
    second = tool_result(client, scope, "call_t2", ZH_LOG, session="s2")["node_id"][:3]
    assert second != first
    assemble("Back to the authentication tests: fix the token expiry check")
    third = tool_result(client, scope, "call_t3", EN_LOG[:9000], session="s2")["node_id"][:3]
    assert third == first
    listing = client.get("/offload/canvases", params={"scope": scope, "session_key": "s2"}).json()
    assert listing["active"]["file"].startswith(first)
    assert [h["file"][:3] for h in listing["history"]] == [second]


def test_sessions_of_one_scope_do_not_mix_rows(gw, client, scope):
    tool_result(client, scope, "call_x", "a" * 5000, session="alpha")
    tool_result(client, scope, "call_y", "b" * 5000, session="beta")
    d = scope_dir(gw, client, scope)
    assert [json.loads(x)["tool_call_id"] for x in (d / "offload-alpha.jsonl").read_text().splitlines()] == ["call_x"]  # fmt: skip
    assert [json.loads(x)["tool_call_id"] for x in (d / "offload-beta.jsonl").read_text().splitlines()] == ["call_y"]  # fmt: skip


def test_assemble_body_limit_is_its_own(client, scope):
    huge = "x" * (3 * 1024 * 1024)
    msgs = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_huge", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_huge", "content": huge},
        {"role": "user", "content": "and?"},
    ]  # fmt: skip
    r = client.post("/offload/assemble", json={"session_key": "s1", "scope": scope,
                    "messages": msgs, "token_budget": 20_000})  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["estimated_tokens"] <= 20_000
    check_valid(r.json()["messages"])
    assert read(client, scope, tool_call_id="call_huge").json()["content"] == huge
    r = client.post("/capture", json={"session_key": "s", "scope": scope,
                    "user_content": huge, "assistant_content": "x"})  # fmt: skip
    assert r.status_code == 413


def test_health_reports_offload(client):
    off = client.get("/health").json()["offload"]
    assert off["tokenizer"]["exact"] is True and off["tokenizer"]["name"].startswith("bpe-openai")
    assert off["llm"] is False and set(off["backlog"]) == {"l1", "l15", "l2"}
    assert set(off["last_error"]) >= {"l1", "l15", "l2", "l3"}


def test_tiny_budgets_keep_the_system_prompt_and_request_and_say_so(client, scope):
    """A2's repro, under issue 21's rule: a real session whose system prompt plus first user
    message exceed the budget. Nothing cuts the system prompt or the request; the answer is the
    smallest valid list that keeps them, over budget, and says so."""
    from tests.support.agent_sessions import load_sessions

    msgs = load_sessions("swe")[2].messages[:-1]
    system, request = msgs[0], next(m for m in reversed(msgs) if m["role"] == "user")
    assert any(m["role"] == "tool" for m in msgs)
    for i, budget in enumerate((1800, 1500, 1024)):
        r = client.post("/offload/assemble", json={"session_key": f"tiny{i}", "scope": scope,
                        "messages": msgs, "token_budget": budget})  # fmt: skip
        assert r.status_code == 200, r.text
        out = r.json()
        check_valid(out["messages"])
        assert len(canvas_messages(out["messages"])) == 1, budget
        assert out["messages"][0] == system, budget  # whole, first
        assert request in out["messages"], budget  # whole
        if out["stats"]["over_budget"]:
            assert out["stats"]["fixed_tokens"] + 20 > budget, out["stats"]
        else:
            assert out["estimated_tokens"] <= budget, budget
    for m in msgs:
        if m["role"] == "tool":
            got = read(client, scope, tool_call_id=m["tool_call_id"]).json()
            assert got["content"] == m["content"]

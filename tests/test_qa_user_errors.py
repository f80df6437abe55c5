"""What a new user sees when a request is wrong: the error names the problem exactly (found by
an outside check that followed only the README). One gateway for the module; scopes isolate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx


def test_not_found_and_bad_value_messages_keep_their_closing_quote(shared_gateway, scope):
    with shared_gateway.client() as c:
        gone = c.delete("/memories/m_nope", params={"scope": scope})
        assert gone.status_code == 404
        assert gone.json()["error"] == "No memory with id 'm_nope'"
        patched = c.patch("/memories/m_nope", json={"content": "用户住在上海", "scope": scope})
        assert patched.status_code == 404
        assert patched.json()["error"] == "No memory with id 'm_nope'"
        since = c.get("/memories", params={"scope": scope, "since": "yesterday"})
        assert since.status_code == 422
        assert since.json()["error"].endswith("'yesterday'")
        status = c.get("/memories", params={"scope": scope, "status": "gone"})
        assert status.status_code == 422
        assert status.json()["error"].endswith("'gone'")


def test_forget_with_neither_query_nor_ids_says_so(shared_gateway, scope):
    with shared_gateway.client() as c:
        for body in ({"scope": scope}, {"ids": [], "scope": scope, "dry_run": False}):
            r = c.post("/memories/forget", json=body)
            assert r.status_code == 422
            assert "not both" not in r.json()["error"], body
            assert "query" in r.json()["error"] and "ids" in r.json()["error"]
        both = c.post("/memories/forget", json={"query": "tea", "ids": ["m_1"], "scope": scope})
        assert both.status_code == 422
        assert "not both" in both.json()["error"]


def test_json_sent_without_a_json_content_type_is_named(shared_gateway, scope):
    """curl -d without -H 'Content-Type: application/json' sends form encoding: the error must
    say that the body is not JSON (it said "JSON body must be an object, got bytes")."""
    body = json.dumps(
        {
            "session_key": "s1",
            "scope": scope,
            "user_content": "我喜欢爬山",
            "assistant_content": "好",
        }
    )
    for ctype in ("application/x-www-form-urlencoded", "text/plain"):
        r = httpx.post(
            shared_gateway.base_url + "/capture",
            content=body.encode(),
            headers={**shared_gateway.headers, "Content-Type": ctype},
        )
        assert r.status_code in (415, 422), r.text
        error = r.json()["error"]
        assert "bytes" not in error
        assert "application/json" in error and ctype in error
    with shared_gateway.client() as c:
        found = c.post(
            "/search/conversations", json={"query": "爬山", "scope": scope, "limit": 5}
        ).json()
        assert found["total"] == 0  # nothing was written


def _cli(gw, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_messages_point_at_the_cli(shared_gateway):
    """An offline command refused while the gateway runs names the command that stops it, and
    a refused search prints the gateway's message, not its raw JSON."""
    refused = _cli(shared_gateway, "reindex")
    assert refused.returncode == 3, refused.stderr
    assert "memory-tencentdb stop" in refused.stderr
    empty = _cli(shared_gateway, "search", "")
    assert empty.returncode == 1
    assert "query: String should have at least 1 character" in empty.stderr
    assert '{"error"' not in empty.stderr


def test_a_tool_result_over_a_mebibyte_is_offloaded_not_refused(shared_gateway, scope):
    """Real tool outputs reach 666k characters (reference/offload-hosts.md), over 2 MB in UTF-8
    when they are Chinese: exactly the results offload exists for. /offload/tool-result used
    the 1 MiB limit of the small routes and answered 413, so the host kept them in context."""
    lines = [f"第{i}行：订单 {i} 已处理 / order {i} processed" for i in range(40_000)]
    result = "\n".join(lines)
    assert len(result.encode()) > 1_500_000
    with shared_gateway.client(timeout=120) as c:
        r = c.post(
            "/offload/tool-result",
            json={
                "session_key": "big-log",
                "scope": scope,
                "tool_call_id": "call_big_1",
                "tool_name": "bash",
                "arguments": {"cmd": "cat orders.log"},
                "result": result,
            },
        )
        assert r.status_code == 200, r.text
        assert r.json()["offloaded"] is True
        back = c.post("/offload/read", json={"tool_call_id": "call_big_1", "scope": scope})
        assert back.status_code == 200
        assert back.json()["content"] == result


def test_stop_gives_up_quickly_on_a_frozen_gateway(start_gateway):
    """`memory-tencentdb stop` on a gateway that accepts connections but does not answer
    (SIGSTOP, a hung machine) waited the client's 30 s, then (--force) 40 s more, then said
    "still running (draining)". The shutdown route answers at once when the gateway is alive,
    so a few seconds decide; what is said names the frozen pid."""
    gw = start_gateway()
    os.kill(gw.proc.pid, signal.SIGSTOP)
    try:
        plain = _cli(gw, "stop", timeout=20)
        assert plain.returncode == 1
        assert f"held by pid {gw.proc.pid}" in plain.stderr
        forced = _cli(gw, "stop", "--force", "--drain", "0", timeout=40)
        assert forced.returncode == 1
        assert f"sent SIGTERM to pid {gw.proc.pid}" in forced.stdout
        assert "does not answer" in forced.stderr and "draining" not in forced.stderr
    finally:
        os.kill(gw.proc.pid, signal.SIGCONT)
    assert gw.proc.wait(timeout=60) == 0  # the SIGTERM is handled once it runs: a drain, exit 0

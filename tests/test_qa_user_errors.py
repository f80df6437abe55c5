"""What a new user sees when a request is wrong: the error names the problem exactly (found by
an outside check that followed only the README). One gateway for the module; scopes isolate."""

from __future__ import annotations

import json
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


def _cli(gw, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=120,
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

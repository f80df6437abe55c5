"""Bad input gets a clear 4xx naming the problem, and never disturbs what is stored.

Through the real routes of the gateway app, in process (``app_gateway``); what needs a real
process (a bad configuration stopping ``serve``) is in ``test_gateway_lifecycle.py``.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.inprocess import InProcessGateway

ROUTES = [
    "/capture",
    "/recall",
    "/search/memories",
    "/search/conversations",
    "/session/end",
    "/memories",
]


def _state(c: httpx.Client, scope: str) -> tuple:
    h = c.get("/health").json()["counts"]
    m = c.post("/search/memories", json={"query": "Rust", "scope": scope}).json()["items"]
    v = c.post("/search/conversations", json={"query": "Rust", "scope": scope}).json()["items"]
    return h, [i["id"] for i in m], [i["id"] for i in v]


@pytest.fixture
def seeded(app_gateway: InProcessGateway, scope: str):
    with app_gateway.client() as c:
        c.post(
            "/memories",
            json={
                "content": "用户正在学习 Rust 语言",
                "type": "persona",
                "session_key": "s",
                "scope": scope,
            },
        )
        c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": scope,
                "user_content": "Rust 的所有权好难",
                "assistant_content": "慢慢来",
            },
        )
        # The seeded rows embed in the background; the state compared must not move because
        # the embedder caught up (seen on PostgreSQL: the reply joined the hybrid hits later).
        app_gateway.wait_embedded()
        before = _state(c, scope)
        yield c, before
        assert _state(c, scope) == before


def test_malformed_json_is_400(seeded):
    c, _ = seeded
    for route in ROUTES:
        for raw in (b"{not json", b'{"query": "x",}', b"\xff\xfe", b"[1, 2"):
            r = c.post(route, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 400, (route, raw, r.text)
            assert r.json()["error"].startswith("Invalid JSON body")
        r = c.post(route, content=b"", headers={"content-type": "application/json"})
        assert r.status_code in (400, 422), r.text
        assert "error" in r.json()


@pytest.mark.parametrize(
    "route,body,needle",
    [
        ("/recall", {"session_key": "s"}, "query: Field required"),
        ("/recall", {"query": "hi"}, "session_key: Field required"),
        ("/recall", {"query": 42, "session_key": "s"}, "query: Input should be a valid string"),
        (
            "/recall",
            {"query": "   ", "session_key": "s"},
            "query: String should have at least 1 character",
        ),
        ("/capture", {"session_key": "s", "user_content": "hi"}, "assistant_content"),
        (
            "/capture",
            {"user_content": "a", "assistant_content": "b"},
            "session_key: Field required",
        ),
        (
            "/capture",
            {"session_key": "s", "messages": "nope"},
            "messages: Input should be a valid list",
        ),
        (
            "/capture",
            {"session_key": "s", "messages": [{"content": "x"}]},
            "messages.0.role: Field required",
        ),
        (
            "/search/memories",
            {"query": "x", "limit": "5"},
            "limit: Input should be a valid integer",
        ),
        (
            "/search/memories",
            {"query": "x", "limit": 0},
            "limit: Input should be greater than or equal to 1",
        ),
        ("/search/memories", {"query": "x", "type": "secret"}, "type: Input should be 'persona'"),
        ("/search/conversations", {"limit": 3}, "query: Field required"),
        ("/session/end", {}, "session_key: Field required"),
        (
            "/memories",
            {"content": "x", "type": "fact", "session_key": "s"},
            "type: Input should be",
        ),
        (
            "/memories",
            {"content": "", "type": "persona", "session_key": "s"},
            "content: String should have",
        ),
        (
            "/memories",
            {"content": "x", "type": "persona", "session_key": "s", "priority": 500},
            "priority",
        ),
        ("/recall", "null", "JSON body must be an object"),
        ("/recall", [1, 2], "JSON body must be an object, got list"),
    ],
)
def test_wrong_or_missing_fields_are_422(seeded, route, body, needle):
    c, _ = seeded
    if isinstance(body, str):
        r = c.post(route, content=body.encode(), headers={"content-type": "application/json"})
    else:
        r = c.post(route, json=body)
    assert r.status_code == 422, r.text
    assert needle in r.json()["error"]


def test_oversize_bodies_are_413(seeded):
    c, _ = seeded
    big = "长" * (400 * 1024)  # 1.2 MB of UTF-8, over the 1 MiB default
    r = c.post("/capture", json={"session_key": "s", "user_content": big, "assistant_content": "x"})
    assert r.status_code == 413 and "too large" in r.json()["error"]

    def chunks():  # no Content-Length: the limit still applies while streaming
        for _ in range(300):
            yield b"x" * 4096

    r = c.post("/memories", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_unknown_routes_and_methods(seeded):
    c, _ = seeded
    r = c.post("/nope", json={})
    assert r.status_code == 404 and r.json()["error"] == "Not found: POST /nope"
    r = c.get("/recall")
    assert r.status_code == 405 and "error" in r.json()


def test_openapi_lists_routes(app_gateway: InProcessGateway):
    with app_gateway.client() as c:
        spec = c.get("/openapi.json").json()
    for route in [*ROUTES, "/health", "/seed", "/memories/{memory_id}"]:
        assert route in spec["paths"], route


def test_seed_validates_and_writes_a_separate_dir(app_gateway: InProcessGateway, scope: str):
    with app_gateway.client() as c:
        bad = c.post(
            "/seed",
            json={
                "data": {"sessions": [{"sessionKey": "", "conversations": [[{"role": "user"}]]}]}
            },
        )
        good = c.post(
            "/seed",
            json={
                "data": [
                    {
                        "sessionKey": "imported",
                        "conversations": [
                            [
                                {"role": "user", "content": "我喜欢爬山"},
                                {"role": "assistant", "content": "很好"},
                            ],
                            [
                                {"role": "user", "content": "I also like kayaking"},
                                {"role": "assistant", "content": "Nice"},
                            ],
                        ],
                    }
                ],
                "scope": scope,
            },
        )
    assert bad.status_code == 400
    stages = {e["stage"] for e in bad.json()["validation_errors"]}
    assert stages == {"session", "message"}
    assert good.status_code == 200, good.text
    body = good.json()
    assert (body["sessions_processed"], body["rounds_processed"], body["l0_recorded"]) == (1, 2, 4)
    out = body["output_dir"]
    assert out.startswith(str(app_gateway.data_dir)) and "seed-" in out


def test_not_found_and_bad_value_messages_keep_their_closing_quote(app_gateway, scope):
    with app_gateway.client() as c:
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


def test_forget_with_neither_query_nor_ids_says_so(app_gateway, scope):
    with app_gateway.client() as c:
        for body in ({"scope": scope}, {"ids": [], "scope": scope, "dry_run": False}):
            r = c.post("/memories/forget", json=body)
            assert r.status_code == 422
            assert "not both" not in r.json()["error"], body
            assert "query" in r.json()["error"] and "ids" in r.json()["error"]
        both = c.post("/memories/forget", json={"query": "tea", "ids": ["m_1"], "scope": scope})
        assert both.status_code == 422
        assert "not both" in both.json()["error"]


def test_json_sent_without_a_json_content_type_is_named(app_gateway, scope):
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
    with app_gateway.client() as c:
        for ctype in ("application/x-www-form-urlencoded", "text/plain"):
            r = c.post("/capture", content=body.encode(), headers={"Content-Type": ctype})
            assert r.status_code in (415, 422), r.text
            error = r.json()["error"]
            assert "bytes" not in error
            assert "application/json" in error and ctype in error
        found = c.post(
            "/search/conversations", json={"query": "爬山", "scope": scope, "limit": 5}
        ).json()
        assert found["total"] == 0  # nothing was written


def test_a_tool_result_over_a_mebibyte_is_offloaded_not_refused(app_gateway, scope):
    """Real tool outputs reach 666k characters (reference/offload-hosts.md), over 2 MB in UTF-8
    when they are Chinese: exactly the results offload exists for. /offload/tool-result used
    the 1 MiB limit of the small routes and answered 413, so the host kept them in context."""
    lines = [f"第{i}行：订单 {i} 已处理 / order {i} processed" for i in range(40_000)]
    result = "\n".join(lines)
    assert len(result.encode()) > 1_500_000
    with app_gateway.client(timeout=120) as c:
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

"""Bad input gets a clear 4xx naming the problem, and never disturbs what is stored.

Through the real routes of the gateway app, in process (``app_gateway``); what needs a real
process (a bad configuration stopping ``serve``) is in ``test_gateway_lifecycle.py``.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.inprocess import InProcessGateway

pytestmark = pytest.mark.both_backends  # `make test` runs this suite on PostgreSQL too

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

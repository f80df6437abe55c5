"""Auth and CORS, and the degraded modes: each is visible in /health, none is silent.

Through the gateway's routes in process (``start_app_gateway``), but for the SQLite binding
chosen by the process's environment, on a gateway process."""

from __future__ import annotations

import logging

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY

KEY = "s3cret-token-9f8e7d"


def test_bearer_auth(start_app_gateway, scope: str, caplog):
    caplog.set_level(logging.DEBUG)
    gw = start_app_gateway(env={"TDAI_GATEWAY_API_KEY": KEY, **KEYWORD_ONLY})
    body = {"query": "x", "session_key": "s", "scope": scope}
    with gw.client(token="") as c:
        assert c.get("/health").status_code == 200  # open, for supervisors and probes
        r = c.post("/recall", json=body)
        assert r.status_code == 401 and r.json()["error"] == "Unauthorized: missing Bearer token"
        for header in ("Bearer wrong", "Bearer  x", "Basic " + KEY, "bearer " + KEY, KEY):
            r = c.post("/recall", json=body, headers={"Authorization": header})
            assert r.status_code == 401, header
        r = c.post("/nope", json={})
        assert r.status_code == 401  # auth before routing: no route list leaks
        r = c.get("/openapi.json")
        assert r.status_code == 401
    with gw.client(token=KEY) as c:
        assert c.post("/recall", json=body).status_code == 200
        assert (
            c.post(
                "/memories",
                json={"content": "ok", "type": "persona", "session_key": "s", "scope": scope},
            ).status_code
            == 201
        )
    assert caplog.records and KEY not in caplog.text  # no secrets in logs


def test_cors_allow_list(start_app_gateway):
    gw = start_app_gateway(env={"TDAI_CORS_ORIGINS": "https://app.example.com", **KEYWORD_ONLY})
    with gw.client(token="") as c:
        ok = c.options("/recall", headers={"Origin": "https://app.example.com"})
        assert ok.status_code == 204
        assert ok.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "Authorization" in ok.headers["access-control-allow-headers"]
        bad = c.options("/recall", headers={"Origin": "https://evil.example.com"})
        assert bad.status_code == 403 and "access-control-allow-origin" not in bad.headers
        r = c.get("/health", headers={"Origin": "https://app.example.com"})
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
        r = c.get("/health", headers={"Origin": "https://evil.example.com"})
        assert "access-control-allow-origin" not in r.headers and r.headers["vary"] == "Origin"


def test_no_embedding_is_keyword_only_and_visible(start_app_gateway, scope: str):
    gw = start_app_gateway(env=KEYWORD_ONLY)
    with gw.client() as c:
        health = c.get("/health").json()
        c.post(
            "/memories",
            json={
                "content": "项目数据库必须是 PostgreSQL",
                "type": "instruction",
                "session_key": "s",
                "scope": scope,
            },
        )
        body = c.post(
            "/recall", json={"query": "PostgreSQL 怎么配置", "session_key": "s", "scope": scope}
        ).json()
    assert health["embedding"]["state"] == "disabled" and health["vector_index"]["l1"] == "none"
    assert health["stores"]["embeddingService"] is False
    assert body["strategy"] == "keyword" and body["memory_count"] == 1


def test_without_sqlite_vec_vectors_are_searched_with_numpy(start_gateway, scope: str):
    gw = start_gateway(env={"TDAI_SQLITE_BINDING": "novec"})
    with gw.client() as c:
        health = c.get("/health").json()
        c.post(
            "/memories",
            json={
                "content": "用户完全不能吃辣",
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
                "user_content": "周末想去海边看日出",
                "assistant_content": "好主意",
            },
        )
        gw.wait_embedded()
        body = c.post(
            "/recall", json={"query": "推荐几道川菜", "session_key": "s", "scope": scope}
        ).json()
        conv = c.post(
            "/search/conversations", json={"query": "sunrise by the ocean", "scope": scope}
        ).json()
    assert health["status"] == "degraded"
    assert any("sqlite-vec unavailable" in d for d in health["degraded"])
    assert health["vector_index"] == {"l1": "numpy", "l0": "numpy"}
    assert health["sqlite"]["binding"] == "sqlite3" and health["sqlite"]["sqlite_vec"] is None
    assert body["strategy"] in ("embedding", "hybrid") and body["memory_count"] == 1
    assert conv["items"] and conv["items"][0]["content"] == "周末想去海边看日出"
    assert "sqlite-vec unavailable" in gw.log()


def test_remote_embeddings_and_their_failure(start_app_gateway, scope: str):
    with FakeLLM() as fake:
        gw = start_app_gateway(env={**fake.embedding_env(), "TDAI_EMBEDDING_API_KEY": "emb-key"})
        with gw.client() as c:
            health = c.get("/health").json()
            c.post(
                "/memories",
                json={
                    "content": "The user's favourite colour is teal",
                    "type": "persona",
                    "session_key": "s",
                    "scope": scope,
                },
            )
            body = c.post(
                "/recall", json={"query": "favourite colour", "session_key": "s", "scope": scope}
            ).json()
        emb_requests = [r for r in fake.requests if r["_path"].endswith("/embeddings")]
        assert emb_requests and emb_requests[0]["dimensions"] == 32
        assert emb_requests[0]["_headers"]["authorization"] == "Bearer emb-key"
        assert health["embedding"]["state"] == "ready"
        assert body["strategy"] == "hybrid" and body["memory_count"] == 1
        # The embedding service fails now: recall of new words degrades to keyword, and says
        # so; words already embedded keep their vector (the gateway's query cache).
        fake.embedding_failure = 503
        with gw.client() as c:
            cached = c.post(
                "/recall", json={"query": "favourite colour", "session_key": "s", "scope": scope}
            ).json()
            body = c.post(
                "/recall",
                json={"query": "favourite colour again", "session_key": "s", "scope": scope},
            ).json()
            c.post(
                "/capture",
                json={
                    "session_key": "s",
                    "scope": scope,
                    "user_content": "teal again",
                    "assistant_content": "ok",
                },
            )
            import time

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                health = c.get("/health").json()
                if any("background embedding" in d for d in health["degraded"]):
                    break
                time.sleep(0.2)
        assert cached["strategy"] == "hybrid" and cached["memory_count"] == 1
        assert body["strategy"] == "keyword" and body["memory_count"] == 1
        assert health["status"] == "degraded"
        assert any("query embedding failing" in d for d in health["degraded"])
        assert any("background embedding failing" in d for d in health["degraded"])

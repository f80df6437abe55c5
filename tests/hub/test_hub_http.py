"""The hub's door over plain HTTP (no browser): one-time links, the session cookie, CSRF, the Host
allow-list, the page's files, and a revoked key ending its sessions."""

from __future__ import annotations

import json
import re
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx

from tests.hub.conftest import KEYS, KEYS_FILE

STATIC = Path(__file__).resolve().parents[2] / "memory_tencentdb" / "hub" / "static"


def _link_token(gw: Any, key: str | None = None) -> str:
    with gw.client(token=key) as c:
        r = c.post("/hub/api/login-link")
    assert r.status_code == 200, r.text
    return r.json()["url"].split("#login=", 1)[1]


def _session(gw: Any, key: str | None = None) -> tuple[httpx.Client, str]:
    """A cookie-only client (no Authorization header), logged in by a link, and its CSRF token."""
    c = httpx.Client(base_url=gw.base_url, timeout=30)
    r = c.post("/hub/api/login", json={"token": _link_token(gw, key)})
    assert r.status_code == 200, r.text
    return c, r.json()["csrf"]


def test_login_link_works_once_and_sets_a_strict_httponly_cookie(hub_gateway: dict) -> None:
    gw = hub_gateway["gw"]
    token = _link_token(gw)
    with httpx.Client(base_url=gw.base_url) as c:
        r = c.post("/hub/api/login", json={"token": token})
        assert r.status_code == 200 and r.json()["principal"] == "owner"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert re.match(rf"tdai_hub_{gw.port}=", cookie)
        assert c.get("/hub/api/me").json()["csrf"] == r.json()["csrf"]
        again = c.post("/hub/api/login", json={"token": token})
        assert again.status_code == 401 and "used or expired" in again.json()["error"]
    with httpx.Client(base_url=gw.base_url) as c:
        assert c.post("/hub/api/login", json={"key": "not-a-key-0123456789"}).status_code == 401
        assert c.post("/hub/api/login", json={}).status_code == 422
        assert c.post("/hub/api/login", content=b"[1]").status_code == 400
        assert c.get("/hub/api/me").status_code == 401  # no cookie, no key


def test_a_browser_session_cannot_mint_login_links(hub_gateway: dict) -> None:
    c, csrf = _session(hub_gateway["gw"])
    with closing(c):
        r = c.post("/hub/api/login-link", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 403


def test_every_request_but_get_needs_the_csrf_token_and_our_origin(hub_gateway: dict) -> None:
    gw = hub_gateway["gw"]
    c, csrf = _session(gw)
    body = {"query": "咖啡", "scope": "alice"}
    with closing(c):
        assert c.post("/hub/api/search", json=body).status_code == 403
        assert (
            c.post("/hub/api/search", json=body, headers={"X-CSRF-Token": "x"}).status_code == 403
        )
        ok = c.post("/hub/api/search", json=body, headers={"X-CSRF-Token": csrf})
        assert ok.status_code == 200 and ok.json()["items"]
        cross = c.post(
            "/hub/api/search",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": "http://localhost:3000"},
        )
        assert cross.status_code == 403 and "cross-origin" in cross.json()["error"]
        same = c.post(
            "/hub/api/search",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": f"http://127.0.0.1:{gw.port}"},
        )
        assert same.status_code == 200
        # Logging out ends the session: the cookie no longer opens anything.
        assert c.post("/hub/api/logout", headers={"X-CSRF-Token": csrf}).status_code == 200
    with httpx.Client(base_url=gw.base_url, cookies=c.cookies) as again:
        assert again.get("/hub/api/me").status_code == 401


def test_the_page_obeys_the_host_allow_list_and_loads_nothing_from_elsewhere(
    hub_gateway: dict,
) -> None:
    gw = hub_gateway["gw"]
    with httpx.Client(base_url=gw.base_url) as c:
        page = c.get("/hub/")
        assert page.status_code == 200
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert c.get("/hub/", headers={"Host": "evil.example"}).status_code == 403
        evil = c.post("/hub/api/login", json={"key": "x"}, headers={"Host": "evil.example"})
        assert evil.status_code == 403
        assert c.get("/hub/static/%2e%2e/gate.py").status_code == 404
        assert c.get("/hub/static/vendor/mermaid.min.js").status_code == 200
    assert (STATIC / "vendor" / "mermaid.LICENSE").read_text().startswith("The MIT License")
    for name in ("index.html", "hub.js", "hub.css"):
        text = (STATIC / name).read_text("utf-8")
        external = [u for u in re.findall(r"https?://[^\s\"'`)]+", text) if "w3.org" not in u]
        assert not external, (name, external)


def test_a_revoked_key_ends_its_sessions(hub_gateway: dict) -> None:
    gw = hub_gateway["gw"]
    c, _ = _session(gw, KEYS["bob"])
    keys = gw.data_dir / "keys.json"
    with closing(c):
        assert c.get("/hub/api/me").json()["principal"] == "bob"
        without_bob = json.loads(json.dumps(KEYS_FILE))
        del without_bob["principals"]["bob"]
        without_bob["scopes"]["team:ops"]["readers"] = []
        try:
            keys.write_text(json.dumps(without_bob), "utf-8")
            deadline = time.monotonic() + 5
            while c.get("/hub/api/me").status_code != 401:
                assert time.monotonic() < deadline, "bob's session outlived his key"
                time.sleep(0.2)
        finally:
            keys.write_text(json.dumps(KEYS_FILE), "utf-8")
    deadline = time.monotonic() + 5
    with gw.client(token=KEYS["bob"]) as bob:
        while bob.get("/scopes").status_code != 200:  # later tests need bob back
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_bad_input_to_the_hub_routes_is_a_4xx_naming_it(hub_gateway: dict) -> None:
    with hub_gateway["gw"].client() as c:
        cases = [
            (c.get("/hub/api/memories", params={"scope": "alice", "type": "bogus"}), 422, "type"),
            (c.get("/hub/api/memories", params={"scope": "alice", "cursor": "abc"}), 422, "cursor"),
            (c.get("/hub/api/memories", params={"min_priority": 500}), 422, "min_priority"),
            (c.get("/hub/api/scene", params={"scope": "alice", "filename": "x.md"}), 404, "x.md"),
            (
                c.get("/hub/api/conversations/messages", params={"scope": "alice"}),
                422,
                "session_key",
            ),
            (c.post("/hub/api/search", json={"scope": "alice"}), 422, "query"),
            (c.post("/hub/api/search", json={"query": "咖啡", "since": "someday"}), 422, "since"),
            (c.post("/hub/api/search", json={"query": "x", "kind": "files"}), 422, "kind"),
            (c.post("/hub/api/recall-explain", json={"query": " "}), 422, "query"),
        ]
        for r, status, named in cases:
            assert r.status_code == status and named in r.json()["error"], (r.url, r.text)

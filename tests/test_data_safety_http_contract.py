"""The HTTP contract's carry-overs (issue 22), against one real gateway:

- ``messages[].id`` that is not text or an integer (``false``, ``true``, ``1.5``, a list) on
  ``/capture`` is a 422 naming the field, and nothing is recorded;
- a 405 carries ``Allow`` with the methods the path does answer;
- ``/openapi.json`` lists every status a route answers: the test walks every documented route,
  provokes each error it can (no key, a foreign Host, a bad or huge Content-Length, a body that
  is not JSON, a form body, a body of the wrong shape, an over-long parameter, an unknown id)
  and checks that every status it got is in that route's ``responses``."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = GatewayProcess(tmp_path_factory.mktemp("contract") / "data", env=KEYWORD_ONLY).start()
    yield g
    g.stop()


def _l0(gw: GatewayProcess) -> int:
    return httpx.get(gw.base_url + "/health", timeout=10).json()["counts"]["l0_messages"]


@pytest.mark.parametrize("bad", [False, True, 1.5, [], {"x": 1}], ids=repr)
def test_a_message_id_that_is_not_text_or_integer_is_refused(gw, bad):
    before = _l0(gw)
    with gw.client() as c:
        r = c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": "ids",
                "messages": [
                    {"role": "user", "content": "我喜欢喝茶", "id": "u1"},
                    {"role": "assistant", "content": "OK", "id": bad},
                ],
            },
        )
    assert r.status_code == 422, r.text
    assert "messages.1.id" in r.json()["error"], r.text
    assert _l0(gw) == before


def test_text_and_integer_message_ids_are_accepted(gw):
    with gw.client() as c:
        r = c.post(
            "/capture",
            json={
                "session_key": "s",
                "scope": "ids",
                "messages": [
                    {"role": "user", "content": "I like green tea", "id": "m-1"},
                    {"role": "assistant", "content": "好的", "id": 42},
                ],
            },
        )
    assert r.status_code == 200 and r.json()["l0_recorded"] == 2, r.text


def _concrete(path: str) -> str:
    return path.replace("{memory_id}", "m_does_not_exist").replace("{", "").replace("}", "")


def test_405_names_the_allowed_methods(gw):
    with gw.client() as c:
        spec = c.get("/openapi.json").json()
        for path, ops in spec["paths"].items():
            r = c.request("PUT", _concrete(path), json={})
            assert r.status_code == 405, (path, r.status_code)
            allowed = {m.strip() for m in r.headers.get("allow", "").split(",")}
            assert {m.upper() for m in ops} <= allowed, (path, r.headers.get("allow"))


def _raw(gw: GatewayProcess, method: str, path: str, headers: dict[str, str]) -> int:
    """One request with headers as given (an HTTP client would fix a bad Content-Length)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{gw.port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_openapi_lists_every_status_each_route_answers(gw):
    with gw.client() as c:
        spec = c.get("/openapi.json").json()
    auth = gw.headers
    checked = 0
    for path, ops in spec["paths"].items():
        url = _concrete(path)
        for method, op in ops.items():
            method = method.upper()
            documented = set(op["responses"])
            got: dict[int, str] = {}
            with httpx.Client(base_url=gw.base_url, timeout=30) as c:
                got[c.request(method, url).status_code] = "no key"
                r = c.request(method, url, headers={**auth, "Host": "evil.example"})
                got[r.status_code] = "foreign Host"
                if "requestBody" in op:
                    for what, kw in (
                        ("not JSON", {"content": b"{", "headers": {"Content-Type": "application/json"}}),
                        ("form body", {"data": {"a": "b"}}),
                        ("a list body", {"json": []}),
                        ("wrong field types", {"json": {"scope": 5, "session_key": 5, "query": 5, "drain_s": "x", "cancel": "x"}}),
                    ):  # fmt: skip
                        r = c.request(method, url, headers={**auth, **kw.pop("headers", {})}, **kw)
                        got[r.status_code] = what
                params = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"]
                if params:
                    r = c.request(method, url, headers=auth, params={p: "x" * 600 for p in params})
                    got[r.status_code] = "over-long parameters"
                if "{" in path and method in ("GET", "DELETE"):
                    r = c.request(method, url, headers=auth, params={"scope": "nobody"})
                    got[r.status_code] = "unknown id"
                if "{" in path and method == "PATCH":
                    r = c.request(method, url, headers=auth, json={"content": "新的内容"})
                    got[r.status_code] = "unknown id"
            got[_raw(gw, method, url, {**auth, "Content-Length": "abc"})] = "bad Content-Length"
            got[_raw(gw, method, url, {**auth, "Content-Length": str(10**9)})] = "huge body"
            missing = {code: why for code, why in got.items() if str(code) not in documented}
            assert not missing, (method, path, missing, sorted(documented))
            if path != "/health":
                assert "401" in documented, (method, path)
            checked += 1
    assert checked >= 20  # every route of the gateway, offload and operations included

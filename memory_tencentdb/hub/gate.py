"""The hub's door in front of the gateway's guard (an ASGI middleware around it).

- ``/hub/`` and ``/hub/static/...``: the page and its files, served here after the same Host
  allow-list check as every route (they hold no data; everything the page shows is fetched
  through the API after login). A strict Content-Security-Policy: nothing but our own origin.
- ``POST /hub/api/login``: trades a one-time link token (or a key pasted in the form) for a
  session cookie (HttpOnly, SameSite=Strict) and answers the CSRF token.
- ``POST /hub/api/logout``: ends the session.
- Anything else with the session cookie and no ``Authorization`` header: the cookie becomes
  ``Authorization: Bearer hub-session.<id>`` for the guard, which then applies auth, the
  principal's permissions and the body limit exactly as for a key. A request that is not GET or
  HEAD must carry the session's CSRF token in ``X-CSRF-Token`` (and, when the browser sends an
  ``Origin``, it must be this gateway's), else 403 before anything runs.
"""

from __future__ import annotations

import json
import logging
import mimetypes
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

from memory_tencentdb.gateway.security import GatewayGuard, host_name
from memory_tencentdb.hub.sessions import SESSION_PREFIX, SESSION_TTL_S, HubSessions, key_digest

log = logging.getLogger("memory_tencentdb.hub")

STATIC = Path(__file__).parent / "static"
LOGIN_BODY_LIMIT = 4096
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    " img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none';"
    " base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def _response(
    status: int, body: bytes, ctype: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> list[dict[str, Any]]:
    headers = [
        (b"content-type", ctype),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        *(extra or []),
    ]
    return [
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]


def _json(status: int, data: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None):
    return _response(status, json.dumps(data).encode(), b"application/json", extra)


class HubGate:
    def __init__(self, guard: GatewayGuard, sessions: HubSessions) -> None:
        self.guard = guard
        self.sessions = sessions
        self._files: dict[str, tuple[bytes, bytes]] = {}

    # ------------------------------------------------------------------ helpers

    def _static(self, rel: str) -> tuple[bytes, bytes] | None:
        """``(body, content type)`` of a file under ``static/``; None outside it or missing."""
        cached = self._files.get(rel)
        if cached is not None:
            return cached
        path = (STATIC / rel).resolve()
        if not path.is_relative_to(STATIC.resolve()) or not path.is_file():
            return None
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        found = (path.read_bytes(), ctype.encode())
        self._files[rel] = found
        return found

    def _cookie(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        for k, v in headers:
            if k == b"cookie":
                jar = SimpleCookie()
                try:
                    jar.load(v.decode("latin-1"))
                except Exception:  # noqa: BLE001 - a malformed cookie header is no session
                    continue
                morsel = jar.get(self.sessions.cookie_name)
                if morsel is not None and morsel.value:
                    return morsel.value
        return None

    @staticmethod
    def _cross_origin(headers: dict[bytes, bytes]) -> bool:
        """An ``Origin`` that is not this gateway's own address (the page's requests carry
        ours; a page elsewhere, even on another local port, carries its own)."""
        origin = headers.get(b"origin")
        if origin is None:
            return False
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        text = origin.decode("latin-1").strip().lower()
        return text in ("null", "") or text.split("://", 1)[-1] != host

    async def _read_body(self, receive: Any, limit: int) -> bytes | None:
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            if len(body) > limit:
                return None
            if not message.get("more_body"):
                return body

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/"):
            await self.guard(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        raw_headers = list(scope.get("headers") or [])
        headers = dict(raw_headers)

        async def answer(messages: list[dict[str, Any]]) -> None:
            for m in messages:
                await send(m)

        is_page = path in ("/hub", "/hub/") or path.startswith("/hub/static/")
        is_login = path in ("/hub/api/login", "/hub/api/logout")
        if is_page or is_login:
            problem = self.guard._host_problem(headers.get(b"host"))
            if problem:
                log.warning("hub: refused a request for Host %r", headers.get(b"host", b"")[:200])
                await answer(_json(403, {"error": problem}))
                return
        if is_page:
            await self._page(path, method, answer)
            return
        if is_login:
            await self._login(path, method, headers, raw_headers, receive, answer)
            return
        sid = None if b"authorization" in headers else self._cookie(raw_headers)
        if sid is not None:
            session = self.sessions.get(sid)
            if session is not None and method not in SAFE_METHODS:
                sent = headers.get(b"x-csrf-token", b"").decode("latin-1")
                if self._cross_origin(headers):
                    await answer(_json(403, {"error": "Forbidden: cross-origin request"}))
                    return
                if not self.sessions.csrf_ok(session, sent):
                    await answer(
                        _json(
                            403,
                            {"error": "Forbidden: missing or wrong CSRF token (X-CSRF-Token)"},
                        )
                    )
                    return
            token = SESSION_PREFIX + sid.encode("ascii", "replace")
            scope = {
                **scope,
                "headers": [
                    *(h for h in raw_headers if h[0] != b"cookie"),
                    (b"authorization", b"Bearer " + token),
                ],
            }
        await self.guard(scope, receive, send)

    async def _page(self, path: str, method: str, answer: Any) -> None:
        if method not in ("GET", "HEAD"):
            await answer(_json(405, {"error": f"Method not allowed: {method} {path}"}))
            return
        if path == "/hub":
            await answer(_response(308, b"", b"text/plain", [(b"location", b"/hub/")]))
            return
        rel = "index.html" if path == "/hub/" else path[len("/hub/static/") :]
        found = self._static(rel)
        if found is None:
            await answer(_json(404, {"error": f"Not found: GET {path}"}))
            return
        body, ctype = found
        cache = b"no-store" if rel == "index.html" else b"max-age=3600"
        await answer(
            _response(
                200,
                body if method == "GET" else b"",
                ctype,
                [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", cache),
                ],
            )
        )

    def _set_cookie(self, value: str, max_age: int) -> tuple[bytes, bytes]:
        return (
            b"set-cookie",
            (
                f"{self.sessions.cookie_name}={value}; Path=/; Max-Age={max_age};"
                " HttpOnly; SameSite=Strict"
            ).encode(),
        )

    async def _login(
        self,
        path: str,
        method: str,
        headers: dict[bytes, bytes],
        raw_headers: list[tuple[bytes, bytes]],
        receive: Any,
        answer: Any,
    ) -> None:
        if method != "POST":
            await answer(_json(405, {"error": f"Method not allowed: {method} {path}"}))
            return
        if self._cross_origin(headers):
            await answer(_json(403, {"error": "Forbidden: cross-origin request"}))
            return
        if path == "/hub/api/logout":
            sid = self._cookie(raw_headers)
            session = self.sessions.get(sid) if sid else None
            if sid and session is not None:
                sent = headers.get(b"x-csrf-token", b"").decode("latin-1")
                if not self.sessions.csrf_ok(session, sent):
                    await answer(_json(403, {"error": "Forbidden: missing or wrong CSRF token"}))
                    return
                self.sessions.close(sid)
            await answer(_json(200, {"logged_out": True}, [self._set_cookie("", 0)]))
            return
        body = await self._read_body(receive, LOGIN_BODY_LIMIT)
        try:
            data = json.loads(body or b"")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            await answer(_json(400, {"error": "body must be a JSON object {token} or {key}"}))
            return
        token, key = data.get("token"), data.get("key")
        if not (isinstance(token, str) and token) and not (isinstance(key, str) and key):
            await answer(_json(422, {"error": "give token (from a login link) or key"}))
            return
        policy = self.sessions.policy
        if isinstance(token, str) and token:
            digest = self.sessions.redeem(token.strip())
            if digest is None:
                await answer(
                    _json(
                        401,
                        {
                            "error": "Unauthorized: this login link was used or expired; run"
                            " `memory-tencentdb hub` for a new one"
                        },
                    )
                )
                return
        else:
            digest = key_digest(str(key).strip())  # a non-empty str: checked above
        if policy.enforced:
            who = policy.current().by_digest.get(digest)
            if who is None:
                await answer(_json(401, {"error": "Unauthorized: invalid key or link"}))
                return
            name, owner = who.name, who.owner
        else:
            name, owner = "owner", True
        sid, session = self.sessions.open(digest)
        await answer(
            _json(
                200,
                {"principal": name, "owner": owner, "csrf": session.csrf},
                [self._set_cookie(sid, int(SESSION_TTL_S))],
            )
        )


def cookie_name(port: int) -> str:
    """One cookie per port: cookies ignore ports, and two gateways on one machine each keep
    their own session."""
    return f"tdai_hub_{int(port)}"


__all__ = ["HubGate", "cookie_name", "host_name"]

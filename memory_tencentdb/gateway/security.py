"""Host allow-list, auth, CORS and the body-size limit, as one small ASGI middleware.

Order per request: the ``Host`` header first (a name that is not ours is a DNS-rebinding page
in a browser: 403 for every route, ``/health`` included; IP literals cannot be rebound and are
always accepted), then CORS headers are decided (so a rejected request still tells a browser
why), ``OPTIONS`` preflights answer 204 without auth, ``GET /health`` is open, everything else
needs exactly one ``Authorization: Bearer <key>`` header (also unknown paths: auth before
routing, so the route list does not leak); the key names the caller's principal
(``gateway/access.py``), left in the ASGI scope for the routes' permission checks. Bodies over the limit are refused with 413 before
they are read. A fault in a route answers 500 and keeps the connection: an exception is never
let through to the server, which would drop a keep-alive connection the client pools.

CORS is decided here rather than by Starlette's ``CORSMiddleware`` because the answers differ
where clients see them: that middleware answers an allowed preflight 200 (ours 204), a refused
origin with a plain-text 400 (ours a 403 ``{"error"}`` naming the origin), and passes an
``OPTIONS`` without ``Access-Control-Request-Method`` on to the routes, where it would need the
key (ours answers 204 before auth); ``test_cors_allow_list`` holds these. The guard's own
refusals (401, 403, 413) carry the CORS headers too, so a browser can read why.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import Any, Protocol

from memory_tencentdb.gateway.access import SCOPE_KEY, LivePolicy, Principal

log = logging.getLogger("memory_tencentdb.gateway")

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# Host names accepted without configuration (``server.allowedHosts`` adds more).
DEFAULT_ALLOWED_HOSTS = ("localhost",)


def host_name(value: str) -> str:
    """The name part of a ``Host`` header: port, IPv6 brackets and a final dot removed."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.rsplit(":", 1)[0]
    return value.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _json(status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> list[Any]:
    data = json.dumps(body).encode()
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        },
        {"type": "http.response.body", "body": data},
    ]


class TokenPolicy(Protocol):
    """What the guard asks of a policy: ``LivePolicy``, or the hub's session-aware wrapper."""

    @property
    def enforced(self) -> bool: ...

    def identify(self, token: bytes) -> Principal | None: ...


class GatewayGuard:
    def __init__(self, app: Any, policy: LivePolicy, cors_origins: list[str], max_body: int):
        self.app = app
        self.policy: TokenPolicy = policy
        self.cors = list(cors_origins)
        self.max_body = max_body
        # Routes with their own limit (``/offload/assemble`` carries a whole context window).
        self.path_limits: dict[str, int] = {}
        # Names a ``Host`` header may carry; "*" accepts any. Entries starting with "." match
        # any subdomain. IP literals are always accepted.
        self.allowed_hosts: set[str] = set(DEFAULT_ALLOWED_HOSTS)

    def _cors_headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        if not self.cors:
            return []
        allow = [
            (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", b"Content-Type, Authorization"),
        ]
        if "*" in self.cors:
            return [(b"access-control-allow-origin", b"*"), *allow]
        if origin and origin in self.cors:
            return [(b"access-control-allow-origin", origin.encode()), *allow, (b"vary", b"Origin")]
        return [(b"vary", b"Origin")]

    def _host_problem(self, raw: bytes | None) -> str | None:
        """``None`` when the ``Host`` header names us, else the 403 message."""
        if raw is None or "*" in self.allowed_hosts:
            return None  # no Host at all: not a browser (every browser sends one)
        name = host_name(raw.decode("latin-1"))
        if _is_ip(name) or name in self.allowed_hosts:
            return None
        if any(h.startswith(".") and name.endswith(h) for h in self.allowed_hosts):
            return None
        shown = raw.decode("latin-1")[:200]
        return (
            f"Host not allowed: {shown!r} (a page reaching this gateway by DNS rebinding?); add"
            " the name to server.allowedHosts (TDAI_GATEWAY_ALLOWED_HOSTS) if it is yours"
        )

    def _authorized(self, raw_headers: list[tuple[bytes, bytes]]) -> Principal | str | None:
        """The caller's principal, ``None`` with auth off, else the 401 message. Exactly one
        header, exactly ``Bearer <key>``: a second header or whitespace inside the value is a
        client bug or a smuggling attempt, never something to guess about. Whitespace around
        the value is not part of it (RFC 9110 section 5.5): h11 and uvicorn >= 0.55 strip it
        before we see the header, older uvicorn with httptools did not, so it is stripped here
        too and the answer does not depend on the server's version."""
        if not self.policy.enforced:
            return None
        values = [v for k, v in raw_headers if k.lower() == b"authorization"]
        if len(values) > 1:
            return "Unauthorized: more than one Authorization header"
        raw = values[0].strip(b" \t") if values else b""
        if not raw:
            return "Unauthorized: missing Bearer token"
        if not raw.startswith(b"Bearer "):
            return "Unauthorized: the header must be exactly 'Authorization: Bearer <key>'"
        token = raw[len(b"Bearer ") :]
        who = self.policy.identify(token) if token else None
        if who is None:
            return "Unauthorized: invalid token"
        return who

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_headers = list(scope.get("headers") or [])
        headers = dict(raw_headers)
        bad_host = self._host_problem(headers.get(b"host"))
        if bad_host:
            log.warning("refused a request for Host %r", headers.get(b"host", b"")[:200])
            for m in _json(403, {"error": bad_host}, []):
                await send(m)
            return
        origin = headers.get(b"origin", b"").decode("latin-1") or None
        cors = self._cors_headers(origin)
        method, path = scope["method"], scope["path"]
        max_body = self.path_limits.get(path, self.max_body)

        async def send_all(messages: list[Any]) -> None:
            for m in messages:
                await send(m)

        if method == "OPTIONS":
            if (
                self.cors
                and origin
                and not any(h[0] == b"access-control-allow-origin" for h in cors)
            ):
                await send_all(_json(403, {"error": f"Origin not allowed: {origin}"}, cors))
                return
            await send({"type": "http.response.start", "status": 204, "headers": cors})
            await send({"type": "http.response.body", "body": b""})
            return
        if not (method == "GET" and path == "/health"):
            who = self._authorized(raw_headers)
            if isinstance(who, str):
                await send_all(_json(401, {"error": who}, cors))
                return
            if who is not None:
                scope = {**scope, SCOPE_KEY: who}
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > max_body
            except ValueError:
                await send_all(_json(400, {"error": "Invalid Content-Length header"}, cors))
                return
            if too_big:
                await send_all(
                    _json(
                        413,
                        {"error": f"Request body too large: {int(length)} bytes, limit {max_body}"},
                        cors,
                    )
                )
                return

        received = 0
        started = False
        refused = False

        async def limited_receive() -> Any:
            # A streamed body without Content-Length: count as it arrives, answer 413 ourselves
            # the moment it passes the limit, and tell the app the client went away.
            nonlocal received, refused, started
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > max_body:
                    refused = True
                    if not started:
                        started = True
                        await send_all(
                            _json(
                                413,
                                {"error": f"Request body too large: limit {max_body} bytes"},
                                cors,
                            )
                        )
                    return {"type": "http.disconnect"}
            return message

        async def send_with_cors(message: Any) -> None:
            nonlocal started
            if refused:
                return  # the 413 already went out; drop whatever the app says after it
            if message["type"] == "http.response.start":
                started = True
                if cors:
                    message = {**message, "headers": [*message.get("headers", []), *cors]}
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_cors)
        except Exception:
            # FastAPI's error handler has already logged and answered the 500 before it
            # re-raises; letting it reach the server would close the keep-alive connection.
            if refused:
                return
            if not started:
                log.exception("internal error on %s %s", method, path)
                await send_all(_json(500, {"error": "Internal error"}, cors))


def log_posture(host: str, api_key: str | None, cors: list[str], mode: str = "") -> None:
    """One line about exposure at startup, louder when it is risky."""
    exposed = host not in LOOPBACK
    if exposed and not api_key:
        log.warning(
            "SECURITY: listening on %s without an API key: anyone who can reach this port can read"
            " and write memories. Set TDAI_GATEWAY_API_KEY or bind to 127.0.0.1.",
            host,
        )
    elif not api_key:
        log.warning(
            "security: auth off (server.auth: off); any local process can read and write"
            " memories on %s",
            host,
        )
    elif mode == "key-file":
        log.info("security: Bearer auth on with the data directory's gateway.key; on %s", host)
    else:
        log.info("security: Bearer auth on; listening on %s", host)
    if "*" in cors:
        log.warning("security: CORS allows any origin ('*')")

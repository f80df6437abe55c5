"""Auth, CORS and the body-size limit, as one small ASGI middleware.

Order per request: CORS headers are decided first (so a rejected request still tells a browser
why), ``OPTIONS`` preflights answer 204 without auth, ``GET /health`` is open, everything else
needs the Bearer key when one is configured (also unknown paths: auth before routing, so the
route list does not leak). Bodies over the limit are refused with 413 before they are read.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

log = logging.getLogger("memory_tencentdb.gateway")

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


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


class GatewayGuard:
    def __init__(self, app: Any, api_key: str | None, cors_origins: list[str], max_body: int):
        self.app = app
        self.api_key = (api_key or "").encode() or None
        self.cors = list(cors_origins)
        self.max_body = max_body
        # Routes with their own limit (``/offload/assemble`` carries a whole context window).
        self.path_limits: dict[str, int] = {}

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

    def _authorized(self, headers: dict[bytes, bytes]) -> str | None:
        """``None`` when allowed, else the 401 message."""
        if self.api_key is None:
            return None
        raw = headers.get(b"authorization", b"")
        if not raw.startswith(b"Bearer "):
            return "Unauthorized: missing Bearer token"
        token = raw[len(b"Bearer ") :].strip()
        if not token or not hmac.compare_digest(token, self.api_key):
            return "Unauthorized: invalid token"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
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
            problem = self._authorized(headers)
            if problem:
                await send_all(_json(401, {"error": problem}, cors))
                return
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
                        {
                            "error": f"Request body too large: {int(length)} bytes, limit {max_body}"
                        },
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
            if not refused:
                raise


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

"""HTTP client for the memory-tencentdb gateway (httpx only, see docs/http-api.md).

Why a thin class: every call must pass the circuit breaker and carry its own timeout, and the
provider must be able to tell "the gateway is unavailable" (retry later, count towards the
breaker) from "the gateway rejected this request" (a 4xx: do not retry, the gateway is fine).
"""

from __future__ import annotations

from typing import Any

import httpx

from .breaker import CircuitBreaker

DEFAULT_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 0.5


class GatewayError(Exception):
    """Base class of everything this client raises."""


class GatewayUnavailable(GatewayError):
    """Breaker open, connection refused, timeout or a 5xx: worth retrying later."""


class GatewayRejected(GatewayError):
    """The gateway answered 4xx: the request itself is wrong; retrying will not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class GatewayClient:
    """One pooled connection set per gateway; safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        breaker: CircuitBreaker | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.breaker = breaker or CircuitBreaker()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # trust_env=False: an HTTP(S)_PROXY in the user's shell must never capture loopback calls.
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=4),
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    # -- raw ---------------------------------------------------------------------------------

    def health(self, timeout_s: float = 1.0) -> dict[str, Any] | None:
        """GET /health without the breaker (the supervisor's liveness probe); None if down."""
        try:
            r = self._http.get("/health", timeout=_timeout(timeout_s))
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        try:
            body = r.json()
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def post(self, path: str, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        """POST through the breaker; returns the decoded JSON answer."""
        if not self.breaker.allow():
            raise GatewayUnavailable("circuit breaker open")
        try:
            r = self._http.post(path, json=body, timeout=_timeout(timeout_s))
        except httpx.HTTPError as exc:
            self.breaker.record_failure()
            raise GatewayUnavailable(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            # Anything unexpected must not leave a half-open probe dangling forever.
            self.breaker.record_failure()
            raise
        if r.status_code >= 500:
            self.breaker.record_failure()
            raise GatewayUnavailable(f"{r.status_code}: {_error_text(r)}")
        self.breaker.record_success()
        if r.status_code >= 400:
            raise GatewayRejected(r.status_code, _error_text(r))
        try:
            return r.json()
        except ValueError:
            return {}

    # -- routes ------------------------------------------------------------------------------

    def recall(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        out = self.post("/recall", body, timeout_s)
        return out if isinstance(out, dict) else {}

    def capture(self, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        return self.post("/capture", body, timeout_s)

    def session_end(self, body: dict[str, Any], timeout_s: float | None = 30.0) -> Any:
        return self.post("/session/end", body, timeout_s)

    def add_memory(self, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        return self.post("/memories", body, timeout_s)

    def search_memories(self, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        return self.post("/search/memories", body, timeout_s)

    def search_conversations(self, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        return self.post("/search/conversations", body, timeout_s)


def _timeout(total: float | None) -> Any:
    if total is None:  # an explicit None would disable timeouts altogether in httpx
        return httpx.USE_CLIENT_DEFAULT
    return httpx.Timeout(total, connect=min(CONNECT_TIMEOUT_S, total))


def _error_text(r: httpx.Response) -> str:
    try:
        body = r.json()
        if isinstance(body, dict) and "error" in body:
            return str(body["error"])[:300]
    except ValueError:
        pass
    return r.text[:300]

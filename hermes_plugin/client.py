"""HTTP client for the memory-tencentdb gateway (httpx only, see docs/http-api.md).

Why a thin class: every call must pass the circuit breaker and carry its own timeout, and the
provider must be able to tell "the gateway is unavailable" (retry later, count towards the
breaker) from "the gateway rejected this request" (a 4xx: do not retry, the gateway is fine)
and from "this gateway is not ours" (another data directory or a 401: send it nothing).
"""

from __future__ import annotations

from typing import Any

import httpx

from .breaker import CircuitBreaker
from .ownership import Ownership, Verdict

DEFAULT_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 0.5


class GatewayError(Exception):
    """Base class of everything this client raises."""


class GatewayUnavailable(GatewayError):
    """Breaker open, connection refused, timeout or a 5xx: worth retrying later."""


class GatewayNotOurs(GatewayUnavailable):
    """The gateway on our address is not ours (other data directory, or it rejects our key)."""


class GatewayRejected(GatewayError):
    """The gateway answered 4xx: the request itself is wrong; retrying will not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


# What a /health probe found at the address.
OURS = "ours"
FOREIGN = "foreign"
REFUSED = "refused"  # nothing listens: a gateway may be started here
UNRESPONSIVE = "unresponsive"  # something accepts connections but does not answer: never spawn


class GatewayClient:
    """One pooled connection set per gateway; safe to share between threads.

    With an ``owner`` (the provider always passes one), no request carrying user data leaves
    before a ``/health`` answer showed the gateway is ours, and again after any transport error
    (the process behind the port may have changed); a 401 or a foreign ``/health`` pauses the
    client until the supervisor finds our gateway there again.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        breaker: CircuitBreaker | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        owner: Ownership | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.breaker = breaker or CircuitBreaker()
        self.api_key = api_key
        self.owner = owner
        self.verified = owner is None
        self.paused = ""  # why memory is paused ("" = not paused)
        self.last_verdict: Verdict | None = None
        # trust_env=False: an HTTP(S)_PROXY in the user's shell must never capture loopback calls.
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=4),
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    # -- ownership ---------------------------------------------------------------------------

    def _token(self) -> str:
        return self.owner.token() if self.owner is not None else self.api_key

    def _auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def probe(self, timeout_s: float = 1.0) -> tuple[str, Verdict | None]:
        """GET /health and judge it: (OURS | FOREIGN | REFUSED | UNRESPONSIVE, verdict)."""
        try:
            r = self._http.get("/health", timeout=_timeout(timeout_s))
        except httpx.ConnectError:
            self.verified = self.owner is None
            return REFUSED, None
        except httpx.HTTPError:
            self.verified = self.owner is None
            return UNRESPONSIVE, None
        if r.status_code != 200:
            verdict = Verdict(False, f"{self.base_url} answers /health with {r.status_code}")
        else:
            try:
                body = r.json()
            except ValueError:
                body = None
            if self.owner is None:
                return OURS, Verdict(True)
            verdict = self.owner.judge(body if isinstance(body, dict) else {})
        self._record_verdict(verdict)
        return (OURS if verdict.ours else FOREIGN), verdict

    def _record_verdict(self, verdict: Verdict) -> None:
        self.last_verdict = verdict
        self.verified = verdict.ours
        self.paused = "" if verdict.ours else verdict.reason
        if self.owner is not None:
            self.owner.note(verdict)

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
        return self._send("POST", path, body, None, timeout_s)

    def get(self, path: str, params: dict[str, Any], timeout_s: float | None = None) -> Any:
        """GET through the breaker (offload's canvases); returns the decoded JSON answer."""
        return self._send("GET", path, None, params, timeout_s)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, Any] | None,
        timeout_s: float | None,
    ) -> Any:
        if self.paused:
            raise GatewayNotOurs(self.paused)
        if not self.breaker.allow():
            raise GatewayUnavailable("circuit breaker open")
        try:
            if not self.verified:
                kind, _ = self.probe(min(1.0, timeout_s or 1.0))
                if kind == FOREIGN:
                    self.breaker.record_success()  # it answered; the pause gates what follows
                    raise GatewayNotOurs(self.paused)
                if kind != OURS:
                    self.breaker.record_failure()
                    raise GatewayUnavailable(f"gateway {kind}")
            token = self._token()
            r = self._http.request(
                method,
                path,
                json=body,
                params=params,
                headers=self._auth(token),
                timeout=_timeout(timeout_s),
            )
            if r.status_code == 401 and self.owner is not None:
                fresh = self._token()  # a key file created or replaced since: try it once
                if fresh and fresh != token:
                    r = self._http.request(
                        method,
                        path,
                        json=body,
                        params=params,
                        headers=self._auth(fresh),
                        timeout=_timeout(timeout_s),
                    )
                if r.status_code == 401:
                    self.breaker.record_success()
                    self._record_verdict(self.owner.rejected(self.health(0.5)))
                    raise GatewayNotOurs(self.paused)
        except httpx.HTTPError as exc:
            self.verified = self.owner is None
            self.breaker.record_failure()
            raise GatewayUnavailable(f"{type(exc).__name__}: {exc}") from exc
        except GatewayError:
            raise
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

    def admin_shutdown(self, body: dict[str, Any], timeout_s: float = 1.0) -> dict[str, Any] | None:
        """POST /admin/shutdown (drain or cancel) outside the breaker; None if it did not work."""
        if self.paused:
            return None
        try:
            r = self._http.post(
                "/admin/shutdown",
                json=body,
                headers=self._auth(self._token()),
                timeout=_timeout(timeout_s),
            )
        except httpx.HTTPError:
            return None
        if r.status_code >= 300:
            return None
        try:
            out = r.json()
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}

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

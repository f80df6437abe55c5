"""The real gateway app in the test process: the same routes, middleware and engine as
``memory-tencentdb serve``, without a child process or a socket.

Why: a subprocess gateway costs seconds to start (a Python start plus two embedding models),
and most route checks (shapes, bad input naming what is wrong, auth, status codes) need none of
what a process gives. ``InProcessGateway`` builds the app the way ``cli.serve.cmd_serve`` does
(``load_settings`` from a clean environment, ``Engine``, ``create_app``) and serves it through
``httpx.ASGITransport`` (wrapped for a plain ``httpx.Client``: the app runs on one event loop
thread, as under uvicorn), with the app's ASGI lifespan run, so the engine starts and closes as
in a real gateway.

What stays with ``tests/support/gateway.py`` (a real process): start-up and shutdown, kill and
restart, durability across processes, concurrency and hostile input that must not block a real
server, timings, the ``serve`` command itself, and the real hosts. Also what is set per process
rather than per app: ``serve``'s umask (file modes), settings read from ``os.environ`` (e.g.
``TDAI_SQLITE_BINDING``), the redaction patterns (``redact.configure`` is process-wide, so two
in-process gateways with different redaction settings would share the last one's) and the
gateway's log file.

The embedding models load once per test session: ``share_embedders`` hands every in-process
engine the same loaded embedders for the same configuration (embedders are thread-safe and hold
no per-store state; ``embedding/__init__.py``). The data directory, store and everything else
are the gateway's own.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx

from tests.support import postgres
from tests.support.gateway import gateway_token

# Requests carry this Host: an IP literal passes the gateway's Host check, as a local host
# adapter's ``127.0.0.1:<port>`` does.
BASE_URL = "http://127.0.0.1:8420"

_embedders_lock = threading.Lock()
_embedders: dict[tuple[Any, ...], tuple[list[Any], list[str]]] = {}
STARTS = {"in_process": 0}  # reported at the session's end (tests/conftest.py)


def _embedding_key(cfg: Any) -> tuple[Any, ...]:
    names = (
        "provider",
        "model",
        "base_url",
        "dimensions",
        "send_dimensions",
        "timeout_ms",
        "max_input_chars",
        "num_threads",
        "model_cache_dir",
    )
    return tuple(str(getattr(cfg, n, None)) for n in names)


# The embedding configs of in-process engines (held, so an id is never reused for another).
_ours: list[Any] = []
_installed = False


def share_embedders(cfg: Any) -> None:
    """The engine with this embedding config gets the session's loaded embedders for a
    configuration seen before (local models only; a remote one is built fresh each time).
    Engines built by other tests (``Engine(settings)`` directly) load their own, as before."""
    global _installed
    from memory_tencentdb import vectorizer
    from memory_tencentdb.embedding import load_embedders

    def cached(cfg: Any) -> tuple[list[Any], list[str]]:
        if not any(c is cfg for c in _ours) or getattr(cfg, "provider", "local") != "local":
            return load_embedders(cfg)
        key = _embedding_key(cfg)
        with _embedders_lock:
            if key not in _embedders:
                loaded, warnings = load_embedders(cfg)
                _embedders[key] = [_SharedEmbedder(e) for e in loaded], warnings
            embedders, warnings = _embedders[key]
            return list(embedders), list(warnings)

    with _embedders_lock:
        _ours.append(cfg)
        if not _installed:
            vectorizer.load_embedders = cached
            _installed = True


class _SharedEmbedder:
    """One loaded embedder for every in-process engine. Each engine's start embeds the same
    reference queries (``text/reference_queries.py``): the vectors are the same each time, so
    they are computed once (seconds on a loaded machine); every other text goes to the model."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._references: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: list[str]) -> Any:
        from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

        if list(texts) != list(REFERENCE_QUERIES):
            return self._inner.embed(texts)
        with self._lock:
            if self._references is None:
                self._references = self._inner.embed(texts)
            return self._references.copy()


class InProcessGateway:
    """The gateway app over an in-process client, with the helpers of ``GatewayProcess``
    that need no process (``client``, ``token``, ``headers``, ``wait_healthy``...)."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.extra_env = dict(env or {})
        self.base_url = BASE_URL
        self.engine: Any = None
        self.app: Any = None
        self._portal_cm: Any = None
        self._portal: Any = None
        self._lifespan: _Lifespan | None = None

    def env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))
        }
        env["TDAI_DATA_DIR"] = str(self.data_dir)
        env.update(postgres.gateway_env(self.data_dir, self.extra_env))
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 60.0, ready: bool = True) -> InProcessGateway:
        """Build the app as ``serve`` does and run its lifespan (the engine starts); with
        ``ready``, wait for the models to have loaded, as ``GatewayProcess.start`` does."""
        from memory_tencentdb.config import load_settings
        from memory_tencentdb.engine import Engine
        from memory_tencentdb.gateway.app import create_app

        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = load_settings(self.env(), cwd=self.data_dir.parent)
        self.engine = Engine(settings)
        share_embedders(self.engine.vectorizer.cfg)
        self.app = create_app(self.engine)
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._lifespan = _Lifespan(self.app)
        self._portal.start_task_soon(self._lifespan.run)
        self._portal.call(self._lifespan.startup)  # engine.start()
        STARTS["in_process"] += 1
        self.wait_healthy(timeout, ready=ready)
        return self

    def stop(self) -> None:
        if self._portal is None:
            return
        try:
            if self._lifespan is not None:
                self._portal.call(self._lifespan.shutdown)  # engine.close()
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._portal = self._portal_cm = self._lifespan = None

    @property
    def token(self) -> str | None:
        return gateway_token(self.env(), self.data_dir)

    @property
    def headers(self) -> dict[str, str]:
        token = self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """A client with this gateway's token (``token=""`` for none); an ``httpx.Client``."""
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = _PortalTransport(self.app, self._portal)
        return httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def wait_healthy(self, timeout: float = 60.0, ready: bool = True) -> dict:
        """/health's body once the embedder has loaded (with ``ready``)."""
        deadline = time.monotonic() + timeout
        with self.client() as c:
            while time.monotonic() < deadline:
                body = c.get("/health").json()
                if not ready or body.get("ready", True):
                    return body
                time.sleep(0.05)
        raise TimeoutError(f"gateway not ready after {timeout}s")

    def wait_embedded(self, timeout: float = 60.0) -> None:
        """Wait until the background embedder has caught up with everything written so far."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            emb = self.wait_healthy(timeout).get("embedding", {})
            if emb.get("state") in ("disabled", "unavailable"):
                return
            if emb.get("state") == "ready" and emb.get("idle", True):
                return
            time.sleep(0.05)
        raise TimeoutError("background embedding did not catch up")


class _PortalTransport(httpx.BaseTransport):
    """A sync transport over ``httpx.ASGITransport``: each request runs on the gateway's event
    loop thread (the blocking portal), as a request to a uvicorn server would."""

    def __init__(self, app: Any, portal: Any) -> None:
        self._asgi = httpx.ASGITransport(
            app=app, raise_app_exceptions=False, client=("127.0.0.1", 50000)
        )
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # The headers as sent (a streamed body keeps its chunked encoding, no Content-Length).
        body = request.read()
        inner = httpx.Request(
            request.method, request.url, headers=request.headers, stream=httpx.ByteStream(body)
        )

        async def send() -> tuple[int, httpx.Headers, bytes]:
            resp = await self._asgi.handle_async_request(inner)
            content = await resp.aread()
            return resp.status_code, resp.headers, content

        status, headers, content = self._portal.call(send)
        return httpx.Response(status, headers=headers, content=content, request=request)


class _LifespanFailed(RuntimeError):
    pass


class _Lifespan:
    """The ASGI lifespan protocol, as uvicorn speaks it: startup before the first request,
    shutdown at the end (``create_app``'s lifespan starts and closes the engine)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._to_app, self._to_app_recv = anyio.create_memory_object_stream[dict](10)
        self._from_app_send, self._from_app = anyio.create_memory_object_stream[dict](10)

    async def run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        await self.app(scope, self._to_app_recv.receive, self._from_app_send.send)

    async def startup(self) -> None:
        await self._to_app.send({"type": "lifespan.startup"})
        message = await self._from_app.receive()
        if message["type"] != "lifespan.startup.complete":
            raise _LifespanFailed(message.get("message", "lifespan startup failed"))

    async def shutdown(self) -> None:
        await self._to_app.send({"type": "lifespan.shutdown"})
        message = await self._from_app.receive()
        if message["type"] != "lifespan.shutdown.complete":
            raise _LifespanFailed(message.get("message", "lifespan shutdown failed"))

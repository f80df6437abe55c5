"""The HTTP surface: routes of the original plus ``/memories``; thin over ``Engine``.

Every bad input is a 4xx with ``{"error": "..."}`` naming what is wrong: 400 for unparseable
JSON, 401 auth, 404 unknown route or id, 413 too large, 422 wrong or missing fields. A 500 means
a fault of ours, and is logged. 403 is a scope the caller's key may not read or write (named in
the message; ``gateway/access.py``), answered before anything is written.

The routes live in one module per concern, each an ``APIRouter`` over the engine: health and
shutdown (``admin_routes``), offload (``offload_routes``), the host's model
(``host_model_routes``), capture and session end (``capture_routes``), recall and search
(``recall_routes``), listing, correcting and forgetting (``operations_routes``), writing
memories (``memory_routes``); the error answers are ``errors.py``'s, the guard in front of them
all ``security.py``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from memory_tencentdb import __version__, hub
from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway.admin_routes import admin_router
from memory_tencentdb.gateway.capture_routes import capture_router
from memory_tencentdb.gateway.errors import install_error_handlers
from memory_tencentdb.gateway.host_model_routes import host_model_router, wire_policy
from memory_tencentdb.gateway.lifecycle import Lifecycle
from memory_tencentdb.gateway.memory_routes import memories_router
from memory_tencentdb.gateway.offload_routes import offload_router
from memory_tencentdb.gateway.openapi_doc import document_statuses
from memory_tencentdb.gateway.operations_routes import operations_router
from memory_tencentdb.gateway.recall_routes import recall_router
from memory_tencentdb.gateway.security import GatewayGuard, host_name


def create_app(engine: Engine, lifecycle: Lifecycle | None = None) -> FastAPI:
    if lifecycle is None:
        lifecycle = Lifecycle(engine, engine.settings.server.drain_timeout_s)
    # Before anything is served: a bad keys file stops start-up with a message naming it.
    policy = access.load_policy(engine.settings.server, engine.data_dir, engine.auth)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine.start()
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(
        title="memory-tencentdb gateway",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.access_policy = policy
    document_statuses(app)  # /openapi.json lists every status each route answers
    install_error_handlers(app)
    app.include_router(admin_router(engine, lifecycle, policy))
    app.include_router(offload_router(engine))
    app.include_router(host_model_router(engine))
    wire_policy(engine, policy)
    app.include_router(capture_router(engine))
    app.include_router(recall_router(engine))
    app.include_router(operations_router(engine))
    app.include_router(memories_router(engine))
    return hub.mount(app, _guard(app, engine, lifecycle, policy), engine, policy)  # type: ignore[return-value]  # the served app is the hub's gate in front of the guard and FastAPI


def _guard(app: FastAPI, engine: Engine, lifecycle: Lifecycle, policy: Any) -> GatewayGuard:
    """The guard in front of every route (host, origin, key, body size; ``security.py``); the
    Memory Hub's gate goes in front of it (``hub.mount``)."""
    server = engine.settings.server
    guard = GatewayGuard(lifecycle.track(app), policy, server.cors_origins, server.max_body_bytes)
    guard.allowed_hosts |= {host_name(h) for h in [server.host, *server.allowed_hosts]}
    # The offload routes carry what is big by nature: a context window, or one tool output
    # (real ones reach megabytes); refusing them would keep exactly those in the context.
    offload_limit = engine.settings.memory.offload.assemble_max_body_bytes
    guard.path_limits["/offload/assemble"] = offload_limit
    guard.path_limits["/offload/tool-result"] = offload_limit
    guard.path_limits["/offload/host-status"] = 16 * 1024  # a few names and one reason
    return guard

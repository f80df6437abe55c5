"""The HTTP surface: routes of the original plus ``/memories``; thin over ``Engine``.

Every bad input is a 4xx with ``{"error": "..."}`` naming what is wrong: 400 for unparseable
JSON, 401 auth, 404 unknown route or id, 413 too large, 422 wrong or missing fields. A 500 means
a fault of ours, and is logged. 403 is a scope the caller's key may not read or write (named in
the message; ``gateway/access.py``), answered before anything is written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from memory_tencentdb import __version__
from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access, operations_routes
from memory_tencentdb.gateway import schemas as s
from memory_tencentdb.gateway.host_model_routes import host_model_router, wire_policy
from memory_tencentdb.gateway.lifecycle import Lifecycle, ShutdownBody, settle_idle
from memory_tencentdb.gateway.offload_routes import offload_router
from memory_tencentdb.gateway.openapi_doc import document_statuses
from memory_tencentdb.gateway.security import GatewayGuard, host_name

log = logging.getLogger("memory_tencentdb.gateway")


def _describe(errors: Sequence[Any]) -> str:
    parts = []
    for err in errors[:10]:
        if err.get("type") == "unstorable_value":  # names its own path, nested or extra
            parts.append(err.get("msg", "invalid value"))
            continue
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        if not loc and err.get("type") in ("model_attributes_type", "dict_type", "model_type"):
            parts.append(f"JSON body must be an object, got {type(err.get('input')).__name__}")
            continue
        where = ".".join(loc) or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def _allowed(app: FastAPI, scope: Mapping[str, Any]) -> list[str]:
    """The methods some route answers on this request's path (Starlette's own 405 names only
    the first matching route's, and ``/memories`` has two)."""
    return [
        m
        for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
        if any(r.matches({**scope, "method": m})[0] == Match.FULL for r in app.router.routes)
    ]


def create_app(engine: Engine, lifecycle: Lifecycle | None = None) -> FastAPI:
    if lifecycle is None:
        lifecycle = Lifecycle(engine, engine.settings.server.drain_timeout_s)
    # Before anything is served: a bad keys file stops start-up with a message naming it.
    policy = access.load_policy(engine.settings.server, engine.data_dir, engine.auth)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
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

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            detail = next(e for e in errors if e.get("type") == "json_invalid")
            ctx = detail.get("ctx", {}).get("error", "")
            return JSONResponse({"error": f"Invalid JSON body: {ctx}".strip()}, status_code=400)
        if any(e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",) for e in errors):
            return JSONResponse({"error": "Missing JSON body"}, status_code=400)
        if any(isinstance(e.get("input"), bytes) for e in errors):
            # FastAPI leaves the body unparsed unless it is declared JSON (curl -d alone sends
            # form encoding); say that, not "must be an object, got bytes".
            ctype = request.headers.get("content-type") or "none"
            return JSONResponse(
                {"error": f"body must be JSON with Content-Type: application/json (got {ctype})"},
                status_code=415,
            )
        return JSONResponse({"error": _describe(errors)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            msg = f"Not found: {request.method} {request.url.path}"
        elif exc.status_code == 405:  # with "Allow" (RFC 9110 15.5.6)
            msg = f"Method not allowed: {request.method} {request.url.path}"
            allowed = ", ".join(_allowed(app, request.scope))
            return JSONResponse({"error": msg}, status_code=405, headers={"Allow": allowed})
        else:
            msg = str(exc.detail)
        return JSONResponse({"error": msg}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _fault(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(
            {"error": f"Internal error: {type(exc).__name__}: {exc}"}, status_code=500
        )

    @app.get("/health")
    def health() -> dict[str, Any]:
        out = settle_idle({**engine.health(), "draining": lifecycle.draining}, engine.busy())
        keys_file = out["keys_file"] = policy.status()
        if keys_file and keys_file["error"]:  # the last good keys are in force meanwhile
            out["degraded"] = [*out["degraded"], f"keys file not used: {keys_file['error']}"]
            out["status"] = "degraded"
        return out

    @app.post("/admin/shutdown", status_code=202)
    def shutdown(request: Request, body: ShutdownBody | None = None) -> Any:
        """Drain, then exit (202); ``{"cancel": true}`` cancels a drain not yet exited (200)."""
        access.require_owner(request, "shut the gateway down")
        body = body or ShutdownBody()
        if body.cancel:
            return JSONResponse({"cancelled": lifecycle.cancel()}, status_code=200)
        lifecycle.request_drain(body.drain_s, reason="POST /admin/shutdown")
        return {"draining": True}

    app.include_router(offload_router(engine))
    app.include_router(host_model_router(engine))
    wire_policy(engine, policy)

    @app.post("/capture")
    def capture(body: s.CaptureBody, request: Request) -> dict[str, Any]:
        scope = access.writable(request, body.scope, body.user_id)
        rows = engine.capture(scope, body.session_key, body.session_id or "", body.turn())
        return {"l0_recorded": len(rows), "scheduler_notified": bool(engine.listeners)}

    @app.post("/recall")
    def recall(body: s.RecallBody, request: Request) -> dict[str, Any]:
        names = body.tool_names.model_dump(exclude_none=True) if body.tool_names else None
        scope = access.readable(request, body.scope, body.user_id)
        teams = access.team_scopes(request, scope, body.team_scopes)
        result = engine.recall(body.query, scope, names, team_scopes=teams)
        return result.as_json()

    @app.post("/search/memories")
    def search_memories(body: s.SearchMemoriesBody, request: Request) -> dict[str, Any]:
        scope = access.readable(request, body.scope, body.user_id)
        return engine.search_memories(
            body.query,
            scope,
            body.limit,
            team_scopes=access.team_scopes(request, scope, body.team_scopes),
            type=body.type,
            scene=body.scene,
        )

    @app.post("/search/conversations")
    def search_conversations(body: s.SearchConversationsBody, request: Request) -> dict[str, Any]:
        scope = access.readable(request, body.scope, body.user_id)
        return engine.search_conversations(
            body.query,
            scope,
            body.limit,
            body.session_key,
            team_scopes=access.team_scopes(request, scope, body.team_scopes),
        )

    @app.post("/session/end")
    def session_end(body: s.SessionEndBody, request: Request) -> dict[str, Any]:
        done = engine.end_session(
            access.writable(request, body.scope, body.user_id),
            body.session_key,
            body.session_id or "",
            wait=body.wait,
        )
        return {"flushed": done}

    # GET /memories (paged), PATCH/DELETE /memories/{id}, /memories/forget, /scopes, /persona,
    # /scenes. Registered first: the operations' GET /memories answers the list.
    operations_routes.register(app, engine)

    @app.post("/memories", status_code=201)
    def create_memory(body: s.MemoryBody, request: Request) -> dict[str, Any]:
        record = engine.write_memory(
            content=body.content,
            type_=body.type,
            scope=access.writable(request, body.scope, body.user_id),
            session_key=body.session_key,
            session_id=body.session_id or "",
            priority=body.priority,
            scene_name=body.scene_name,
            metadata=body.metadata,
        )
        return {"id": record.id}

    @app.get("/memories/{memory_id}")
    def get_memory(
        memory_id: str, request: Request, scope: s.QueryText = None, user_id: s.QueryText = None
    ) -> Any:
        # Same scope rule as every other route; another scope's id is simply not found here.
        found = engine.memory(memory_id, access.readable(request, scope, user_id))
        if found is None:
            return JSONResponse({"error": f"No memory with id {memory_id!r}"}, status_code=404)
        return found

    @app.post("/seed")
    def seed(body: s.SeedBody, request: Request) -> Any:
        from memory_tencentdb.seed import SeedValidationError, run_seed

        access.writable(request, body.scope, body.user_id)
        try:
            return run_seed(engine, body)
        except SeedValidationError as e:
            return JSONResponse({"error": str(e), "validation_errors": e.errors}, status_code=400)

    server = engine.settings.server
    guard = GatewayGuard(lifecycle.track(app), policy, server.cors_origins, server.max_body_bytes)
    guard.allowed_hosts |= {host_name(h) for h in [server.host, *server.allowed_hosts]}
    # The offload routes carry what is big by nature: a context window, or one tool output
    # (real ones reach megabytes); refusing them would keep exactly those in the context.
    offload_limit = engine.settings.memory.offload.assemble_max_body_bytes
    guard.path_limits["/offload/assemble"] = offload_limit
    guard.path_limits["/offload/tool-result"] = offload_limit
    guard.path_limits["/offload/host-status"] = 16 * 1024  # a few names and one reason
    from memory_tencentdb import hub  # the Memory Hub page (/hub): a gate in front of the guard

    # The served ASGI app is the hub's gate in front of the guard and FastAPI, not FastAPI.
    return hub.mount(app, guard, engine, policy)  # type: ignore[return-value]

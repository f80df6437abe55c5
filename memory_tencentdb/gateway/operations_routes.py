"""HTTP routes of the operations: list and read, correct, forget (by id or query), scopes,
persona and scenes. Thin over ``memory_tencentdb.operations``; errors follow the gateway's rule
(4xx with ``{"error": ...}`` naming what is wrong, nothing written before it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field, StringConstraints

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway.schemas import QueryText, Scoped
from memory_tencentdb.operations import browse, forget
from memory_tencentdb.operations.browse import BadRequest, NotFound


class MemoryPatchBody(Scoped):
    content: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20000)]
        | None
    ) = None
    type: Literal["persona", "episodic", "instruction"] | None = None
    priority: int | None = Field(None, ge=-1, le=100)


class ForgetBody(Scoped):
    """What to forget: the memories a ``query`` names, or these ``ids`` (one of the two)."""

    query: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
        | None
    ) = None
    ids: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] | None = Field(
        None, max_length=100
    )
    limit: int = Field(10, ge=1, le=100)
    dry_run: bool = True


def _error(e: Exception) -> JSONResponse:
    code = 404 if isinstance(e, NotFound) else 422
    # The message as raised (str() of a KeyError would add quotes; stripping them cut the
    # closing quote of "No memory with id 'm_x'").
    message = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
    return JSONResponse({"error": message}, status_code=code)


def operations_router(engine: Engine) -> APIRouter:
    router = APIRouter()

    def stale(scope: str) -> None:
        if engine.pipeline is not None:
            engine.pipeline.scenes_stale(scope)

    @router.get("/memories")
    def list_memories(
        request: Request,
        scope: QueryText = None,
        user_id: QueryText = None,
        type: QueryText = None,
        status: Annotated[str, Query(max_length=20)] = "active",
        since: QueryText = None,
        session_key: QueryText = None,
        history: bool = False,
        limit: Annotated[int, Query(ge=1, le=browse.MAX_PAGE)] = 200,
        cursor: QueryText = None,
    ) -> Any:
        """A scope's memories, newest first, a page at a time (``next_cursor``); ``history=true``
        adds the superseded versions, ``status=deleted`` lists what was forgotten."""
        try:
            return browse.list_memories(
                engine.store,
                access.readable(request, scope, user_id),
                type_=type or None,
                status="history" if history and status == "active" else status,
                since=since,
                session_key=session_key or None,
                limit=limit,
                cursor=cursor,
            )
        except BadRequest as e:
            return _error(e)

    @router.get("/scopes")
    def scopes(request: Request) -> dict[str, Any]:
        """The scopes the caller's key may read (all of them for an owner), with its access."""
        return access.visible_scopes(request, browse.scopes(engine.store, engine.data_dir))

    @router.get("/persona")
    def persona(
        request: Request, scope: QueryText = None, user_id: QueryText = None
    ) -> dict[str, Any]:
        return browse.persona(engine.data_dir, access.readable(request, scope, user_id))

    @router.get("/scenes")
    def scenes(
        request: Request, scope: QueryText = None, user_id: QueryText = None
    ) -> dict[str, Any]:
        return browse.scenes(engine.data_dir, access.readable(request, scope, user_id))

    @router.patch("/memories/{memory_id}")
    def patch_memory(memory_id: str, body: MemoryPatchBody, request: Request) -> Any:
        scope = access.writable(request, body.scope, body.user_id)
        try:
            updated = forget.correct(
                engine.store,
                engine.vectorizer,
                memory_id,
                scope,
                content=body.content,
                type_=body.type,
                priority=body.priority,
            )
        except (BadRequest, NotFound) as e:
            return _error(e)
        if body.content is not None:
            stale(scope)
        return updated

    @router.delete("/memories/{memory_id}")
    def delete_memory(
        memory_id: str, request: Request, scope: QueryText = None, user_id: QueryText = None
    ) -> Any:
        scope_ = access.writable(request, scope, user_id)
        try:
            removed = forget.delete(engine.store, [memory_id], scope_, reason="delete")
        except NotFound as e:
            return _error(e)
        stale(scope_)
        return {"deleted": removed}

    @router.post("/memories/forget")
    def forget_by_query(body: ForgetBody, request: Request) -> Any:
        scope = access.writable(request, body.scope, body.user_id)
        if bool(body.query) == bool(body.ids):
            error = (
                "give either query (what to forget) or ids, not both"
                if body.query
                else "give query (what to forget) or ids (a non-empty list): neither was given"
            )
            return JSONResponse({"error": error}, status_code=422)
        if body.ids:
            try:
                found = forget.preview(engine.store, body.ids, scope)
                if not body.dry_run:
                    forget.delete(engine.store, body.ids, scope, reason="delete")
                    stale(scope)
            except NotFound as e:
                return _error(e)
            return {
                "query": None,
                "scope": scope,
                "dry_run": body.dry_run,
                "matched": found,
                "forgotten": [] if body.dry_run else [m["id"] for m in found],
                "candidates": [],
            }
        assert body.query  # neither both nor none: checked above
        try:
            result = forget.forget_query(
                engine.store,
                engine.vectorizer,
                body.query,
                scope,
                engine.settings.memory.recall.strategy,
                limit=body.limit,
                dry_run=body.dry_run,
            )
        except BadRequest as e:
            return _error(e)
        if result["forgotten"]:
            stale(scope)
        return result

    return router

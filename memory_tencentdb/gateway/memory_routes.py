"""Writing memory directly: ``POST /memories`` (one memory), ``GET /memories/{id}`` and
``POST /seed`` (a batch of conversations run through the pipeline). Listing, correcting and
forgetting are the operations' routes (``operations_routes.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway import schemas as s


def memories_router(engine: Engine) -> APIRouter:
    router = APIRouter()

    @router.post("/memories", status_code=201)
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

    @router.get("/memories/{memory_id}")
    def get_memory(
        memory_id: str, request: Request, scope: s.QueryText = None, user_id: s.QueryText = None
    ) -> Any:
        # Same scope rule as every other route; another scope's id is simply not found here.
        found = engine.memory(memory_id, access.readable(request, scope, user_id))
        if found is None:
            return JSONResponse({"error": f"No memory with id {memory_id!r}"}, status_code=404)
        return found

    @router.post("/seed")
    def seed(body: s.SeedBody, request: Request) -> Any:
        from memory_tencentdb.seed import SeedValidationError, run_seed

        access.writable(request, body.scope, body.user_id)
        try:
            return run_seed(engine, body)
        except SeedValidationError as e:
            return JSONResponse({"error": str(e), "validation_errors": e.errors}, status_code=400)

    return router

"""What a host sends as a conversation goes on: ``POST /capture`` (one turn, recorded as L0
messages) and ``POST /session/end`` (distil what the session left)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway import schemas as s


def capture_router(engine: Engine) -> APIRouter:
    router = APIRouter()

    @router.post("/capture")
    def capture(body: s.CaptureBody, request: Request) -> dict[str, Any]:
        scope = access.writable(request, body.scope, body.user_id)
        rows = engine.capture(scope, body.session_key, body.session_id or "", body.turn())
        return {"l0_recorded": len(rows), "scheduler_notified": bool(engine.listeners)}

    @router.post("/session/end")
    def session_end(body: s.SessionEndBody, request: Request) -> dict[str, Any]:
        done = engine.end_session(
            access.writable(request, body.scope, body.user_id),
            body.session_key,
            body.session_id or "",
            wait=body.wait,
        )
        return {"flushed": done}

    return router

"""``GET /health`` (what a probe and ``memory-tencentdb status`` read) and
``POST /admin/shutdown`` (drain, then exit; the owner's key only)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway.lifecycle import Lifecycle, ShutdownBody, settle_idle


def admin_router(engine: Engine, lifecycle: Lifecycle, policy: Any) -> APIRouter:
    router = APIRouter()

    @router.get("/health")
    def health() -> dict[str, Any]:
        out = settle_idle({**engine.health(), "draining": lifecycle.draining}, engine.busy())
        keys_file = out["keys_file"] = policy.status()
        if keys_file and keys_file["error"]:  # the last good keys are in force meanwhile
            out["degraded"] = [*out["degraded"], f"keys file not used: {keys_file['error']}"]
            out["status"] = "degraded"
        return out

    @router.post("/admin/shutdown", status_code=202)
    def shutdown(request: Request, body: ShutdownBody | None = None) -> Any:
        """Drain, then exit (202); ``{"cancel": true}`` cancels a drain not yet exited (200)."""
        access.require_owner(request, "shut the gateway down")
        body = body or ShutdownBody()
        if body.cancel:
            return JSONResponse({"cancelled": lifecycle.cancel()}, status_code=200)
        lifecycle.request_drain(body.drain_s, reason="POST /admin/shutdown")
        return {"draining": True}

    return router

"""The ``/offload/*`` routes (issue 9): thin over ``Engine.offload`` (``memory_tencentdb/offload``).

Input the schemas cannot check (the message lists' shapes) is checked by the service before
anything is written; its ``OffloadInputError`` names the field and becomes a 422.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway import schemas as s
from memory_tencentdb.offload import OffloadInputError, OffloadNotFound
from memory_tencentdb.offload.host_status import TooManyHosts
from memory_tencentdb.offload.records import ToolResult
from memory_tencentdb.offload.service import MIN_TOKEN_BUDGET, parse_timestamp
from memory_tencentdb.offload.store import content_of


def _unprocessable(e: OffloadInputError) -> JSONResponse:
    return JSONResponse({"error": str(e)}, status_code=422)


def offload_router(engine: Engine) -> APIRouter:
    svc = engine.offload

    async def warm_tokenizer() -> None:
        """Any offload request means a host uses it: load the token encoding now, in the
        background (async: no thread hop per request; ``preload`` never waits)."""
        svc.tokens.preload()

    router = APIRouter(prefix="/offload", dependencies=[Depends(warm_tokenizer)])

    @router.post("/tool-result")
    def tool_result(body: s.OffloadToolResultBody, request: Request) -> Any:
        scope = access.writable(request, body.scope, body.user_id)
        ts = None
        if body.timestamp is not None:
            ts = parse_timestamp(body.timestamp, svc.tz)
            if ts is None:
                return _unprocessable(
                    OffloadInputError("timestamp", "must be an ISO-8601 string or epoch ms")
                )
        arguments = body.arguments if body.arguments is not None else {}
        if not isinstance(arguments, dict | str):  # a non-JSON string is kept as it is
            kind = {bool: "a boolean", int: "a number", float: "a number", list: "an array"}
            return _unprocessable(
                OffloadInputError(
                    "arguments",
                    "must be an object or a string (a JSON object string, or any text),"
                    f" got {kind.get(type(arguments), type(arguments).__name__)}",
                )
            )
        content, encoding = content_of(body.result)
        result = ToolResult(
            tool_call_id=body.tool_call_id,
            tool_name=body.tool_name,
            arguments=arguments,
            content=content,
            encoding=encoding,
            is_error=body.is_error,
            timestamp=ts or "",
        )
        return svc.tool_result(scope, body.session_key, result)

    @router.post("/assemble")
    def assemble(body: s.OffloadAssembleBody, request: Request) -> Any:
        scope = access.writable(request, body.scope, body.user_id)
        limit = svc.cfg.assemble_max_messages
        if len(body.messages) > limit:  # before anything is parsed or written
            return JSONResponse(
                {
                    "error": f"too many messages: {len(body.messages)}, limit {limit}"
                    " (memory.offload.assembleMaxMessages)"
                },
                status_code=413,
            )
        if body.token_budget < MIN_TOKEN_BUDGET:
            return _unprocessable(
                OffloadInputError(
                    "token_budget",
                    f"must be at least {MIN_TOKEN_BUDGET} (the offload's own canvas, guide and"
                    f" history note need ~400 tokens of it), got {body.token_budget}",
                )
            )
        try:
            out = svc.assemble(
                scope,
                body.session_key,
                body.messages,
                body.token_budget,
                body.prompt,
                body.system_tokens,
                body.format,
                body.current_turn_follows,
                body.pending_tool_call_ids,
            )
        except OffloadInputError as e:
            return _unprocessable(e)
        # Plain json.dumps: FastAPI's encoder walks every message again (~3x slower at 300).
        return Response(json.dumps(out, ensure_ascii=False), media_type="application/json")

    @router.post("/read")
    def read(body: s.OffloadReadBody, request: Request) -> Any:
        scope = access.readable(request, body.scope, body.user_id)
        keys = {
            k: v.strip()
            for k in ("tool_call_id", "result_ref", "node_id", "canvas")
            if (v := getattr(body, k))
        }
        try:
            return svc.read(scope, body.session_key, body.offset, body.length, **keys)
        except OffloadInputError as e:
            return _unprocessable(e)
        except OffloadNotFound as e:
            return JSONResponse({"error": str(e)}, status_code=404)

    @router.get("/canvases")
    def canvases(
        request: Request,
        scope: str | None = None,
        user_id: str | None = None,
        session_key: str | None = None,
    ) -> Any:
        return svc.canvases(access.readable(request, scope, user_id), session_key)

    @router.post("/host-status")
    def host_status(body: s.OffloadHostStatusBody, request: Request) -> Any:
        scope = access.writable(request, body.scope, body.user_id)
        fallback = body.fallback.strip() if body.fallback and body.fallback.strip() else None
        try:
            return asdict(svc.hosts.report(body.host, body.engine, fallback, scope))
        except TooManyHosts as e:
            return JSONResponse({"error": str(e)}, status_code=429)

    @router.get("/guide")
    def guide(
        request: Request,
        scope: str | None = None,
        user_id: str | None = None,
        session_key: str | None = None,
    ) -> Any:
        return svc.guide(access.readable(request, scope, user_id), session_key)

    return router

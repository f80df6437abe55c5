"""The gateway's error answers: every bad input is a 4xx with ``{"error": "..."}`` naming what
is wrong (400 unparseable JSON or no body, 404 unknown route, 405 with ``Allow``, 415 not sent as
JSON, 422 a field wrong or missing); any other exception is a 500 naming it, and is logged."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

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


def install_error_handlers(app: FastAPI) -> None:
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

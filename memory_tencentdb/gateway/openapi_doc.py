"""``/openapi.json`` lists every status each route answers, not only FastAPI's 200/422.

The statuses come from where they are produced, so a reader of the document can state them:

- every route: 400 (a ``Content-Length`` that is not a number), 403 (a ``Host`` not allowed,
  an ``Origin`` not allowed; a scope the key may not touch), 413 (a body over the limit: the
  guard counts any body, a GET's too) and 500 (a fault of ours) — ``gateway/security.py``;
- every route but ``GET /health``: 401 (no key, or not a key of this gateway);
- a route with a JSON body: 400 (not JSON, or no body), 415 (not sent as JSON), 422 (a field
  wrong or missing) — ``app.py``'s validation handler;
- a route with query or path parameters: 422;
- a route that looks something up by id: 404 (``ROUTE_SPECIFIC``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

WHY = {
    400: "Invalid JSON body, missing body, or an invalid Content-Length header",
    401: "No key, or a key this gateway does not know (Authorization: Bearer <key>)",
    403: "Host or Origin not allowed, or a scope the caller's key may not read or write",
    404: "No such record in this scope",
    413: "Request body too large",
    415: "Body not sent as application/json",
    422: "A field is wrong or missing (the message names it)",
    500: "Internal error of the gateway (logged)",
}
# Statuses a route answers besides the general rules above: (method, path) -> statuses.
ROUTE_SPECIFIC: dict[tuple[str, str], dict[int, str]] = {
    ("POST", "/memories/forget"): {404: "An id given is not a memory of this scope"},
    ("POST", "/offload/read"): {404: "No offloaded result, node or canvas by that name"},
    ("POST", "/admin/shutdown"): {200: 'A drain was cancelled ({"cancel": true})'},
}
ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "string"}},
    "required": ["error"],
}


def statuses(method: str, path: str, operation: dict[str, Any]) -> dict[int, str]:
    """Every status other than the route's success answer, with why (see the module doc)."""
    out = {code: WHY[code] for code in (400, 403, 413, 500)}
    if not (method == "GET" and path == "/health"):
        out[401] = WHY[401]
    if "requestBody" in operation:
        out.update({415: WHY[415], 422: WHY[422]})
    if operation.get("parameters"):
        out[422] = WHY[422]
    if "{" in path:
        out[404] = WHY[404]
    out.update(ROUTE_SPECIFIC.get((method, path), {}))
    return out


def document_statuses(app: FastAPI) -> None:
    """Make ``app.openapi()`` list every status of every route (errors as ``{"error": ...}``)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for path, operations in schema.get("paths", {}).items():
            for method, op in operations.items():
                responses = op.setdefault("responses", {})
                for code, why in statuses(method.upper(), path, op).items():
                    if 200 <= code < 300:
                        responses.setdefault(str(code), {"description": why})
                    else:
                        responses[str(code)] = {"description": why, "content": error}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override

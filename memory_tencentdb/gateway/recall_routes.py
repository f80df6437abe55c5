"""Reading memory back: ``POST /recall`` (what a host injects before a turn) and
``POST /search/memories`` / ``POST /search/conversations`` (what its tools and the CLI ask)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway import schemas as s


def recall_router(engine: Engine) -> APIRouter:
    router = APIRouter()

    @router.post("/recall")
    def recall(body: s.RecallBody, request: Request) -> dict[str, Any]:
        names = body.tool_names.model_dump(exclude_none=True) if body.tool_names else None
        scope = access.readable(request, body.scope, body.user_id)
        teams = access.team_scopes(request, scope, body.team_scopes)
        result = engine.recall(body.query, scope, names, team_scopes=teams)
        return result.as_json()

    @router.post("/search/memories")
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

    @router.post("/search/conversations")
    def search_conversations(body: s.SearchConversationsBody, request: Request) -> dict[str, Any]:
        scope = access.readable(request, body.scope, body.user_id)
        return engine.search_conversations(
            body.query,
            scope,
            body.limit,
            body.session_key,
            team_scopes=access.team_scopes(request, scope, body.team_scopes),
        )

    return router

"""The hub's own JSON routes (``/hub/api/...``), for what the gateway's API does not answer yet:
pyramid counts, pages of memories by scene and of conversations, search with time and session
filters, the recall explanation, offload sessions with their token chart, team scopes.

They sit behind the same guard as every route (auth, Host allow-list, body limit) and check
scopes with the same ``gateway/access.py`` calls; everything the page changes goes through the
gateway's own routes (``PATCH``/``DELETE /memories``, ``POST /memories/forget``). Queries travel
in POST bodies: memory text never appears in a URL (nor, therefore, in any access log).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway.schemas import NonEmpty, OptText, QueryText, Scoped, TeamScopes
from memory_tencentdb.hub import explain, offload_view
from memory_tencentdb.hub.counts import TypeCounts
from memory_tencentdb.hub.sessions import SESSION_PREFIX, HubSessions, key_digest
from memory_tencentdb.operations import browse
from memory_tencentdb.operations.browse import BadRequest

PAGE = 50


class HubSearchBody(Scoped):
    query: NonEmpty
    kind: Literal["memories", "conversations"] = "memories"
    limit: int = Field(20, ge=1, le=50)
    type: Literal["persona", "episodic", "instruction"] | None = None
    since: OptText = None  # a date, date-time or age (7d), as GET /memories
    until: OptText = None
    session_key: OptText = None
    team_scopes: TeamScopes = Field(None, max_length=50)


class ExplainBody(Scoped):
    query: NonEmpty
    team_scopes: TeamScopes = Field(None, max_length=50)


def _bad(message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=422)


def _session_id(request: Request) -> str | None:
    raw = request.headers.get("authorization", "").strip()
    prefix = "Bearer " + SESSION_PREFIX.decode()
    return raw[len(prefix) :] if raw.startswith(prefix) else None


def hub_router(engine: Engine, sessions: HubSessions) -> APIRouter:
    router = APIRouter(prefix="/hub/api")
    type_counts = TypeCounts()

    @router.get("/me")
    def me(request: Request) -> dict[str, Any]:
        """Who the page is logged in as, and the CSRF token its mutations must carry."""
        who = access.caller(request)
        sid = _session_id(request)
        session = sessions.get(sid) if sid else None
        return {
            "principal": who.name,
            "owner": who.owner,
            "auth": engine.auth.mode,
            "csrf": session.csrf if session else None,
        }

    @router.post("/login-link")
    def login_link(request: Request) -> Any:
        """A one-time login link for the caller's own key (``memory-tencentdb hub``). Only a key
        may ask: a browser session cannot mint links for itself."""
        if _session_id(request) is not None:
            return JSONResponse(
                {"error": "Forbidden: ask with the key, not a hub session"}, status_code=403
            )
        raw = request.headers.get("authorization", "").strip()
        token = raw[len("Bearer ") :] if raw.startswith("Bearer ") else ""
        link = sessions.new_link(key_digest(token) if token else b"")
        host = request.headers.get("host") or f"127.0.0.1:{engine.settings.server.port}"
        return {"url": f"http://{host}/hub/#login={link}", "expires_in_s": 300}

    @router.get("/pyramid")
    def pyramid(request: Request, scope: QueryText = None, user_id: QueryText = None) -> Any:
        """Counts per layer: persona (L3), scenes (L2), memories by type and priority (L1),
        conversations (L0)."""
        name = access.readable(request, scope, user_id)
        by_type: dict[str, dict[str, Any]] = {}
        for type_, priority, n in type_counts.get(engine.store, name):
            entry = by_type.setdefault(type_, {"type": type_, "count": 0, "priorities": {}})
            entry["count"] += n
            entry["priorities"][str(priority)] = n
        total = engine.store.session_count(name)
        persona = browse.persona(engine.data_dir, name)
        scenes = browse.scenes(engine.data_dir, name)["scenes"]
        return {
            "scope": name,
            "persona": persona,
            "scenes": [
                {k: s[k] for k in ("filename", "summary", "heat", "updated")} for s in scenes
            ],
            "memories": {
                "total": sum(e["count"] for e in by_type.values()),
                "by_type": sorted(by_type.values(), key=lambda e: e["type"]),
            },
            "conversations": {
                "sessions": total,
                "messages": engine.store.count("l0_messages", name),
            },
        }

    @router.get("/scene")
    def scene(
        request: Request, filename: Annotated[str, Query(max_length=512)], scope: QueryText = None
    ) -> Any:
        """One scene with the memories it was folded from: those its lines quote, and those
        whose ``scene_name`` is the scene's name."""
        name = access.readable(request, scope, None)
        for s in browse.scenes(engine.data_dir, name)["scenes"]:
            if s["filename"] == filename:
                quoted = [ln[2:].strip() for ln in s["content"].splitlines() if ln.startswith("- ")]
                rows = engine.store.memories_with_content(name, quoted, 200)
                label = filename.removesuffix(".md")
                seen = {r.id for r in rows}
                for r in engine.store.list_memories(name, scene=label, limit=PAGE):
                    if r.id not in seen:
                        rows.append(r)
                return {**s, "memories": [r.public() for r in rows]}
        return JSONResponse({"error": f"No scene {filename!r} in this scope"}, status_code=404)

    @router.get("/memories")
    def memories(
        request: Request,
        scope: QueryText = None,
        type: QueryText = None,
        scene: QueryText = None,
        min_priority: Annotated[int | None, Query(ge=-1, le=100)] = None,
        cursor: QueryText = None,
        limit: Annotated[int, Query(ge=1, le=200)] = PAGE,
    ) -> Any:
        """A page of active memories, newest first (``next_cursor`` for the next)."""
        name = access.readable(request, scope, None)
        if type and type not in ("persona", "episodic", "instruction"):
            return _bad(f"type: must be persona, episodic or instruction, got {type!r}")
        if cursor and not cursor.isdigit():
            return _bad(f"cursor: not a cursor this gateway gave out: {cursor!r}")
        rows = engine.store.list_memories(
            name,
            type_=type or None,
            scene=scene or None,
            min_priority=min_priority,
            before_seq=int(cursor) if cursor else None,
            limit=limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        return {
            "scope": name,
            "items": [r.public() for r in rows],
            "next_cursor": str(rows[-1].seq) if more and rows else None,
        }

    @router.get("/conversations")
    def conversations(
        request: Request,
        scope: QueryText = None,
        offset: Annotated[int, Query(ge=0, le=10**7)] = 0,
        limit: Annotated[int, Query(ge=1, le=200)] = PAGE,
    ) -> Any:
        name = access.readable(request, scope, None)
        total, rows = engine.store.conversation_sessions(name, limit, offset)
        return {"scope": name, "total": total, "offset": offset, "sessions": rows}

    @router.get("/conversations/messages")
    def messages(
        request: Request,
        session_key: Annotated[str, Query(max_length=512)],
        scope: QueryText = None,
        after: Annotated[int | None, Query(ge=0)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> Any:
        name = access.readable(request, scope, None)
        rows = engine.store.session_messages(name, session_key, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return {
            "scope": name,
            "session_key": session_key,
            "messages": [
                {
                    "id": m.id,
                    "role": m.role,
                    "speaker": m.speaker,
                    "content": m.content,
                    "timestamp": m.timestamp,
                    "recorded_at": m.recorded_at,
                }
                for m in rows
            ],
            "next_after": rows[-1].seq if more and rows else None,
        }

    @router.post("/search")
    def search(body: HubSearchBody, request: Request) -> Any:
        """The agent's hybrid search (``Engine.search_*``, as ``POST /search/*``), then the
        page's filters: time (``since``/``until`` on updated or recorded time) and session."""
        name = access.readable(request, body.scope, body.user_id)
        teams = access.team_scopes(request, name, body.team_scopes)
        try:
            since = browse.parse_since(body.since)
            until = browse.parse_since(body.until)
        except BadRequest as e:
            return _bad(str(e).replace("since:", "since/until:"))
        filtered = bool(since or until or (body.session_key and body.kind == "memories"))
        fetch = 50 if filtered else body.limit
        if body.kind == "memories":
            found = engine.search_memories(
                body.query, name, fetch, team_scopes=teams, type=body.type
            )
        else:
            found = engine.search_conversations(
                body.query, name, fetch, body.session_key or None, team_scopes=teams
            )
        items = []
        for item in found["items"]:
            when = item.get("updated_at") or item.get("recorded_at") or ""
            if since and (not when or when < since):
                continue
            if until and when and when > until:
                continue
            if body.session_key and body.kind == "memories":
                row = engine.store.memory_by_id(item["id"])
                if row is None or row.session_key != body.session_key:
                    continue
            items.append(item)
        return {
            "scope": name,
            "kind": body.kind,
            "strategy": found.get("strategy"),
            "items": items[: body.limit],
        }

    @router.post("/recall-explain")
    def recall_explain(body: ExplainBody, request: Request) -> Any:
        name = access.readable(request, body.scope, body.user_id)
        teams = access.team_scopes(request, name, body.team_scopes)
        return explain.explain_recall(engine, body.query, name, teams)

    @router.get("/offload/sessions")
    def offload_sessions(request: Request, scope: QueryText = None) -> Any:
        return offload_view.sessions(engine.offload, access.readable(request, scope, None))

    @router.get("/teams")
    def teams(request: Request) -> dict[str, Any]:
        """Team scopes from ``keys.json`` with who may read and write, for the scopes the
        caller may read (all for an owner). Read-only: the file is the place to change them."""
        who = access.caller(request)
        policy = request.app.state.access_policy.current()
        out = []
        for scope, team in sorted(policy.teams.items()):
            if not policy.can_read(who, scope):
                continue
            out.append(
                {
                    "scope": scope,
                    "writers": sorted(team.writers),
                    "readers": sorted(team.readers - team.writers),
                    "access": policy.access(who, scope),
                }
            )
        return {"principal": who.name, "source": policy.source, "teams": out}

    return router

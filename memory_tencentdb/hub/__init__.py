"""Memory Hub: a web page served by the gateway at ``/hub`` to see, search, explain, correct and
forget memory, with the offload task canvases drawn.

Plain HTML, CSS and JavaScript in ``static/`` (no build step, nothing from the network; Mermaid's
bundle with its licence in ``static/vendor/``). The page reads and changes memory only through
the gateway's routes and the hub's own (``routes.py``), behind the same guard, so a principal
sees and changes exactly what its key allows. ``gate.py`` turns a browser session into that
key's principal; ``sessions.py`` holds the one-time links and sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_tencentdb.hub.gate import HubGate, cookie_name
from memory_tencentdb.hub.routes import hub_router
from memory_tencentdb.hub.sessions import HubSessions, SessionAwarePolicy

if TYPE_CHECKING:
    from fastapi import FastAPI

    from memory_tencentdb.engine import Engine
    from memory_tencentdb.gateway.access import LivePolicy
    from memory_tencentdb.gateway.security import GatewayGuard


def mount(app: FastAPI, guard: GatewayGuard, engine: Engine, policy: LivePolicy) -> HubGate:
    """Add the hub's routes to ``app`` and put its gate in front of ``guard``; serve the gate."""
    sessions = HubSessions(policy, cookie_name(engine.settings.server.port))
    app.include_router(hub_router(engine, sessions))
    guard.policy = SessionAwarePolicy(policy, sessions)
    app.state.hub_sessions = sessions
    return HubGate(guard, sessions)

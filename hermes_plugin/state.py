"""Process-wide state shared by every provider instance (and every copy of this module).

Why: Hermes builds a new provider for every agent (one per chat session in its messaging
gateway) and may import the plugin folder under two module names. The gateway connection,
its breaker, its supervisor, the tool-hook routing table and log handlers must exist once per
process, so they live in one object parked in ``sys.modules`` under a fixed key. Nothing is
created at import time; ``shared()`` builds it on first use.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

_KEY = "_memory_tencentdb_hermes_shared"


def shared() -> Any:
    """The single shared namespace for this process."""
    ns = sys.modules.get(_KEY)
    if ns is None:
        # Any: the attributes below are set at run time (a module is what sys.modules holds).
        fresh: Any = types.ModuleType(_KEY)
        fresh.lock = threading.RLock()
        fresh.gateways = {}  # (host, port, api_key) -> Gateway
        fresh.sessions = {}  # Hermes session id -> weakref to a provider
        fresh.hook = None  # the post_tool_call callback registered with Hermes
        fresh.log_files = set()  # provider.log paths that already have a handler
        ns = sys.modules.setdefault(_KEY, fresh)
    return ns

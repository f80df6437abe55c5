"""The ``post_tool_call`` hook, attached to Hermes's process-wide plugin manager.

Why this route: the context Hermes hands a memory provider's ``register(ctx)`` turns
``register_hook`` into a no-op, so the hook is attached once per process to the global plugin
manager instead (docs: hermes-host.md §2c, option 1). Hooks are process-global, so calls are
routed by ``session_id`` to the provider that owns that Hermes session; unknown sessions
(subagents, other agents) are ignored. The attachment is re-checked on every ``register`` since
a forced plugin rediscovery clears Hermes's hook table.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from .state import shared

log = logging.getLogger("hermes_memory_tencentdb")

HOOK_NAME = "post_tool_call"


def route(session_id: str, provider: Any) -> None:
    """Send this Hermes session's tool calls to ``provider``."""
    if session_id:
        st = shared()
        with st.lock:
            st.sessions[session_id] = weakref.ref(provider)


def unroute(session_id: str, provider: Any) -> None:
    st = shared()
    with st.lock:
        ref = st.sessions.get(session_id)
        if ref is not None and ref() in (provider, None):
            st.sessions.pop(session_id, None)


def _on_post_tool_call(**kwargs: Any) -> None:
    """Hermes calls this on the turn thread after every tool; it must be cheap and never raise."""
    try:
        session_id = str(kwargs.get("session_id") or "")
        st = shared()
        ref = st.sessions.get(session_id)
        provider = ref() if ref is not None else None
        if provider is not None:
            provider.record_tool_call(kwargs)
    except Exception:  # a hook must never break a turn
        log.debug("memory_tencentdb: post_tool_call routing failed", exc_info=True)


def install(ctx: Any) -> bool:
    """Attach the hook once per process; True if it is attached after the call."""
    st = shared()
    with st.lock:
        if st.hook is None:
            st.hook = _on_post_tool_call
        callback = st.hook
        # A real PluginContext (general loader, kind: standalone) registers for real.
        if hasattr(ctx, "register_hook") and type(ctx).__name__ == "PluginContext":
            manager = getattr(ctx, "_manager", None)
            if manager is not None and callback in manager._hooks.get(HOOK_NAME, []):
                return True
            ctx.register_hook(HOOK_NAME, callback)
            return True
        try:
            from hermes_cli.plugins import (
                PluginContext,
                PluginManifest,
                get_plugin_manager,
            )
        except Exception:
            return False  # not running inside Hermes (tests, benchmarks)
        try:
            manager = get_plugin_manager()
            if callback in manager._hooks.get(HOOK_NAME, []):
                return True
            manifest = PluginManifest(name="memory_tencentdb", source="user", kind="exclusive")
            PluginContext(manifest, manager).register_hook(HOOK_NAME, callback)
            return True
        except Exception:
            log.debug("memory_tencentdb: could not attach post_tool_call hook", exc_info=True)
            return False

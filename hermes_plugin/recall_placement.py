"""Where this turn's recalled memories go in Hermes: the ``recall_placement`` setting.

- ``prepend`` (default): they are what ``prefetch`` returns, which Hermes adds to this turn's
  user message in the API copy (never to the stored transcript). The system prompt then holds
  only the stable part (persona, scenes, tool guide), so a provider's prompt cache keeps the
  system prompt and the earlier turns (bench/injection_bench.py).
- ``appendSystem``: they are appended to the system message of every API call of the turn, after
  the stable part, by an ``llm_request`` middleware (the only per-call seam Hermes has: it builds
  its system prompt once per session). The system prompt then changes whenever the memories do.

The middleware is process-wide: calls are routed by ``session_id`` to the provider that owns the
session (``hooks.route``), which holds the memories its last prefetch got. It does no I/O,
and on any trouble it leaves the request as it is.
"""

from __future__ import annotations

import logging
from typing import Any

from .state import shared

log = logging.getLogger("hermes_memory_tencentdb")

PLACEMENTS = ("prepend", "appendSystem")
PLUGIN_NAME = "memory_tencentdb"


def on_llm_request(**kw: Any) -> dict[str, Any] | None:
    """Hermes's ``llm_request`` middleware: never raises, returns None to leave the request."""
    try:
        return _llm_request(kw)
    except Exception:  # noqa: BLE001 - a middleware must never break a call
        log.debug("memory_tencentdb: recall llm_request failed", exc_info=True)
        return None


def _llm_request(kw: dict[str, Any]) -> dict[str, Any] | None:
    st = shared()
    ref = st.sessions.get(str(kw.get("session_id") or ""))
    provider = ref() if ref is not None else None
    memories = provider.system_memories() if provider is not None else ""
    if not memories or str(kw.get("api_mode") or "chat_completions") != "chat_completions":
        return None
    request = kw.get("request")
    if not isinstance(request, dict):
        return None
    messages = request.get("messages")
    if not isinstance(messages, list):
        return None
    return {"request": {**request, "messages": with_memories(messages, memories)}}


def with_memories(messages: list[Any], memories: str) -> list[Any]:
    """``messages`` with ``memories`` at the end of the first system message (one is added
    first when there is none); the list and that message are copies."""
    out = list(messages)
    first = out[0] if out else None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        content = first.get("content")
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": memories}]
        else:
            content = f"{content or ''}\n\n{memories}".lstrip()
        out[0] = {**first, "content": content}
    else:
        out.insert(0, {"role": "system", "content": memories})
    return out


def install() -> bool:
    """Attach the middleware to Hermes's plugin manager once per process; True if attached."""
    try:
        from hermes_cli.plugins import (
            PluginContext,
            PluginManifest,
            get_plugin_manager,
        )
    except Exception:  # noqa: BLE001
        return False  # not inside Hermes
    st = shared()
    with st.lock:
        callback = getattr(st, "recall_seam", None)
        if callback is None:
            callback = st.recall_seam = on_llm_request
    try:
        manager = get_plugin_manager()
        if callback in manager._middleware.get("llm_request", []):
            return True
        ctx = PluginContext(
            PluginManifest(name=PLUGIN_NAME, source="user", kind="exclusive"), manager
        )
        ctx.register_middleware("llm_request", callback)
        return True
    except Exception:  # noqa: BLE001
        log.warning("memory_tencentdb: could not attach the recall placement seam", exc_info=True)
        return False

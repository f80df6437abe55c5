"""The offload seams Hermes calls on the turn thread: two middleware, one hook, one engine.

- ``tool_execution`` middleware: every tool's result goes to ``POST /offload/tool-result``; a
  stub answered by the gateway replaces it for the model, ``post_tool_call`` and the
  transcript (offload-hosts.md §1.3). On a timeout or any error the result stays as it was.
- ``llm_request`` middleware, before every API call: our earlier canvas out, exactly one
  canvas block in, stubs re-applied (the API copy only, never persisted). The view is cached
  per session and refreshed with ``POST /offload/assemble`` only when something changed.
- ``pre_llm_call`` hook, once per user turn: the new prompt becomes pending, and the next
  assemble carries it to the gateway (its task boundary). It returns None: what a
  ``pre_llm_call`` returns is stored in the turn's row and replayed on every later turn.

Registered once per process on the global plugin manager (the memory loader's context has
no middleware methods), only when offload is switched on; re-checked on every ``register``
because a forced plugin rediscovery clears Hermes's tables.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from . import offload
from .offload_engine import ENGINE_NAME, OffloadEngine

log = logging.getLogger("hermes_memory_tencentdb")

PLUGIN_NAME = "memory_tencentdb"
LEVELS_THAT_REPLACE = ("aggressive", "emergency")
MAX_PROMPT_CHARS = 4000


# -- tool_execution ------------------------------------------------------------------------------


def on_tool_execution(**kw: Any) -> Any:
    """Run the tool, then offer its result to the gateway; the stub, or the result unchanged."""
    next_call = kw["next_call"]
    result = next_call(kw.get("args"))  # a tool's own exception must reach Hermes as it is
    try:
        return _offload_result(kw, result)
    except Exception:  # noqa: BLE001 - the original result, whatever happened
        log.debug("memory_tencentdb: offload tool_execution failed", exc_info=True)
        return result


def _offload_result(kw: dict[str, Any], result: Any) -> Any:
    session_id = kw.get("session_id")
    target = offload.route_for(session_id)
    tool_name = str(kw.get("tool_name") or "")
    tool_call_id = str(kw.get("tool_call_id") or "")
    if target is None or tool_name == offload.READ_TOOL or not tool_call_id:
        return result
    if not isinstance(result, str) or not result:
        return result
    args = kw.get("original_args", kw.get("args"))
    out = offload.post_tool_result(target, tool_name, tool_call_id, args, result)
    view = offload.view_for(session_id)
    replacement = out.get("replacement") if out else None
    kept = replacement if isinstance(replacement, str) and replacement else result
    with view.lock:
        view.dirty = True
        view.added_tokens += offload.estimate_text(kept)
        if kept is not result:
            view.stubs[tool_call_id] = kept
    return kept


# -- llm_request ---------------------------------------------------------------------------------


def on_llm_request(**kw: Any) -> dict[str, Any] | None:
    """The request with our canvas and stubs, or None (Hermes sends it unchanged)."""
    try:
        return _llm_request(kw)
    except Exception:  # noqa: BLE001 - never break an API call
        log.debug("memory_tencentdb: offload llm_request failed", exc_info=True)
        return None


def _tools_tokens(view: offload.View, tools: Any) -> int:
    if not isinstance(tools, list) or not tools:
        return 0
    key = tuple(
        str((t.get("function") or {}).get("name") or t.get("name") or "")
        if isinstance(t, dict)
        else ""
        for t in tools
    )
    if key != view.tools_key:
        view.tools_key = key
        view.tools_tokens = offload.estimate_text(json.dumps(tools, ensure_ascii=False))
    return view.tools_tokens


def _llm_request(kw: dict[str, Any]) -> dict[str, Any] | None:
    session_id = kw.get("session_id")
    target = offload.route_for(session_id)
    if target is None or str(kw.get("api_mode") or "chat_completions") != "chat_completions":
        return None
    request = kw.get("request")
    if not isinstance(request, dict):
        return None
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    view = offload.view_for(session_id)
    tools_tokens = _tools_tokens(view, request.get("tools"))
    system_tokens = sum(
        offload.estimate_message(m)
        for m in messages
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    )
    with view.lock:
        view.overhead_tokens = system_tokens + tools_tokens
        refresh = view.dirty and not view.refreshing
        if refresh:
            view.refreshing = True
        prompt = view.pending_prompt
    sent = messages
    if refresh:
        try:
            sent = _refresh(target, view, messages, tools_tokens, prompt)
        finally:
            with view.lock:
                view.refreshing = False
    with view.lock:
        new = offload.apply(view, sent)
        if not view.gateway_tokens:  # the engine's fallback when the gateway gave no count
            view.request_tokens = offload.estimate_messages(new) + tools_tokens
            view.added_tokens = 0
    if len(new) == len(messages) and all(a is b for a, b in zip(new, messages, strict=True)):
        return None
    return {"request": {**request, "messages": new}, "source": PLUGIN_NAME}


def _refresh(
    target: offload.Route,
    view: offload.View,
    messages: list[Any],
    tools_tokens: int,
    prompt: str,
) -> list[Any]:
    """Something changed: ``POST /offload/assemble`` with the whole request; what to send.

    The answer gives this session's canvas message (the gateway's: one whenever the session
    has a canvas) and the stubs it chose; both are cached for the calls until the next change.
    Past the mild levels its list is sent as it is. On failure the cache stays as it was.
    """
    answer = offload.assemble(
        target,
        messages,
        offload.budget(target, view),
        target.settings.offload_request_timeout_s,
        system_tokens=tools_tokens,
        prompt=prompt,
    )
    with view.lock:
        view.refreshes += 1
        if answer is None:
            view.gateway_tokens = 0  # unknown again: the engine falls back to its estimate
            return messages
        offload.learn(view, messages, answer)
        view.dirty = False
        if view.pending_prompt == prompt:
            view.pending_prompt = ""
    stats = raw if isinstance(raw := answer.get("stats"), dict) else {}
    if answer.get("level") in LEVELS_THAT_REPLACE or stats.get("request_restored"):
        # Past the mild levels, or Hermes's list lost the turn's request (after a compaction
        # its live list can hold only our notes): the gateway's list for this call.
        return answer["messages"]
    return messages


# -- pre_llm_call --------------------------------------------------------------------------------


def on_pre_llm_call(**kw: Any) -> None:
    """A new user prompt: the next assemble tells the gateway (task boundary). Returns None."""
    try:
        session_id = kw.get("session_id")
        if offload.route_for(session_id) is None:
            return None
        message = kw.get("user_message")
        if isinstance(message, list):  # multimodal: its text parts
            message = " ".join(
                str(p.get("text")) for p in message if isinstance(p, dict) and p.get("text")
            )
        if not isinstance(message, str) or not message.strip():
            return None
        view = offload.view_for(session_id)
        with view.lock:
            view.pending_prompt = message[:MAX_PROMPT_CHARS]
            view.dirty = True
    except Exception:  # noqa: BLE001
        log.debug("memory_tencentdb: offload pre_llm_call failed", exc_info=True)
    return None


# -- registration --------------------------------------------------------------------------------


def _configured_engine() -> str:
    """``context.engine`` from Hermes's config.yaml ("" if unknown)."""
    try:
        from hermes_cli.config import load_config

        ctx = (load_config() or {}).get("context") or {}
        return str(ctx.get("engine") or "") if isinstance(ctx, dict) else ""
    except Exception:  # noqa: BLE001
        return ""


def _seams() -> Any:
    """One set of callbacks per process, whichever module copy registers first."""
    st = offload._ns()
    with st.lock:
        if st.offload_seams is None:
            st.offload_seams = {
                "tool_execution": on_tool_execution,
                "llm_request": on_llm_request,
                "pre_llm_call": on_pre_llm_call,
            }
        return st.offload_seams


def install() -> bool:
    """Attach the seams to Hermes's plugin manager (idempotent); True if they are attached.

    The engine is registered only when config.yaml selects it: registering it otherwise would
    take the single engine slot from another plugin the user chose.
    """
    try:
        from hermes_cli.plugins import (
            PluginContext,
            PluginManifest,
            get_plugin_manager,
        )
    except Exception:  # noqa: BLE001
        return False  # not inside Hermes
    try:
        seams = _seams()
        manager = get_plugin_manager()
        ctx = PluginContext(
            PluginManifest(name=PLUGIN_NAME, source="user", kind="exclusive"), manager
        )
        for kind in ("tool_execution", "llm_request"):
            if seams[kind] not in manager._middleware.get(kind, []):
                ctx.register_middleware(kind, seams[kind])
        if seams["pre_llm_call"] not in manager._hooks.get("pre_llm_call", []):
            ctx.register_hook("pre_llm_call", seams["pre_llm_call"])
        current = getattr(manager, "_context_engine", None)
        if current is None and _configured_engine() == ENGINE_NAME:
            ctx.register_context_engine(OffloadEngine())
        return True
    except Exception:  # noqa: BLE001
        log.warning("memory_tencentdb: could not attach the offload seams", exc_info=True)
        return False

"""The ``memory_tencentdb`` context engine: compaction near the limit through the gateway.

Selected with ``context: {engine: memory_tencentdb}`` in config.yaml (``install-hermes.sh
--offload``). ``compress()`` returns the gateway's ``/offload/assemble`` list, which Hermes then
keeps as the live and persisted transcript (offload-hosts.md §1.2); the canvas block is left
out of it, since the llm_request middleware inserts a fresh one before every call.

Why the state is plain: Hermes gives every agent a ``copy.deepcopy`` of the registered engine
and falls back to its built-in compressor if that copy fails, so the engine holds only
strings and numbers and reaches the gateway through the module-level routing table. Why
every method catches everything: an exception from ``compress()`` aborts the user's turn, and
Hermes puts no timeout around it, so the gateway call has its own deadline and any failure
returns the input unchanged.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from . import offload
from .config import OFFLOAD_MIN_BUDGET, Settings
from .link import connect
from .ownership import default_scope

try:
    from agent.context_engine import ContextEngine
except ImportError:  # outside Hermes (unit tests): the attributes Hermes reads are enough

    class ContextEngine:  # type: ignore[no-redef]  # the stand-in for the import above
        """Stand-in for Hermes's ABC when Hermes is not installed."""

        last_prompt_tokens: int = 0
        last_completion_tokens: int = 0
        last_total_tokens: int = 0
        threshold_tokens: int = 0
        context_length: int = 0
        compression_count: int = 0
        threshold_percent: float = 0.75
        protect_first_n: int = 3
        protect_last_n: int = 6

        def update_model(self, model: str, context_length: int, **kw: Any) -> None:
            self.context_length = context_length
            self.threshold_tokens = int(context_length * self.threshold_percent)

        def on_session_reset(self) -> None:
            self.last_prompt_tokens = 0
            self.compression_count = 0


log = logging.getLogger("hermes_memory_tencentdb")

ENGINE_NAME = "memory_tencentdb"
FOLDABLE_SHARE = 0.1  # the messages (beyond system prompt and tools) must hold this much
REGROW_SHARE = 0.05  # after a compaction, the next waits until the context grew this much
FORCE_LEVEL = 0.9  # `/compress`: the share of the budget the list is made to fill


def _profile() -> str:
    try:
        from hermes_cli.profiles import get_active_profile_name

        return str(get_active_profile_name() or "default")
    except Exception:  # noqa: BLE001
        return "default"


class OffloadEngine(ContextEngine):
    """Hermes ContextEngine backed by the gateway's offload (plain, deep-copyable state)."""

    threshold_percent = offload.COMPRESS_RATIO

    def __init__(self) -> None:
        self.session_id = ""
        self.hermes_home = ""
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.context_length = 0
        self.threshold_tokens = 0
        self.compression_count = 0
        self.compress_failures = 0

    @property
    def name(self) -> str:
        return ENGINE_NAME

    # -- session and model ---------------------------------------------------------------------

    def update_model(self, model: str, context_length: int, *args: Any, **kwargs: Any) -> None:
        try:
            self.context_length = int(context_length or 0)
            self._sync_view()
        except Exception:  # noqa: BLE001
            log.debug("memory_tencentdb: engine update_model failed", exc_info=True)

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        """Bind to the agent's session; route it here if no provider of ours did."""
        try:
            self.session_id = str(session_id or "")
            self.hermes_home = str(kwargs.get("hermes_home") or self.hermes_home or "")
            if self.session_id and offload.route_for(self.session_id) is None:
                settings = Settings.load(self.hermes_home or None)
                if settings.offload:
                    scope = settings.scope or default_scope(settings.home, _profile(), "")
                    offload.route(
                        self.session_id,
                        offload.Route(connect(settings), self.session_id, scope, owner="engine"),
                    )
            self._sync_view()
        except Exception:  # noqa: BLE001
            log.debug("memory_tencentdb: engine on_session_start failed", exc_info=True)

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Called at compaction boundaries too: the route stays (the session goes on)."""

    def _sync_view(self) -> None:
        if not self.session_id:
            return
        target = offload.route_for(self.session_id)
        view = offload.view_for(self.session_id)
        if self.context_length:
            view.context_length = self.context_length
        if target is not None:
            self.threshold_tokens = int(offload.budget(target, view) * offload.COMPRESS_RATIO)

    # -- usage and the decision -----------------------------------------------------------------

    def update_from_response(self, usage: dict[str, Any]) -> None:
        try:
            self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
            self.last_total_tokens = int(usage.get("total_tokens") or 0)
        except Exception:  # noqa: BLE001
            pass

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """At the gateway's aggressive threshold (0.85 of the budget), when there is something
        to fold.

        The size is the gateway's exact count of the last request plus the results since (a
        rough estimate only before the gateway answered once). Why the two extra conditions:
        every compaction makes Hermes rewrite the transcript, so one that cannot fold anything
        (the system prompt and tool schemas alone fill the budget, or the last compaction got
        no lower than this) must not run, let alone three times a turn.
        """
        try:
            target = offload.route_for(self.session_id)
            if target is None:
                return False
            view = offload.view_for(self.session_id)
            budget = offload.budget(target, view)
            limit = int(budget * offload.COMPRESS_RATIO)
            self.threshold_tokens = limit
            if view.gateway_tokens:
                size = view.gateway_tokens + view.added_tokens
            else:
                size = max(int(prompt_tokens or 0), view.request_tokens + view.added_tokens)
            if size < limit:
                return False
            if size - view.overhead_tokens < budget * FOLDABLE_SHARE:
                return False
            return not (view.compress_floor and size < view.compress_floor + budget * REGROW_SHARE)
        except Exception:  # noqa: BLE001
            return False

    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        return len(messages or []) > 1

    # -- compaction ----------------------------------------------------------------------------

    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
    ) -> list[dict[str, Any]]:
        """The gateway's assembled list (without its canvas block), or ``messages`` unchanged."""
        try:
            out = self._compress(messages, force)
        except Exception:  # noqa: BLE001 - an exception here would abort the user's turn
            log.warning("memory_tencentdb: offload compress failed", exc_info=True)
            out = None
        if out is None:
            self.compress_failures += 1
            return messages
        self.compression_count += 1
        return out

    def _compress(self, messages: list[dict[str, Any]], force: bool) -> list[dict[str, Any]] | None:
        target = offload.route_for(self.session_id)
        if target is None or not isinstance(messages, list) or not messages:
            return None
        view = offload.view_for(self.session_id)
        limit = offload.budget(target, view)
        with view.lock:
            prompt = view.pending_prompt
            overhead = view.overhead_tokens
        t0 = time.monotonic()
        deadline = target.settings.offload_compress_timeout_s
        answer = offload.assemble(
            target, messages, limit, deadline, system_tokens=overhead, prompt=prompt
        )
        if answer is None:
            return None
        for _ in range(3 if force else 2):
            # A compaction folds older turns, or it is not worth Hermes's transcript rewrite:
            # when the gateway only stubbed (its count after stubs is below its threshold, or
            # this is `/compress` below it), a budget that the list fills to 90 % after the
            # gateway's stubs (its own count) makes it fold. It stubs first and folds only what
            # is still over, hence a few steps, all within the deadline.
            if answer.get("level") in ("aggressive", "emergency"):
                break
            size = answer.get("estimated_tokens")
            left = deadline - (time.monotonic() - t0)
            if not isinstance(size, int | float) or left < 0.5:
                break
            tighter = max(OFFLOAD_MIN_BUDGET, int(size / FORCE_LEVEL))
            again = offload.assemble(target, messages, tighter, left, system_tokens=overhead)
            if again is None:
                break
            answer = again
        result = answer["messages"]
        users = [m for m in result if m.get("role") == "user" and not offload.is_canvas(m)]
        if users:
            result = [m for m in result if not offload.is_canvas(m)]
        result = offload.note_after_request(result)
        with view.lock:
            offload.learn(view, messages, answer)
            if view.pending_prompt == prompt:
                view.pending_prompt = ""
            view.request_tokens = offload.estimate_messages(result) + overhead
            view.gateway_tokens = int(answer.get("estimated_tokens") or 0)
            view.compress_floor = view.gateway_tokens
            view.added_tokens = 0
            view.dirty = True
        log.info(
            "memory_tencentdb: offload compaction of session %s: %d -> %d messages (level %s,"
            " ~%s tokens)",
            self.session_id,
            len(messages),
            len(result),
            answer.get("level"),
            answer.get("estimated_tokens"),
        )
        return result

    # -- the read tool (for agents without our memory provider) ---------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [dict(offload.READ_SCHEMA)]

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        try:
            if name != offload.READ_TOOL:
                return json.dumps({"error": f"unknown tool {name}"})
            window = offload.window_of(self.session_id)
            return offload.read_back(offload.route_for(self.session_id), args, window)
        except Exception as exc:  # noqa: BLE001
            return json.dumps({"error": f"offload read failed: {exc}"})

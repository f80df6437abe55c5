"""Context offload for Hermes: which session goes where, the per-session view, the gateway calls.

Why a process-wide table: Hermes's middleware, hooks and context engine are process-global
and also see subagents, so every seam finds its session by ``session_id`` here; an unknown id
means "not ours, pass through". The provider routes its session (its gateway session key and
scope); an agent without a provider (a subagent, a ``skip_memory`` agent) is routed by the
engine's ``on_session_start``. The table and the views live in the shared namespace
(state.py), so both copies of this module Hermes may import see one table.

Why every gateway call goes through ``call_within``: Hermes puts no timeout around a
middleware, a hook or ``compress()`` (offload-hosts.md §1.2-1.4), and httpx timeouts bound each
phase, not the whole call. So each call runs on a small pool and the seam waits at most its
deadline; a call that overstays is abandoned (its own httpx timeout ends it soon after) and
that seam carries on without offload. The provider's shared breaker gates every call, so a
gateway that is down costs microseconds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from .client import GatewayNotOurs, GatewayRejected, GatewayUnavailable
from .config import OFFLOAD_MIN_BUDGET, Settings
from .link import Gateway
from .state import shared
from .supervisor import NOT_OURS, STARTING

log = logging.getLogger("hermes_memory_tencentdb")

READ_TOOL = "memory_tencentdb_offload_read"
CANVAS_MARK = "<current_task_context"
HISTORY_MARK = "<history_task_context"
# The gateway signs its marker messages in their opening tag (memory_tencentdb.offload.messages):
# 64 bits of HMAC-SHA256 as 16 hex digits, looked for in a bounded head of the message.
_SIG = re.compile(r' sig="[0-9a-f]{16}"')
_OPEN_TAG_CHARS = 400
# The gateway's thresholds (memory.offload defaults): compaction at the aggressive level,
# the gateway's own stubbing of kept results from the mild level on.
COMPRESS_RATIO = 0.85
MILD_RATIO = 0.5
BUDGET_FLOOR = 1024
DEFAULT_CONTEXT = 200_000  # the gateway's default_context_window, when Hermes told us nothing
READ_TIMEOUT_S = 10.0
OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}

# A copy of the gateway's memory_tencentdb/offload/guide.py (TOOL_DESCRIPTION and
# HOST_TOOL_PARAMETERS; this plugin cannot import the gateway's package), held equal to it by
# tests/test_host_adapter_copies.py.
READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_call_id": {
            "type": "string",
            "description": "id of the tool call whose result to read",
        },
        "result_ref": {"type": "string", "description": "refs/<file>.md named in a stub"},
        "node_id": {"type": "string", "description": "canvas node id, NNN-N<k>"},
        "canvas": {"type": "string", "description": 'canvas file (NNN-label.mmd) or "active"'},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "where the page starts, in characters (the previous page names it)",
        },
    },
    "additionalProperties": False,
}

READ_SCHEMA: dict[str, Any] = {
    "name": READ_TOOL,
    "description": (
        "Read back what context offload moved out of your context: the full original result of a "
        "tool call (by tool_call_id or result_ref, exactly as the tool returned it), the steps of a "
        "task-canvas node (by node_id, e.g. 003-N2), or a task canvas (by canvas file name, or "
        '"active"). Use it whenever a stub or a canvas node lacks a detail you need. Give exactly '
        "one of the four. A long text comes in pages: a page ends by naming the call for the next "
        "page (the same key with offset); the pages joined are the original exactly."
    ),
    "parameters": READ_PARAMETERS,
}

GUIDE = (
    "## Context offload (memory_tencentdb)\n"
    "Large tool results in this conversation are replaced by a short stub that names the tool "
    "call, and a task canvas (a Mermaid flowchart inside <current_task_context>) shows the steps "
    "of the current task; older turns may be folded into <history_task_context>. Nothing is "
    f'lost: call `{READ_TOOL}` with {{"tool_call_id": "..."}} for the exact original result, '
    '{"node_id": "NNN-N<k>"} for the steps behind a canvas node, or {"canvas": "active"} for '
    "the whole canvas."
)


@dataclass
class Route:
    """Where one Hermes session's offload goes."""

    gw: Gateway
    session_key: str
    scope: str
    user_id: str = ""
    owner: str = "provider"  # "provider" | "engine" (an agent without our provider)

    @property
    def settings(self) -> Settings:
        return self.gw.settings

    def base(self) -> dict[str, Any]:
        body: dict[str, Any] = {"session_key": self.session_key, "scope": self.scope}
        if self.user_id:
            body["user_id"] = self.user_id
        return body


@dataclass
class View:
    """What the llm_request middleware puts into every request of one session, cached.

    ``dirty`` says the gateway's view may have changed (a new prompt, a tool result, a
    compaction) and the next request should refresh it; otherwise no HTTP is made.
    """

    canvas_block: str = ""
    stubs: dict[str, str] = field(default_factory=dict)
    dirty: bool = True
    refreshing: bool = False
    pending_prompt: str = ""
    context_length: int = 0
    overhead_tokens: int = 0  # system prompt + tool schemas of the last request
    tools_tokens: int = 0  # tool schemas alone (cached by their names)
    tools_key: tuple[str, ...] = ()
    request_tokens: int = 0  # estimate of the last request sent
    added_tokens: int = 0  # tool results kept since that request
    gateway_tokens: int = 0  # the gateway's count of the last transcript it saw (0: none yet)
    compress_floor: int = 0  # what the last compaction got down to (it cannot fold below)
    refreshes: int = 0
    # The turn's request as the gateway put it back (``stats.request_restored``): Hermes 0.19.0
    # can drop it from its live list after a compaction, so the calls that do not ask the
    # gateway (nothing changed, or it did not answer in time) put it back too.
    restored_request: dict[str, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _ns() -> Any:
    st = shared()
    with st.lock:
        if not hasattr(st, "offload_routes"):
            st.offload_routes = {}
            st.offload_views = {}
            st.offload_pool = None
            st.offload_seams = None
    return st


def route(session_id: str, target: Route) -> None:
    """Route ``session_id``'s seams to ``target`` (a provider's route wins over an engine's)."""
    if not session_id:
        return
    st = _ns()
    with st.lock:
        current = st.offload_routes.get(session_id)
        if current is not None and current.owner == "provider" and target.owner == "engine":
            return
        st.offload_routes[session_id] = target
        st.offload_views.setdefault(session_id, View())


def unroute(session_id: str, owner: str = "provider") -> None:
    st = _ns()
    with st.lock:
        current = st.offload_routes.get(session_id)
        if current is not None and current.owner == owner:
            st.offload_routes.pop(session_id, None)
            st.offload_views.pop(session_id, None)


def route_for(session_id: Any) -> Route | None:
    if not session_id:
        return None
    return _ns().offload_routes.get(str(session_id))


def view_for(session_id: Any) -> View:
    st = _ns()
    with st.lock:
        return st.offload_views.setdefault(str(session_id), View())


def window_of(session_id: Any) -> int:
    """The model's context window as the session's view last saw it (0: not known)."""
    view = _ns().offload_views.get(str(session_id or ""))
    return view.context_length if view is not None else 0


def budget(target: Route, view: View) -> int:
    """Tokens one request may hold: the model's window, capped by ``offload_token_budget``."""
    window = view.context_length or DEFAULT_CONTEXT
    cap = target.settings.offload_token_budget
    return max(BUDGET_FLOOR, min(cap, window) if cap else window)


# -- token estimate ------------------------------------------------------------------------------


def estimate_text(text: str) -> int:
    """A cheap, deliberately high token estimate (cl100k: ~4 ASCII chars a token, CJK ~1 a char;
    this counts 3.5 and 1.2).

    Why high: it only decides when to refresh or compact; compacting a little early is cheap,
    sending a request over the window is not.
    """
    if not text:
        return 0
    n = len(text)
    extra = len(text.encode("utf-8")) - n  # 2 per CJK char, 1-3 for other non-ASCII
    wide = extra // 2
    return (n - wide) * 2 // 7 + wide + (wide // 5) + 1


def estimate_message(m: Any) -> int:
    if not isinstance(m, dict):
        return 0
    total = 4
    content = m.get("content")
    if isinstance(content, str):
        total += estimate_text(content)
    elif content is not None:
        total += estimate_text(json.dumps(content, ensure_ascii=False, default=str))
    calls = m.get("tool_calls")
    if calls:
        total += estimate_text(json.dumps(calls, ensure_ascii=False, default=str))
    return total


def estimate_messages(messages: list[Any]) -> int:
    return sum(estimate_message(m) for m in messages)


# -- gateway calls with a hard deadline ----------------------------------------------------------


def _pool() -> ThreadPoolExecutor:
    st = _ns()
    with st.lock:
        if st.offload_pool is None:
            st.offload_pool = ThreadPoolExecutor(4, thread_name_prefix="memory-tencentdb-offload")
        return st.offload_pool


def call_within(
    target: Route, path: str, body: dict[str, Any], deadline_s: float, method: str = "POST"
) -> Any:
    """POST ``path`` and wait at most ``deadline_s``; None on any failure or when late.

    A gateway this process is still starting gets part of the deadline to come up; a gateway
    that is not ours, paused or behind an open breaker is not called at all.
    """
    t0 = time.monotonic()
    gw = target.gw
    try:
        sup = gw.supervisor
        if sup.state == STARTING:
            sup.wait_until_settled(deadline_s * 0.8)
            if sup.state == STARTING:
                return None
        if sup.state == NOT_OURS or gw.client.paused or gw.breaker.refuses_now():
            return None
    except Exception:  # noqa: BLE001
        return None
    remaining = deadline_s - (time.monotonic() - t0)
    if remaining < 0.02:
        return None
    try:
        if method == "GET":
            future = _pool().submit(gw.client.get, path, body, remaining)
        else:
            future = _pool().submit(gw.client.post, path, body, remaining)
    except Exception:  # noqa: BLE001 - pool shut down at exit
        return None
    try:
        return future.result(timeout=remaining)
    except FutureTimeout:
        log.info("memory_tencentdb: offload %s past its %.2f s deadline", path, deadline_s)
        return None
    except GatewayNotOurs:
        return None
    except GatewayUnavailable:
        with contextlib.suppress(Exception):
            gw.supervisor.notice_failure()  # a throttled restart in the background
        return None
    except GatewayRejected as exc:
        log.warning("memory_tencentdb: offload %s rejected: %s", path, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - never into Hermes
        log.warning("memory_tencentdb: offload %s failed: %s", path, exc)
        return None


def post_tool_result(
    target: Route, tool_name: str, tool_call_id: str, args: Any, result: str
) -> dict[str, Any] | None:
    body = {
        **target.base(),
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "result": result,
        "timestamp": int(time.time() * 1000),
    }
    if isinstance(args, dict | str):
        body["arguments"] = args
    out = call_within(target, "/offload/tool-result", body, target.settings.offload_tool_timeout_s)
    return out if isinstance(out, dict) else None


def assemble(
    target: Route,
    messages: list[Any],
    token_budget: int,
    deadline_s: float,
    system_tokens: int = 0,
    prompt: str = "",
) -> dict[str, Any] | None:
    body: dict[str, Any] = {
        **target.base(),
        "messages": messages,
        "token_budget": max(OFFLOAD_MIN_BUDGET, int(token_budget)),
        "system_tokens": max(0, int(system_tokens)),
        "format": "openai",
    }
    if prompt:
        body["prompt"] = prompt
    out = call_within(target, "/offload/assemble", body, deadline_s)
    if not isinstance(out, dict) or not valid_messages(out.get("messages")):
        return None
    return out


def valid_messages(messages: Any) -> bool:
    """A non-empty list of OpenAI chat messages (what Hermes can send and persist)."""
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and m.get("role") in OPENAI_ROLES for m in messages)
    )


# -- the read tool -------------------------------------------------------------------------------

# Hermes 0.19.0 keeps a tool result in the conversation only up to its per-result limit
# (tools/budget_config.py `budget_for_context_window`: 15 % of the window at 4 characters a
# token, at least 8,000 and at most 100,000 characters; longer ones go to a file with a 1,500-
# character preview), so a read-back answers pages that fit it, footer included.
HERMES_RESULT_FLOOR = 8_000
HERMES_RESULT_CAP = 100_000
PAGE_FOOTER_RESERVE = 400
PAGE_MARK = f"\n\n[{READ_TOOL} page: characters "
READ_KEYS = ("tool_call_id", "result_ref", "node_id", "canvas")


def page_chars(context_length: int = 0) -> int:
    """Characters of a read-back page for a model of ``context_length`` tokens (0: unknown,
    then Hermes's floor, which fits every window)."""
    limit = HERMES_RESULT_FLOOR
    if context_length and context_length > 0:
        share = int(context_length * 4 * 0.15)
        limit = max(HERMES_RESULT_FLOOR, min(share, HERMES_RESULT_CAP))
    return limit - PAGE_FOOTER_RESERVE


def read_back(target: Route | None, args: Any, context_length: int = 0) -> str:
    """``memory_tencentdb_offload_read``: the original, the canvas text, or a node's rows.

    A tool result or a canvas longer than a page comes back in pages: the page, then one line
    naming the call for the next (what precedes ``PAGE_MARK`` is the page, exactly)."""
    if target is None:
        return json.dumps({"error": "the memory gateway is not set up in this session"})
    args = args if isinstance(args, dict) else {}
    keys = [k for k in READ_KEYS if args.get(k)]
    if len(keys) != 1:
        return json.dumps(
            {"error": "give exactly one of tool_call_id, result_ref, node_id, canvas"}
        )
    offset = args.get("offset", 0)
    if offset in (None, ""):
        offset = 0
    if isinstance(offset, str) and offset.strip().isdigit():
        offset = int(offset.strip())
    if isinstance(offset, float) and offset.is_integer():
        offset = int(offset)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return json.dumps({"error": "offset must be a whole number of characters, 0 or more"})
    key = keys[0]
    body: dict[str, Any] = {**target.base(), key: str(args[key]).strip()}
    size = page_chars(context_length)
    if key != "node_id":
        body.update(offset=offset, length=size)
    try:
        out = target.gw.client.post("/offload/read", body, READ_TIMEOUT_S)
    except GatewayRejected as exc:
        if exc.status == 404:
            return json.dumps({"error": f"nothing offloaded matches {key}={body[key]!r}"})
        return json.dumps({"error": f"offload read rejected: {exc}"})
    except GatewayUnavailable:
        return json.dumps({"error": "the offload store is unavailable right now; try again later"})
    except Exception as exc:  # noqa: BLE001 - a tool never throws into Hermes
        return json.dumps({"error": f"offload read failed: {exc}"})
    if not isinstance(out, dict):
        return json.dumps({"error": "unexpected answer from the offload store"})
    kind = out.get("kind")
    if kind == "tool_result" and isinstance(out.get("content"), str):
        again = (
            {"tool_call_id": out["tool_call_id"]}
            if key == "tool_call_id" and out.get("tool_call_id")
            else {key: body[key]}
        )
        return _page(out, "content", offset, size, again)
    if kind == "canvas" and isinstance(out.get("text"), str):
        return _page(out, "text", offset, size, {"canvas": out.get("canvas") or body[key]})
    if kind == "node":
        return json.dumps(
            {"node_id": out.get("node_id"), "canvas": out.get("canvas"), "rows": out.get("rows")},
            ensure_ascii=False,
        )
    return json.dumps(out, ensure_ascii=False)


def _page(out: dict[str, Any], field: str, asked: int, size: int, again: dict[str, str]) -> str:
    text = out[field]
    start, total = out.get("offset"), out.get("total_chars")
    if not isinstance(start, int) or not isinstance(total, int):
        # A gateway from before paging answers the whole text: page it here.
        start, total = min(asked, len(text)), len(text)
        text = text[start : start + size]
    text = text[:size]
    end = start + len(text)
    if start == 0 and end >= total:
        return text
    if end < total:
        call = json.dumps({**again, "offset": end}, ensure_ascii=False)
        tail = f"next page: {READ_TOOL} {call}"
    else:
        tail = "last page"
    return f"{text}{PAGE_MARK}{start}-{end} of {total}; {tail}]"


# -- the per-request view ------------------------------------------------------------------------


def is_canvas(m: Any) -> bool:
    """Our canvas message: the mark and the gateway's signature in its opening tag.

    A user's own message that merely starts like a canvas carries no signature and stays. The
    plugin cannot check the signature (the key stays with the gateway); the gateway does, and a
    forged one only drops the forger's own message from the forger's own context.
    """
    return _signed_marker(m, (CANVAS_MARK,))


def _signed_marker(m: Any, marks: tuple[str, ...]) -> bool:
    if not isinstance(m, dict) or m.get("role") != "user":
        return False
    content = m.get("content")
    if not isinstance(content, str):
        return False
    text = content.lstrip()
    if not text.startswith(marks):
        return False
    head = text[:_OPEN_TAG_CHARS]
    end = head.find(">")
    return end > 0 and _SIG.search(head, 0, end) is not None


def learn(view: View, sent: list[Any], answer: dict[str, Any]) -> None:
    """Cache the gateway's canvas message, the stubs it chose and its count of the request.

    The count is the gateway's exact one (tool schemas included as ``system_tokens``): what
    the model receives after the mild stubs (``estimated_tokens``), or, when the gateway had
    to fold turns for this call, what the transcript holds (``input_tokens``). The engine
    compacts on it, so a compaction runs only when the gateway will fold turns: mild stubs
    are applied per call anyway, and each compaction is a rewrite of Hermes's transcript.
    """
    before = {
        str(m.get("tool_call_id")): m.get("content")
        for m in sent
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    stats = raw if isinstance(raw := answer.get("stats"), dict) else {}
    folded = answer.get("level") in ("aggressive", "emergency")
    size = stats.get("input_tokens") if folded else answer.get("estimated_tokens")
    if isinstance(size, int | float):
        view.gateway_tokens = int(size)
        view.added_tokens = 0
    block = ""
    for m in answer.get("messages") or []:
        if is_canvas(m):
            block = m["content"]
        elif m.get("role") == "tool":
            cid = str(m.get("tool_call_id"))
            content = m.get("content")
            if cid in before and isinstance(content, str) and content != before[cid]:
                view.stubs[cid] = content
    view.canvas_block = block
    restored = bool((answer.get("stats") or {}).get("request_restored"))
    view.restored_request = next(
        (m for m in answer.get("messages") or [] if restored and _hosts_user_message(m)), None
    )


def _hosts_user_message(m: Any) -> bool:
    """A user message that is neither our canvas nor our history note (signed, see is_canvas)."""
    if not isinstance(m, dict) or m.get("role") != "user":
        return False
    return not _signed_marker(m, (CANVAS_MARK, HISTORY_MARK))


def note_after_request(messages: list[Any]) -> list[Any]:
    """The compacted list with our history note after the host's request when the two are
    neighbours, for Hermes to keep as its transcript.

    Why: Hermes 0.19.0 merges consecutive user messages of its live list before every call
    (``repair_message_sequence``), and the gateway puts the note first: right before the
    request, the merged message started with our note, so the turn's request was no longer a
    message of its own (what Hermes's background review and the next turn read) and the
    gateway counted it as our note. Joined after the request, the message starts with the
    request; the gateway splits the note off again by its signature. A note followed by
    anything else stays first: it is what keeps the list from starting with an assistant.
    """
    for i, m in enumerate(messages[:-1]):
        if _signed_marker(m, (HISTORY_MARK,)):
            if not _hosts_user_message(messages[i + 1]):
                return messages
            return [*messages[:i], messages[i + 1], m, *messages[i + 2 :]]
    return messages


def apply(view: View, messages: list[Any]) -> list[Any]:
    """Our earlier canvas out, stubs in, exactly one canvas before the newest user message."""
    out: list[Any] = []
    for m in messages:
        if is_canvas(m):
            continue
        if isinstance(m, dict) and m.get("role") == "tool":
            stub = view.stubs.get(str(m.get("tool_call_id")))
            if stub is not None and m.get("content") != stub:
                m = {**m, "content": stub}
        out.append(m)
    if view.restored_request is not None and not any(_hosts_user_message(m) for m in out):
        at = 0
        while at < len(out) and isinstance(out[at], dict) and out[at].get("role") == "system":
            at += 1
        out.insert(at, view.restored_request)
    if view.canvas_block:
        at = len(out)
        for i in range(len(out) - 1, -1, -1):
            m = out[i]
            if isinstance(m, dict) and m.get("role") == "user":
                at = i
                break
        else:
            at = 0
            while at < len(out) and isinstance(out[at], dict) and out[at].get("role") == "system":
                at += 1
        out.insert(at, {"role": "user", "content": view.canvas_block})
    return out

"""Replay a recorded session through a real gateway's offload routes, the way a host does it.

Turn by turn over an OpenAI-format recording (tests/support/agent_sessions.py):

- every tool result goes through ``POST /offload/tool-result`` first; when the gateway answers a
  ``replacement``, the host keeps that stub in its live list instead of the raw result (what the
  Hermes ``tool_execution`` middleware and the OpenClaw tool-result middleware do);
- before every model call (each recorded assistant message) the live list so far goes through
  ``POST /offload/assemble`` with a token budget (and the new user prompt when the turn is new);
  the answer is what would be sent to the model. The live list itself is never replaced by the
  answer (both hosts rewrite only the copy sent to the model).

``fmt="agent"`` sends OpenClaw AgentMessages instead: the tool-result route gets the id as the
tool produced it (with underscores), the assembled lists carry the ids without underscores, as
OpenClaw sends them. ``check_assembled`` validates one answer; ``Replay`` collects what the tests
and the benchmark need (every answer, every id whose result left or was shortened).
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.agent_sessions import Message, strip_id, to_agent_messages

CANVAS_MARK = "<current_task_context"
HISTORY_MARK = "<history_task_context"


@dataclass
class AssembleCall:
    """One model call of the replay: what went in and what came back."""

    at: int  # index in the recording of the assistant message this call produced
    input_messages: int
    verbatim: list[Message]  # the recording up to here, every result verbatim (OpenAI format)
    answer: dict[str, Any]
    elapsed_ms: float


@dataclass
class Replay:
    session_key: str
    scope: str
    fmt: str
    budget: int
    system_tokens: int = 0
    calls: list[AssembleCall] = field(default_factory=list)
    tool_answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> answer
    raw_results: dict[str, str] = field(default_factory=dict)  # id (as recorded) -> raw text
    changed_ids: set[str] = field(default_factory=set)  # recorded ids stubbed/shortened/removed
    problems: list[str] = field(default_factory=list)

    def levels(self) -> set[str]:
        return {c.answer.get("level", "?") for c in self.calls}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return str(content)


def is_canvas(m: Message) -> bool:
    return m.get("role") == "user" and _text(m.get("content")).lstrip().startswith(CANVAS_MARK)


def is_history_block(m: Message) -> bool:
    return m.get("role") == "user" and _text(m.get("content")).lstrip().startswith(HISTORY_MARK)


def _calls_of(m: Message, fmt: str) -> list[str]:
    if fmt == "openai":
        return [c["id"] for c in m.get("tool_calls") or []]
    content = m.get("content")
    if not isinstance(content, list):
        return []
    return [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def _result_id(m: Message, fmt: str) -> str | None:
    if fmt == "openai":
        return m.get("tool_call_id") if m.get("role") == "tool" else None
    return m.get("toolCallId") if m.get("role") == "toolResult" else None


def structure_problems(messages: list[Message], fmt: str) -> list[str]:
    """Why this list is not a valid model request (empty when it is).

    Valid: system messages only at the head (OpenAI), the first other message is a user message,
    every assistant tool call is answered by a tool result immediately after it (all of its
    calls, each once, nothing in between), and no tool result appears anywhere else.
    """
    out: list[str] = []
    tool_role = "tool" if fmt == "openai" else "toolResult"
    i = 0
    n = len(messages)
    while i < n and fmt == "openai" and messages[i].get("role") == "system":
        i += 1
    if any(m.get("role") == "system" for m in messages[i:]):
        out.append("system message after the head")
    if i < n and messages[i].get("role") != "user":
        out.append(f"first non-system message is {messages[i].get('role')!r}, not 'user'")
    allowed = {"user", "assistant", tool_role} | ({"system"} if fmt == "openai" else set())
    if fmt == "agent":  # OpenClaw's shapes: numeric timestamps, block lists, tool result fields
        for k, m in enumerate(messages):
            if not isinstance(m.get("timestamp"), int | float):
                out.append(f"[{k}] {m.get('role')} without a numeric timestamp")
            content = m.get("content")
            if m.get("role") != "user" and not isinstance(content, list):
                out.append(f"[{k}] {m.get('role')} content is not a block list")
            if m.get("role") == tool_role and not (m.get("toolName") is not None and content):
                out.append(f"[{k}] toolResult without toolName or content blocks")
    while i < n:
        m = messages[i]
        role = m.get("role")
        if role not in allowed:
            out.append(f"[{i}] unexpected role {role!r}")
        if role == tool_role:
            out.append(f"[{i}] orphaned tool result {_result_id(m, fmt)!r}")
            i += 1
            continue
        calls = _calls_of(m, fmt) if role == "assistant" else []
        i += 1
        if calls:
            want = [strip_id(c) for c in calls]
            got = []
            while i < n and messages[i].get("role") == tool_role:
                got.append(strip_id(_result_id(messages[i], fmt) or ""))
                i += 1
            if sorted(got) != sorted(want):
                out.append(f"[{i}] tool calls {want} answered by {got}")
    return out


def check_assembled(answer: dict[str, Any], budget: int, fmt: str, need_canvas: bool) -> list[str]:
    """Problems with one /offload/assemble answer: budget, structure, canvas count, format.

    ``need_canvas`` (the session has a step): exactly one canvas message, else at most one;
    whenever messages left the context, a canvas or a history block names the way back."""
    out: list[str] = []
    msgs = answer.get("messages")
    if not isinstance(msgs, list):
        return [f"messages is {type(msgs).__name__}"]
    if answer.get("format") != fmt:
        out.append(f"format {answer.get('format')!r} != {fmt!r}")
    est = answer.get("estimated_tokens")
    if not isinstance(est, int) or est > budget:
        out.append(f"estimated_tokens {est} over budget {budget}")
    out.extend(structure_problems(msgs, fmt))
    canvases = sum(1 for m in msgs if is_canvas(m))
    if canvases > 1 or (need_canvas and canvases != 1):
        out.append(f"{canvases} canvas messages (need {'exactly one' if need_canvas else '<= 1'})")
    removed = (answer.get("stats") or {}).get("removed", 0)
    if removed and not canvases and not any(is_history_block(m) for m in msgs):
        out.append(f"{removed} messages left but no canvas or history block names them")
    if (answer.get("canvas") is None) != (canvases == 0):
        out.append(
            f"canvas field {answer.get('canvas') is not None} but {canvases} canvas messages"
        )
    return out


def _tool_contents(messages: list[Message], fmt: str) -> dict[str, str]:
    """stripped id -> text of its tool result, for every tool result in the list."""
    out = {}
    for m in messages:
        rid = _result_id(m, fmt)
        if rid is not None:
            out[strip_id(rid)] = _text(m.get("content"))
    return out


def _to_fmt(live: list[Message], fmt: str) -> list[Message]:
    if fmt == "openai":
        return live
    return to_agent_messages(live)[1]


def replay(
    client: httpx.Client,
    messages: list[Message],
    *,
    session_key: str,
    scope: str,
    budget: int,
    fmt: str = "openai",
    system_tokens: int = 0,
    check: bool = True,
    extra_assemble: dict[str, Any] | None = None,
    assemble_from: int = 0,
    send_results: bool = True,
) -> Replay:
    """Drive one recording through the routes; collect answers (and problems when ``check``).

    ``assemble_from``: no model calls before this index (a host resuming a session: its earlier
    tool results are sent again, which the gateway must answer as duplicates, unchanged).
    ``send_results=False``: the host never calls /offload/tool-result (its middleware was off
    or the gateway was down then); /offload/assemble must record what it removes itself.
    """
    if fmt not in ("openai", "agent"):
        raise ValueError(fmt)
    rep = Replay(session_key, scope, fmt, budget, system_tokens)
    live: list[Message] = []  # the host's own list (OpenAI format; stubs from tool-result)
    calls: dict[str, dict[str, Any]] = {}
    seen_tool = False
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and i < assemble_from:
            for c in m.get("tool_calls") or []:
                calls[c["id"]] = c
            live.append(m)
        elif m["role"] == "assistant":
            prompt = None
            if live and live[-1]["role"] == "user":
                prompt = _text(live[-1].get("content"))
            body: dict[str, Any] = {
                "session_key": session_key,
                "scope": scope,
                "messages": _to_fmt(live, fmt),
                "token_budget": budget,
            }
            if system_tokens:
                body["system_tokens"] = system_tokens
            if prompt is not None:
                body["prompt"] = prompt
            body.update(extra_assemble or {})
            t0 = time.perf_counter()
            r = client.post("/offload/assemble", json=body)
            elapsed = (time.perf_counter() - t0) * 1000
            if r.status_code != 200:
                rep.problems.append(f"assemble at [{i}]: HTTP {r.status_code} {r.text[:300]}")
                live.append(m)
                continue
            answer = r.json()
            rep.calls.append(AssembleCall(i, len(live), messages[:i], answer, elapsed))
            if check:
                for p in check_assembled(answer, budget, fmt, need_canvas=seen_tool):
                    rep.problems.append(f"assemble at [{i}] ({answer.get('level')}): {p}")
            # Which recorded results did this answer shorten or drop?
            sent = _tool_contents(answer.get("messages") or [], fmt)
            for rid, raw in rep.raw_results.items():
                if sent.get(strip_id(rid)) != raw:
                    rep.changed_ids.add(rid)
            for c in m.get("tool_calls") or []:
                calls[c["id"]] = c
            live.append(m)
        elif m["role"] == "tool" and not send_results:
            rep.raw_results[m["tool_call_id"]] = _text(m.get("content"))
            seen_tool = True
            live.append(m)
        elif m["role"] == "tool":
            rid = m["tool_call_id"]
            call = calls.get(rid, {}).get("function", {})
            raw = _text(m.get("content"))
            body = {
                "session_key": session_key,
                "scope": scope,
                "tool_call_id": rid,
                "tool_name": m.get("name") or call.get("name", ""),
                "arguments": call.get("arguments", "{}"),
                "result": raw,
            }
            r = client.post("/offload/tool-result", json=body)
            if r.status_code != 200:
                rep.problems.append(f"tool-result {rid}: HTTP {r.status_code} {r.text[:300]}")
                live.append(m)
                continue
            ans = r.json()
            rep.tool_answers[rid] = ans
            rep.raw_results[rid] = raw
            seen_tool = True
            if ans.get("replacement") is not None:
                rep.changed_ids.add(rid)
                live.append({**m, "content": ans["replacement"]})
            else:
                live.append(m)
        else:
            live.append(m)
    return rep


def read_back_problems(client: httpx.Client, rep: Replay, ids: set[str] | None = None) -> list[str]:
    """Every shortened/removed result must come back byte-exact from /offload/read.

    In AgentMessage replays the id is asked for without underscores (as OpenClaw has it).
    """
    out = []
    for rid in sorted(ids if ids is not None else rep.changed_ids):
        key = strip_id(rid) if rep.fmt == "agent" else rid
        r = client.post(
            "/offload/read",
            json={"session_key": rep.session_key, "scope": rep.scope, "tool_call_id": key},
        )
        if r.status_code != 200:
            out.append(f"read {key}: HTTP {r.status_code} {r.text[:200]}")
            continue
        body = r.json()
        content = body.get("content")
        row = body.get("row") or {}
        # Shortened or dropped: its JSONL row says so and its ref is on disk.
        if row.get("offloaded") not in (True, "deleted"):
            out.append(f"read {key}: row offloaded={row.get('offloaded')!r}")
        if not body.get("path") or not Path(body["path"]).is_file():
            out.append(f"read {key}: ref file {body.get('path')!r} missing")
        if content != rep.raw_results[rid]:
            out.append(
                f"read {key}: content differs ({len(content or '')} vs "
                f"{len(rep.raw_results[rid])} chars)"
            )
    return out


def dumps_size(messages: list[Message]) -> int:
    return len(json.dumps(messages, ensure_ascii=False))


_ENC: Any = None


def content_tokens(messages: list[Message]) -> int:
    """An independent lower bound of a list's tokens: cl100k over every text, tool name and
    argument (no per-message overhead), so an engine estimate below it is wrong."""
    global _ENC
    if _ENC is None:
        import bpe_openai

        _ENC = bpe_openai.get_encoding("cl100k_base")
    n = 0
    for m in messages:
        parts = [_text(m.get("content"))]
        for c in m.get("tool_calls") or []:
            parts += [c["function"]["name"], c["function"].get("arguments") or ""]
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    parts += [b.get("name", ""), json.dumps(b.get("arguments"), ensure_ascii=False)]
        n += sum(len(_ENC.encode_ordinary(p)) for p in parts if p)
    return n


def canvas_goal(user_texts: list[str]) -> str | None:
    """The ``Goal:`` line of the canvas among a request's user texts (unescaped), if any."""

    for text in reversed(user_texts):
        at = text.find("<current_task_context")
        if at < 0:
            continue
        for line in text[at:].splitlines():
            if line.startswith("Goal: "):
                return html.unescape(line[len("Goal: ") :])
    return None


def task_key(task: str) -> str:
    """What names a SWE-agent/CTF task inside its goal line (bench.hermes_offload_bench.task_of
    gives ``ISSUE:\\n<title>`` or ``named "<name>"``): the title's start, or the name."""
    title = task.split("\n", 1)[1] if task.startswith("ISSUE:") and "\n" in task else task
    return " ".join(title.split())[:24]

"""Real recorded agent sessions (tests/fixtures/agent-sessions/) for offload tests and benches.

The fixture holds 52 sessions in OpenAI chat format (11 SWE-agent coding/CTF sessions, 41
tau-bench airline sessions; sources and licences in the fixture's README). This module gives:

- ``load_sessions(kind)``: single sessions, ``kind`` = ``"swe"``, ``"tau"`` or ``None`` (all).
- ``chain(sessions)``: one long session as the original project measured: one system prompt (the
  first session's), then every session's other messages appended in order.
- ``to_agent_messages(messages)``: the same list as OpenClaw AgentMessages
  (``reference/offload-hosts.md`` §2.2): ``user`` / ``assistant`` (``toolCall`` blocks) /
  ``toolResult``, tool-call ids with their underscores removed as OpenClaw sends them; the
  system prompt is returned apart (OpenClaw passes it beside the messages, not in them).
- ``tool_results(messages)``: every tool result with its call, what a host hands
  ``/offload/tool-result``.

The recordings reuse tool-call ids (tau-bench repeats ids across and within sessions, SWE-agent
within one session), which no provider does inside one conversation. Every list this module
returns therefore has unique ids: a repeated id gets the suffix ``_r<k>`` (its tool message is
renamed with it), so pairing stays exact and ids stay unique with underscores stripped too.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "agent-sessions"
SESSIONS_FILE = FIXTURE / "sessions.jsonl"

Message = dict[str, Any]


@dataclass(frozen=True)
class Session:
    """One recorded session: its id, where it came from, and its OpenAI-format messages."""

    id: str
    source: str
    kind: str  # "swe" (SWE-agent, coding) or "tau" (tau-bench airline)
    messages: list[Message] = field(repr=False)


@dataclass(frozen=True)
class ToolResult:
    """A tool result as a host forwards it: the call that produced it and the raw output."""

    index: int  # position of the tool message in its list
    tool_call_id: str
    tool_name: str
    arguments: Any  # parsed JSON arguments when they parse, else the raw string
    result: str


def _kind(source: str) -> str:
    return "swe" if source.startswith("SWE-agent") else "tau"


@lru_cache(maxsize=1)
def _raw() -> tuple[tuple[str, str, str], ...]:
    rows = []
    with SESSIONS_FILE.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows.append((row["id"], row["source"], json.dumps(row["messages"])))
    return tuple(rows)


def load_sessions(kind: str | None = None) -> list[Session]:
    """Single sessions (fresh copies; callers may mutate them), in fixture order."""
    if kind not in (None, "swe", "tau"):
        raise ValueError(f"kind must be 'swe', 'tau' or None, not {kind!r}")
    out = []
    for sid, source, messages in _raw():
        if kind is None or _kind(source) == kind:
            out.append(Session(sid, source, _kind(source), unique_tool_ids(json.loads(messages))))
    return out


def chain(sessions: list[Session]) -> list[Message]:
    """One long session: the first system prompt, then each session's other messages in order."""
    if not sessions:
        return []
    out: list[Message] = []
    system = next((m for m in sessions[0].messages if m["role"] == "system"), None)
    if system is not None:
        out.append(copy.deepcopy(system))
    for s in sessions:
        out.extend(copy.deepcopy(m) for m in s.messages if m["role"] != "system")
    return unique_tool_ids(out)


def unique_tool_ids(messages: list[Message]) -> list[Message]:
    """Rename repeated tool-call ids (``_r<k>``) so each call/result pair has its own id."""
    seen: set[str] = set()
    current: dict[str, str] = {}  # recorded id -> id of its latest call
    for m in messages:
        for call in m.get("tool_calls") or []:
            orig = call["id"]
            new, k = orig, 1
            while new in seen or new.replace("_", "") in seen:
                k += 1
                new = f"{orig}_r{k}"
            seen.add(new)
            seen.add(new.replace("_", ""))
            current[orig] = new
            call["id"] = new
        if m["role"] == "tool":
            m["tool_call_id"] = current.get(m["tool_call_id"], m["tool_call_id"])
    return messages


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def tool_results(messages: list[Message]) -> list[ToolResult]:
    """Every tool message of an OpenAI-format list, with the call that asked for it."""
    calls: dict[str, dict[str, Any]] = {}
    out = []
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            calls[call["id"]] = call
        if m["role"] == "tool":
            call = calls.get(m["tool_call_id"], {})
            fn = call.get("function", {})
            out.append(
                ToolResult(
                    index=i,
                    tool_call_id=m["tool_call_id"],
                    tool_name=m.get("name") or fn.get("name", ""),
                    arguments=_arguments(fn.get("arguments", "{}")),
                    result=_text(m.get("content")),
                )
            )
    return out


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def strip_id(tool_call_id: str) -> str:
    """The id as OpenClaw sends it to providers: underscores removed."""
    return tool_call_id.replace("_", "")


def to_agent_messages(
    messages: list[Message], start_ms: int = 1_767_225_600_000
) -> tuple[str, list[Message]]:
    """Convert OpenAI chat messages to (system prompt, OpenClaw AgentMessages).

    Timestamps are epoch milliseconds, one second apart, as OpenClaw stores them.
    """
    system = "\n\n".join(_text(m.get("content")) for m in messages if m["role"] == "system")
    out: list[Message] = []
    ts = start_ms
    for m in messages:
        role = m["role"]
        if role == "system":
            continue
        ts += 1000
        if role == "user":
            out.append(
                {
                    "role": "user",
                    "content": [{"type": "text", "text": _text(m["content"])}],
                    "timestamp": ts,
                }
            )
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(m.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            calls = m.get("tool_calls") or []
            for call in calls:
                fn = call["function"]
                args = _arguments(fn.get("arguments", "{}"))
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": strip_id(call["id"]),
                        "name": fn["name"],
                        "arguments": args if isinstance(args, dict) else {"input": args},
                    }
                )
            out.append(
                {
                    "role": "assistant",
                    "content": blocks,
                    "api": "openai-completions",
                    "provider": "openai",
                    "model": "gpt-4o",
                    "stopReason": "toolUse" if calls else "stop",
                    "timestamp": ts,
                }
            )
        elif role == "tool":
            out.append(
                {
                    "role": "toolResult",
                    "toolCallId": strip_id(m["tool_call_id"]),
                    "toolName": m.get("name", ""),
                    "content": [{"type": "text", "text": _text(m.get("content"))}],
                    "isError": False,
                    "timestamp": ts,
                }
            )
        else:
            raise ValueError(f"unexpected role {role!r}")
    return system, out

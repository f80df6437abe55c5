"""Capture: a host's turn becomes L0 messages, on disk before the answer.

Hosts send this turn's messages (user, assistant with tool calls, tool results). Each is cleaned
of our own injected blocks, framework noise is dropped, and the rest is appended to the day's
JSONL file and indexed. Embedding happens later, in the background, so capture stays fast.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import L0Input, L0Message
from memory_tencentdb.text.sanitize import clean_captured, is_noise

CAPTURED_ROLES = ("user", "assistant", "tool")
# Epoch milliseconds of 9999-12-31T23:59:59.999Z: the last instant a date type can hold.
MAX_TIMESTAMP_MS = 253_402_300_799_999
MAX_TOOL_ARGS_CHARS = 2000

# Called after each successful capture with (scope, session_key, session_id, rows); the
# pipeline subscribes here. Kept as plain callables so capture knows nothing about it.
CaptureListener = Callable[[str, str, str, list[L0Message]], None]


def message_text(content: Any) -> str:
    """Text of a message ``content``: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                if kind in ("text", "input_text", "output_text") and isinstance(
                    part.get("text"), str
                ):
                    parts.append(part["text"])
                elif kind in ("image_url", "image", "input_image"):
                    parts.append("[image]")
                elif kind in ("tool_result",) and part.get("content") is not None:
                    parts.append(message_text(part.get("content")))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return json.dumps(content, ensure_ascii=False)


def _timestamp_ms(value: Any, fallback: int) -> int:
    """Epoch ms from ms, seconds or ISO-8601; the fallback when absent or unreadable."""
    if isinstance(value, bool) or value is None:
        return fallback
    if isinstance(value, int | float):
        v = float(value)
        if not (math.isfinite(v) and 0 <= v <= MAX_TIMESTAMP_MS):
            return fallback  # would overflow the index's int64 (the gateway refuses it first)
        return int(v * 1000) if v < 1e11 else int(v)
    if isinstance(value, str) and value.strip():
        try:
            return int(datetime.fromisoformat(value.strip()).timestamp() * 1000)
        except ValueError:
            return fallback
    return fallback


def _tool_calls_text(calls: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    lines, kept = [], []
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = f if isinstance(f := call.get("function"), dict) else call
        name = str(fn.get("name") or call.get("name") or "tool")
        args = fn.get("arguments", call.get("arguments", call.get("input", "")))
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        if len(args_text) > MAX_TOOL_ARGS_CHARS:
            args_text = args_text[:MAX_TOOL_ARGS_CHARS] + "…"
        lines.append(f"[tool call] {name}({args_text})")
        kept.append({"id": call.get("id", ""), "name": name, "arguments": args_text})
    return "\n".join(lines), kept


def to_l0_inputs(
    messages: list[dict[str, Any]], scope: str, session_key: str, session_id: str
) -> list[L0Input]:
    """Normalise host messages; drops other roles, empty text and noise."""
    now = int(time.time() * 1000)
    out: list[L0Input] = []
    for i, m in enumerate(messages):
        role = str(m.get("role", "")).lower()
        if role == "toolresult" or role == "function":
            role = "tool"
        if role not in CAPTURED_ROLES:
            continue
        text = clean_captured(message_text(m.get("content")))
        extra: dict[str, Any] = {}
        if role == "assistant" and m.get("tool_calls"):
            calls_text, calls = _tool_calls_text(list(m["tool_calls"]))
            if calls:
                extra["tool_calls"] = calls
                text = (text + "\n" + calls_text).strip() if text else calls_text
        if role == "tool":
            for key in ("tool_call_id", "name", "tool_name"):
                if m.get(key):
                    extra[key] = str(m[key])
        if role == "user" and is_noise(text):
            continue
        if not text or (role != "tool" and is_noise(text)):
            continue
        out.append(
            L0Input(
                speaker=_speaker(m, role),
                scope=scope,
                session_key=session_key,
                session_id=session_id,
                role=role,
                content=text,
                # Keep order inside a turn even when the host gave no timestamps.
                timestamp=_timestamp_ms(m.get("timestamp"), now + i),
                message_id=str(m.get("id") or ""),
                extra=extra or None,
            )
        )
    return out


def _speaker(m: dict[str, Any], role: str) -> str:
    """The speaker's name: ``speaker``, else the OpenAI-style ``name`` of a user or assistant
    message (on a tool message ``name`` is the tool's)."""
    value = m.get("speaker") or (m.get("name") if role in ("user", "assistant") else None)
    return " ".join(str(value).split())[:100] if isinstance(value, str | int) else ""


def capture(
    store: MemoryStore,
    scope: str,
    session_key: str,
    session_id: str,
    messages: list[dict[str, Any]],
    listeners: list[CaptureListener],
) -> list[L0Message]:
    """Record one turn. Returns the messages stored (possibly none)."""
    inputs = to_l0_inputs(messages, scope, session_key, session_id)
    inputs = _drop_already_captured(store, inputs)
    rows = store.record_messages(inputs)
    for listener in listeners:
        listener(scope, session_key, session_id, rows)
    return rows


def _drop_already_captured(store: MemoryStore, inputs: list[L0Input]) -> list[L0Input]:
    """A host that retries a turn sends the same message ids again: keep the first copy."""
    with_ids = [m for m in inputs if m.message_id]
    if not with_ids:
        return inputs
    first = with_ids[0]
    seen = store.captured_message_ids(
        first.scope, first.session_key, [m.message_id for m in with_ids]
    )
    return [m for m in inputs if not m.message_id or m.message_id not in seen]

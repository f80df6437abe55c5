"""Turning Hermes's transcript into the messages one ``/capture`` call carries.

Why: ``sync_turn`` receives the whole cumulative transcript (and, on the background worker,
possibly after the next turn has already been appended), but the gateway wants exactly this
turn: the user message, the assistant's tool calls, the tool results and the final reply.
Recalled ``<memory-context>`` blocks are stripped so memory never feeds back into itself.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

MAX_CONTENT_CHARS = 32_000
MAX_ARGUMENT_CHARS = 8_000
MAX_CAPTURE_BYTES = 600_000  # the gateway accepts 1 MiB bodies by default; leave headroom

_MEMORY_CONTEXT_RE = re.compile(r"<\s*memory-context\s*>[\s\S]*?<\s*/\s*memory-context\s*>", re.I)


def text_of(content: Any) -> str:
    """Plain text of a message content (string, parts list or None).

    The gateway's rule (``memory_tencentdb.capture.message_text``, which this plugin cannot
    import), held equal to it by tests/test_host_adapter_copies.py: text parts as they are,
    an image as ``[image]``, a tool_result part by its own content, parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
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
                    parts.append(text_of(part.get("content")))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return json.dumps(content, ensure_ascii=False)


def strip_recalled(text: str) -> str:
    return _MEMORY_CONTEXT_RE.sub("", text).strip()


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not captured]"


def turn_slice(
    messages: list[dict[str, Any]], user_content: str, assistant_content: str
) -> list[dict[str, Any]]:
    """The messages of the turn that ended with ``assistant_content``.

    Searches backwards for the final assistant reply of this turn (the transcript may already
    hold a later turn), then back to the user message that opened it.
    """
    msgs = [m for m in messages if isinstance(m, dict)]
    end = None
    want = assistant_content.strip()
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        is_reply = m.get("role") == "assistant" and not m.get("tool_calls")
        if is_reply and text_of(m.get("content")).strip() == want:
            end = i
            break
    if end is None:
        end = len(msgs) - 1
    start = None
    for i in range(end, -1, -1):
        if msgs[i].get("role") == "user":
            start = i
            break
    if start is None:
        return []
    turn = msgs[start : end + 1]
    # The user text Hermes hands to sync_turn is the cleaned one (skill scaffolding removed).
    if user_content and turn and turn[0].get("role") == "user":
        turn = [{**turn[0], "content": user_content}, *turn[1:]]
    return turn


def to_capture_messages(turn: list[dict[str, Any]], first_ts_ms: int) -> list[dict[str, Any]]:
    """Normalise a turn to the gateway's message shape, with strictly increasing timestamps."""
    out: list[dict[str, Any]] = []
    ts = first_ts_ms
    for m in turn:
        role = m.get("role")
        if role not in ("user", "assistant", "tool"):
            continue
        text = text_of(m.get("content"))
        if role == "user":
            text = strip_recalled(text)
        item: dict[str, Any] = {"role": role, "content": _clip(text, MAX_CONTENT_CHARS)}
        if role == "assistant" and m.get("tool_calls"):
            item["tool_calls"] = [_tool_call(c) for c in m["tool_calls"] if isinstance(c, dict)]
        if role == "tool":
            if m.get("tool_call_id"):
                item["tool_call_id"] = str(m["tool_call_id"])
            if m.get("name"):
                item["name"] = str(m["name"])
        if not item["content"] and not item.get("tool_calls"):
            continue
        item["timestamp"] = ts
        ts += 1
        out.append(item)
    return out


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    fn = raw if isinstance(raw := call.get("function"), dict) else {}
    args = fn.get("arguments", "")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {"name": str(fn.get("name", "")), "arguments": _clip(args, MAX_ARGUMENT_CHARS)},
    }


def tool_record_messages(
    records: list[dict[str, Any]], known_ids: set[str]
) -> list[dict[str, Any]]:
    """Tool calls seen by the post_tool_call hook that the transcript slice does not show."""
    out: list[dict[str, Any]] = []
    for r in records:
        call_id = str(r.get("tool_call_id") or "")
        if call_id and call_id in known_ids:
            continue
        args = r.get("args")
        args_text = (
            args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
        )
        out.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": str(r.get("tool_name", "")),
                            "arguments": _clip(args_text, MAX_ARGUMENT_CHARS),
                        },
                    }
                ],
            }
        )
        out.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": str(r.get("tool_name", "")),
                "content": _clip(str(r.get("result", "")), MAX_CONTENT_CHARS),
            }
        )
    return out


def chunks(messages: list[dict[str, Any]], max_bytes: int = MAX_CAPTURE_BYTES) -> list[list]:
    """Split a turn into consecutive batches whose JSON stays under the gateway's body limit.

    Why: a turn with many large tool results can exceed the gateway's 1 MiB request limit,
    and a rejected capture would lose the whole turn; batches keep order and timestamps.
    """
    out: list[list[dict[str, Any]]] = []
    batch: list[dict[str, Any]] = []
    size = 0
    for m in messages:
        n = len(json.dumps(m, ensure_ascii=False).encode("utf-8")) + 2
        if batch and size + n > max_bytes:
            out.append(batch)
            batch, size = [], 0
        batch.append(m)
        size += n
    if batch:
        out.append(batch)
    return out


def now_ms() -> int:
    return int(time.time() * 1000)

"""The two message formats the hosts send, read into one shape and written back unchanged
except where the offload changed them.

OpenAI chat (Hermes): ``{role: system|user|assistant|tool, content, tool_calls?: [{id, type,
function: {name, arguments}}], tool_call_id?}``. OpenClaw AgentMessage: ``{role: user|assistant|
toolResult, content: [{type: "text", text} | {type: "toolCall", id, name, arguments}],
toolCallId?, toolName?, isError?, timestamp}``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from memory_tencentdb.offload.records import OffloadInputError, strip_id

CANVAS_MARK = "<current_task_context"
HISTORY_MARK = "<history_task_context"
OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Our own messages carry ``sig="<hmac>"`` in their opening tag: an HMAC of the rest of the
# message under a key only the gateway holds. A message is ours only when its signature checks
# out, so a user's own message that starts with ``<current_task_context`` stays in the context.
_SIG = re.compile(r' sig="([0-9a-f]{16})"')  # 64 bits of HMAC-SHA256
_OPEN_TAG_CHARS = 400  # the signature is in the opening tag (bounded search)
_CLOSE_TAGS = {CANVAS_MARK: "</current_task_context>", HISTORY_MARK: "</history_task_context>"}
# A history head joins at most 5 task blocks (ContextBlocks.history_blocks); a few more are tried.
_MAX_JOINED_BLOCKS = 8
AGENT_ROLES = {"user", "assistant", "toolResult", "system"}


@dataclass
class Call:
    id: str
    name: str
    arguments: Any


@dataclass
class Msg:
    raw: dict[str, Any]
    role: str  # system | user | assistant | tool (normalised)
    text: str  # everything that costs tokens, flattened
    body: str = ""  # the content's text alone (without tool-call arguments)
    parts: list[str] = field(default_factory=list)  # what costs tokens (see token_parts)
    calls: list[Call] = field(default_factory=list)
    call_id: str | None = None  # for tool results
    tool_name: str = ""
    is_error: bool = False
    ours: bool = False  # a canvas / history block we added earlier

    @property
    def key(self) -> str | None:
        return strip_id(self.call_id) if self.call_id else None


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:16]


def sign(text: str, key: bytes) -> str:
    """``text`` (opening with ``<tag ...>``) with the gateway's signature in its opening tag."""
    text = text.strip()
    end = text.find(">")
    if end <= 0:
        return text
    return f'{text[:end]} sig="{_mac(key, text)}"{text[end:]}'


def signed_by(text: str, key: bytes) -> bool:
    """Was ``text`` produced by :func:`sign` under ``key`` (byte for byte)?"""
    body = text.strip()
    if not body.startswith((CANVAS_MARK, HISTORY_MARK)):
        return False
    head = body[:_OPEN_TAG_CHARS]
    end = head.find(">")
    m = _SIG.search(head, 0, end if end > 0 else 0)
    if m is None:
        return False
    plain = body[: m.start()] + body[m.end() :]
    return hmac.compare_digest(m.group(1), _mac(key, plain))


def split_joined(text: str, key: bytes) -> tuple[str, str, bool] | None:
    """``(our block, the host's text, ours_first)`` when ``text`` is one of our signed blocks
    joined with the host's own text (before or after it); None otherwise.

    Why: Hermes 0.19.0 merges consecutive user messages of its live list before every call
    (agent_runtime_helpers.repair_message_sequence: ``a + "\\n\\n" + b``), so the history note a
    compaction leaves beside the turn's request comes back inside the request's message: its
    signature no longer checks, and each compaction would keep the old note inside the request
    and add a new one (the request growing by a note per compaction). Our block is a prefix
    ending at one of its closing tags, or a suffix starting at one of its opening tags, whose
    signature checks (a history head joins a few blocks); at most ``_MAX_JOINED_BLOCKS`` cuts
    are tried each way, so the work is linear in the text. A block only made to look like ours
    does not check, and stays the host's text.
    """
    body = text.strip()
    mark = next((m for m in _CLOSE_TAGS if body.startswith(m)), None)
    if mark is not None:  # our block, then the host's text
        close = _CLOSE_TAGS[mark]
        at = 0
        for _ in range(_MAX_JOINED_BLOCKS):
            end = body.find(close, at)
            if end < 0:
                break
            at = end + len(close)
            rest = body[at:].strip()
            if not rest:
                return None  # the whole message is the block (signed or not): nothing joined
            if signed_by(body[:at], key):
                return body[:at], rest, True
    if not body.endswith(tuple(_CLOSE_TAGS.values())):
        return None
    at = len(body)
    for _ in range(_MAX_JOINED_BLOCKS):  # the host's text, then our block
        at = max(body.rfind(CANVAS_MARK, 0, at), body.rfind(HISTORY_MARK, 0, at))
        if at <= 0:
            return None
        host = body[:at].strip()
        if host and signed_by(body[at:], key):
            return body[at:], host, False
    return None


def _with_text(raw: dict[str, Any], text: str) -> dict[str, Any] | None:
    """``raw`` with its text replaced, for a string content or a single text block."""
    content = raw.get("content")
    if isinstance(content, str):
        return {**raw, "content": text}
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and isinstance(content[0].get("text"), str)
    ):
        return {**raw, "content": [{**content[0], "text": text}]}
    return None


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") in ("toolCall", "tool_use"):
                    continue
                else:
                    parts.append(json.dumps(block, ensure_ascii=False))
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def detect_format(messages: list[Any], hint: str | None = None) -> str:
    """``agent`` for OpenClaw AgentMessages (a ``toolResult``, a ``toolCall`` block, or list
    content with a numeric ``timestamp``, which OpenAI messages never carry), else ``openai``."""
    if hint in ("openai", "agent"):
        return hint
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "toolResult":
            return "agent"
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "toolCall" for b in content
        ):
            return "agent"
        if isinstance(content, list) and isinstance(m.get("timestamp"), int | float):
            return "agent"
    return "openai"


def token_parts(raw: dict[str, Any]) -> list[str]:
    """The texts of a message that cost tokens: its content, each call's name and arguments."""
    content = raw.get("content")
    parts = [_text_of(content)]
    for c in raw.get("tool_calls") or []:
        if isinstance(c, dict):
            fn = f if isinstance(f := c.get("function"), dict) else {}
            parts += [str(fn.get("name") or ""), _args_text(fn.get("arguments", ""))]
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "toolCall":
                parts += [str(b.get("name") or ""), _args_text(b.get("arguments", {}))]
    return [p for p in parts if p]


def _args_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def parse(messages: list[Any], fmt: str, key: bytes | None = None) -> list[Msg]:
    """The messages read and checked (``OffloadInputError`` names the first bad field).
    ``key``: the gateway's signing key; user messages signed with it are marked ``ours``."""
    out: list[Msg] = []
    roles = AGENT_ROLES if fmt == "agent" else OPENAI_ROLES
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise OffloadInputError(where, f"must be an object, got {type(m).__name__}")
        role = m.get("role")
        if not isinstance(role, str) or role not in roles:
            raise OffloadInputError(
                f"{where}.role", f"must be one of {sorted(roles)} ({fmt} format), got {role!r}"
            )
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise OffloadInputError(f"{where}.content", "must be a string, a list or null")
        text = _text_of(content)
        msg = Msg(raw=m, role=role, text=text, body=text)
        if fmt == "agent":
            if role == "toolResult":
                cid = m.get("toolCallId")
                if not isinstance(cid, str) or not cid:
                    raise OffloadInputError(f"{where}.toolCallId", "required for a toolResult")
                msg.role, msg.call_id = "tool", cid
                msg.tool_name = str(m.get("toolName") or "")
                msg.is_error = bool(m.get("isError"))
            elif isinstance(content, list):
                for j, b in enumerate(content):
                    if isinstance(b, dict) and b.get("type") == "toolCall":
                        if not isinstance(b.get("id"), str) or not b.get("id"):
                            raise OffloadInputError(f"{where}.content[{j}].id", "required")
                        args = b.get("arguments", {})
                        msg.calls.append(Call(b["id"], str(b.get("name") or ""), args))
                        msg.text += f"\n{b.get('name', '')} {_args_text(args)}"
        else:
            if role in ("tool", "function"):
                cid = m.get("tool_call_id")
                if not isinstance(cid, str) or not cid:
                    raise OffloadInputError(f"{where}.tool_call_id", "required for a tool message")
                msg.role, msg.call_id = "tool", cid
                msg.tool_name = str(m.get("name") or "")
            if role == "developer":
                msg.role = "system"
            calls = m.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    raise OffloadInputError(f"{where}.tool_calls", "must be a list")
                for j, c in enumerate(calls):
                    fn = c.get("function") if isinstance(c, dict) else None
                    if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not c["id"]:
                        raise OffloadInputError(f"{where}.tool_calls[{j}].id", "required")
                    fn = fn if isinstance(fn, dict) else {}
                    args = fn.get("arguments", "")
                    msg.calls.append(Call(c["id"], str(fn.get("name") or ""), args))
                    msg.text += f"\n{fn.get('name', '')} {_args_text(args)}"
        msg.parts = token_parts(m)
        if key is not None and msg.role == "user":
            if signed_by(text, key):
                msg.ours = True
            elif (joined := split_joined(text, key)) is not None:
                block, rest, first = joined
                ours, hosts = _with_text(m, block), _with_text(m, rest)
                if ours is not None and hosts is not None:  # the joined message split in two again
                    note = Msg(ours, "user", block, block, [block], ours=True)
                    msg = Msg(hosts, "user", rest, rest, token_parts(hosts))
                    if first:
                        out.append(note)
                    else:
                        out.append(msg)
                        msg = note
        out.append(msg)
    return out


def stub_message(msg: Msg, fmt: str, stub: str) -> dict[str, Any]:
    raw = dict(msg.raw)
    if fmt == "agent":
        raw["content"] = [{"type": "text", "text": stub}]
        raw.pop("details", None)
    else:
        raw["content"] = stub
    return raw


def synthetic_result(call: Call, fmt: str, text: str) -> dict[str, Any]:
    if fmt == "agent":
        return {
            "role": "toolResult",
            "toolCallId": call.id,
            "toolName": call.name,
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "timestamp": int(time.time() * 1000),
        }
    return {"role": "tool", "tool_call_id": call.id, "content": text}


def user_message(text: str, fmt: str) -> dict[str, Any]:
    if fmt == "agent":
        return {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": int(time.time() * 1000),
        }
    return {"role": "user", "content": text}


def truncated_text_message(msg: Msg, fmt: str, text: str) -> dict[str, Any]:
    """The message with its text content replaced (tool calls, if any, kept as they are)."""
    raw = dict(msg.raw)
    content = raw.get("content")
    if isinstance(content, list):
        kept = [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]
        raw["content"] = [{"type": "text", "text": text}, *kept]
    else:
        raw["content"] = text
    return raw


def compact_call_arguments(
    msg: Msg, fmt: str, compact: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The assistant message with the arguments of the calls in ``compact`` (by id) replaced."""
    raw = dict(msg.raw)
    if fmt == "agent":
        blocks = []
        for b in raw.get("content") or []:
            if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("id") in compact:
                b = {**b, "arguments": compact[b["id"]]}
            blocks.append(b)
        raw["content"] = blocks
    else:
        calls = []
        for c in raw.get("tool_calls") or []:
            if isinstance(c, dict) and c.get("id") in compact:
                fn = dict(c.get("function") or {})
                fn["arguments"] = json.dumps(compact[c["id"]], ensure_ascii=False)
                c = {**c, "function": fn}
            calls.append(c)
        raw["tool_calls"] = calls
    return raw

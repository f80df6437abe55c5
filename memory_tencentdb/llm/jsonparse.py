"""Tolerant parsing of JSON written by a language model.

Models wrap JSON in Markdown fences, add a sentence before or after it, leave trailing commas,
put raw newlines or tabs inside strings, or stop mid-object when they run out of tokens. The
first four are repaired here; the last one cannot be, and is reported as ``JSONTruncated`` so
the caller can retry with less input instead of silently losing the conversation.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_BAD_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


class JSONParseError(ValueError):
    """The reply holds no usable JSON. ``excerpt`` is a short, log-safe piece of it."""

    def __init__(self, message: str, text: str = "") -> None:
        self.excerpt = _excerpt(text)
        super().__init__(f"{message} (reply starts: {self.excerpt!r})" if text else message)


class JSONTruncated(JSONParseError):
    """The JSON value starts but never ends: the model was cut off (output token limit)."""


def _excerpt(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text[:n] + ("…" if len(text) > n else "")


def parse_json(text: str, expect: type | None = None) -> Any:
    """The JSON value in ``text``; ``expect`` (list or dict) picks which bracket to look for."""
    if text is None or not str(text).strip():
        raise JSONParseError("empty reply")
    original = str(text)
    body = _THINK.sub("", original).strip()
    fenced = _FENCE.search(body)
    if fenced and fenced.group(1).strip():
        inner = fenced.group(1).strip()
        # Only trust the fence if it actually holds the value we want.
        if _first_open(inner, expect) is not None:
            body = inner
    start = _first_open(body, expect)
    if start is None:
        raise JSONParseError("no JSON value in reply", original)
    end = _matching_close(body, start)
    if end is None:
        raise JSONTruncated("JSON reply is truncated (output limit reached?)", original)
    candidate = body[start : end + 1]
    for attempt in (candidate, _repair(candidate)):
        try:
            value = json.loads(attempt, strict=False)
        except ValueError:
            continue
        if expect is not None and not isinstance(value, expect):
            raise JSONParseError(f"expected a JSON {expect.__name__}", original)
        return value
    raise JSONParseError("reply is not valid JSON", original)


def _first_open(text: str, expect: type | None) -> int | None:
    opens = "[" if expect is list else "{" if expect is dict else None
    positions = [text.find(c) for c in ([opens] if opens else ["[", "{"])]
    positions = [p for p in positions if p >= 0]
    return min(positions) if positions else None


def _matching_close(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start``, string-aware; None if it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _repair(text: str) -> str:
    """Escape control characters inside strings, drop them outside, remove trailing commas."""
    out: list[str] = []
    in_string = False
    escaped = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
                out.append(ch)
            elif ch == "\\":
                escaped = True
                out.append(ch)
            elif ch == '"':
                in_string = False
                out.append(ch)
            elif ch < " ":
                out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\u{ord(ch):04x}"))
            else:
                out.append(ch)
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
        elif ch == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] in "]}":
                i += 1
                continue  # trailing comma
            out.append(ch)
        elif _BAD_CONTROL.match(ch):
            pass
        else:
            out.append(ch)
        i += 1
    return "".join(out)

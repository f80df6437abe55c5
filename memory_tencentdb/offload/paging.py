"""Reading a long text back in pages, so it fits a host's tool-result limit and still comes
back byte for byte.

Why pages: hosts cut a tool result that is too long before the model sees it (OpenClaw
2026.9.6 keeps about 8,000 ASCII characters of a result at 16k-token windows and more, Hermes
0.19.0 persists anything over 8,000-100,000 characters to a file), so an original longer than
that never reaches the model whole in one answer. Offsets are characters (Unicode code points,
Python's ``str`` indexing); the concatenation of the pages from offset 0, each started at the
previous page's ``next_offset``, is the text exactly.
"""

from __future__ import annotations

from typing import Any

from .guide import TOOL_NAME
from .records import OffloadInputError


def page(text: str, offset: int, length: int | None, key: dict[str, str]) -> dict[str, Any]:
    """The page ``text[offset:offset+length]`` (to the end without ``length``) and where the
    next one starts: ``next_offset`` (None at the end) and ``continuation``, the exact call
    that reads it (``key`` is the read's own key, e.g. ``{"tool_call_id": "call_1"}``)."""
    total = len(text)
    if offset > total:
        raise OffloadInputError(
            "offset", f"{offset} is past the end (the text has {total} characters)"
        )
    end = total if length is None else min(total, offset + length)
    nxt = end if end < total else None
    continuation = None
    if nxt is not None:
        args: dict[str, Any] = {**key, "offset": nxt}
        if length is not None:
            args["length"] = length
        continuation = {"tool": TOOL_NAME, "arguments": args}
    return {
        "offset": offset,
        "end": end,
        "total_chars": total,
        "next_offset": nxt,
        "continuation": continuation,
    }

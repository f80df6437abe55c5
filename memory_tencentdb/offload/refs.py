"""Raw tool results in ``refs/<timestamp>.md``, in the original's Markdown layout.

A ref is created with ``O_EXCL`` (never overwritten: a second result in the same millisecond gets
``-1``, ``-2`` … and, past 15 of them, a random suffix), written, fsync'ed with its directory,
and only then is a stub answered. The result sits in a fence longer than any backtick run inside it, so reading it back is byte-exact.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

from memory_tencentdb.offload.records import ToolResult

_RESULT_MARK = "\n**Result:**\n"


def ref_stem(timestamp: str) -> str:
    """``2026-04-12T17:26:08.123+08:00`` -> ``2026-04-12T17-26-08-123p08-00`` (the original's rule)."""
    return re.sub(r"[^0-9A-Za-z_-]", "-", timestamp.replace("+", "p")) or "ref"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fence(content: str) -> str:
    """Backticks one longer than the longest run in ``content`` (at least three). Found by
    substring tests (doubling, then halving: O(log run) searches, each linear and short), not
    one ``re.findall`` over the whole text (30 MB: 0.7 s holding the GIL)."""
    if "```" not in content:
        return "```"
    lo, hi = 3, 6  # a run of lo is in content; hi is the first length tried above it
    while "`" * hi in content:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if "`" * mid in content else (lo, mid)
    return "`" * (lo + 1)


def render(result: ToolResult) -> str:
    fence = _fence(result.content)
    try:
        args = json.dumps(result.arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        args = json.dumps(str(result.arguments), ensure_ascii=False)
    return (
        f"# Tool Result: {_one_line(result.tool_name)}\n"
        f"**Timestamp:** {result.timestamp}\n"
        "---\n"
        f"**Tool:** {_one_line(result.tool_name)}\n"
        f"**Call ID:** {_one_line(result.tool_call_id)}\n"
        f"**Arguments:** {args}\n"
        f"**Encoding:** {result.encoding}\n"
        f"**Error:** {'true' if result.is_error else 'false'}\n"
        f"**Result:**\n{fence}\n{result.content}\n{fence}\n"
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# The original's names: ``<stem>.md``, then ``-1``, ``-2`` … in the same millisecond. Probing on
# and on made the n-th same-stamp result cost n tries and the 10,000th fail; past a few, a random
# suffix is taken instead (O_EXCL still guarantees it is new).
_PROBES = 16


def _candidate(stem: str, n: int) -> str:
    if n == 0:
        return f"{stem}.md"
    if n < _PROBES:
        return f"{stem}-{n}.md"
    return f"{stem}-{uuid.uuid4().hex[:12]}.md"


def write(refs_dir: Path, result: ToolResult, sync: bool = True) -> str:
    """Write and fsync the ref; answer its name relative to the scope dir (``refs/<f>.md``).

    ``sync=False``: the caller makes many refs at once and calls ``os.sync()`` before it answers
    (one flush instead of one per file)."""
    refs_dir.mkdir(parents=True, exist_ok=True)
    data = render(result).encode("utf-8")
    stem = ref_stem(result.timestamp)
    for n in range(_PROBES + 64):
        name = _candidate(stem, n)
        try:
            fd = os.open(refs_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if sync:
            _fsync_dir(refs_dir)
        return f"refs/{name}"
    raise OSError(f"no free ref name for {stem}")


def parse(text: str) -> dict[str, str]:
    """Header fields and the exact ``content`` of a ref written by :func:`render`.

    Refs of the original (no Encoding/Arguments lines) parse too; their content is what lies
    between the fences."""
    head, sep, rest = text.partition(_RESULT_MARK)
    fields: dict[str, str] = {}
    for line in head.splitlines():
        m = re.match(r"^\*\*([A-Za-z ]+):\*\* ?(.*)$", line)
        if m:
            fields[m.group(1).lower().replace(" ", "_")] = m.group(2)
    if not sep:
        fields["content"] = text
        return fields
    fence, _, body = rest.partition("\n")
    closing = f"\n{fence}\n"
    if body.endswith(closing):
        body = body[: -len(closing)]
    elif body.endswith(f"\n{fence}"):
        body = body[: -len(fence) - 1]
    fields["content"] = body
    return fields

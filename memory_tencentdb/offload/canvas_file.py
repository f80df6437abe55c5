"""Appending one step to a canvas file without rewriting it (issue 21: 1,500 steps took the
per-step cost from 2.5 to 28 ms, each append reading, scanning and rewriting the whole canvas).

An append writes the new node (and its edge) at the end of the file and the metadata line in
place, then one fsync. The metadata line is padded with trailing spaces to a multiple of
``_PAD`` bytes (a Mermaid comment may end in spaces), so a new progress or update time almost
always has the same length; when it does not, the file is rewritten whole (atomically), as
before. What the append needs to know (the last node number, the status counts, where the file
ends) is kept per file and trusted only while the file's inode, size and mtime are the ones this
module left and no whole-canvas write of this process (``Scope.write_canvas``: an LLM canvas,
a batch of an assembly) came since; a hand edit changes the stamp. Either way the next append
reads the file again.

A crash between the two writes leaves a node without its progress counted (the next append
or any rewrite recounts), or, torn within the line, a metadata line :func:`canvas.parse_meta`
still reads the goal from.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from memory_tencentdb.offload import canvas
from memory_tencentdb.store.files import write_atomic

_PAD = 64


@dataclass
class _Known:
    stamp: tuple[int, int, int]  # inode, size, mtime_ns after our last write
    k: int
    counts: dict[str, int]
    meta: canvas.Meta
    meta_bytes: int  # length of the first line, newline excluded


_known: dict[Path, _Known] = {}
_guard = threading.Lock()


def padded_meta(meta: canvas.Meta) -> str:
    line = canvas.meta_line(meta)
    width = len(line.encode("utf-8"))
    return line + " " * (-width % _PAD)


def forget(path: Path) -> None:
    """Another writer (a whole-canvas rewrite in this process) is about to replace the file."""
    with _guard:
        _known.pop(Path(path), None)


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _load(path: Path, prefix: str) -> _Known:
    text = path.read_bytes().decode("utf-8")
    first = text.split("\n", 1)[0]
    return _Known(
        stamp=(0, 0, 0),
        k=canvas.max_k(text, prefix),
        counts=canvas.status_counts(text),
        meta=canvas.parse_meta(text),
        # -1: no metadata line, or no newline at the end: the next append rewrites the file.
        meta_bytes=len(first.encode("utf-8"))
        if first.startswith("%%") and text.endswith("\n")
        else -1,
    )


def _progress(counts: dict[str, int]) -> str:
    total = sum(counts.values()) or 1
    return str(round(100 * counts.get("done", 0) / total))


def append(path: Path, prefix: str, step: str, status: str, summary: str, timestamp: str) -> str:
    """Add the next step to the canvas at ``path`` (the caller holds the scope's lock); answers
    the new node's id."""
    path = Path(path)
    with _guard:
        known = _known.get(path)
    st = os.stat(path)
    if known is None or known.stamp != _stamp(st):
        known = _load(path, prefix)
    added, node = canvas.append_node("", prefix, step, status, summary, timestamp, known.k)
    added = added.lstrip("\n")
    counts = dict(known.counts)
    counts[status] = counts.get(status, 0) + 1
    meta = canvas.Meta(**known.meta.__dict__)
    meta.updated_time = timestamp
    meta.progress = _progress(counts)
    line = padded_meta(meta).encode("utf-8")
    if known.meta_bytes == len(line):
        body = added.encode("utf-8")
        fd = os.open(path, os.O_WRONLY)
        try:
            end = os.fstat(fd).st_size
            os.pwrite(fd, line, 0)
            done = 0
            while done < len(body):
                done += os.pwrite(fd, body[done:], end + done)
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
    else:  # the padding ran out (or an unpadded line): rewrite whole, padded from now on
        text = path.read_bytes().decode("utf-8")
        if not text.endswith("\n"):
            text += "\n"
        first, sep, rest = text.partition("\n")
        if not first.startswith("%%"):
            rest, sep = text, "\n"
        new = line.decode("utf-8") + sep + rest + added
        write_atomic(path, new)
        st = os.stat(path)
    with _guard:
        _known[path] = _Known(_stamp(st), known.k + 1, counts, meta, len(line))
    return node

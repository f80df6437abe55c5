"""One session's and one scope's offload state, loaded from and written to their files.

A :class:`Session` is the in-memory copy of ``offload-<session>.jsonl`` plus
``sessions/<session>.json`` (active canvas, boundaries); the journal is the truth and is
re-read on first use after a restart, so a killed gateway resumes with the same rows and canvas.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_tencentdb.offload import canvas, canvas_file, journal, refs
from memory_tencentdb.offload.layout import ScopeLayout
from memory_tencentdb.offload.records import OffloadRow, ToolResult, strip_id
from memory_tencentdb.store.files import write_atomic

_MMD = re.compile(r"^(\d{3,})-.*\.mmd$")


def read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
        return data if isinstance(data, dict) else dict(default)
    except (OSError, ValueError):
        return dict(default)


def content_of(value: Any) -> tuple[str, str]:
    """The text a ref stores for a result, and its encoding: strings as they are, a list of text
    blocks joined by newlines (OpenClaw), anything else as JSON."""
    if isinstance(value, str):
        return value, "text"
    if isinstance(value, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in value
    ):
        return "\n".join(b["text"] for b in value), "text"
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return content_of(value["content"])
    return json.dumps(value, ensure_ascii=False, indent=2), "json"


def message_id(role: str, text: str) -> str:
    return "msg-" + hashlib.sha1(f"{role}\0{text}".encode()).hexdigest()[:16]


@dataclass
class Scope:
    name: str
    layout: ScopeLayout
    lock: threading.RLock = field(default_factory=threading.RLock)

    def canvas_files(self) -> list[str]:
        d = self.layout.mmds
        if not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if _MMD.match(p.name))

    def read_canvas(self, name: str) -> str:
        return (self.layout.mmds / name).read_text("utf-8")

    def write_canvas(self, name: str, text: str) -> None:
        canvas_file.forget(self.layout.mmds / name)  # its next append reads the file again
        write_atomic(self.layout.mmds / name, text)

    def new_canvas(self, goal: str, created: str) -> str:
        """Create ``NNN-<label>.mmd``; NNN = one past the counter and every file on disk."""
        with self.lock:
            state = read_json(self.layout.state_file, {"mmd_counter": 0})
            on_disk = [int(m.group(1)) for f in self.canvas_files() if (m := _MMD.match(f))]
            n = max([int(state.get("mmd_counter") or 0), *on_disk]) + 1
            name = f"{n:03d}-{canvas.slug(goal)}.mmd"
            self.write_canvas(name, canvas.new_canvas(goal, created))
            state["mmd_counter"] = n
            write_atomic(self.layout.state_file, json.dumps(state))
            return name


def _joined(entry: list[Any]) -> str:
    """A batch canvas entry's text: what the file held, then the node lines added since."""
    text, _, lines = entry
    if not lines:
        return text
    joined = "".join(lines)
    entry[0], entry[2] = (text if text.endswith("\n") else text + "\n") + joined, []
    return entry[0]


def split_ref(ref: str) -> tuple[str, tuple[int, int] | None]:
    """``refs/<f>.md#<start>-<end>`` -> (``refs/<f>.md``, byte range) ; a whole ref -> (ref, None)."""
    path, sep, span = ref.partition("#")
    if not sep:
        return ref, None
    a, dash, b = span.partition("-")
    if not (dash and a.isdigit() and b.isdigit() and int(a) <= int(b)):
        raise ValueError(f"bad byte range in ref {ref!r}")
    return path, (int(a), int(b))


def read_ref_text(root: Path, ref: str) -> str:
    """The text of one ref (a whole file, or its part of a request's bundle), undecoded
    newlines kept (no translation)."""
    path, span = split_ref(ref)
    if span is None:
        return (root / path).read_bytes().decode("utf-8")
    with (root / path).open("rb") as f:
        f.seek(span[0])
        return f.read(span[1] - span[0]).decode("utf-8")


def session_canvases(sess: Session) -> list[str]:
    """The canvases of ``sess``'s scope that belong to this session: the ones it began or
    resumed (its task prompts name them). A session never continues, resumes or adds steps to
    another session's canvas: the scope's other canvases are not its tasks."""
    state = sess.state
    own = set(state.get("task_prompts") or {}) | {state.get("active"), state.get("previous")}
    return [f for f in sess.scope.canvas_files() if f in own]


def prefix_of(name: str) -> str:
    m = _MMD.match(name)
    return m.group(1) if m else "000"


@dataclass
class Session:
    scope: Scope
    key: str
    lock: threading.RLock = field(default_factory=threading.RLock)
    rows: list[OffloadRow] = field(default_factory=list)
    by_key: dict[str, OffloadRow] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    corrupt: int = 0
    # While an assembly records many results/messages: rows wait here, refs are unsynced.
    batch: list[OffloadRow] | None = None
    dirty: bool = False  # rows changed in a batch: rewrite at commit
    # Canvases grown in a batch: name -> [text before, last k, added node lines]; the lines are
    # joined once (at commit or when shown), not re-copied per node (quadratic in the canvas).
    # The scope lock is held until commit.
    canvases: dict[str, list[Any]] = field(default_factory=dict)
    # During one assembly: tool calls whose results the host appends after the list.
    pending_ids: list[str] = field(default_factory=list)
    # The results and messages one assembly records share one ref file (its "bundle"): each
    # row names its part as ``refs/<f>.md#<start>-<end>``. One file per request, not per
    # removed message (a 0.26 MB request used to leave thousands of files, 16 MB on disk).
    bundle: list[bytes] = field(default_factory=list)
    bundle_name: str | None = None
    bundle_size: int = 0

    @property
    def journal_path(self) -> Path:
        return self.scope.layout.journal(self.key)

    @property
    def state_path(self) -> Path:
        return self.scope.layout.session_state(self.key)

    def load(self) -> None:
        rows, bad = journal.read(self.journal_path)
        self.corrupt += bad
        self.rows = rows
        self.by_key = {strip_id(r.tool_call_id): r for r in rows}
        self.state = read_json(
            self.state_path,
            {"session_key": self.key, "active": None, "pending_goal": None, "boundaries": []},
        )

    def canvas_text(self, name: str) -> str:
        """A canvas as it stands, nodes added in this batch included (not on disk yet)."""
        entry = self.canvases.get(name)
        return _joined(entry) if entry is not None else self.scope.read_canvas(name)

    def save_state(self) -> None:
        self.state["session_key"] = self.key
        self.state["scope"] = self.scope.name  # so a restart can find the session again
        write_atomic(self.state_path, json.dumps(self.state, ensure_ascii=False, indent=1))

    def row(self, tool_call_id: str) -> OffloadRow | None:
        return self.by_key.get(strip_id(tool_call_id))

    def add(self, row: OffloadRow) -> None:
        """Append and fsync the row (the ref is already on disk); in a batch, at ``commit``."""
        if self.batch is not None:
            self.batch.append(row)
        else:
            journal.append(self.journal_path, [row])
        self.rows.append(row)
        self.by_key[strip_id(row.tool_call_id)] = row

    def begin(self) -> None:
        self.batch = []
        self.dirty = False
        self.bundle, self.bundle_name, self.bundle_size = [], None, 0

    def commit(self, now: str) -> None:
        """Make the batch durable: its refs (one bundle file, fsync'ed) and canvases (each
        fsync'ed), then the rows (one fsync, or one rewrite when flags of older rows changed
        too). No ``os.sync()``: it flushes every file of the machine (seconds on a busy disk)."""
        rows, self.batch = self.batch or [], None
        self._write_bundle()
        if self.canvases:
            try:
                for name, entry in self.canvases.items():
                    self.scope.write_canvas(name, canvas.finish(_joined(entry), now))
            finally:
                self.canvases = {}
                self.scope.lock.release()
        if self.dirty:
            self.dirty = False
            self.flush_rows()
        elif rows:
            journal.append(self.journal_path, rows)

    def flush_rows(self) -> None:
        self.corrupt += journal.rewrite(self.journal_path, self.rows)

    def write_ref(self, result: ToolResult) -> str:
        if self.batch is None:
            return refs.write(self.scope.layout.refs, result, sync=True)
        if self.bundle_name is None:
            stem = refs.ref_stem(result.timestamp)
            self.bundle_name = f"{stem}-req-{secrets.token_hex(4)}.md"  # unique: no probing
        data = refs.render(result).encode("utf-8")
        start = self.bundle_size
        self.bundle.append(data)
        self.bundle_size += len(data)
        return f"refs/{self.bundle_name}#{start}-{self.bundle_size}"

    def _write_bundle(self) -> None:
        """The batch's bundle on disk and fsync'ed (with its directory), before its rows."""
        chunks, name = self.bundle, self.bundle_name
        self.bundle, self.bundle_name, self.bundle_size = [], None, 0
        if not chunks or name is None:
            return
        d = self.scope.layout.refs
        d.mkdir(parents=True, exist_ok=True)
        fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for data in chunks:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

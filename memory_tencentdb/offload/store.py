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
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_tencentdb.offload import canvas, canvas_file, journal, refs
from memory_tencentdb.offload.layout import ScopeLayout
from memory_tencentdb.offload.records import OffloadRow, ToolResult, strip_id

_MMD = re.compile(r"^(\d{3,})-.*\.mmd$")


def write_atomic(path: Path, text: str, sync: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)


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

    def write_canvas(self, name: str, text: str, sync: bool = True) -> None:
        canvas_file.forget(self.layout.mmds / name)  # its next append reads the file again
        write_atomic(self.layout.mmds / name, text, sync)

    def new_canvas(self, goal: str, created: str) -> str:
        """Create ``NNN-<label>.mmd``; NNN = one past the counter and every file on disk."""
        with self.lock:
            state = read_json(self.layout.state_file, {"mmd_counter": 0})
            on_disk = [int(_MMD.match(f).group(1)) for f in self.canvas_files()]
            n = max([int(state.get("mmd_counter") or 0), *on_disk]) + 1
            name = f"{n:03d}-{canvas.slug(goal)}.mmd"
            self.write_canvas(name, canvas.new_canvas(goal, created))
            state["mmd_counter"] = n
            write_atomic(self.layout.state_file, json.dumps(state))
            return name


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
    # Canvases grown in a batch: name -> [text, last k]; the scope lock is held until commit.
    canvases: dict[str, list[Any]] = field(default_factory=dict)
    # During one assembly: tool calls whose results the host appends after the list.
    pending_ids: list[str] = field(default_factory=list)

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
        return entry[0] if entry is not None else self.scope.read_canvas(name)

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

    def commit(self, now: str) -> None:
        """Make the batch durable: every ref and canvas (one ``os.sync``), then the rows (one
        fsync, or one rewrite when flags of older rows changed too)."""
        rows, self.batch = self.batch or [], None
        if self.canvases:
            try:
                for name, (text, _) in self.canvases.items():
                    self.scope.write_canvas(name, canvas.finish(text, now), sync=False)
            finally:
                self.canvases = {}
                self.scope.lock.release()
        if rows:
            os.sync()
        if self.dirty:
            self.dirty = False
            self.flush_rows()
        elif rows:
            journal.append(self.journal_path, rows)

    def flush_rows(self) -> None:
        self.corrupt += journal.rewrite(self.journal_path, self.rows)

    def write_ref(self, result: ToolResult) -> str:
        return refs.write(self.scope.layout.refs, result, sync=self.batch is None)

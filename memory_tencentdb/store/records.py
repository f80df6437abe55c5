"""Typed records the store hands to the services (one field name per fact).

``L0Message`` and ``Memory`` name each fact as the HTTP API does. Where a format on disk names it
otherwise (the L0 journal's ``record_id``/``sessionKey``/..., the ``source_ids`` and ``rowid``
columns), the functions here translate it, and nothing outside ``store/`` sees the other name.

The pipeline's progress lives in two tables (``pipeline_sessions``, ``pipeline_scopes``); the
services read them as these dataclasses and change them only through the store's named methods,
so no SQL, and no backend's dialect, leaks out of ``store/``.

Cursors (``l1_cursor``, ``l2_cursor``) are sequence numbers: each backend numbers the rows of a
table in the order it stored them (SQLite's ``rowid``, PostgreSQL's ``seq`` identity column). The
record id next to each cursor (``l1_cursor_id``, ``l2_cursor_id``) is what survives a rebuild.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple


@dataclass
class SessionState:
    """L1 progress of one session (a row of ``pipeline_sessions``, or its defaults)."""

    scope: str
    session_key: str
    l1_cursor: int = 0  # sequence number of the last L0 message extracted
    l1_cursor_id: str = ""  # its record id
    warmup_threshold: int = 1  # 0 = graduated to everyN
    last_scene_name: str = ""
    plan: str = ""  # JSON: writes decided but not yet all applied
    failures: int = 0
    last_error: str = ""
    memories_extracted: int = 0
    updated_at: str = ""


@dataclass
class ScopeState:
    """L2/L3 progress of one scope (a row of ``pipeline_scopes``, or its defaults)."""

    scope: str
    l2_cursor: int = 0  # sequence number of the last L1 memory folded into scenes
    l2_cursor_id: str = ""
    l2_last_run: float = 0.0  # epoch seconds
    l2_due_at: float = 0.0  # epoch seconds, 0 = not armed
    l2_plan: str = ""  # JSON: scene actions being applied
    scenes_processed: int = 0
    memories_since_persona: int = 0
    last_persona_at: int = 0  # L0 count when the persona was written
    last_persona_time: str = ""
    persona_request: str = ""  # reason, when L2 asked for L3
    last_active: float = 0.0  # epoch seconds of the last capture
    l2_failures: int = 0
    l3_failures: int = 0
    last_error: str = ""
    updated_at: str = ""


@dataclass
class SessionBacklog:
    """A session with captured messages past its L1 cursor (or a plan left half-applied)."""

    scope: str
    session_key: str
    pending: int = 0  # messages past the cursor
    last_recorded_at: str = ""
    max_seq: int = 0
    user_messages: int = 0


SESSION_COLUMNS = tuple(f.name for f in fields(SessionState))
SCOPE_COLUMNS = tuple(f.name for f in fields(ScopeState))


def session_from_row(names: list[str], row: tuple[Any, ...]) -> SessionState:
    return SessionState(**dict(zip(names, row, strict=True)))


def scope_from_row(names: list[str], row: tuple[Any, ...]) -> ScopeState:
    d = dict(zip(names, row, strict=True))
    for key in ("l2_last_run", "l2_due_at", "last_active"):
        d[key] = float(d[key] or 0)
    return ScopeState(**d)


# --------------------------------------------------------------------------- L0 messages


@dataclass
class L0Input:
    """One message to record (``MemoryStore.record_messages``); ``id`` is assigned by the store."""

    scope: str
    session_key: str
    session_id: str
    role: str
    content: str
    timestamp: int
    message_id: str = ""
    extra: dict[str, Any] | None = None
    speaker: str = ""  # the speaker's name, when the host knows it


@dataclass(frozen=True, slots=True)
class L0Message:
    """One captured message (a row of ``l0_messages``), named as the HTTP API names it.

    ``id`` is the store's record id (``l0_...``: the journal's ``record_id``, the ``id`` of a
    ``/search/conversations`` item, an entry of a memory's ``source_message_ids``);
    ``message_id`` is the host's own id of the message (the journal's ``id``). ``seq`` is the
    backend's sequence number (SQLite's rowid): an order and a cursor, never an identity, since
    a rebuild renumbers it; 0 for a message not yet stored.
    """

    id: str
    scope: str
    session_key: str
    session_id: str
    role: str
    content: str
    timestamp: int  # when it was said, epoch milliseconds (the host's, else capture time)
    recorded_at: str  # when the store wrote it, ISO-8601 UTC
    message_id: str = ""
    speaker: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    file: str = ""  # the journal file (relative to the data directory)
    text_hash: str = ""

    def journal_line(self) -> dict[str, Any]:
        """The message as a line of the L0 journal (and of an export)."""
        line: dict[str, Any] = {
            "record_id": self.id,
            "scope": self.scope,
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
            "recordedAt": self.recorded_at,
            "id": self.message_id,
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp,
        }
        if self.speaker:
            line["speaker"] = self.speaker
        if self.extra:
            line["extra"] = self.extra
        return line


def l0_from_journal(line: dict[str, Any], file: str = "") -> L0Message:
    """A journal (or export) line as a message; old lines lacking a field get its default."""
    return L0Message(
        id=str(line["record_id"]),
        scope=str(line.get("scope") or "default"),
        session_key=str(line.get("sessionKey") or ""),
        session_id=str(line.get("sessionId") or ""),
        role=str(line.get("role") or "user"),
        content=str(line.get("content", "")),
        timestamp=int(line.get("timestamp") or 0),
        recorded_at=str(line.get("recordedAt") or ""),
        message_id=str(line.get("id") or ""),
        speaker=str(line.get("speaker") or ""),
        extra=line.get("extra") or {},
        file=file,
    )


# The database columns, in ``L0Message`` order (the column ``rowid`` is the field ``seq``).
L0_SELECT = (
    "id, scope, session_key, session_id, role, content, timestamp, recorded_at, message_id,"
    " speaker, extra, rowid, file, text_hash"
)


def l0_from_row(row: tuple[Any, ...]) -> L0Message:
    """A row selected with ``L0_SELECT`` (``extra`` is JSON text in the database)."""
    extra = row[10]
    if isinstance(extra, str):
        extra = json.loads(extra or "{}")
    return L0Message(
        row[0],
        row[1],
        row[2],
        row[3] or "",
        row[4],
        row[5],
        int(row[6] or 0),
        row[7] or "",
        row[8] or "",
        row[9] or "",
        extra or {},
        int(row[11]),
        row[12] or "",
        row[13] or "",
    )


# --------------------------------------------------------------------------- L1 memories


@dataclass(frozen=True, slots=True)
class Memory:
    """One L1 memory (a row of ``l1_memories``), named as the HTTP API and the L1 journal
    (``records/*.jsonl`` upsert lines) name it.

    ``source_message_ids`` are the record ids (``L0Message.id``) it was distilled from (the
    database column is ``source_ids``: translated in ``memory_from_row``). ``seq`` is the
    backend's sequence number (0 for one not yet stored), ``file`` the journal file that holds
    its latest line.
    """

    id: str
    scope: str
    content: str
    type: str = "episodic"
    priority: int = 50
    scene_name: str = ""
    session_key: str = ""
    session_id: str = ""
    source_message_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamps: list[str] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""
    status: str = "active"  # active | superseded | deleted
    superseded_by: str = ""
    origin: str = "api"  # api | extraction | rules | import ...
    seq: int = 0
    file: str = ""
    text_hash: str = ""

    def journal_line(self) -> dict[str, Any]:
        """The memory as an upsert line of the L1 journal."""
        return {
            "op": "upsert",
            "id": self.id,
            "scope": self.scope,
            "content": self.content,
            "type": self.type,
            "priority": self.priority,
            "scene_name": self.scene_name,
            "session_key": self.session_key,
            "session_id": self.session_id,
            "source_message_ids": list(self.source_message_ids),
            "metadata": self.metadata,
            "timestamps": list(self.timestamps),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status,
            "superseded_by": self.superseded_by,
            "origin": self.origin,
        }

    @property
    def activity_start(self) -> str:
        """When what it tells began (``metadata.activity_start_time``), "" when not known."""
        return str(self.metadata.get("activity_start_time") or "")

    @property
    def activity_end(self) -> str:
        return str(self.metadata.get("activity_end_time") or "")

    def public(self) -> dict[str, Any]:
        """The memory as the HTTP API shows it (no sequence number or hash: the index's)."""
        out = self.journal_line()
        del out["op"]
        out["activity_start"] = self.activity_start
        out["activity_end"] = self.activity_end
        out["file"] = self.file
        return out


def memory_from_journal(line: dict[str, Any], file: str = "") -> Memory:
    """An upsert line (or a plan's record, or an export line) as a memory; missing fields get
    their defaults."""
    return Memory(
        id=str(line["id"]),
        scope=str(line.get("scope") or "default"),
        content=str(line["content"]),
        type=str(line.get("type") or "episodic"),
        priority=int(line.get("priority", 50)),
        scene_name=str(line.get("scene_name") or ""),
        session_key=str(line.get("session_key") or ""),
        session_id=str(line.get("session_id") or ""),
        source_message_ids=list(line.get("source_message_ids") or []),
        metadata=dict(line.get("metadata") or {}),
        timestamps=list(line.get("timestamps") or []),
        created_at=str(line.get("created_at") or ""),
        updated_at=str(line.get("updated_at") or ""),
        status=str(line.get("status") or "active"),
        superseded_by=str(line.get("superseded_by") or ""),
        origin=str(line.get("origin") or "api"),
        file=file,
    )


# The database columns, in ``Memory`` order (``source_ids`` is ``source_message_ids``,
# ``rowid`` is ``seq``).
L1_SELECT = (
    "id, scope, content, type, priority, scene_name, session_key, session_id, source_ids,"
    " metadata, timestamps, created_at, updated_at, status, superseded_by, origin, rowid, file,"
    " text_hash"
)


def _json(value: Any, empty: str) -> Any:
    """A JSON column's value; the empty list / object most rows hold is built, not parsed (a
    recall decodes ~120 candidate rows: the three columns' ``json.loads`` were ~a third of
    ``memory_from_row``, bench/recall_profile.py)."""
    if not isinstance(value, str):
        return value
    if not value or value == empty:
        return [] if empty == "[]" else {}
    return json.loads(value)


def memory_from_row(row: tuple[Any, ...]) -> Memory:
    """A row selected with ``L1_SELECT`` (lists and metadata are JSON text in the database)."""
    return Memory(
        row[0],
        row[1],
        row[2],
        row[3],
        int(row[4]),
        row[5] or "",
        row[6] or "",
        row[7] or "",
        _json(row[8], "[]") or [],
        _json(row[9], "{}") or {},
        _json(row[10], "[]") or [],
        row[11] or "",
        row[12] or "",
        row[13],
        row[14] or "",
        row[15] or "",
        int(row[16]),
        row[17] or "",
        row[18] or "",
    )


class KeywordHit(NamedTuple):
    """A keyword-search hit: the row's sequence number and its BM25 score mapped into (0, 1).
    A tuple, so ``for seq, score in hits`` reads it (the search is on the hot path)."""

    seq: int
    score: float


@dataclass
class ScopeCounts:
    """A scope's counts (``MemoryStore.scope_counts``)."""

    scope: str
    memories: int = 0  # active L1
    history: int = 0  # superseded or deleted L1 rows
    messages: int = 0  # L0
    last_activity: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "memories": self.memories,
            "history": self.history,
            "messages": self.messages,
            "last_activity": self.last_activity or None,
        }

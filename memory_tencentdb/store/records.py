"""Typed records the store hands to the services (one field name per fact).

The pipeline's progress lives in two tables (``pipeline_sessions``, ``pipeline_scopes``); the
services read them as these dataclasses and change them only through the store's named methods,
so no SQL, and no backend's dialect, leaks out of ``store/``.

Cursors (``l1_cursor``, ``l2_cursor``) are sequence numbers: each backend numbers the rows of a
table in the order it stored them (SQLite's ``rowid``, PostgreSQL's ``seq`` identity column). The
record id next to each cursor (``l1_cursor_id``, ``l2_cursor_id``) is what survives a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


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

"""Pipeline state, as the stages use it: typed records read and changed through the store.

The SQL lives in each backend's ``pipeline.py`` (``store/sqlite/``, ``store/postgres/``); this
module only keeps the stages' vocabulary (plans as JSON, "complete a chunk") in one place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import Memory, ScopeState, SessionBacklog, SessionState


def get_session(store: MemoryStore, scope: str, key: str) -> SessionState:
    return store.session_state(scope, key)


def get_scope(store: MemoryStore, scope: str) -> ScopeState:
    return store.scope_state(scope)


def update_session(store: MemoryStore, scope: str, key: str, **values: Any) -> None:
    """Set columns (``col=v``) or add to them (``col__add=n``)."""
    store.update_session_state(scope, key, **values)


def update_scope(store: MemoryStore, scope: str, **values: Any) -> None:
    store.update_scope_state(scope, **values)


def save_plan(store: MemoryStore, scope: str, key: str, plan: dict[str, Any]) -> None:
    update_session(store, scope, key, plan=json.dumps(plan, ensure_ascii=False))


def load_plan(raw: str) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        plan = json.loads(raw)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def complete_chunk(
    store: MemoryStore,
    scope: str,
    key: str,
    to_seq: int,
    to_id: str,
    stored: int,
    last_scene: str,
    last_active: float,
) -> None:
    """Advance the L1 cursor past an applied chunk, with the counters it feeds, atomically."""
    store.complete_chunk(scope, key, to_seq, to_id, stored, last_scene, last_active)


def backlog_sessions(store: MemoryStore) -> list[SessionBacklog]:
    return store.backlog_sessions()


def scopes_with_state(store: MemoryStore) -> list[ScopeState]:
    return store.scope_states()


def pending_l1_memories(store: MemoryStore, scope: str, cursor: int, limit: int) -> list[Memory]:
    """Active memories of ``scope`` written after the L2 cursor, oldest first."""
    return store.l1_after(scope, cursor, limit)


def count_pending_l1(store: MemoryStore, scope: str, cursor: int) -> int:
    return store.count_l1_after(scope, cursor)


def max_l1_rowid(store: MemoryStore, scope: str) -> int:
    return store.max_l1_seq(scope)


def reconcile(store: MemoryStore, has_scenes: Callable[[str], bool]) -> list[str]:
    """Make cursors agree with the database after ``reindex`` rebuilt it."""
    return store.reconcile_pipeline(has_scenes)

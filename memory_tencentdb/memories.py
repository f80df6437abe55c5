"""Direct L1 writes (``POST /memories``) and the trace of one memory back to its evidence.

Hosts mirror their own memory writes here (Hermes's ``on_memory_write``), tests and seeding use
it. A direct write is durable (the journal line fsync'ed) and keyword-searchable when the call
returns; its vectors come from the background loop within moments (embedding both models on the
request's thread cost ~250 ms a write). A recall of the scope meanwhile waits briefly for them
(``Engine._await_embedded``), so "write, then ask" still finds it by meaning.
"""

from __future__ import annotations

from typing import Any

from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import new_id, now_iso
from memory_tencentdb.store.records import Memory
from memory_tencentdb.vectorizer import Vectorizer


def write_memory(
    store: MemoryStore,
    vectorizer: Vectorizer,
    *,
    content: str,
    type_: str,
    scope: str,
    session_key: str,
    session_id: str = "",
    priority: int = 50,
    scene_name: str = "",
    source_ids: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    origin: str = "api",
) -> Memory:
    now = now_iso()
    stored = store.write_memory(
        Memory(
            id=new_id("m"),
            scope=scope,
            content=content.strip(),
            type=type_,
            priority=priority,
            scene_name=scene_name,
            session_key=session_key,
            session_id=session_id,
            source_message_ids=source_ids or [],
            metadata=metadata or {},
            timestamps=[now],
            created_at=now,
            updated_at=now,
            origin=origin,
        )
    )
    vectorizer.expect(scope, [stored.seq])
    return stored


def memory_with_trace(store: MemoryStore, memory_id: str, scope: str) -> dict[str, Any] | None:
    """A memory of ``scope``, the raw messages it came from, what replaced it and what it
    replaced. Another scope's memory is None (not found), exactly like a missing id."""
    row = store.memory_by_id(memory_id)
    if row is None or row.scope != scope:
        return None
    out = row.public()
    sources = [m for m in store.l0_by_ids(row.source_message_ids) if m.scope == scope]
    out["trace"] = {
        "file": row.file,
        "source_messages": [
            {
                "id": m.id,
                "role": m.role,
                "content": m.content,
                "session_key": m.session_key,
                "timestamp": m.timestamp,
                "file": m.file,
            }
            for m in sources
        ],
        "superseded_by": row.superseded_by or None,
        "history": [
            {
                "id": h.id,
                "content": h.content,
                "status": h.status,
                "updated_at": h.updated_at,
                "superseded_by": h.superseded_by,
            }
            for h in store.memory_history(memory_id)
            if h.scope == scope
        ],
    }
    return out

"""What recall and the search tools return for one memory or message: the stored record and
the score it was found with. One type for both, so the answer's JSON is written in one place and
the layers in between keep the record itself (recall renders its lines from it, orders a newer
statement before the one it replaced by it) instead of a dict carrying it under a private key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_tencentdb.store.records import L0Message, Memory


@dataclass(frozen=True)
class FoundMemory:
    memory: Memory
    score: float

    def as_json(self, *, scope: bool = False, times: bool = False) -> dict[str, Any]:
        """``scope``: say which scope it came from (when team scopes were searched too);
        ``times``: when it was written and last changed (the search tool shows them)."""
        m = self.memory
        out: dict[str, Any] = {
            "id": m.id,
            "content": m.content,
            "type": m.type,
            "priority": m.priority,
            "scene_name": m.scene_name,
            "score": round(self.score, 6),
        }
        if scope:
            out["scope"] = m.scope
        if times:
            out["created_at"], out["updated_at"] = m.created_at, m.updated_at
        return out


@dataclass(frozen=True)
class FoundMessage:
    message: L0Message
    score: float

    def as_json(self, *, scope: bool = False) -> dict[str, Any]:
        m = self.message
        return {
            "id": m.id,
            **({"scope": m.scope} if scope else {}),
            "session_key": m.session_key,
            "session_id": m.session_id,
            "role": m.role,
            "speaker": m.speaker,
            "message_id": m.message_id,
            "content": m.content,
            "score": round(self.score, 6),
            "recorded_at": m.recorded_at,
            "timestamp": m.timestamp,
        }

"""The columns PostgreSQL's statements select for a typed record, in the order the records'
decoders (``records.l0_from_row``, ``records.memory_from_row``) read them. The decoders take JSON
columns as text or already decoded, so they serve this schema's columns as they are."""

from __future__ import annotations

import json
from typing import Any

from memory_tencentdb.store.records import l0_from_row, memory_from_row

# ``L0Message`` order (``extra`` is jsonb: psycopg decodes it).
L0_SELECT = (
    "id, scope, session_key, session_id, role, content, timestamp, recorded_at, message_id,"
    " speaker, extra, seq, file, text_hash"
)
# ``Memory`` order (``source_ids`` is ``source_message_ids``; the JSON columns are jsonb).
L1_SELECT = (
    "id, scope, content, type, priority, scene_name, session_key, session_id, source_ids,"
    " metadata, timestamps, created_at, updated_at, status, superseded_by, origin, seq, file,"
    " text_hash"
)

l0_from_pg = l0_from_row
memory_from_pg = memory_from_row


def json_list(value: Any) -> list[Any]:
    """A JSON list column's value (``source_ids``, decoded by psycopg; text is read too); a
    value that is no list reads as empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "[]")
        except ValueError:
            return []
    return value if isinstance(value, list) else []


__all__ = ["L0_SELECT", "L1_SELECT", "json_list", "l0_from_pg", "memory_from_pg"]

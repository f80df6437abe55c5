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


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


def jsonb_text(text: str) -> str:
    """JSON text ``jsonb`` accepts: it refuses the character U+0000 in strings (``\\u0000``),
    which JSON and the journal allow (a tool call's arguments may carry one). Such a value is
    stored without it, as ``clean_captured`` stores message text; the journal keeps the
    original. Any other text is passed as it is (the escape is rare: decoded only then)."""
    if "\\u0000" not in text:
        return text
    return json.dumps(_without_nul(json.loads(text)), ensure_ascii=False)


def json_list(value: Any) -> list[Any]:
    """A JSON list column's value (``source_ids``, decoded by psycopg; text is read too); a
    value that is no list reads as empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "[]")
        except ValueError:
            return []
    return value if isinstance(value, list) else []


__all__ = ["L0_SELECT", "L1_SELECT", "json_list", "jsonb_text", "l0_from_pg", "memory_from_pg"]

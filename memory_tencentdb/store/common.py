"""What both backends (``sqlite/`` and ``postgres/``) share that holds no SQL: ids, clocks, text
hashes, and the column values of a journal line. Each backend owns its statements and schema;
these helpers only turn records and journal lines into plain Python values both bind alike.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from memory_tencentdb.store.records import l0_from_journal
from memory_tencentdb.text import tokenize
from memory_tencentdb.text.embedding_text import hash_input, l0_text

L1_TYPES = ("persona", "episodic", "instruction")
L1_STATUSES = ("active", "superseded", "deleted")
# Ids per statement when a list of them is bound (SQLite's variable limit is the smaller one).
CHUNK = 500


def text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def utc_iso(when: datetime | None = None, timespec: str = "milliseconds") -> str:
    """A time (now by default) as UTC ISO-8601 ending in ``Z``: the one form every stored time
    takes, so comparing two as strings compares them as times."""
    when = datetime.now(UTC) if when is None else when.astimezone(UTC)
    return when.isoformat(timespec=timespec).replace("+00:00", "Z")


def now_iso() -> str:
    return utc_iso()


# Seeded once from the OS; then ids cost no system call (a capture makes several).
_random = random.Random(secrets.randbits(128))


def new_id(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000)}_{_random.getrandbits(32):08x}"


def chunks(values: list[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


def keeps_index_entry(before: Any, values: dict[str, Any]) -> bool:
    """Whether an L1 upsert leaves the row as the vector indexes already hold it: it was active
    and stays active with the same text and scope (a change of type, priority or metadata, a
    pipeline merge adding a timestamp). Such a write is not reported to the embedder, which
    would otherwise embed the unchanged text again with every model (~100 ms of CPU)."""
    return (
        before is not None
        and values["status"] == "active"
        and tuple(before) == (values["text_hash"], "active", values["scope"])
    )


def l0_params(rows: list[dict[str, Any]], rel_file: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The column values of JSONL L0 lines (``id, scope, session_key, session_id, role, content,
    message_id, timestamp, recorded_at, file, text_hash, extra, speaker``; ``extra`` as JSON
    text), and their keyword-index tokens."""
    params = []
    toks = []
    for r in rows:
        m = l0_from_journal(r, rel_file)
        indexed = l0_text(m.content, m.speaker)
        params.append(
            (
                m.id,
                m.scope,
                m.session_key,
                m.session_id,
                m.role,
                m.content,
                m.message_id,
                m.timestamp,
                m.recorded_at,
                rel_file,
                text_hash(hash_input("l0", indexed)),
                json.dumps(m.extra, ensure_ascii=False),
                m.speaker,
            )
        )
        toks.append(tokenize.index_text(indexed))
    return params, toks


# The L1 columns that hold JSON (text on SQLite, ``jsonb`` on PostgreSQL).
L1_JSON_COLUMNS = ("source_ids", "metadata", "timestamps")


def l1_values(r: dict[str, Any], rel_file: str) -> tuple[dict[str, Any], str]:
    """The column values of a JSONL L1 upsert line (JSON columns as JSON text), and its
    keyword-index tokens."""
    content = str(r["content"])
    timestamps = list(r.get("timestamps") or [])
    values = {
        "id": r["id"],
        "scope": r.get("scope") or "default",
        "content": content,
        "type": r.get("type", "episodic"),
        "priority": int(r.get("priority", 50)),
        "scene_name": r.get("scene_name") or "",
        "session_key": r.get("session_key") or "",
        "session_id": r.get("session_id") or "",
        "source_ids": json.dumps(r.get("source_message_ids") or [], ensure_ascii=False),
        "metadata": json.dumps(r.get("metadata") or {}, ensure_ascii=False),
        "timestamps": json.dumps(timestamps, ensure_ascii=False),
        "activity_start": str((r.get("metadata") or {}).get("activity_start_time") or ""),
        "activity_end": str((r.get("metadata") or {}).get("activity_end_time") or ""),
        "created_at": r.get("created_at") or now_iso(),
        "updated_at": r.get("updated_at") or now_iso(),
        "status": r.get("status") or "active",
        "superseded_by": r.get("superseded_by") or "",
        "origin": r.get("origin") or "api",
        "file": rel_file,
        "text_hash": text_hash(hash_input("l1", content)),
    }
    return values, tokenize.index_text(content)


def memory_filters(
    seq_column: str,
    placeholder: str,
    *,
    scope: str | None,
    type_: str | None,
    status: str,
    session_key: str | None,
    scene: str | None,
    min_priority: int | None,
    since: str | None,
    before_seq: int | None,
) -> tuple[list[str], list[Any]]:
    """``MemoryStore.list_memories``'s filters as WHERE conditions over ``l1_memories`` in both
    backends' SQL (their sequence column and placeholder given), and their parameters. An empty
    text filters nothing, as an absent one; ``status`` "history" is every status but deleted,
    "all" every one."""
    p = placeholder
    conditions = ["1 = 1"]  # a bare 1 is no boolean to PostgreSQL
    params: list[Any] = []
    if status == "history":
        conditions.append("status != 'deleted'")
    elif status != "all":
        conditions.append(f"status = {p}")
        params.append(status)
    for condition, value in (
        (f"scope = {p}", scope),
        (f"type = {p}", type_ or None),
        (f"session_key = {p}", session_key or None),
        (f"scene_name = {p}", scene or None),
        (f"priority >= {p}", min_priority),
        (f"updated_at >= {p}", since or None),
        (f"{seq_column} < {p}", before_seq),
    ):
        if value is not None:
            conditions.append(condition)
            params.append(value)
    return conditions, params

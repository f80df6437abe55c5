"""See what is remembered: memories page by page, scopes with their counts, persona, scenes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_tencentdb.pipeline import layout
from memory_tencentdb.pipeline.scenes import META_END, parse_scene, strip_navigation
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import L1_STATUSES, utc_iso
from memory_tencentdb.store.records import Memory

MAX_PAGE = 1000
_RELATIVE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$", re.IGNORECASE)


class BadRequest(ValueError):
    """The caller asked for something malformed; the message names the field."""


class NotFound(LookupError):
    """No such memory in this scope (another scope's id is not found either)."""


def parse_since(value: str | None) -> str | None:
    """``since`` as a UTC ISO string comparable with ``updated_at``.

    Accepts a date (``2026-05-01``), an ISO date-time (naive = UTC), or a relative age such as
    ``30m``, ``12h``, ``7d``, ``2w``."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    m = _RELATIVE.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2).lower()
        delta = {"m": timedelta(minutes=n), "h": timedelta(hours=n), "d": timedelta(days=n)}.get(
            unit, timedelta(weeks=n)
        )
        when = datetime.now(UTC) - delta
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise BadRequest(f"since: not a date, date-time or age like 7d: {text!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    return utc_iso(when)


def public_memory(memory: Memory) -> dict[str, Any]:
    """A memory as the API shows it (no sequence number or hash: the index's business)."""
    return memory.public()


def list_memories(
    store: MemoryStore,
    scope: str,
    *,
    type_: str | None = None,
    status: str = "active",
    since: str | None = None,
    session_key: str | None = None,
    limit: int = 200,
    cursor: str | None = None,
) -> dict[str, Any]:
    """One page of a scope's memories, newest first, and the cursor of the next page.

    ``status`` is active (default), superseded, deleted, history (active + superseded) or all."""
    if type_ and type_ not in ("persona", "episodic", "instruction"):
        raise BadRequest(f"type: must be persona, episodic or instruction, got {type_!r}")
    if status not in (*L1_STATUSES, "history", "all"):
        raise BadRequest(
            f"status: must be active, superseded, deleted, history or all, got {status!r}"
        )
    if not 1 <= limit <= MAX_PAGE:
        raise BadRequest(f"limit: must be 1-{MAX_PAGE}, got {limit}")
    before = None
    if cursor:
        if not cursor.isdigit():
            raise BadRequest(f"cursor: not a cursor this gateway gave out: {cursor!r}")
        before = int(cursor)
    rows = store.list_memories(
        scope,
        type_=type_,
        status=status,
        since=parse_since(since),
        session_key=session_key,
        limit=limit + 1,
        before_seq=before,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "scope": scope,
        "total": len(rows),
        "items": [public_memory(r) for r in rows],
        "next_cursor": str(rows[-1].seq) if more and rows else None,
    }


def scopes(store: MemoryStore, data_dir: Path) -> list[dict[str, Any]]:
    """Each scope with its memory, history and message counts, scenes and persona."""
    out = []
    for sc in store.scope_counts():
        root = layout.scope_root(data_dir, sc.scope)
        scenes = list(layout.scene_dir(root).glob("*.md"))
        out.append(
            {
                **sc.as_json(),
                "scenes": len(scenes),
                "persona": bool(_persona_text(root)),
            }
        )
    return out


def _persona_text(root: Path) -> str:
    try:
        return strip_navigation(layout.persona_file(root).read_text("utf-8")).strip()
    except OSError:
        return ""


def persona(data_dir: Path, scope: str) -> dict[str, Any]:
    root = layout.scope_root(data_dir, scope)
    path = layout.persona_file(root)
    text = _persona_text(root)
    updated = None
    if path.exists():
        updated = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    return {
        "scope": scope,
        "persona": text,
        "file": str(path.relative_to(data_dir)) if text else None,
        "updated_at": updated if text else None,
    }


def scenes(data_dir: Path, scope: str) -> dict[str, Any]:
    root = layout.scope_root(data_dir, scope)
    items: list[dict[str, Any]] = []
    for path in sorted(layout.scene_dir(root).glob("*.md")):
        try:
            text = path.read_text("utf-8")
        except OSError:
            continue
        scene = parse_scene(path.name, text)
        if not scene.body.strip() and META_END not in text:
            continue
        items.append(
            {
                "filename": scene.filename,
                "file": str(path.relative_to(data_dir)),
                "summary": scene.summary,
                "heat": scene.heat,
                "created": scene.created,
                "updated": scene.updated,
                "content": scene.body.strip(),
            }
        )
    items.sort(key=lambda s: -s["heat"])
    return {"scope": scope, "scenes": items}

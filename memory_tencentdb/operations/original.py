"""``import --from-original``: bring the original TypeScript project's data directory over.

The original (TencentDB-Agent-Memory 0.3.6) keeps, per data directory (reference/original-core.md
§0): ``conversations/*.jsonl`` (L0 lines ``{sessionKey, sessionId, recordedAt, id, role, content,
timestamp}``), ``records/*.jsonl`` (an append-only log of L1 MemoryRecords), ``scene_blocks/*.md``,
``persona.md`` and ``vectors.db`` (the live L1 set and the L0 rows with their record ids).

Mapping:

- Agents become scopes: an OpenClaw session key ``agent:<id>:...`` belongs to scope ``<id>`` (our
  OpenClaw default); any other key goes to ``--scope`` (default ``default``).
- L0 lines keep their vectors.db ``record_id`` when it can be matched (same session, timestamp
  and text), else get a stable id derived from the line, so importing twice changes nothing.
- L1 source links may name either a JSONL message ``id`` or a vectors.db ``record_id``: both are
  resolved to the imported L0 record, so every memory keeps its trace to its raw messages.
- The JSONL log keeps records the original merged away (it deletes them only in vectors.db):
  when vectors.db is present, those are imported as history (superseded), not as live memories.
- Scenes and persona (one set per original data directory) go to the scope of its agent (or
  ``--scope``); an existing file of ours is never overwritten.
- Pipeline cursors are set past everything imported, so nothing is extracted a second time.
  Embeddings are not copied (another model made them): the next ``serve`` re-embeds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb.operations.transfer import settle_cursors
from memory_tencentdb.pipeline import layout, state
from memory_tencentdb.pipeline.persona import refresh_navigation
from memory_tencentdb.pipeline.scenes import SceneStore
from memory_tencentdb.store import files
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import L1_TYPES, now_iso, utc_iso
from memory_tencentdb.store.original_db import OriginalDB, read_vectors_db
from memory_tencentdb.store.sqlite import Store
from memory_tencentdb.text.redact import redact

_AGENT_KEY = re.compile(r"^agent:([^:]+):")
_TYPE_ALIASES = {"episode": "episodic", "instruct": "instruction", "preference": "persona"}


class OriginalError(ValueError):
    """Not an original data directory, or unreadable; the message says what is wrong."""


@dataclass
class Source:
    path: Path | None
    note: str


@dataclass
class Plan:
    root: Path
    messages: list[dict[str, Any]] = field(default_factory=list)  # our L0 line format
    memories: list[dict[str, Any]] = field(default_factory=list)  # our upsert format
    scenes: list[Path] = field(default_factory=list)
    persona: Path | None = None
    files_scope: str = "default"
    unresolved_links: int = 0
    history: int = 0

    @property
    def size(self) -> int:
        return len(self.messages) + len(self.memories)


@dataclass
class OriginalReport:
    source: str = ""
    scopes: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: int = 0
    scenes: int = 0
    persona: bool = False
    unresolved_links: int = 0

    def summary(self) -> str:
        parts = [
            f"{s}: {c.get('memories', 0)} memories, {c.get('messages', 0)} messages"
            for s, c in sorted(self.scopes.items())
        ]
        return (
            f"imported from {self.source}: "
            + ("; ".join(parts) or "nothing new")
            + f"; {self.scenes} scene files, persona {'yes' if self.persona else 'no'}"
            + (f"; {self.skipped} rows already present" if self.skipped else "")
            + (
                f"; {self.unresolved_links} source links named no message"
                if self.unresolved_links
                else ""
            )
        )


def default_locations(env: dict[str, str] | None = None) -> list[tuple[Path, str]]:
    """Where the original keeps its data (its OpenClaw host, its gateway, the legacy folder)."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("HOME") or Path.home())
    out = []
    if env.get("OPENCLAW_STATE_DIR"):
        out.append(
            (Path(env["OPENCLAW_STATE_DIR"]) / "memory-tdai", "OpenClaw ($OPENCLAW_STATE_DIR)")
        )
    out.append((home / ".openclaw" / "memory-tdai", "OpenClaw default"))
    if env.get("TDAI_DATA_DIR"):
        out.append((Path(env["TDAI_DATA_DIR"]), "$TDAI_DATA_DIR"))
    root = Path(env.get("MEMORY_TENCENTDB_ROOT") or home / ".memory-tencentdb")
    out.append((root / "memory-tdai", "the original gateway's default"))
    out.append((home / "memory-tdai", "the original's legacy location"))
    return out


def looks_original(path: Path) -> bool:
    """An original data directory: its files, and not one of ours (``memory.db``)."""
    if not path.is_dir() or (path / "memory.db").exists():
        return False
    return (path / "vectors.db").exists() or any(
        any((path / sub).glob("*.jsonl")) for sub in ("conversations", "records")
    )


def find_source(given: str | None, env: dict[str, str] | None = None) -> Source:
    if given:
        path = Path(given).expanduser()
        if not path.is_dir():
            return Source(None, f"{path} is not a directory")
        if not looks_original(path):
            return Source(
                None,
                f"{path} does not look like the original's data directory (no vectors.db,"
                " conversations/*.jsonl or records/*.jsonl, or it is one of ours: memory.db)",
            )
        return Source(path, f"importing the original's data directory {path}")
    tried = []
    for path, what in default_locations(env):
        tried.append(str(path))
        if looks_original(path):
            return Source(path, f"found the original's data directory at {path} ({what})")
    return Source(None, "no original data directory found; looked in " + ", ".join(tried))


def _scope_of(session_key: str, fallback: str) -> str:
    m = _AGENT_KEY.match(session_key or "")
    return m.group(1) if m else fallback


def _stable_id(*parts: Any) -> str:
    digest = hashlib.sha1("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"l0_orig_{digest[:20]}"


def _iso(value: Any) -> str:
    """An ISO-8601 string from the original's ISO text or epoch milliseconds."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return utc_iso(datetime.fromtimestamp(value / 1000, UTC))
    if isinstance(value, str) and value.strip():
        return value.strip()
    return ""


def read_original(root: Path, default_scope: str | None = None) -> Plan:
    """Read and check everything first (nothing is written here)."""
    fallback = default_scope or "default"
    db = OriginalDB({}, {}, {})
    if (root / "vectors.db").exists():
        try:
            db = read_vectors_db(root / "vectors.db")
        except ValueError as e:
            raise OriginalError(str(e)) from None
    plan = Plan(root)
    # L0: map original JSONL lines to record ids (vectors.db's when it can be matched).
    by_content: dict[tuple[str, int, str], str] = {}
    for rid, r in db.l0.items():
        same = (
            str(r.get("session_key") or ""),
            int(r.get("timestamp") or 0),
            str(r.get("message_text") or ""),
        )
        by_content.setdefault(same, rid)
    link: dict[str, str] = {}  # JSONL id or vectors.db record id -> our record id
    seen: set[str] = set()
    for shard in files.shards(root / "conversations"):
        for n, line in files.read_lines(shard):
            content = line.get("content")
            if not isinstance(content, str) or not content.strip():
                continue
            key = str(line.get("sessionKey") or "")
            ts = t if isinstance(t := line.get("timestamp"), int) else 0
            mid = str(line.get("id") or "")
            rid = by_content.get((key, ts, content)) or _stable_id(shard.name, n, key, mid, ts)
            if rid in seen:
                continue
            seen.add(rid)
            link[rid] = rid
            if mid:
                link.setdefault(mid, rid)
            plan.messages.append(
                {
                    "record_id": rid,
                    "scope": _scope_of(key, fallback),
                    "sessionKey": key,
                    "sessionId": str(line.get("sessionId") or ""),
                    "recordedAt": _iso(line.get("recordedAt")) or _iso(ts) or now_iso(),
                    "id": mid,
                    "role": str(line.get("role") or "user"),
                    "content": content,
                    "timestamp": ts,
                    "_file": f"conversations/{shard.name}",
                }
            )
    # Rows only in vectors.db (their JSONL lost or rotated away) still come over.
    for rid, r in db.l0.items():
        if rid in seen or not str(r.get("message_text") or "").strip():
            continue
        seen.add(rid)
        link[rid] = rid
        key = str(r.get("session_key") or "")
        plan.messages.append(
            {
                "record_id": rid,
                "scope": _scope_of(key, fallback),
                "sessionKey": key,
                "sessionId": str(r.get("session_id") or ""),
                "recordedAt": _iso(r.get("recorded_at")) or now_iso(),
                "id": "",
                "role": str(r.get("role") or "user"),
                "content": str(r["message_text"]),
                "timestamp": int(r.get("timestamp") or 0),
                "_file": "",
            }
        )
    # L1: the JSONL log, newest line of each id wins; vectors.db says which are live.
    latest: dict[str, tuple[dict[str, Any], str]] = {}
    for shard in files.shards(root / "records"):
        for _, line in files.read_lines(shard):
            lid = line.get("id") or line.get("record_id")
            if isinstance(lid, str) and lid and isinstance(line.get("content"), str):
                latest[lid] = (line, f"records/{shard.name}")
    for rid, r in db.l1.items():
        if rid not in latest and str(r.get("content") or "").strip():
            latest[rid] = (
                {
                    "id": rid,
                    "content": r["content"],
                    "type": r.get("type"),
                    "priority": r.get("priority"),
                    "scene_name": r.get("scene_name"),
                    "sessionKey": r.get("session_key"),
                    "sessionId": r.get("session_id"),
                    "timestamps": [t for t in [r.get("timestamp_str")] if t],
                    "createdAt": r.get("created_time"),
                    "updatedAt": r.get("updated_time"),
                    "metadata": _json(r.get("metadata_json")),
                },
                "",
            )
    for rid, (line, rel) in latest.items():
        type_ = str(line.get("type") or "episodic").lower()
        type_ = _TYPE_ALIASES.get(type_, type_)
        if type_ not in L1_TYPES:
            continue
        key = str(line.get("sessionKey") or line.get("session_key") or "")
        sources = []
        for s in line.get("source_message_ids") or []:
            if str(s) in link:
                sources.append(link[str(s)])
            else:
                plan.unresolved_links += 1
        live = not db.l1 or rid in db.l1
        plan.history += 0 if live else 1
        scope = _scope_of(key, fallback)
        updated = _iso(line.get("updatedAt") or line.get("updated_at")) or now_iso()
        priority = line.get("priority")
        plan.memories.append(
            {
                "op": "upsert",
                "id": rid,
                "scope": scope,
                "content": line["content"],
                "type": type_,
                "priority": priority if isinstance(priority, int) and -1 <= priority <= 100 else 50,
                "scene_name": str(line.get("scene_name") or ""),
                "session_key": key,
                "session_id": str(line.get("sessionId") or line.get("session_id") or ""),
                "source_message_ids": sources,
                "metadata": line.get("metadata") if isinstance(line.get("metadata"), dict) else {},
                "timestamps": [t for t in line.get("timestamps") or [] if isinstance(t, str)],
                "created_at": _iso(line.get("createdAt") or line.get("created_at")) or updated,
                "updated_at": updated,
                "status": "active" if live else "superseded",
                "superseded_by": "",
                "origin": "original",
                "_file": rel,
            }
        )
    plan.scenes = sorted(p for p in (root / "scene_blocks").glob("*.md") if p.is_file())
    plan.persona = root / "persona.md" if (root / "persona.md").is_file() else None
    # One set of scenes and persona per original directory: OpenClaw's default agent ("main")
    # if it is there, else the agent with the most memories.
    counts: dict[str, int] = {}
    for m in plan.memories:
        counts[m["scope"]] = counts.get(m["scope"], 0) + 1
    for m in plan.messages:
        counts.setdefault(m["scope"], 0)
    best = "main" if "main" in counts else max(counts, key=lambda k: counts[k], default=fallback)
    plan.files_scope = default_scope or best
    if not plan.messages and not plan.memories and not plan.scenes and plan.persona is None:
        raise OriginalError(f"{root} holds no conversations, records, scenes or persona")
    return plan


def _json(value: Any) -> dict[str, Any]:
    try:
        out = json.loads(value or "{}")
    except (TypeError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def apply(
    plan: Plan, data_dir: Path, tz: tzinfo, tick: Callable[[int], None] | None = None
) -> OriginalReport:
    report = OriginalReport(source=str(plan.root), unresolved_links=plan.unresolved_links)
    store = Store(data_dir, tz)
    try:
        _import_messages(store, plan, report, tick)
        _import_memories(store, plan, report, tick)
        settle_cursors(store, plan.messages, plan.memories)
        if plan.scenes and not state.get_scope(store, plan.files_scope).scenes_processed:
            state.update_scope(store, plan.files_scope, scenes_processed=1)
    finally:
        store.close()
    root = layout.scope_root(data_dir, plan.files_scope)
    scene_dir = layout.scene_dir(root)
    scene_dir.mkdir(parents=True, exist_ok=True)
    for path in plan.scenes:
        dest = scene_dir / path.name
        if not dest.exists():
            files.write_atomic(dest, redact(path.read_text("utf-8", errors="replace")))
            report.scenes += 1
    ss = SceneStore(root, tz, max_scenes=10**6, backup_count=1)
    if plan.scenes:
        ss.sync_index()
    if plan.persona is not None and not layout.persona_file(root).exists():
        files.write_atomic(
            layout.persona_file(root), redact(plan.persona.read_text("utf-8", errors="replace"))
        )
        report.persona = True
    if report.persona or report.scenes:
        refresh_navigation(ss)  # the navigation tail names this scope's scene paths
    return report


def _import_messages(store: MemoryStore, plan: Plan, report: OriginalReport, tick: Any) -> None:
    for i in range(0, len(plan.messages), 2000):
        chunk = plan.messages[i : i + 2000]
        have = store.existing_ids("l0", [m["record_id"] for m in chunk])
        by_file: dict[str, list[dict[str, Any]]] = {}
        for m in chunk:
            if m["record_id"] in have:
                report.skipped += 1
                continue
            line = {k: v for k, v in m.items() if not k.startswith("_")}
            line["content"] = redact(line["content"])
            try:
                when = datetime.fromisoformat(line["recordedAt"])
            except ValueError:
                when = datetime.now(UTC)
            rel = m["_file"] or files.day_file("conversations", when, store.tz)
            by_file.setdefault(rel, []).append(line)
            report.scopes.setdefault(line["scope"], {}).setdefault("messages", 0)
            report.scopes[line["scope"]]["messages"] += 1
        for rel, lines in by_file.items():
            files.append_lines(store.data_dir / rel, lines)
            store.index_l0_lines(lines, rel)
        if tick:
            tick(len(chunk))


def _import_memories(store: MemoryStore, plan: Plan, report: OriginalReport, tick: Any) -> None:
    for i in range(0, len(plan.memories), 2000):
        chunk = plan.memories[i : i + 2000]
        have = store.existing_ids("l1", [m["id"] for m in chunk])
        by_file: dict[str, list[dict[str, Any]]] = {}
        for m in chunk:
            if m["id"] in have:
                report.skipped += 1
                continue
            line = {k: v for k, v in m.items() if not k.startswith("_")}
            line["content"] = redact(line["content"])
            rel = m["_file"] or files.day_file("records", datetime.now(UTC), store.tz)
            by_file.setdefault(rel, []).append(line)
            if line["status"] == "active":
                report.scopes.setdefault(line["scope"], {}).setdefault("memories", 0)
                report.scopes[line["scope"]]["memories"] += 1
        for rel, lines in by_file.items():
            files.append_lines(store.data_dir / rel, lines)
            with store.bulk():
                for line in lines:
                    store.index_l1_line(line, rel)
        if tick:
            tick(len(chunk))

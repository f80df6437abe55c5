"""L1: captured messages become atomic memories, conflicts resolved against what is known.

One *chunk* is the unit of work: up to ``WINDOW_NEW`` qualifying messages after the session's
cursor (oldest first, so nothing is ever skipped), shown with up to ``WINDOW_BACKGROUND`` earlier
messages as context. A chunk is turned into a *plan* (the memory writes and supersessions to
make, with their ids fixed in advance), the plan is saved, applied idempotently, and only then
does the cursor move past the chunk. A crash before the save repeats the LLM calls and writes
nothing twice; a crash after it replays the same plan.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any

from memory_tencentdb.llm import JSONParseError, LLMClient, LLMError
from memory_tencentdb.pipeline import prompts, rules
from memory_tencentdb.retrieval import retrieve
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import new_id, now_iso
from memory_tencentdb.store.records import L0Message, Memory, memory_from_journal
from memory_tencentdb.text import relative_dates, tokenize
from memory_tencentdb.text.sanitize import is_noise
from memory_tencentdb.vectorizer import Vectorizer

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.pipeline")

WINDOW_NEW = 10
WINDOW_BACKGROUND = 5
SCAN_LIMIT = 200
MAX_MESSAGE_CHARS = 2000
TYPES = ("persona", "episodic", "instruction")
TYPE_ALIASES = {"episode": "episodic", "instruct": "instruction", "preference": "persona"}
UNKNOWN_SCENE = ("Unknown scene", "未知情境")
# How clearly a stated change must be about an earlier memory (z-score against the reference
# questions, as recall's relevance cut) to replace it when they share no word.
CHANGE_RELEVANCE = 2.5


@dataclass
class Chunk:
    scope: str
    session_key: str
    rows: list[L0Message]  # every message in the chunk, qualifying or not
    new: list[L0Message]  # messages to extract from
    background: list[L0Message]
    to_seq: int  # sequence number of the chunk's last message

    @property
    def to_id(self) -> str:
        return self.rows[-1].id


def _slot(r: Slotted) -> tuple[str, str]:
    """The slot of a memory from a list already filtered to those that have one."""
    assert r.slot is not None
    return r.slot


@dataclass
class Slotted:
    """A memory the rules arbitrate against (stored, or written earlier in this chunk), with
    its rules slot (subject, value)."""

    id: str
    content: str
    type: str
    priority: int
    session_key: str
    seq: int
    slot: tuple[str, str] | None


@dataclass
class Extracted:
    content: str
    type: str
    priority: int
    scene_name: str
    source_ids: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str = ""
    slot: tuple[str, str] | None = None
    switch_to: str | None = None
    switch_from: str | None = None


@dataclass
class Decision:
    item: Extracted
    action: str  # store | skip | update | merge
    targets: list[str] = field(default_factory=list)
    content: str = ""
    type: str = ""
    priority: int | None = None
    timestamps: list[str] = field(default_factory=list)
    slot: tuple[str, str] | None = None
    id: str = ""


class StageFailure(RuntimeError):
    """A chunk could not be processed; the cursor stays, the work is retried."""

    def __init__(self, message: str, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated


def should_extract(row: L0Message) -> bool:
    if row.role not in ("user", "assistant"):
        return False
    text = (row.content or "").strip()
    if not text or is_noise(text):
        return False
    if len(text) <= 5 and not re.search(r"[\w\u3400-\u9fff]", text):
        return False
    return not re.fullmatch(r"[?？\s]+", text)


def next_chunk(
    store: MemoryStore, scope: str, session_key: str, cursor: int, window: int = WINDOW_NEW
) -> Chunk | None:
    pending = store.l0_after(scope, session_key, cursor, SCAN_LIMIT)
    if not pending:
        return None
    rows: list[L0Message] = []
    new: list[L0Message] = []
    for row in pending:
        if new and should_extract(row) and len(new) >= window:
            break
        rows.append(row)
        if should_extract(row):
            new.append(row)
    background: list[L0Message] = []
    if new:
        before = store.l0_before(scope, session_key, new[0].seq, WINDOW_BACKGROUND * 3)
        sid = new[0].session_id
        background = [r for r in before if should_extract(r) and r.session_id == sid]
        background = list(reversed(background[:WINDOW_BACKGROUND]))
    return Chunk(scope, session_key, rows, new, background, rows[-1].seq)


def iso_local(ms: int, tz: tzinfo) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(tz).isoformat(timespec="seconds")


def normalise_time(value: Any, tz: tzinfo) -> str:
    """An LLM-given time as ISO 8601 with an explicit offset in ``tz`` (dates stay dates)."""
    if not isinstance(value, str) or not value.strip():
        return ""
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return text
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return ""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.astimezone(tz).isoformat(timespec="seconds")


class L1Extractor:
    """Plans and applies L1 for one chunk at a time."""

    def __init__(
        self,
        store: MemoryStore,
        vectorizer: Vectorizer,
        settings: Settings,
        tz: tzinfo,
        llm: LLMClient | None,
    ) -> None:
        self.store = store
        self.vectorizer = vectorizer
        self.settings = settings
        self.tz = tz
        self.llm = llm
        self.last_dedup_error: str | None = None

    @property
    def top_k(self) -> int:
        return self.settings.memory.embedding.conflict_recall_top_k

    # ------------------------------------------------------------------ planning

    def plan(
        self, chunk: Chunk, previous_scene: str, prior: list[Memory] | None = None
    ) -> dict[str, Any]:
        """Extract and arbitrate; returns the plan (no writes). Raises ``StageFailure``.

        ``prior``: memories the rules already stored from these messages (a host model's late
        redo, pipeline/host_redo.py): every new item is arbitrated against them, and a failed
        arbitration fails the plan instead of falling back to the rule policy (which cannot
        tell a paraphrase from a new fact)."""
        if not chunk.new:
            return {
                "to_rowid": chunk.to_seq,
                "to_id": chunk.to_id,
                "ops": [],
                "scene": previous_scene,
            }
        if self.llm is not None:
            items, scene = self._extract_llm(chunk, previous_scene)
            origin = "extraction"
            if self.settings.memory.extraction.enable_dedup and items:
                decisions = self._arbitrate_llm(chunk, items, prior)
            else:
                decisions = [Decision(i, "store") for i in items]
        else:
            items, scene = self._extract_rules(chunk), previous_scene
            origin = "rules"
            decisions = self._arbitrate_rules(chunk, items)
        ops = []
        for d in decisions:
            if d.action == "skip":
                continue
            ops.append(
                {
                    "record": self._record(chunk, d, origin),
                    "supersedes": d.targets if d.action in ("update", "merge") else [],
                }
            )
        if items:
            scene = items[-1].scene_name or scene
        return {"to_rowid": chunk.to_seq, "to_id": chunk.to_id, "ops": ops, "scene": scene}

    def _record(self, chunk: Chunk, d: Decision, origin: str) -> dict[str, Any]:
        now = now_iso()
        item = d.item
        metadata = dict(item.metadata)
        slot = d.slot or item.slot
        if slot:
            metadata["slot"] = {"subject": slot[0], "value": slot[1]}
        session_id = next(
            (r.session_id for r in chunk.new if r.id in item.source_ids),
            chunk.new[-1].session_id,
        )
        return {
            "id": d.id or new_id("m"),
            "scope": chunk.scope,
            "content": (d.content or item.content).strip(),
            "type": d.type if d.type in TYPES else item.type,
            "priority": int(d.priority if d.priority is not None else item.priority),
            "scene_name": item.scene_name,
            "session_key": chunk.session_key,
            "session_id": session_id,
            "source_message_ids": item.source_ids,
            "metadata": metadata,
            "timestamps": d.timestamps or [item.timestamp or now],
            "created_at": now,
            "updated_at": now,
            "status": "active",
            "origin": origin,
        }

    # ------------------------------------------------------------------ extraction

    def _render(self, rows: list[L0Message], alias: dict[str, str]) -> str:
        out = []
        for r in rows:
            text = r.content
            if len(text) > MAX_MESSAGE_CHARS:
                text = text[:MAX_MESSAGE_CHARS] + "…"
            who = f" {r.speaker}" if r.speaker else ""  # the speaker's name
            out.append(
                f"[{alias[r.id]}] [{r.role}{who}] [{iso_local(r.timestamp, self.tz)}]: {text}"
            )
        return "\n\n".join(out)

    def _tz_line(self) -> str:
        now = datetime.now(self.tz)
        offset = now.strftime("%z")
        offset = f"{offset[:3]}:{offset[3:]}" if offset else "+00:00"
        name = getattr(self.tz, "key", None) or now.tzname() or "local time"
        return (
            f"**All timestamps below are in {name} (UTC{offset}). Resolve relative dates such as "
            f'"yesterday" or "next week" against the message timestamps.**'
        )

    def _extract_llm(self, chunk: Chunk, previous_scene: str) -> tuple[list[Extracted], str]:
        assert self.llm is not None
        ordered = chunk.background + chunk.new
        alias = {r.id: f"m{i}" for i, r in enumerate(ordered, 1)}
        back = {v: k for k, v in alias.items()}
        parts = [
            self._tz_line(),
            prompts.LANGUAGE_RULE,
            f"Previous scene: {previous_scene or '(none)'}",
        ]
        if chunk.background:
            parts.append(
                "Background messages (context only, already processed; do not extract):\n\n"
                + self._render(chunk.background, alias)
            )
        parts.append(
            "=== New messages (extract from these) ===\n\n" + self._render(chunk.new, alias)
        )
        try:
            data, reply = self.llm.chat_json(
                "l1-extraction", prompts.L1_SYSTEM, "\n\n".join(parts), expect=None
            )
        except JSONParseError as e:
            raise StageFailure(
                f"l1-extraction: {e}", truncated=type(e).__name__ == "JSONTruncated"
            ) from None
        except LLMError as e:
            raise StageFailure(str(e)) from None
        scenes = _as_scene_list(data)
        if scenes is None:
            raise StageFailure("l1-extraction: reply is JSON but not a list of scenes")
        zh = any(rules.has_cjk(r.content) for r in chunk.new)
        new_ids = {r.id for r in chunk.new}
        user_ids = [r.id for r in chunk.new if r.role == "user"] or sorted(new_ids)
        by_id = {r.id: r for r in ordered}
        items: list[Extracted] = []
        last_scene = previous_scene
        for scene in scenes:
            name = scene.get("scene_name")
            name = name.strip() if isinstance(name, str) and name.strip() else UNKNOWN_SCENE[zh]
            last_scene = name
            for m in scene.get("memories") or []:
                if not isinstance(m, dict):
                    continue
                content = m.get("content")
                if not isinstance(content, str) or not content.strip():
                    continue
                type_ = str(m.get("type") or "episodic").strip().lower()
                type_ = TYPE_ALIASES.get(type_, type_)
                if type_ not in TYPES:
                    continue
                try:
                    priority = max(-1, min(100, int(m.get("priority", 50))))
                except (TypeError, ValueError):
                    priority = 50
                sources = [
                    back[s]
                    for s in (m.get("source_message_ids") or [])
                    if isinstance(s, str) and s in back
                ] or user_ids
                meta_in = mi if isinstance(mi := m.get("metadata"), dict) else {}
                meta = {}
                for key in ("activity_start_time", "activity_end_time"):
                    t = normalise_time(meta_in.get(key) or m.get(key), self.tz)
                    if t:
                        meta[key] = t
                last_ms = max(by_id[s].timestamp for s in sources if s in by_id)
                items.append(
                    Extracted(
                        content=content.strip(),
                        type=type_,
                        priority=priority,
                        scene_name=name,
                        source_ids=sources,
                        metadata=meta,
                        timestamp=iso_local(last_ms, self.tz),
                    )
                )
        return items[: self.settings.memory.extraction.max_memories_per_session], last_scene

    def _extract_rules(self, chunk: Chunk) -> list[Extracted]:
        items: list[Extracted] = []
        for row in chunk.new:
            if row.role != "user":
                continue
            said = datetime.fromtimestamp(row.timestamp / 1000, UTC).astimezone(self.tz)
            for m in rules.extract(row.content):
                meta: dict[str, Any] = {"rule": m.kind}
                span = relative_dates.resolve(m.content, said)
                if span:
                    # "昨天" / "last week" against when the message was sent, not when L1 ran.
                    meta["activity_start_time"] = span[0].isoformat()
                    if span[1] != span[0]:
                        meta["activity_end_time"] = span[1].isoformat()
                items.append(
                    Extracted(
                        content=m.content,
                        type=m.type,
                        priority=m.priority,
                        scene_name=m.scene_name,
                        source_ids=[row.id],
                        timestamp=iso_local(row.timestamp, self.tz),
                        slot=m.slot,
                        switch_to=m.switch_to,
                        switch_from=m.switch_from,
                        metadata=meta,
                    )
                )
        return items[: self.settings.memory.extraction.max_memories_per_session]

    # ------------------------------------------------------------------ candidates

    def candidates(self, scope: str, text: str, k: int) -> list[Memory]:
        """Active memories most related to ``text``: hybrid vector + keyword top-k."""
        try:
            hits = retrieve(self.store, self.vectorizer, "l1", scope, text, "hybrid", depth=k)
        except Exception as e:  # noqa: BLE001 - no candidates is a safe answer
            log.warning("conflict candidates failed: %s", e)
            return []
        rows = self.store.l1_rows([r for r, _ in hits.ranked[:k]])
        return [rows[r] for r, _ in hits.ranked[:k] if r in rows and rows[r].status == "active"]

    # ------------------------------------------------------------------ arbitration (LLM)

    def _arbitrate_llm(
        self, chunk: Chunk, items: list[Extracted], prior: list[Memory] | None = None
    ) -> list[Decision]:
        assert self.llm is not None
        pool: dict[str, Memory] = {}
        alias: dict[str, str] = {}
        related: list[list[str]] = []
        for item in items:
            ids = []
            found = self.candidates(chunk.scope, item.content, self.top_k)
            seen = {r.id for r in found}
            for row in found + [m for m in prior or [] if m.id not in seen]:
                if row.id not in alias:
                    alias[row.id] = f"c{len(alias) + 1}"
                    pool[alias[row.id]] = row
                ids.append(alias[row.id])
            related.append(ids)
        if not any(related):
            return [Decision(i, "store") for i in items]
        pool_json = [
            {
                "id": a,
                "content": r.content,
                "type": r.type,
                "priority": r.priority,
                "scene_name": r.scene_name,
                "timestamps": r.timestamps,
            }
            for a, r in pool.items()
        ]
        sections = []
        for i, (item, ids) in enumerate(zip(items, related, strict=True), 1):
            new = {
                "record_id": f"n{i}",
                "content": item.content,
                "type": item.type,
                "priority": item.priority,
                "scene_name": item.scene_name,
            }
            sections.append(
                f"### New memory n{i}\n{json.dumps(new, ensure_ascii=False)}\n"
                f"Related existing ids: {json.dumps(ids)}"
                + ("  (none: store it)" if not ids else "")
            )
        user = (
            prompts.LANGUAGE_RULE
            + "\n\n## Existing memories\n"
            + json.dumps(pool_json, ensure_ascii=False, indent=1)
            + "\n\n## New memories\n\n"
            + "\n\n".join(sections)
        )
        try:
            data, _ = self.llm.chat_json("l1-dedup", prompts.L1_DEDUP_SYSTEM, user, expect=None)
            if isinstance(data, dict):
                data = next((v for v in data.values() if isinstance(v, list)), None)
            if not isinstance(data, list):
                raise JSONParseError("l1-dedup: expected a JSON array")
        except (LLMError, JSONParseError) as e:
            self.last_dedup_error = str(e)
            if prior:
                raise StageFailure(f"l1-dedup: {e}") from None
            # Arbitration is an optimisation; the rule policy is a safe stand-in.
            log.warning("conflict arbitration failed (%s); using the rule policy", e)
            return self._arbitrate_rules(chunk, items)
        self.last_dedup_error = None
        by_id = {str(d.get("record_id")): d for d in data if isinstance(d, dict)}
        decisions = []
        for i, item in enumerate(items, 1):
            d = by_id.get(f"n{i}")
            if d is None:
                decisions.append(Decision(item, "store"))
                continue
            action = str(d.get("action", "store")).strip().lower()
            if action not in ("store", "skip", "update", "merge"):
                action = "store"
            targets = [
                pool[t].id for t in (d.get("target_ids") or []) if isinstance(t, str) and t in pool
            ]
            if action in ("update", "merge") and not targets:
                action = "store"
            priority = d.get("merged_priority")
            try:
                priority = max(-1, min(100, int(priority))) if priority is not None else None
            except (TypeError, ValueError):
                priority = None
            stamps = [s for s in (d.get("merged_timestamps") or []) if isinstance(s, str) and s]
            content = mc if isinstance(mc := d.get("merged_content"), str) else ""
            decisions.append(
                Decision(
                    item,
                    action,
                    targets,
                    content=content if action in ("update", "merge") else "",
                    type=str(d.get("merged_type") or "").lower() if action != "store" else "",
                    priority=priority if action in ("update", "merge") else None,
                    timestamps=stamps if action in ("update", "merge") else [],
                )
            )
        return decisions

    # ------------------------------------------------------------------ arbitration (rules)

    def _slot_pool(self, scope: str, texts: list[str]) -> list[Slotted]:
        """Recent slot-bearing memories plus the candidates of each new text, with their slots."""
        pool = {r.id: r for r in self.store.recent_slot_memories(scope, 200)}
        for text in texts:
            for row in self.candidates(scope, text, self.top_k):
                pool.setdefault(row.id, row)
        out = []
        for row in pool.values():
            slot = row.metadata.get("slot")
            s = (
                (slot["subject"], slot["value"])
                if isinstance(slot, dict)
                else rules.slot_of(row.content)
            )
            out.append(
                Slotted(row.id, row.content, row.type, row.priority, row.session_key, row.seq, s)
            )
        out.sort(key=lambda r: -r.seq)
        return out

    def _arbitrate_rules(self, chunk: Chunk, items: list[Extracted]) -> list[Decision]:
        """Same text: skip. Same subject, new value: update. A switch: update its target."""
        if not items:
            return []
        # The pool holds each item's top-k candidates too, so exact repeats are caught here.
        existing = self._slot_pool(chunk.scope, [i.content for i in items])
        seen = {rules.normalise(r.content) for r in existing}
        decisions: list[Decision] = []
        batch: list[Slotted] = []  # this chunk's writes, newest first
        for item in items:
            key = rules.normalise(item.content)
            if key in seen:
                decisions.append(Decision(item, "skip"))
                continue
            d = Decision(item, "store", id=new_id("m"))
            pool = batch + existing
            if item.switch_to:
                target = self._switch_target(chunk, item, pool)
                if target is not None:
                    subject, old_value = _slot(target)
                    d.action, d.targets = "update", [target.id]
                    d.content = _replace_value(target.content, old_value, item.switch_to)
                    d.slot = (subject, item.switch_to)
                    d.type, d.priority = target.type, max(target.priority, item.priority)
            elif item.slot:
                same = [
                    r
                    for r in pool
                    if r.slot
                    and r.id not in d.targets
                    and rules.same_subject(r.slot[0], item.slot[0])
                ]
                if any(rules.normalise(_slot(r)[1]) == rules.normalise(item.slot[1]) for r in same):
                    decisions.append(Decision(item, "skip"))
                    continue
                if same:
                    d.action, d.targets = "update", [r.id for r in same]
            if not d.targets and rules.is_change(item.content):
                # A new rule for the assistant replaces an old one only when it names it.
                least = 2 if item.metadata.get("rule") == "rule" else 1
                changed = _changed_memory(item.content, pool, least) or self._closest_changed(
                    chunk.scope, item.content
                )
                if changed is not None:
                    d.action, d.targets = "update", [changed.id]
            if rules.normalise(d.content or item.content) in seen:
                decisions.append(Decision(item, "skip"))
                continue
            seen.add(key)
            seen.add(rules.normalise(d.content or item.content))
            decisions.append(d)
            slot = d.slot or item.slot
            batch.insert(
                0,
                Slotted(
                    d.id,
                    d.content or item.content,
                    d.type or item.type,
                    item.priority,
                    chunk.session_key,
                    1 << 62,  # newer than anything stored
                    slot,
                ),
            )
            if d.targets:
                gone = set(d.targets)
                batch = [b for b in batch if b.id not in gone]
                existing = [e for e in existing if e.id not in gone]
        return decisions

    def _closest_changed(self, scope: str, text: str) -> Memory | None:
        """For a stated change that names nothing it shares with an earlier memory
        ("我们现在改用钉钉了" after "我们用企业微信沟通"): the stored memory closest in meaning, if
        it clears the relevance bar recall uses (it is clearly about the same thing)."""
        if not rules.switch_verb(text):
            return None
        try:
            hits = retrieve(self.store, self.vectorizer, "l1", scope, text, "hybrid", depth=3)
        except Exception as e:  # noqa: BLE001 - no target is a safe answer
            log.warning("change target lookup failed: %s", e)
            return None
        for rowid, _ in hits.ranked[:1]:
            ev = hits.evidence.get(rowid)
            if ev is not None and ev.relevance is not None and ev.relevance >= CHANGE_RELEVANCE:
                row = self.store.l1_rows([rowid]).get(rowid)
                if row and row.status == "active" and row.scope == scope:
                    return row
        return None

    def _switch_target(self, chunk: Chunk, item: Extracted, pool: list[Slotted]) -> Slotted | None:
        assert item.switch_to
        kind = rules.value_kind(item.switch_to)
        new_value = rules.normalise(item.switch_to)
        options = [
            r
            for r in pool
            if r.slot
            and rules.normalise(r.slot[1]) != new_value
            and rules.value_kind(r.slot[1]) == kind
        ]
        if item.slot and item.slot[0]:
            options = [r for r in options if rules.same_subject(_slot(r)[0], item.slot[0])]
        if item.switch_from:
            named = [
                r
                for r in options
                if rules.normalise(item.switch_from) in rules.normalise(_slot(r)[1])
            ]
            options = named or options
        if not options:
            return None
        ranked = {r.id: i for i, r in enumerate(self.candidates(chunk.scope, item.content, 20))}
        options.sort(
            key=lambda r: (
                r.session_key != chunk.session_key,  # this conversation first
                ranked.get(r.id, len(ranked) + 1),
                -r.seq,
            )
        )
        return options[0]

    # ------------------------------------------------------------------ applying

    def apply(self, plan: dict[str, Any], scope: str) -> int:
        """Write the plan's memories and supersessions; safe to call again with the same plan."""
        written: list[Memory] = []
        for op in plan.get("ops", []):
            rec = op["record"]  # a journal upsert line, kept in the saved plan
            if self.store.memory_by_id(rec["id"]) is None:
                written.append(self.store.write_memory(memory_from_journal(rec)))
            for target in op.get("supersedes") or []:
                row = self.store.memory_by_id(target)
                if row and row.scope == scope and row.status == "active":
                    self.store.set_memory_status(target, "superseded", rec["id"])
        if written:
            self.vectorizer.embed_now(
                "l1", [(m.seq, m.scope, m.text_hash, m.content) for m in written]
            )
        return len(plan.get("ops", []))


def _changed_memory(text: str, pool: list[Slotted], least: int = 1) -> Slotted | None:
    """The earlier memory a stated change replaces ("We've moved off MongoDB" -> "Our backend
    uses MongoDB"): the one it points at most strongly (a named old value counts most, then
    shared subject words), the most recent on a tie; None when nothing is pointed at."""
    best, best_score = None, least - 1
    for row in pool:  # newest first
        score = rules.change_affinity(text, row.content, tokenize.query_terms)
        if score > best_score:
            best, best_score = row, score
    return best


def _as_scene_list(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict):
        if isinstance(data.get("scenes"), list):
            data = data["scenes"]
        elif "memories" in data:
            data = [data]
        else:
            return None
    if not isinstance(data, list):
        return None
    out = []
    for scene in data:
        if isinstance(scene, dict) and "memories" in scene:
            out.append(scene)
        elif isinstance(scene, dict) and "content" in scene:  # a bare memory list
            out.append({"scene_name": scene.get("scene_name"), "memories": [scene]})
    return out


def _replace_value(content: str, old: str, new: str) -> str:
    """ "The project database must be PostgreSQL." with PostgreSQL -> MySQL."""
    if old and old in content:
        return content.replace(old, new, 1)
    idx = content.lower().find(old.lower()) if old else -1
    if idx >= 0:
        return content[:idx] + new + content[idx + len(old) :]
    zh = rules.has_cjk(content)
    return f"{content.rstrip('。.')}{'（已改为' if zh else ' (now: '}{new}{'）' if zh else ')'}"

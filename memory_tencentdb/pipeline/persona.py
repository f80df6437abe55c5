"""L3: the persona (``persona.md``), on the original's trigger rules.

Triggers, checked after every completed L2 run (first match wins):

1. L2 asked for an update (``persona_update`` in its answer);
2. cold start: scenes were processed, no persona was ever written, scene files exist;
3. recovery: a persona was written once, scene files exist, but ``persona.md`` is now empty;
4. first scene: exactly one L2 run so far and new memories since the last persona;
5. threshold: at least ``persona.triggerEveryN`` memories stored since the last persona;
6. without an LLM: any new memory since the last persona. The digest costs one read of the
   scope's strongest memories (bounded: DIGEST_SECTIONS), and L2 runs at most once per idle
   period (``l2DelayAfterL1Seconds`` after the last L1, coalesced), so the persona keeps up
   with every fact at the cost of one small file write per idle period.

With an LLM the persona is written from the scenes that changed; without one it is a
deterministic digest of the strongest memories, in the third person (a "我" or "I" inside the
system prompt reads as the assistant speaking). The text is escaped (it is injected into system
prompts), a backup of the previous file is kept (``persona.backupCount``), and the scene
navigation is appended.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory_tencentdb.llm import JSONParseError, LLMClient, LLMError
from memory_tencentdb.pipeline import layout, prompts, rules, state
from memory_tencentdb.pipeline.l1 import StageFailure
from memory_tencentdb.pipeline.scenes import SceneStore, navigation, strip_navigation
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.files import write_atomic
from memory_tencentdb.store.records import ScopeState
from memory_tencentdb.text.sanitize import escape_tags

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.pipeline")

MAX_PERSONA_CHARS = 2000


def read_persona(ss: SceneStore) -> str:
    try:
        return strip_navigation(layout.persona_file(ss.root).read_text("utf-8")).strip()
    except OSError:
        return ""


def refresh_navigation(ss: SceneStore) -> None:
    """Rewrite the navigation tail of an existing, non-empty persona."""
    body = read_persona(ss)
    if not body:
        return
    nav = navigation(ss.index())
    write_atomic(layout.persona_file(ss.root), body + ("\n\n" + nav if nav else "\n"))


def trigger(st: ScopeState, ss: SceneStore, every_n: int, llm: bool = True) -> str | None:
    has_scenes = bool(ss.load())
    never = not st.last_persona_time
    if st.persona_request:
        return f"requested by L2: {st.persona_request}"
    if st.scenes_processed > 0 and never and has_scenes:
        return "cold start"
    if not never and has_scenes and not read_persona(ss):
        return "recovery: persona.md is empty"
    if st.scenes_processed == 1 and st.memories_since_persona > 0:
        return "first scene"
    if st.memories_since_persona >= every_n:
        return f"threshold: {st.memories_since_persona} new memories"
    if not llm and st.memories_since_persona > 0:
        return f"digest: {st.memories_since_persona} new memories"
    return None


class PersonaRunner:
    def __init__(self, store: MemoryStore, settings: Settings, llm: LLMClient | None) -> None:
        self.store = store
        self.settings = settings
        self.llm = llm

    def run(self, scope: str, ss: SceneStore) -> str | None:
        """Write the persona if a trigger fires; returns the trigger, or None when not due."""
        st = state.get_scope(self.store, scope)
        reason = trigger(
            st, ss, self.settings.memory.persona.trigger_every_n, llm=self.llm is not None
        )
        if reason is None:
            return None
        existing = read_persona(ss)
        index = ss.index()
        changed = _changed(index, st.last_persona_time)
        if self.llm is not None and not changed and existing:
            log.info("persona for %s: nothing changed since the last one; skipped", scope)
            return None
        if self.llm is not None:
            text = self._llm_persona(ss, existing, changed, reason, st)
        else:
            text = digest(self.store, scope)
        text = escape_tags(strip_navigation(text)).strip()
        if not text:
            raise StageFailure("l3-persona: the persona came back empty")
        if self.llm is None and text == existing:
            # The same digest: the stable system part stays byte for byte (prompt caches).
            state.update_scope(self.store, scope, memories_since_persona=0)
            return None
        self._backup(ss, st.last_persona_at)
        nav = navigation(ss.sync_index())
        write_atomic(layout.persona_file(ss.root), text + ("\n\n" + nav if nav else "\n"))
        l0_count = self.store.count("l0_messages", scope)
        state.update_scope(
            self.store,
            scope,
            last_persona_at=l0_count,
            last_persona_time=ss.now(),
            memories_since_persona=0,
            persona_request="",
            l3_failures=0,
        )
        log.info("persona for %s written (%s)", scope, reason)
        return reason

    def _backup(self, ss: SceneStore, offset: int) -> None:
        path = layout.persona_file(ss.root)
        if not path.exists():
            return
        folder = layout.persona_backup_dir(ss.root)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        (folder / f"persona_{stamp}_offset{offset}.md").write_bytes(path.read_bytes())
        backups = sorted(folder.glob("persona_*.md"))
        for stale in backups[: -self.settings.memory.persona.backup_count]:
            stale.unlink(missing_ok=True)

    def _llm_persona(
        self,
        ss: SceneStore,
        existing: str,
        changed: list[dict[str, Any]],
        reason: str,
        st: ScopeState,
    ) -> str:
        assert self.llm is not None
        scenes = ss.load()
        blocks = []
        for entry in changed:
            scene = scenes.get(entry["filename"])
            if scene is not None:
                blocks.append(f"### {scene.filename}\n```markdown\n{scene.render()}```")
        mode = "revise the previous profile" if existing else "write the first profile"
        user = (
            f"{prompts.LANGUAGE_RULE}\n\nTime: {ss.now()}\nTask: {mode}\nTrigger: {reason}\n"
            f"Stats: {len(scenes)} scenes, {len(changed)} changed since the last profile, "
            f"{st.memories_since_persona} new memories.\n\n## Changed scenes\n"
            + ("\n\n".join(blocks) or "(none)")
            + "\n\n## Previous profile\n"
            + (existing or "(none)")
        )
        try:
            data, reply = self.llm.chat_json(
                "l3-persona", prompts.persona_system(MAX_PERSONA_CHARS), user, expect=None
            )
        except JSONParseError as e:
            raise StageFailure(f"l3-persona: {e}") from None
        except LLMError as e:
            raise StageFailure(str(e)) from None
        text = data.get("persona") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise StageFailure('l3-persona: reply has no "persona" text')
        return text[: MAX_PERSONA_CHARS * 2]


def _changed(index: list[dict[str, Any]], since: str) -> list[dict[str, Any]]:
    if not since:
        return list(index)
    try:
        t0 = datetime.fromisoformat(since)
    except ValueError:
        return list(index)
    out = []
    for e in index:
        try:
            # >=: times have one-second resolution, and a scene updated in the same second as
            # the last persona (a fast turn right after it) is a change, not "nothing new".
            if datetime.fromisoformat(str(e.get("updated", ""))) >= t0:
                out.append(e)
        except (ValueError, TypeError):
            out.append(e)
    return out


# How many memories of each type the digest reads, strongest first; MAX_PERSONA_CHARS bounds
# what is kept. Twenty facts of ~40 characters fit in the budget, so every high-priority fact of
# a young scope is present (ten was the limit before, and the eleventh fact never showed).
DIGEST_SECTIONS = (
    ("instruction", "Rules for the assistant", "对助手的要求", 12),
    ("persona", "Preferences, habits and facts", "偏好、习惯与个人信息", 24),
    ("episodic", "Recent events", "近期经历", 5),
)


def digest(store: MemoryStore, scope: str) -> str:
    """No LLM: the strongest current memories, grouped, newest first within a priority, each in
    the third person (memories written through the API may still say 我 / I)."""
    sections = []
    all_text = []
    for type_, en, zh, limit in DIGEST_SECTIONS:
        lines = [rules.third_person(r.content) for r in store.top_memories(scope, type_, limit)]
        all_text += lines
        if lines:
            sections.append((en, zh, lines))
    if not sections:
        return ""
    is_zh = sum(rules.has_cjk(t) for t in all_text) * 2 > len(all_text)
    out = ["# 用户画像" if is_zh else "# User profile"]
    for en, zh, lines in sections:
        out.append(f"\n## {zh if is_zh else en}")
        out += [f"- {line}" for line in lines]
    text = "\n".join(out)
    if len(text) > MAX_PERSONA_CHARS:
        text = text[: MAX_PERSONA_CHARS - 1].rsplit("\n", 1)[0] + "\n…"
    return text

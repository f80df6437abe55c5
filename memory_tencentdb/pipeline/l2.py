"""L2: new L1 memories of a scope are folded into its scene files.

With an LLM the model proposes JSON actions (create / update / merge / delete). Without one, a
deterministic digest keeps one scene per kind of memory (rules, preferences and facts, events).
Either way the actions go through ``SceneStore.apply``, which owns the rules, and the run is
journalled: the actions and the backup are saved before any file changes, so a crash mid-run is
undone (restore) and redone (replay) on restart.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.llm import JSONParseError, LLMClient, LLMError
from memory_tencentdb.pipeline import layout, prompts, rules, state
from memory_tencentdb.pipeline.l1 import StageFailure
from memory_tencentdb.pipeline.scenes import MAX_BODY_CHARS, ActionError, SceneStore
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.records import Memory

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.pipeline")

BATCH = 30  # memories per L2 call; the original had no cap


@dataclass
class L2Result:
    processed: int = 0
    batches: int = 0
    persona_request: str = ""
    log: list[str] = field(default_factory=list)


class L2Runner:
    def __init__(
        self, store: MemoryStore, settings: Settings, tz: tzinfo, llm: LLMClient | None
    ) -> None:
        self.store = store
        self.settings = settings
        self.tz = tz
        self.llm = llm

    def scene_store(self, scope: str) -> SceneStore:
        p = self.settings.memory.persona
        return SceneStore(
            layout.scope_root(self.store.data_dir, scope),
            self.tz,
            p.max_scenes,
            p.scene_backup_count,
        )

    def recover(self, scope: str) -> bool:
        """Finish a run that a crash interrupted: restore its backup, replay its actions."""
        st = state.get_scope(self.store, scope)
        plan = state.load_plan(st.l2_plan)
        if plan is None:
            return False
        ss = self.scene_store(scope)
        backup = Path(plan["backup"])
        if backup.is_dir():
            ss.restore(backup)
        ss.apply(plan["actions"], lenient=True, max_creates=plan.get("max_creates", 1))
        self._complete(scope, plan)
        log.info("L2 for scope %s recovered from an interrupted run", scope)
        return True

    def run(self, scope: str, lenient: bool = False, max_batches: int = 10) -> L2Result:
        result = L2Result()
        if self.recover(scope):
            result.batches += 1
        if self._rebuild_if_asked(scope):
            result.batches += 1
        for _ in range(max_batches):
            st = state.get_scope(self.store, scope)
            memories = state.pending_l1_memories(self.store, scope, st.l2_cursor, BATCH)
            if not memories:
                break
            ss = self.scene_store(scope)
            existing = ss.load()
            if self.llm is not None:
                actions, request = self._llm_actions(ss, memories, existing)
                max_creates = 1
            else:
                actions, request = self._digest_actions(scope, memories, existing), ""
                max_creates = 3
            backup = ss.backup(st.l2_cursor)
            plan = {
                "actions": actions,
                "backup": str(backup),
                "to_cursor": memories[-1].seq,
                "to_id": memories[-1].id,
                "persona_request": request,
                "max_creates": max_creates,
            }
            state.update_scope(self.store, scope, l2_plan=json.dumps(plan, ensure_ascii=False))
            try:
                applied = ss.apply(actions, lenient=lenient, max_creates=max_creates)
            except Exception as e:
                ss.restore(backup)
                state.update_scope(self.store, scope, l2_plan="")
                if isinstance(e, ActionError):
                    raise StageFailure(f"l2-scenes: {e}") from None
                raise
            self._complete(scope, plan)
            result.processed += len(memories)
            result.batches += 1
            result.log += applied["log"]
            if request:
                result.persona_request = request
        return result

    def _rebuild_if_asked(self, scope: str) -> bool:
        """Memories were forgotten: back the scenes up, clear them and refold every memory left,
        so no scene keeps what the user asked to forget (the persona follows in L3)."""
        ss = self.scene_store(scope)
        marker = layout.rebuild_marker(ss.root)
        if not marker.exists():
            return False
        st = state.get_scope(self.store, scope)
        ss.backup(st.l2_cursor)
        if ss.dir.is_dir():
            for path in ss.dir.glob("*.md"):
                path.unlink()
        ss.sync_index()
        left = state.count_pending_l1(self.store, scope, 0)
        if not left:  # nothing left to describe: no persona either
            layout.persona_file(ss.root).unlink(missing_ok=True)
        state.update_scope(
            self.store,
            scope,
            l2_cursor=0,
            l2_cursor_id="",
            persona_request="memories forgotten" if left else "",
        )
        marker.unlink(missing_ok=True)
        log.info("L2 for scope %s: rebuilding scenes after memories were forgotten", scope)
        return True

    def _complete(self, scope: str, plan: dict[str, Any]) -> None:
        from memory_tencentdb.pipeline.persona import refresh_navigation

        refresh_navigation(self.scene_store(scope))
        found = self.store.memory_by_id(plan.get("to_id", "")) if plan.get("to_id") else None
        if found:  # rowids change when the database is rebuilt; memory ids do not
            plan["to_cursor"] = found.seq
        values: dict[str, Any] = {
            "l2_cursor": plan["to_cursor"],
            "l2_cursor_id": plan.get("to_id", ""),
            "l2_plan": "",
            "scenes_processed__add": 1,
            "l2_failures": 0,
        }
        if plan.get("persona_request"):
            values["persona_request"] = plan["persona_request"]
        state.update_scope(self.store, scope, **values)

    # ------------------------------------------------------------------ proposals

    def _llm_actions(
        self, ss: SceneStore, memories: list[Memory], existing: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str]:
        assert self.llm is not None
        max_scenes = ss.max_scenes
        n = len(existing)
        if n >= max_scenes:
            warning = (
                f"The scene count is at the limit ({n}/{max_scenes}): you must MERGE scenes "
                "before any CREATE."
            )
        elif n == max_scenes - 1:
            warning = f"One slot left ({n}/{max_scenes}): UPDATE only, do not CREATE."
        elif n >= max_scenes - 3:
            warning = f"Close to the limit ({n}/{max_scenes}): prefer UPDATE or MERGE."
        else:
            warning = f"Scenes: {n}/{max_scenes}."
        new = [
            {
                "id": m.id,
                "content": m.content,
                "type": m.type,
                "scene_name": m.scene_name,
                "created_at": (m.timestamps or [m.created_at])[0],
            }
            for m in memories
        ]
        scene_text = (
            "\n\n".join(
                f"### {s.filename}\nheat: {s.heat} | updated: {s.updated}\nsummary: {s.summary}\n"
                f"```markdown\n{s.body}\n```"
                for s in sorted(existing.values(), key=lambda s: -s.heat)
            )
            or "(no scenes yet)"
        )
        user = (
            f"{prompts.LANGUAGE_RULE}\n\n{warning}\n\n## New memories\n"
            f"{json.dumps(new, ensure_ascii=False, indent=1)}\n\n## Existing scenes "
            f"({n}/{max_scenes})\n{scene_text}\n\n## Current time\n{ss.now()}"
        )
        try:
            data, _ = self.llm.chat_json(
                "l2-scenes", prompts.scene_system(max_scenes, MAX_BODY_CHARS), user, expect=None
            )
        except JSONParseError as e:
            raise StageFailure(f"l2-scenes: {e}") from None
        except LLMError as e:
            raise StageFailure(str(e)) from None
        if isinstance(data, list):
            data = {"actions": data}
        if not isinstance(data, dict) or not isinstance(data.get("actions"), list):
            raise StageFailure("l2-scenes: reply has no actions list")
        request = data.get("persona_update")
        return data["actions"], request.strip() if isinstance(request, str) else ""

    def _digest_actions(
        self, scope: str, memories: list[Memory], existing: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """No LLM: one scene per kind of memory, rebuilt from the current memories of that kind."""
        touched = sorted({m.type for m in memories})
        actions = []
        for type_ in touched:
            rows = _active_of_type(self.store, scope, type_)
            if not rows:
                continue
            zh = sum(rules.has_cjk(r.content) for r in rows) * 2 > len(rows)
            filename, title, summary = DIGEST_SCENES[type_][1 if zh else 0]
            lines = [f"- {r.content}" for r in rows]
            body = f"## {title}\n" + "\n".join(lines)
            actions.append(
                {
                    "action": "update" if filename in existing else "create",
                    "file": filename,
                    "summary": summary.format(n=len(rows)),
                    "body": body,
                }
            )
        return actions


DIGEST_SCENES = {
    "instruction": (
        ("rules-and-decisions.md", "Rules and decisions", "Rules and decisions the user set ({n})"),
        ("规则与约定.md", "规则与约定", "用户定下的规则与约定（{n} 条）"),
    ),
    "persona": (
        (
            "about-the-user.md",
            "About the user",
            "Preferences, habits and facts about the user ({n})",
        ),
        ("用户画像.md", "用户信息", "用户的偏好、习惯与个人信息（{n} 条）"),
    ),
    "episodic": (
        ("events.md", "Events", "Things that happened ({n})"),
        ("经历与事件.md", "经历与事件", "发生过的事情（{n} 条）"),
    ),
}


def _active_of_type(store: MemoryStore, scope: str, type_: str, limit: int = 60) -> list[Memory]:
    return store.top_memories(scope, type_, limit)

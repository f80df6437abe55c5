"""L2 scene files: format, naming, heat, the index, backups, and applying actions.

A scene file is Markdown with a META header the engine owns::

    -----META-START-----
    created: 2026-05-01T10:00:00+08:00
    updated: 2026-05-02T09:30:00+08:00
    summary: one line
    heat: 3
    -----META-END-----

    <body>

The LLM (or the rule-based digest) only proposes actions; this module enforces everything a
prompt cannot guarantee: file names, ``maxScenes``, heat (new 1, update old+1, merge sum+1),
dates, the body size limit, atomic writes, and a backup taken before each run so a failed run
is undone.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from memory_tencentdb.pipeline import layout
from memory_tencentdb.store.files import write_atomic

META_START = "-----META-START-----"
META_END = "-----META-END-----"
MAX_BODY_CHARS = 1500
NAV_HEADER = "---\n## 🗺️ Scene Navigation (Scene Index)"


class ActionError(ValueError):
    """An action cannot be applied (unknown file, bad shape); the run is undone."""


@dataclass
class Scene:
    filename: str
    created: str
    updated: str
    summary: str
    heat: int
    body: str

    def render(self) -> str:
        summary = " ".join(self.summary.split())
        return (
            f"{META_START}\ncreated: {self.created}\nupdated: {self.updated}\n"
            f"summary: {summary}\nheat: {self.heat}\n{META_END}\n\n{self.body.strip()}\n"
        )

    def index_entry(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "summary": self.summary,
            "heat": self.heat,
            "created": self.created,
            "updated": self.updated,
        }


def parse_scene(filename: str, text: str) -> Scene:
    meta: dict[str, str] = {}
    body = text
    start, end = text.find(META_START), text.find(META_END)
    if start >= 0 and end > start:
        for line in text[start + len(META_START) : end].splitlines():
            m = re.match(r"^(\w+):\s*(.*)$", line.strip())
            if m:
                meta[m.group(1)] = m.group(2).strip()
        body = text[end + len(META_END) :]
    try:
        heat = int(meta.get("heat", "0"))
    except ValueError:
        heat = 0
    return Scene(
        filename,
        meta.get("created", ""),
        meta.get("updated", ""),
        meta.get("summary", ""),
        heat,
        body.strip(),
    )


_STRIP_CHARS = re.compile(r"[()\[\]{}<>'\"`,;:!?*|/\\=&%$#@^~+]")


def normalise_filename(name: str) -> str:
    """Letters, digits, CJK, ``-``, ``_`` and ``.``; lower case; a ``.md`` suffix."""
    stem = str(name or "").strip()
    stem = re.sub(r"\.md$", "", stem, flags=re.IGNORECASE)
    stem = re.sub(r"[\s\u00a0\u3000]+", "-", stem)
    stem = _STRIP_CHARS.sub("", stem)
    stem = re.sub(r"[^\w.\-\u3400-\u9fff]", "", stem)
    stem = re.sub(r"-{2,}", "-", stem)
    stem = re.sub(r"_{2,}", "_", stem)
    stem = re.sub(r"\.{2,}", ".", stem)
    stem = stem.strip("-_.").lower()[:80]
    return (stem or "scene") + ".md"


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    stem = name[:-3]
    for i in range(2, 1000):
        candidate = f"{stem}-{i}.md"
        if candidate not in taken:
            return candidate
    raise ActionError(f"no free file name for {name}")


class SceneStore:
    """The scene files of one scope."""

    def __init__(self, root: Path, tz: tzinfo, max_scenes: int, backup_count: int) -> None:
        self.root = root
        self.dir = layout.scene_dir(root)
        self.tz = tz
        self.max_scenes = max_scenes
        self.backup_count = backup_count

    def now(self) -> str:
        return datetime.now(self.tz).isoformat(timespec="seconds")

    def load(self) -> dict[str, Scene]:
        scenes: dict[str, Scene] = {}
        if not self.dir.is_dir():
            return scenes
        for path in sorted(self.dir.glob("*.md")):
            if not path.is_file():
                continue
            try:
                text = path.read_text("utf-8")
            except OSError:
                continue
            scene = parse_scene(path.name, text)
            if not scene.body or scene.body.strip() == "[DELETED]":
                continue
            scenes[path.name] = scene
        return scenes

    # ------------------------------------------------------------------ backups

    def backup(self, offset: int) -> Path:
        """Copy the scene files aside (even an empty set, so a restore never goes further back)."""
        stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        dest = layout.scene_backup_dir(self.root) / f"scene_blocks_{stamp}_offset{offset}"
        dest.mkdir(parents=True, exist_ok=True)
        if self.dir.is_dir():
            for path in self.dir.iterdir():
                if path.is_file():
                    shutil.copy2(path, dest / path.name)
        backups = sorted(p for p in dest.parent.iterdir() if p.is_dir())
        for stale in backups[: -self.backup_count]:
            shutil.rmtree(stale, ignore_errors=True)
        return dest

    def restore(self, backup: Path) -> None:
        """Make ``scene_blocks/`` exactly what ``backup`` holds."""
        if not backup.is_dir():
            raise FileNotFoundError(f"scene backup {backup} is gone")
        self.dir.mkdir(parents=True, exist_ok=True)
        keep = {p.name for p in backup.iterdir() if p.is_file()}
        for path in self.dir.iterdir():
            if path.is_file() and path.name not in keep:
                path.unlink()
        for name in keep:
            write_atomic(self.dir / name, (backup / name).read_text("utf-8"))
        self.sync_index()

    # ------------------------------------------------------------------ actions

    def apply(
        self, actions: list[dict[str, Any]], lenient: bool = False, max_creates: int = 1
    ) -> dict[str, Any]:
        """Apply actions to the current files; returns what changed. Raises ``ActionError``.

        ``lenient`` skips invalid actions instead of failing the run (used after repeated
        failures, so one bad answer cannot block the scenes for ever).
        """
        scenes = self.load()
        now = self.now()
        changed: dict[str, Scene] = {}
        deleted: set[str] = set()
        created = 0
        log: list[str] = []

        def fail(msg: str) -> None:
            if not lenient:
                raise ActionError(msg)
            log.append(f"skipped: {msg}")

        for i, action in enumerate(actions):
            if not isinstance(action, dict):
                fail(f"action {i} is not an object")
                continue
            kind = str(action.get("action", "")).strip().lower()
            raw_name = action.get("file") or action.get("filename") or ""
            name = normalise_filename(raw_name) if raw_name else ""
            body = _body(action)
            summary = str(action.get("summary") or "").strip()
            if kind == "delete":
                if name not in scenes:
                    fail(f"delete: no scene {raw_name!r}")
                    continue
                scenes.pop(name)
                changed.pop(name, None)
                deleted.add(name)
                log.append(f"delete {name}")
            elif kind == "update":
                old = scenes.get(name)
                if old is None:
                    fail(f"update: no scene {raw_name!r}")
                    continue
                if not body:
                    fail(f"update {name}: empty body")
                    continue
                scene = Scene(
                    name, old.created or now, now, summary or old.summary, old.heat + 1, body
                )
                scenes[name] = changed[name] = scene
                log.append(f"update {name} heat {old.heat}->{scene.heat}")
            elif kind == "create":
                if not body:
                    fail("create: empty body")
                    continue
                if created >= max_creates or len(scenes) >= self.max_scenes:
                    # The limit is the engine's: fold the new scene into the closest one.
                    target = _closest(scenes, summary + "\n" + body)
                    if target is None:
                        fail("create: scene limit reached and nothing to fold into")
                        continue
                    old = scenes[target]
                    merged_body = _fit(old.body + "\n\n" + body)
                    scene = Scene(
                        target, old.created or now, now, old.summary, old.heat + 1, merged_body
                    )
                    scenes[target] = changed[target] = scene
                    log.append(f"create folded into {target} (limit {self.max_scenes})")
                    continue
                name = _unique(name or normalise_filename(summary[:40]), set(scenes) | deleted)
                scene = Scene(name, now, now, summary, 1, body)
                scenes[name] = changed[name] = scene
                deleted.discard(name)
                created += 1
                log.append(f"create {name}")
            elif kind == "merge":
                sources = [normalise_filename(s) for s in (action.get("sources") or []) if s]
                missing = [s for s in sources if s not in scenes]
                if not sources or missing:
                    fail(f"merge: unknown sources {missing or sources}")
                    continue
                if not body:
                    fail("merge: empty body")
                    continue
                target = name or sources[0]
                merged_summary = (scenes.get(target) or scenes[sources[0]]).summary
                heat = (
                    sum(scenes[s].heat for s in sources)
                    + (scenes[target].heat if target in scenes and target not in sources else 0)
                    + 1
                )
                first = min((scenes[s].created for s in sources if scenes[s].created), default=now)
                for s in sources:
                    if s != target:
                        scenes.pop(s)
                        changed.pop(s, None)
                        deleted.add(s)
                if target not in scenes:
                    target = _unique(target, set(scenes))
                scene = Scene(target, first, now, summary or merged_summary, heat, body)
                scenes[target] = changed[target] = scene
                deleted.discard(target)
                log.append(f"merge {sources} -> {target} heat {heat}")
            else:
                fail(f"unknown action {kind!r}")
        # Enforce the limit whatever the actions said: merge the coldest into their neighbour.
        while len(scenes) > self.max_scenes:
            coldest = sorted(scenes.values(), key=lambda s: (s.heat, s.updated))[:2]
            a, b = coldest
            keep, drop = (b, a)
            merged = Scene(
                keep.filename,
                min(x for x in (a.created, b.created) if x) if (a.created or b.created) else now,
                now,
                keep.summary,
                a.heat + b.heat + 1,
                _fit(keep.body + "\n\n" + drop.body),
            )
            scenes.pop(drop.filename)
            changed.pop(drop.filename, None)
            deleted.add(drop.filename)
            scenes[keep.filename] = changed[keep.filename] = merged
            log.append(f"limit: merged {drop.filename} into {keep.filename}")
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, scene in changed.items():
            scene.body = _fit(scene.body)
            write_atomic(self.dir / name, scene.render())
        for name in deleted:
            (self.dir / name).unlink(missing_ok=True)
        self.cleanup()
        self.sync_index()
        return {"changed": sorted(changed), "deleted": sorted(deleted), "log": log}

    def cleanup(self) -> None:
        """Remove empty, ``[DELETED]`` and body-less files."""
        if not self.dir.is_dir():
            return
        for path in self.dir.glob("*.md"):
            if not path.is_file():
                continue
            text = path.read_text("utf-8", "replace")
            body = parse_scene(path.name, text).body.strip()
            if not text.strip() or text.strip() == "[DELETED]" or not body:
                path.unlink(missing_ok=True)

    def sync_index(self) -> list[dict[str, Any]]:
        entries = [s.index_entry() for s in self.load().values()]
        entries.sort(key=lambda e: (-e["heat"], e["filename"]))
        write_atomic(
            layout.scene_index_file(self.root), json.dumps(entries, ensure_ascii=False, indent=2)
        )
        return entries

    def index(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(layout.scene_index_file(self.root).read_text("utf-8"))
        except (OSError, ValueError):
            return []
        return data if isinstance(data, list) else []


def _body(action: dict[str, Any]) -> str:
    body = action.get("body")
    if not isinstance(body, str):
        body = c if isinstance(c := action.get("content"), str) else ""
    body = body.strip()
    if META_END in body:  # the model wrote a whole file: keep only its body
        body = body.split(META_END, 1)[1].strip()
    return "" if body == "[DELETED]" else body


def _fit(body: str, limit: int = MAX_BODY_CHARS) -> str:
    body = body.strip()
    if len(body) <= limit:
        return body
    cut = body[: limit - 1]
    nl = cut.rfind("\n")
    return (cut[:nl] if nl > limit // 2 else cut).rstrip() + "…"


def _closest(scenes: dict[str, Scene], text: str) -> str | None:
    if not scenes:
        return None
    words = set(re.findall(r"[\w\u3400-\u9fff]{2,}", text.lower()))

    def score(s: Scene) -> tuple[int, int]:
        other = set(re.findall(r"[\w\u3400-\u9fff]{2,}", (s.summary + " " + s.body).lower()))
        return (len(words & other), -s.heat)

    return max(scenes.values(), key=score).filename


def heat_emoji(heat: int) -> str:
    for limit, n in ((1000, 5), (500, 4), (200, 3), (100, 2), (50, 1)):
        if heat >= limit:
            return "🔥" * n
    return ""


def navigation(entries: list[dict[str, Any]], prefix: str = "scene_blocks/") -> str:
    """The navigation block appended to ``persona.md`` (relative paths), hottest first."""
    if not entries:
        return ""
    blocks = []
    for e in sorted(entries, key=lambda e: -int(e.get("heat") or 0)):
        heat = int(e.get("heat") or 0)
        line = f"**Heat**: {heat}{heat_emoji(heat)}"
        if e.get("updated"):
            line += f" | **Updated**: {e['updated']}"
        blocks.append(f"### Path: {prefix}{e['filename']}\n{line}\nSummary: {e.get('summary', '')}")
    return (
        f"{NAV_HEADER}\n_Scenes distilled from past conversations; open a file for details._\n\n"
        + "\n\n".join(blocks)
        + "\n\n📌 How to use:\n- Hotter scenes come up more often.\n"
        "- Read a scene file when the conversation touches its topic.\n"
        "- Scene files are summaries; search memories for exact facts.\n"
    )


def strip_navigation(text: str) -> str:
    idx = text.find(NAV_HEADER)
    if idx < 0:
        idx = text.find("\n## 🗺️ Scene Navigation")
    return (text[:idx] if idx >= 0 else text).rstrip().removesuffix("---").rstrip()

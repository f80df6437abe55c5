"""Where a scope's derived files live.

The ``default`` scope keeps the original's layout at the top of the data directory
(``persona.md``, ``scene_blocks/``, ``.metadata/scene_index.json``, ``.backup/...``). Every other
scope gets the same layout under ``scopes/<name>-<hash>/``, so one agent's scenes and persona are
never shown to another (recall is scoped, so its stable part must be too).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

DEFAULT_SCOPE = "default"


def scope_root(data_dir: Path, scope: str) -> Path:
    data_dir = Path(data_dir)
    if not scope or scope == DEFAULT_SCOPE:
        return data_dir
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._")[:48] or "scope"
    digest = hashlib.sha1(scope.encode("utf-8")).hexdigest()[:8]
    return data_dir / "scopes" / f"{safe}-{digest}"


def scene_dir(root: Path) -> Path:
    return root / "scene_blocks"


def scene_index_file(root: Path) -> Path:
    return root / ".metadata" / "scene_index.json"


def persona_file(root: Path) -> Path:
    return root / "persona.md"


def scene_backup_dir(root: Path) -> Path:
    return root / ".backup" / "scene_blocks"


def persona_backup_dir(root: Path) -> Path:
    return root / ".backup" / "persona"


def rebuild_marker(root: Path) -> Path:
    """Present when memories of the scope were forgotten: the next L2 run refolds its scenes
    from the memories that are left (and L3 then rewrites the persona)."""
    return root / ".metadata" / "rebuild_scenes"

"""Where one scope's offload files live (next to the store's layout, not inside ``pipeline/``).

``<offload dir>/<scope-dir>/`` holds ``refs/``, ``mmds/``, ``offload-<session>.jsonl``,
``sessions/<session>.json`` (task state and boundaries) and ``state.json`` (canvas counter).
Scope and session names become file names only through :func:`safe_name`, which never lets
two different names share a file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from memory_tencentdb.pipeline.layout import DEFAULT_SCOPE

_UNSAFE = re.compile(r'[<>:"/\\|?*\s\x00-\x1f\x7f]+|\.\.+')


def safe_name(name: str, limit: int = 96) -> str:
    """``name`` usable as a file name; a hash is added whenever the name had to change."""
    cleaned = _UNSAFE.sub("_", name).strip("._")[:limit] or "x"
    if cleaned == name:
        return cleaned
    return f"{cleaned}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def scope_dir_name(scope: str) -> str:
    if not scope or scope == DEFAULT_SCOPE:
        return DEFAULT_SCOPE
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._")[:48] or "scope"
    return f"{safe}-{hashlib.sha1(scope.encode('utf-8')).hexdigest()[:8]}"


@dataclass(frozen=True)
class ScopeLayout:
    root: Path

    @classmethod
    def of(cls, offload_dir: Path, scope: str) -> ScopeLayout:
        return cls(Path(offload_dir).resolve() / scope_dir_name(scope))

    @property
    def refs(self) -> Path:
        return self.root / "refs"

    @property
    def mmds(self) -> Path:
        return self.root / "mmds"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def journal(self, session_key: str) -> Path:
        return self.root / f"offload-{safe_name(session_key)}.jsonl"

    def session_state(self, session_key: str) -> Path:
        return self.root / "sessions" / f"{safe_name(session_key)}.json"

    def journals(self) -> list[Path]:
        return sorted(self.root.glob("offload-*.jsonl")) if self.root.is_dir() else []

    def inside(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root)
            return True
        except ValueError:
            return False

"""Where one scope's offload files live (next to the store's layout, not inside ``pipeline/``).

``<offload dir>/<scope-dir>/`` holds ``refs/``, ``mmds/``, ``offload-<session>.jsonl``,
``sessions/<session>.json`` (task state and boundaries) and ``state.json`` (canvas counter).
Scope and session names become file names only through :func:`safe_name`, which never lets
two different names share a file (an escape, injective; the older rule let ``x/`` and
``x-<sha1[:8]>`` share one, and its files are still found: :meth:`ScopeLayout.session_stem`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from memory_tencentdb.pipeline.layout import DEFAULT_SCOPE

_UNSAFE = re.compile(r'[<>:"/\\|?*\s\x00-\x1f\x7f]+|\.\.+')
# Escaped by safe_name: what a file name cannot hold, plus its own escape and marker characters.
_ESCAPE = frozenset('<>:"/\\|?*%~')


def legacy_safe_name(name: str, limit: int = 96) -> str:
    """The file name of before issue 21: kept to find the files existing data directories hold.
    Not injective: ``x/`` became ``x-<sha1[:8]>``, which is also a name kept as it is."""
    cleaned = _UNSAFE.sub("_", name).strip("._")[:limit] or "x"
    if cleaned == name:
        return cleaned
    return f"{cleaned}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


def safe_name(name: str, limit: int = 96) -> str:
    """``name`` as a file name, injectively: a character a file name cannot hold (and ``%``,
    ``~``, a leading ``.``) becomes ``%XX`` per UTF-8 byte, so two names never share a file;
    past ``limit`` the escaped name is cut and ``~`` + 16 hex of the name's SHA-256 added
    (``~`` never appears in a name that was not cut)."""
    out = []
    for i, c in enumerate(name):
        if c in _ESCAPE or c.isspace() or not c.isprintable() or (i == 0 and c == "."):
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        else:
            out.append(c)
    escaped = "".join(out) or "%"
    if len(escaped) <= limit:
        return escaped
    return f"{escaped[: limit - 17]}~{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def _legacy_owner(state_file: Path) -> str | None:
    try:
        key = json.loads(state_file.read_text("utf-8")).get("session_key")
    except (OSError, ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None


def scope_dir_name(scope: str) -> str:
    if not scope or scope == DEFAULT_SCOPE:
        return DEFAULT_SCOPE
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._")[:48] or "scope"
    return f"{safe}-{hashlib.sha1(scope.encode('utf-8')).hexdigest()[:8]}"


# (scope root, session key) -> legacy stem, once found (its files stay where they are).
_stems: dict[tuple[Path, str], str] = {}


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

    def session_stem(self, session_key: str) -> str:
        """The name a session's journal and state file share. :func:`safe_name`, except for a
        session whose files an older version wrote under :func:`legacy_safe_name`: those are
        kept using when its state file names this very key (or there is a journal and no
        state file, as before), never when they belong to the key it collided with."""
        new = safe_name(session_key)
        old = legacy_safe_name(session_key)
        if old == new:
            return new
        cached = _stems.get((self.root, session_key))
        if cached is not None:
            return cached
        if (self.root / f"offload-{new}.jsonl").exists() or (
            self.root / "sessions" / f"{new}.json"
        ).exists():
            return new
        state = self.root / "sessions" / f"{old}.json"
        if state.exists():
            stem = old if _legacy_owner(state) == session_key else new
        else:
            stem = old if (self.root / f"offload-{old}.jsonl").exists() else new
        if stem == old:
            _stems[(self.root, session_key)] = stem
        return stem

    def journal(self, session_key: str) -> Path:
        return self.root / f"offload-{self.session_stem(session_key)}.jsonl"

    def session_state(self, session_key: str) -> Path:
        return self.root / "sessions" / f"{self.session_stem(session_key)}.json"

    def journals(self) -> list[Path]:
        return sorted(self.root.glob("offload-*.jsonl")) if self.root.is_dir() else []

    def inside(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root)
            return True
        except ValueError:
            return False

"""The offload sessions of a scope, for the hub: each session's canvases and its tokens sent
versus verbatim. Read-only over ``OffloadService`` (its session files and rows); reading a raw
result or a canvas goes through the service's own ``read`` (``POST /offload/read``).

Tokens per session, from its rows (one per tool call): *verbatim* is what the tool results
measured; *sent* is what the context carries for them after offloading: the whole result when it
was kept, the stub's tokens when it was replaced by a stub, nothing when it left the context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.offload.layout import ScopeLayout
from memory_tencentdb.offload.store import prefix_of

if TYPE_CHECKING:
    from memory_tencentdb.offload.service import OffloadService

MAX_SESSIONS = 200  # newest first; a scope with more shows the newest 200


def _session_keys(root: Path) -> list[tuple[float, str]]:
    """``(mtime, session_key)`` of the scope's session files, newest first."""
    folder = root / "sessions"
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text("utf-8"))
            key = data.get("session_key") if isinstance(data, dict) else None
            if isinstance(key, str) and key:
                found.append((path.stat().st_mtime, key))
        except (OSError, ValueError):
            continue
    found.sort(reverse=True)
    return found[:MAX_SESSIONS]


def sessions(svc: OffloadService, scope: str) -> dict[str, Any]:
    root = ScopeLayout.of(svc.root, scope).root
    files = svc.scope(scope).canvas_files()
    out = []
    for _, key in _session_keys(root):
        sess = svc.session(scope, key)
        with sess.lock:
            rows = list(sess.rows)
            state = dict(sess.state)
        verbatim = sent = stubbed = removed = 0
        for row in rows:
            verbatim += row.tokens
            if row.offloaded == "deleted":
                removed += 1
            elif row.offloaded:
                stubbed += 1
                sent += svc.count(svc.stub(sess, row))
            else:
                sent += row.tokens
        prefixes = {r.node_id.split("-N")[0] for r in rows if r.node_id}
        names = {b.get("canvas") for b in state.get("boundaries") or [] if isinstance(b, dict)}
        names.add(state.get("active"))
        canvases = [f for f in files if f in names or prefix_of(f) in prefixes]
        out.append(
            {
                "session_key": key,
                "tool_results": len(rows),
                "stubbed": stubbed,
                "removed": removed,
                "tokens_verbatim": verbatim,
                "tokens_sent": sent,
                "active": state.get("active"),
                "canvases": canvases,
            }
        )
    return {"scope": scope, "sessions": out, "tokenizer": svc.tokens.name}

"""Reading offloaded content back: a tool result, a node's rows or a canvas, by any key the
stubs and the guide name (tool_call_id, result_ref, node_id, canvas), paged.

Apart from ``OffloadService`` because it only reads what L1-L3 wrote (the journals, the refs,
the canvas files) and shares none of assemble's state; the service keeps one-line delegates
(``read``, ``canvases``, ``guide``) so the routes call it as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.offload import canvas, guide, paging, refs
from memory_tencentdb.offload.records import (
    OffloadInputError,
    OffloadNotFound,
    OffloadRow,
    strip_id,
)
from memory_tencentdb.offload.store import (
    Scope,
    Session,
    prefix_of,
    read_ref_text,
    split_ref,
)

if TYPE_CHECKING:
    from memory_tencentdb.offload.service import OffloadService


class ReadBack:
    """The read-back routes' work over one ``OffloadService``'s scopes and sessions."""

    def __init__(self, svc: OffloadService) -> None:
        self.svc = svc

    def _all_rows(self, scope: str, session_key: str | None) -> list[tuple[Session, OffloadRow]]:
        sc = self.svc.scope(scope)
        keys: list[str] = []
        if session_key:
            keys.append(session_key)
        for path in sc.layout.journals():
            state = (
                sc.layout.root
                / "sessions"
                / (path.name[len("offload-") : -len(".jsonl")] + ".json")
            )
            try:
                key = json.loads(state.read_text("utf-8")).get("session_key")
            except (OSError, ValueError):
                key = None
            if key and key not in keys:
                keys.append(key)
        out: list[tuple[Session, OffloadRow]] = []
        for key in keys:
            sess = self.svc.session(scope, key)
            with sess.lock:
                out.extend((sess, r) for r in list(sess.rows))
        return out

    def _read_ref(self, sc: Scope, ref: str) -> dict[str, str]:
        try:
            name, span = split_ref(ref)
        except ValueError:
            raise OffloadNotFound(f"no ref {ref!r} in this scope") from None
        path = Path(name)
        if not path.is_absolute():
            path = sc.layout.root / (name if name.startswith("refs/") else f"refs/{name}")
        if not sc.layout.inside(path) or path.suffix != ".md" or not path.is_file():
            raise OffloadNotFound(f"no ref {ref!r} in this scope")
        rel = path.relative_to(sc.layout.root).as_posix()
        if span is not None:
            rel += f"#{span[0]}-{span[1]}"
        try:
            return refs.parse(read_ref_text(sc.layout.root, rel))  # no newline translation
        except UnicodeDecodeError:
            raise OffloadNotFound(f"no ref {ref!r} in this scope") from None

    def read(
        self,
        scope: str,
        session_key: str | None,
        offset: int = 0,
        length: int | None = None,
        **key: str,
    ) -> dict[str, Any]:
        """The original behind a key; a tool result's or a canvas's text as the page
        ``[offset, offset+length)`` with where the next page starts (paging.py)."""
        out = self._read_whole(scope, session_key, **key)
        field = {"tool_result": "content", "canvas": "text"}.get(out["kind"])
        if field is not None:
            whole = out[field]
            # The next page is named by what this page was read from (not "active", which
            # may move on between two pages).
            if out["kind"] == "canvas":
                again = {"canvas": out["canvas"]}
            elif key.get("tool_call_id") and out.get("tool_call_id"):
                again = {"tool_call_id": out["tool_call_id"]}
            else:
                again = {"result_ref": out["result_ref"]}
            info = paging.page(whole, offset, length, again)
            out[field] = whole[info["offset"] : info["end"]]
            out.update(info)
        return out

    def _read_whole(self, scope: str, session_key: str | None, **key: str) -> dict[str, Any]:
        self.svc.counts["reads"] += 1
        sc = self.svc.scope(scope)
        if key.get("tool_call_id") or key.get("result_ref"):
            wanted_id = strip_id(key["tool_call_id"]) if key.get("tool_call_id") else None
            wanted_ref = key.get("result_ref")
            if wanted_ref and Path(wanted_ref).is_absolute():
                try:
                    wanted_ref = str(Path(wanted_ref).resolve().relative_to(sc.layout.root))
                except ValueError:
                    raise OffloadNotFound(f"no ref {key['result_ref']!r} in this scope") from None
            if wanted_ref and not wanted_ref.startswith("refs/"):
                wanted_ref = f"refs/{wanted_ref}"
            for _, row in self._all_rows(scope, session_key):
                if (wanted_id and strip_id(row.tool_call_id) == wanted_id) or (
                    wanted_ref and row.result_ref == wanted_ref
                ):
                    fields = self._read_ref(sc, row.result_ref)
                    return {
                        "kind": "tool_result",
                        "tool_call_id": row.tool_call_id,
                        "tool_name": row.tool_name,
                        "result_ref": row.result_ref,
                        **ref_location(sc.layout.root, row.result_ref),
                        "content": fields["content"],
                        "encoding": fields.get("encoding", "text"),
                        "row": row.as_json(),
                    }
            if wanted_ref:  # a ref without a row (e.g. the original's files)
                fields = self._read_ref(sc, wanted_ref)
                return {
                    "kind": "tool_result",
                    "tool_call_id": fields.get("call_id"),
                    "tool_name": fields.get("tool"),
                    "result_ref": wanted_ref,
                    **ref_location(sc.layout.root, wanted_ref),
                    "content": fields["content"],
                    "encoding": fields.get("encoding", "text"),
                    "row": None,
                }
            raise OffloadNotFound(
                f"no tool result {key.get('tool_call_id') or key.get('result_ref')!r} in this scope"
            )
        if key.get("node_id"):
            node = key["node_id"].strip()
            if not canvas.NODE_ID.fullmatch(node):
                raise OffloadInputError("node_id", "must look like NNN-N<k>, e.g. 003-N2")
            rows = [r.as_json() for _, r in self._all_rows(scope, session_key) if r.node_id == node]
            name = next((f for f in sc.canvas_files() if prefix_of(f) == node.split("-N")[0]), None)
            if not rows and name is None:
                raise OffloadNotFound(f"no node {node!r} in this scope")
            return {"kind": "node", "node_id": node, "canvas": name, "rows": rows}
        name = (key.get("canvas") or "").strip()
        if name == "active":
            if not session_key:
                raise OffloadInputError("session_key", 'required with canvas "active"')
            name = self.svc.active_canvas(scope, session_key) or ""
            if not name:
                raise OffloadNotFound("this session has no active canvas")
        files = sc.canvas_files()
        match = next((f for f in files if f in (name, f"{name}.mmd") or prefix_of(f) == name), None)
        if match is None:
            raise OffloadNotFound(f"no canvas {name!r} in this scope")
        return {"kind": "canvas", **self._canvas_info(sc, match, with_text=True)}

    def _canvas_info(self, sc: Scope, name: str, with_text: bool = False) -> dict[str, Any]:
        text = sc.read_canvas(name)
        meta = canvas.parse_meta(text)
        info: dict[str, Any] = {
            "file": name,
            "canvas": name,
            "path": str(sc.layout.mmds / name),
            "task_goal": meta.task_goal,
            "created_time": meta.created_time,
            "updated_time": meta.updated_time,
            "node_count": len(canvas.node_ids(text, prefix_of(name))),
            "status": canvas.status_counts(text),
            "meta": meta.__dict__,
        }
        if with_text:
            info["text"] = text
        return info

    def canvases(self, scope: str, session_key: str | None) -> dict[str, Any]:
        sc = self.svc.scope(scope)
        active = self.svc.session(scope, session_key).state.get("active") if session_key else None
        files = sc.canvas_files()
        act = self._canvas_info(sc, active, True) if active in files else None
        history = [self._canvas_info(sc, f) for f in reversed(files) if f != active]
        return {"active": act, "history": history, "data_dir": str(sc.layout.root)}

    def guide(self, scope: str, session_key: str | None) -> dict[str, Any]:
        sc = self.svc.scope(scope)
        journal_path = sc.layout.journal(session_key or "<session>")
        return guide.tool(sc.layout.root, journal_path)


def ref_location(root: Path, ref: str) -> dict[str, Any]:
    """Where a ref's text lies on disk: the file, and for a part of a request's bundle
    (``refs/<f>.md#<start>-<end>``) its byte range in that file, so ``path`` is always a file."""
    name, span = split_ref(ref)
    return {"path": str(root / name), "bytes": list(span) if span else None}

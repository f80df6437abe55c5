"""The offload's own messages in an /offload/assemble answer: the task canvas (the current
task's goal and the steps that left the context), a new task's goal before its first step,
the history blocks of earlier tasks, and the accounting that sizes them (what the stubs save,
whether the answer shortened anything at all).

Apart from ``OffloadService._assemble`` because it only reads the session (its canvases, its
rows) and the levels' outcome; ``_assemble`` decides where they go and what they may cost
(offload/budget.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_tencentdb.offload import canvas, guide
from memory_tencentdb.offload.messages import sign
from memory_tencentdb.offload.records import OffloadRow, strip_id
from memory_tencentdb.offload.store import Session, prefix_of

if TYPE_CHECKING:
    from memory_tencentdb.offload.service import OffloadService

COMPACT_CANVAS_TOKENS = 300  # the canvas while every step is still in the list


class ContextBlocks:
    """Builds the canvas and history messages for one ``OffloadService``'s sessions."""

    def __init__(self, svc: OffloadService) -> None:
        self.svc = svc

    def canvas_block(
        self, sess: Session, name: str, max_tokens: int, shown: set[str], left: bool = True
    ) -> tuple[str, dict]:
        """The canvas message: the steps in ``shown`` (``left``: those that left the context),
        the newest that fit ``max_tokens``, with short labels. The file keeps every node."""
        text = sess.canvas_text(name)
        meta = canvas.parse_meta(text)
        # Escaped, and 160 characters in both forms: a harness prompt's task names itself
        # after its template's opening sentence (the shared SWE-agent/CTF sessions: at
        # characters 96-130), which a 100-character goal cut off in the real OpenClaw replay.
        goal = canvas.goal_text(meta.task_goal, 160)
        n = len(shown)
        floor = min(1, n)  # at least the newest step, even when squeezed
        while True:
            body, older = canvas.view(text, shown, n)
            if older and left:  # the compact canvas's older steps are in the list
                more = f'flowchart TD\n    %% {older} older steps: {{"canvas": "{name}"}}'
                body = body.replace("flowchart TD", more, 1)
            # While every step is in the list (its results), the goal and the newest steps are
            # all the compact canvas needs to say. The goal is always there: it is the current
            # task's, whatever else had to leave.
            about = (
                f"Task canvas, steps that left the context; a step's results:"
                f' {guide.TOOL_NAME} {{"node_id": "<node>"}}\n'
                if left
                else ""
            )
            block = sign(
                f'<current_task_context file="{name}">\n{about}Goal: {goal}\n'
                f"```mermaid\n{body}\n```\n</current_task_context>",
                self.svc.mark_key,
            )
            tokens = self.svc.count(block)
            if tokens <= max_tokens or n <= floor:
                break
            n = max(floor, min(n - 1, int(n * max_tokens / tokens)))
        info = {
            "file": name,
            "path": str(sess.scope.layout.mmds / name),
            "task_goal": meta.task_goal,
            "node_count": len(canvas.node_ids(text, prefix_of(name))),
            "shown_nodes": n,
            "text": text,
        }
        return block, info

    def shown(
        self,
        sess: Session,
        active: str | None,
        outcome: Any,
        cap: int,
        list_tokens: int,
        squeeze: int | None = None,
        follows: bool = False,
    ) -> tuple[str, dict | None]:
        """The one canvas message of this answer (none only while the session has no step).

        Proportional to what it stands in for: while every step is still in the list, a compact
        canvas of the newest steps (at most ``COMPACT_CANVAS_TOKENS``: ~40 tokens, 1% of the
        list and a quarter of what its stubs save, so it costs what the offload saves); once
        steps of the active task left the context, those steps, at most a quarter of the tokens
        they took (``cap`` at most), so the canvas never costs more than the removal saved.
        An empty list stays empty (a canvas alone is no conversation to send), unless the
        host appends the current turn after it (``follows``: OpenClaw's first turn)."""
        if not (outcome.units or follows):
            return "", None
        pending = sess.state.get("pending_goal")
        if not sess.state.get("active") and pending:
            return self.pending_block(pending)
        if not active:
            return "", None
        prefix = prefix_of(active)
        nodes = canvas.node_ids(sess.canvas_text(active), prefix)
        if not nodes:
            return "", None
        small = min(
            COMPACT_CANVAS_TOKENS, 40 + list_tokens // 100 + self.stub_savings(sess, outcome) // 4
        )
        left = {
            r.node_id for r in outcome.removed if r.node_id and r.node_id.split("-N")[0] == prefix
        }
        if not left:
            return self.canvas_block(sess, active, squeeze or small, set(nodes), left=False)
        removed_tokens = sum(u.tokens for u in outcome.units if u.removed)
        limit = squeeze or max(small, min(cap, removed_tokens // 4))
        return self.canvas_block(sess, active, limit, left, left=True)

    def pending_block(self, goal: str) -> tuple[str, dict]:
        """A new task before its first step: its goal (no canvas file yet; the previous
        task's canvas is not shown as if it were this one's)."""
        goal = canvas.goal_text(goal, 160)  # escaped: the prompt is the host's text
        block = sign(
            f'<current_task_context file="(new task)">\nGoal: {goal}\n'
            "No step of this task yet.\n</current_task_context>",
            self.svc.mark_key,
        )
        info = {"file": None, "path": None, "task_goal": goal, "node_count": 0}
        return block, {**info, "shown_nodes": 0, "text": ""}

    def history_blocks(
        self, sess: Session, removed: list[OffloadRow], active: str | None
    ) -> list[str]:
        prefixes = {r.node_id.split("-N")[0] for r in removed if r.node_id and "-N" in r.node_id}
        blocks = []
        for name in sess.scope.canvas_files():
            if name == active or prefix_of(name) not in prefixes:
                continue
            text = sess.scope.read_canvas(name)
            meta = canvas.parse_meta(text)
            counts = canvas.status_counts(text)
            blocks.append(
                f'<history_task_context file="{name}" mode="meta-only">\n'
                f"Earlier task (its steps left the context). Goal: {canvas.goal_text(meta.task_goal, 120)}\n"
                f"Nodes: {len(canvas.node_ids(text, prefix_of(name)))}"
                f" ({counts.get('done', 0)} done, {counts.get('blocked', 0)} blocked),"
                f" updated {meta.updated_time}. Whole canvas: {guide.TOOL_NAME}"
                f' {{"canvas": "{name}"}}\n</history_task_context>'
            )
        return blocks[-5:]

    def stub_savings(self, sess: Session, outcome: Any) -> int:
        """Tokens the stubs in this answer save (applied here or by the host)."""
        saved = 0
        for u in outcome.units:
            if u.removed:
                continue
            for item in u.items[1:]:
                m = item.msg
                row = sess.row(m.call_id or "") if m is not None and m.role == "tool" else None
                if row is not None and row.offloaded is True and row.tokens > item.tokens:
                    saved += row.tokens - item.tokens
        for row in self.pending_rows(sess, outcome):
            stub = self.svc.count(self.svc.stub(sess, row))
            saved += max(0, row.tokens - stub)
        return saved

    def pending_rows(self, sess: Session, outcome: Any) -> list[OffloadRow]:
        """Stubbed rows of the results the host appends after the list (``pending_ids``),
        those the list does not hold itself."""
        ids = sess.pending_ids
        if not ids:
            return []
        listed = {
            strip_id(item.msg.call_id or "")
            for u in outcome.units
            for item in u.items
            if item.msg is not None and item.msg.role == "tool"
        }
        rows = []
        for cid in dict.fromkeys(strip_id(i) for i in ids):
            row = sess.row(cid)
            if cid not in listed and row is not None and row.offloaded is True:
                rows.append(row)
        return rows

    def shortened(self, sess: Session, outcome: Any) -> bool:
        """Does this answer hold anything shortened (a stub, a truncation, a removal, a
        dropped orphan), including stubs the host applied itself from ``/offload/tool-result``?"""
        if outcome.stubbed or outcome.truncated or outcome.removed or outcome.orphans:
            return True
        if self.pending_rows(sess, outcome):
            return True
        for u in outcome.units:
            if u.removed:
                return True
            for item in u.items:
                if item.state != "orig":
                    return True
                m = item.msg
                if m is not None and m.role == "tool":
                    row = sess.row(m.call_id or "")
                    if row is not None and row.offloaded is True:
                        return True
        return False

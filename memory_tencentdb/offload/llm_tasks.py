"""L1 / L1.5 / L2 with an LLM: the original's JSON tasks, validated, on one background worker.

Nothing a host waits for ever calls the LLM: a tool result is answered with its extractive row
and canvas node, assembly with the embedding boundary. The worker then refines: L1 rewrites a
row's ``summary`` / ``tool_call`` / ``score`` (``summary_by: "llm"``), L1.5 may move the session
to another task from its prompt on (steps recorded meanwhile move with it), L2 redraws the canvas and maps rows to its nodes.
A failed, slow, malformed or truncated reply leaves the no-LLM result in place (``/health``
shows the error); no row is ever lost. Rows still ``summary_by: "rules"`` when a session is
loaded again are queued again, so a restart resumes the backlog.

Without a gateway LLM of its own, each task goes to the host model allowed for the session's
scope (llm/host_models.py ``client_for``: a model of a principal that may write the scope, within
the day's memory budget), or waits (issue 24):

- no usable model now (none handed over yet, resting after a failure, budget spent): an L1 or L2
  task is *deferred* and queued again once one is usable (checked every ``RETRY_CHECK_S``); one
  whose scope has no model handed over at all waits ``NO_MODEL_GRACE_S`` (a host hands its model
  over as its session starts), then the rules' result stays. L1.5 is never deferred: a late
  judgement of an old prompt is worthless, the embedding boundary stands.
- rows recorded before a gateway restart are not queued again (the day's budget goes to the
  turns of now).
- a failed call (429, 5xx, timeout) or a bad answer (malformed JSON, wrong shape) rests that model
  as the pipeline does and defers the task; after ``MAX_TRIES`` bad answers the rules' result
  stays (failed calls do not count: the task waits for the model to answer again).
"""

from __future__ import annotations

import functools
import logging
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memory_tencentdb.llm.host_models import HostModelClient
from memory_tencentdb.offload import canvas
from memory_tencentdb.offload.records import OffloadRow, strip_id
from memory_tencentdb.offload.store import Session, prefix_of, session_canvases

if TYPE_CHECKING:
    from memory_tencentdb.llm.client import LLMClient
    from memory_tencentdb.llm.host_models import HostModels
    from memory_tencentdb.offload.service import OffloadService

log = logging.getLogger("memory_tencentdb.offload")

L1_BATCH = 5
# How often deferred tasks look for a usable host model: a dict lookup per scope; small beside
# a model's first rest (30 s).
RETRY_CHECK_S = 2.0
# A scope with no host model at all: how long its tasks wait for one. Hosts hand it over as a
# session starts (0.26 s after it in Hermes gateway mode's provider.log); a cold autostarted
# gateway took over 12 s (test_e2e_openclaw_autostart), so 60 s leaves room.
NO_MODEL_GRACE_S = 60.0
MAX_TRIES = (
    3  # bad answers to one task before the rules' result stays (as the LLM client's attempts)
)
MAX_DEFERRED_PER_SCOPE = 200  # older deferred tasks keep the rules' result (as host_redo's cap)

L1_SYSTEM = (
    "You summarise tool results for an AI coding assistant. For each tool pair, think about the"
    " user's latest intent and record what was found, done, changed or failed and why it matters."
    ' Output ONLY a JSON array; each item: {"tool_call_id": (copy verbatim), "tool_call":'
    ' (<=150 chars: tool name and target), "summary": (<=200 chars, conclusion first),'
    ' "score": (0-10: how well the summary can replace the raw result)}. Write in the language'
    " of the tool output (Chinese stays Chinese)."
)
L15_SYSTEM = (
    "You are a task lifecycle gatekeeper. Given the user's new message, the current task canvas"
    " and earlier task canvases, decide: does the message continue the current task, start a"
    " new long task, resume an earlier one, or is it a one-off question? Output ONLY JSON:"
    ' {"taskCompleted": bool (true if there is no current task), "isLongTask": bool,'
    ' "isContinuation": bool, "continuationMmdFile": "<earlier file name>"|null,'
    ' "newTaskLabel": "<kebab-case, <=30 chars>"|null}.'
)
L2_SYSTEM = (
    "You are a task-topology architect. Fold new tool-call summaries into the task's Mermaid"
    " flowchart: merge consecutive actions with the same intent into one macro node, keep turning"
    " points, record only what happened. Node ids MUST be <prefix>-N<k> with the given prefix."
    ' Node text: "<phase>: <action><br/>status: done|doing|blocked<br/>summary: <=150 chars'
    '<br/>Timestamp: ISO". Keep the file under 4000 characters. Output ONLY JSON:'
    ' {"fileAction": "write", "mmdContent": "flowchart TD\\n ...", "nodeMapping":'
    ' {"<tool_call_id>": "<node id>"}} mapping EVERY new tool_call_id.'
)

_SHAPES = [("[[", "]]"), ("([", "])"), ("[(", ")]"), ("((", "))"), ("{{", "}}"), ("[", "]"),
           ("(", ")"), ("{", "}")]  # fmt: skip
_NODE_LINE = re.compile(r"^\s*((?:\d{3,}-)?N\d+)\s*(\[\[|\(\[|\[\(|\(\(|\{\{|\[|\(|\{)(.*)$")
_EDGE_LINE = re.compile(
    r"^\s*((?:\d{3,}-)?N\d+)\s*(-->|-\.->|==>|---)\s*(?:\|([^|]*)\|)?\s*((?:\d{3,}-)?N\d+)\s*$"
)
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _full_id(node: str, prefix: str) -> str:
    return node if "-N" in node else f"{prefix}-{node}"


def _label(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1]
    return "<br/>".join(canvas.escape_label(part, 200) for part in _BR.split(raw))


def sanitize_mermaid(text: str, prefix: str) -> str:
    """An LLM's flowchart re-written so it always parses: known node and edge lines only, node
    ids prefixed, every label re-escaped. Answers the body (``flowchart TD`` + lines) or ''."""
    text = re.sub(r"^```(?:mermaid)?\s*|```\s*$", "", text.strip(), flags=re.MULTILINE)
    out = ["flowchart TD"]
    for line in text.splitlines():
        m = _EDGE_LINE.match(line)
        if m:
            a, arrow, lab, b = m.groups()
            arrow = {"-.->": "-.->", "==>": "==>"}.get(arrow, "-->")
            mid = f'|"{_label(lab)}"|' if lab and lab.strip() else ""
            out.append(f"    {_full_id(a, prefix)} {arrow}{mid} {_full_id(b, prefix)}")
            continue
        m = _NODE_LINE.match(line)
        if not m:
            continue
        node, opening, rest = m.groups()
        closing = dict(_SHAPES)[opening]
        rest = rest.rstrip()
        if not rest.endswith(closing):
            continue
        label = _label(rest[: -len(closing)])
        out.append(f'    {_full_id(node, prefix)}{opening}"{label}"{closing}')
    return "\n".join(out) + "\n" if len(out) > 1 else ""


@dataclass
class _Job:
    kind: str  # "l1" | "l15" | "l2"
    sess: Session
    run: Callable[[Any], None]  # run(client)
    tries: int = 0
    since: float = field(default_factory=time.monotonic)


class LLMWorker:
    """One background thread running the offload's LLM tasks with ``llm`` (the gateway's own
    client) or, when that is None, with the host model allowed for each task's scope."""

    def __init__(
        self, svc: OffloadService, llm: LLMClient | None, host_models: HostModels | None = None
    ) -> None:
        self.svc, self.llm, self.host_models = svc, llm, host_models
        self._q: queue.Queue[_Job | None] = queue.Queue()
        self._pending: dict[str, int] = {"l1": 0, "l15": 0, "l2": 0}
        self._errors: dict[str, str | None] = {"l1": None, "l15": None, "l2": None}
        self._deferred: dict[str, deque[_Job]] = {}
        self.kept_rules = 0  # tasks given up on: the rules' result stays
        self._l1_wait: dict[int, list[tuple[Session, OffloadRow]]] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="offload-llm", daemon=True)
        self._stop = threading.Event()

    # ---------------------------------------------------------------- plumbing

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._q.put(None)
        self._thread.join(2)

    def backlog(self) -> dict[str, int]:
        with self._lock:
            return dict(self._pending)

    def errors(self) -> dict[str, str | None]:
        with self._lock:
            return dict(self._errors)

    def serving(self) -> str | None:
        """Which LLM serves the offload now: "gateway", "host-model" or None (the rules)."""
        if self.llm is not None:
            return "gateway"
        if self.host_models is not None and self.host_models.any_registered():
            return "host-model"
        return None

    def waiting(self) -> dict[str, int]:
        """Tasks deferred until a host model is usable, and those that kept the rules."""
        with self._lock:
            return {
                "deferred": sum(len(q) for q in self._deferred.values()),
                "kept_rules": self.kept_rules,
            }

    def _client(self, scope: str) -> Any:
        if self.llm is not None:
            return self.llm
        return self.host_models.client_for(scope) if self.host_models is not None else None

    def _submit(self, kind: str, sess: Session, run: Callable[[Any], None]) -> None:
        self._queue(_Job(kind, sess, run))

    def _queue(self, job: _Job) -> None:
        with self._lock:
            self._pending[job.kind] += 1
        self._q.put(job)

    def _run(self) -> None:
        last_check = time.monotonic()
        while not self._stop.is_set():
            job: _Job | Literal[False] | None
            try:
                job = self._q.get(timeout=RETRY_CHECK_S)
            except queue.Empty:
                job = False  # no job: a turn of the retry check only
            if job is None:
                return
            if time.monotonic() - last_check >= RETRY_CHECK_S:
                last_check = time.monotonic()
                self._retry_deferred()
            if job is False:
                continue
            try:
                self._one(job)
            finally:
                with self._lock:
                    self._pending[job.kind] -= 1

    def _one(self, job: _Job) -> None:
        client = self._client(job.sess.scope.name)
        if client is None:
            self._defer(job)
            return
        hosted = isinstance(client, HostModelClient)
        before = client.entry.failures if hosted else 0
        try:
            job.run(client)
            with self._lock:
                self._errors[job.kind] = None
        except Exception as e:  # noqa: BLE001 - the no-LLM result stays; say why
            msg = f"{type(e).__name__}: {e}"[:300]
            with self._lock:
                self._errors[job.kind] = msg
            log.warning(
                "offload %s LLM task failed, keeping the rule-based result: %s", job.kind, msg
            )
            if hosted:
                if client.entry.failures == before:  # a bad answer: the client saw a reply
                    client.entry.failed(msg)
                    job.tries += 1
                # A 429, 5xx or timeout only rests the model: the task is kept however long it
                # rests (bounded by the per-scope cap and the day's budget, which each call uses).
                self._defer(job)

    def _defer(self, job: _Job) -> None:
        """Keep a task for when a host model of its scope is usable (module docstring)."""
        if self.llm is not None or self.host_models is None:
            return
        if job.kind == "l15" or job.tries >= MAX_TRIES:
            if self.host_models.candidates(job.sess.scope.name):
                with self._lock:
                    self.kept_rules += 1  # counted only where a model could have served
            return
        with self._lock:
            q = self._deferred.setdefault(job.sess.scope.name, deque())
            q.append(job)
            while len(q) > MAX_DEFERRED_PER_SCOPE:
                q.popleft()
                self.kept_rules += 1

    def _retry_deferred(self) -> None:
        with self._lock:
            scopes = list(self._deferred)
        now = time.monotonic()
        for scope in scopes:
            usable = self._client(scope) is not None
            hosts = self.host_models
            known = usable or bool(hosts is not None and hosts.candidates(scope))
            with self._lock:
                q = self._deferred.pop(scope, deque())
                again = [j for j in q if usable]
                kept = [j for j in q if not usable and (known or now - j.since < NO_MODEL_GRACE_S)]
                if known:
                    self.kept_rules += len(q) - len(again) - len(kept)
                if kept:
                    self._deferred[scope] = deque(kept)
            for job in again:
                self._queue(job)

    # ---------------------------------------------------------------- triggers

    def after_row(self, sess: Session, row: OffloadRow) -> None:
        self._submit("l1", sess, lambda llm: self._l1(llm, sess, [row.tool_call_id]))
        name = sess.state.get("active")
        if name:
            since = sess.state.setdefault("l2_new", {})
            since[name] = since.get(name, 0) + 1
            if since[name] >= self.svc.cfg.l2_null_threshold:
                since[name] = 0
                self._submit("l2", sess, lambda llm: self._l2(llm, sess, name))

    def resume(self, sess: Session) -> None:
        if self.llm is None:
            return  # host models: rows of before a restart keep the rules' summary (budget)
        todo = [r.tool_call_id for r in sess.rows if r.summary_by == "rules" and r.node_id]
        for i in range(0, len(todo), L1_BATCH):
            batch = todo[i : i + L1_BATCH]
            self._submit("l1", sess, functools.partial(self._l1, sess=sess, ids=batch))

    def judge(self, sess: Session, prompt: str) -> None:
        self._submit("l15", sess, lambda llm: self._l15(llm, sess, prompt))

    # ---------------------------------------------------------------- L1

    def _l1(self, llm: LLMClient, sess: Session, ids: list[str]) -> None:
        with sess.lock:
            rows = [r for i in ids if (r := sess.row(i)) is not None and r.summary_by == "rules"]
        if not rows:
            return
        parts = []
        for n, row in enumerate(rows, 1):
            content = self._ref_content(sess, row)
            parts.append(
                f"--- Tool Pair {n} ---\ntool_call_id: {row.tool_call_id}\n"
                f"timestamp: {row.timestamp}\nTool: {row.tool_name}\nParams: {row.tool_call[:500]}\n"
                f"Result: {content[:2000]}{'...' if len(content) > 2000 else ''}"
            )
        data, _ = llm.chat_json("offload-l1", L1_SYSTEM, "\n\n".join(parts), expect=list)
        if not isinstance(data, list):
            raise ValueError("L1 reply is not a JSON array")
        wanted = {strip_id(r.tool_call_id): r for r in rows}
        updated = 0
        with sess.lock:
            for item in data:
                if not isinstance(item, dict):
                    continue
                hit = wanted.get(strip_id(str(item.get("tool_call_id") or "")))
                summary = item.get("summary")
                if hit is None or not isinstance(summary, str) or not summary.strip():
                    continue
                hit.summary = " ".join(summary.split())[:400]
                call = item.get("tool_call")
                if isinstance(call, str) and call.strip():
                    hit.tool_call = " ".join(call.split())[:300]
                score = item.get("score")
                if isinstance(score, int | float) and not isinstance(score, bool):
                    hit.score = max(0, min(10, score))
                hit.summary_by = "llm"
                updated += 1
            if updated:
                sess.flush_rows()
        if updated < len(rows):
            raise ValueError(f"L1 reply covered {updated} of {len(rows)} tool calls")

    def _ref_content(self, sess: Session, row: OffloadRow) -> str:
        from memory_tencentdb.offload import refs
        from memory_tencentdb.offload.store import read_ref_text

        try:
            return refs.parse(read_ref_text(sess.scope.layout.root, row.result_ref))["content"]
        except (OSError, ValueError):
            return ""

    # ---------------------------------------------------------------- L1.5

    def _l15(self, llm: LLMClient, sess: Session, prompt: str) -> None:
        with sess.lock:
            active = sess.state.get("active")
            current = sess.scope.read_canvas(active)[:3000] if active else None
            files = [f for f in session_canvases(sess)[-10:] if f != active]
        metas = []
        for f in files:
            meta = canvas.parse_meta(sess.scope.read_canvas(f))
            metas.append(f"- {f}: goal {meta.task_goal!r}, updated {meta.updated_time}")
        user = (
            f"Latest user message:\n{prompt[:1000]}\n\n"
            + (f"Current task canvas ({active}):\n```mermaid\n{current}\n```\n\n" if current else
               "Current task: (none - idle)\n\n")
            + "Earlier task canvases:\n" + ("\n".join(metas) or "(none)")
        )  # fmt: skip
        data, _ = llm.chat_json("offload-l15", L15_SYSTEM, user, expect=dict)
        flags = [data.get(k) for k in ("taskCompleted", "isLongTask", "isContinuation")]
        if not all(isinstance(v, bool) for v in flags):
            raise ValueError(
                "L1.5 reply lacks the booleans taskCompleted/isLongTask/isContinuation"
            )
        completed, long_task, continuation = flags
        target = data.get("continuationMmdFile")
        with sess.lock:
            bounds = sess.state.get("boundaries") or []
            if bounds and bounds[-1].get("goal") != prompt[:300]:
                return  # a newer prompt came first; its own judgement decides
            files_now = session_canvases(sess)
            if continuation and isinstance(target, str) and target in files_now:
                if target == sess.state.get("active"):
                    return
                decision = "resume"
            elif long_task and (completed or not sess.state.get("active")):
                if sess.state.get("active") is None and sess.state.get("pending_goal") is not None:
                    return
                decision, target = "new", None
            else:
                return
            # The judgement is this prompt's: it replaces the embedding's, from the prompt on.
            # Steps recorded while the LLM was thinking move to the task it chose.
            since = bounds.pop()["row_index"] if bounds else len(sess.rows)
            self.svc.tasks.apply_decision(sess, prompt, decision, target, None, "llm")
            sess.state["boundaries"][-1]["row_index"] = since
            moved = self.svc.tasks.rehome(sess, since)
            sess.save_state()
        if moved:
            log.info("offload L1.5 moved %d steps to %s", moved, sess.state.get("active"))

    # ---------------------------------------------------------------- L2

    def _l2(self, llm: LLMClient, sess: Session, name: str) -> None:
        prefix = prefix_of(name)
        with sess.scope.lock:
            before = sess.scope.read_canvas(name)
        with sess.lock:
            rows = [r for r in sess.rows if r.node_id and r.node_id.startswith(f"{prefix}-N")]
        rows = rows[-30:]
        numbered = "\n".join(f"L{i}: {ln}" for i, ln in enumerate(before.splitlines(), 1))
        entries = "\n".join(
            f"{i}. [{r.tool_call_id}] {r.tool_call} -> {r.summary} ({r.timestamp})"
            for i, r in enumerate(rows, 1)
        )
        meta = canvas.parse_meta(before)
        user = (
            f"MMD prefix: {prefix} (all node IDs must start with {prefix}-N)\n"
            f"Task goal: {meta.task_goal}\n\nExisting canvas:\n{numbered}\n\n"
            f"Tool calls to map:\n{entries}"
        )
        data, _ = llm.chat_json("offload-l2", L2_SYSTEM, user, expect=dict)
        content = data.get("mmdContent") or data.get("mmd_content")
        mapping = data.get("nodeMapping") or data.get("node_mapping") or {}
        if not isinstance(content, str) or not isinstance(mapping, dict):
            raise ValueError("L2 reply lacks mmdContent / nodeMapping")
        body = sanitize_mermaid(content, prefix)
        if not body:
            raise ValueError("L2 canvas has no usable node lines")
        nodes = set(canvas.node_ids(body, prefix))
        fixed = {
            strip_id(str(k)): _full_id(v.strip(), prefix)
            for k, v in mapping.items()
            if isinstance(v, str) and v.strip()
        }
        fixed = {k: v for k, v in fixed.items() if v in nodes}
        if not fixed:
            raise ValueError("L2 node mapping names no node of its canvas")
        with sess.scope.lock:
            now_text = sess.scope.read_canvas(name)
            old_lines = set(before.splitlines()[1:])
            added = [ln for ln in now_text.splitlines()[1:] if ln not in old_lines]
            if set(canvas.node_ids("\n".join(added), prefix)) & nodes:
                raise ValueError("L2 canvas collides with nodes added meanwhile; kept as is")
            llm_meta = canvas.parse_meta(content)
            meta = canvas.parse_meta(now_text)
            if llm_meta.task_goal:
                meta.task_goal = llm_meta.task_goal
            if llm_meta.progress:
                meta.progress = llm_meta.progress
            text = canvas.meta_line(meta) + "\n" + body + "".join(f"{ln}\n" for ln in added)
            sess.scope.write_canvas(name, text)
        fallback = sorted(nodes, key=lambda n: int(n.split("-N")[1]))[-1]
        with sess.lock:
            for r in rows:
                new = fixed.get(strip_id(r.tool_call_id))
                if new is None and r.node_id and r.node_id not in nodes and r.node_id not in text:
                    new = fallback
                if new:
                    r.node_id = new
            sess.flush_rows()
        log.info("offload L2 redrew %s (%d nodes, %d rows mapped)", name, len(nodes), len(fixed))

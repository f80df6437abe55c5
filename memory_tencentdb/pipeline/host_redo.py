"""A host's model serves the pipeline without ever holding it back (issue 24).

With the gateway's own LLM (``TDAI_LLM_*``) a failed L1 keeps its cursor and is retried: the
operator chose that model. A host's model (llm/host_models.py) is best effort instead, so:

- **L1**: when the model fails (429, 5xx, timeout, malformed JSON, wrong shape) or rests, or
  the day's budget is spent, the rules extract the chunk now (the cursor moves, the next recall
  has the facts) and the chunk is kept here as a *redo*: its message range and the ids of the
  memories the rules stored from it.
- **Redo**: when a model allowed for the scope is usable again (checked by the timer every few
  seconds, and before every L1 run of the scope), the chunk is extracted again by the model and
  arbitrated with the model against the rules' memories (they are always in the pool): the
  model keeps, updates or merges them; nothing is stored twice and nothing is dropped without
  the model's decision. A redo that fails stays for later. Redos live in memory only: a gateway
  that exits first leaves the rules' memories, which is what a no-LLM gateway stores anyway.
- **L2 / persona**: a failed model run is run again at once with the rules (the scenes and the
  persona are rewritten whole by the next model run anyway).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory_tencentdb.pipeline.l1 import WINDOW_NEW, Chunk, StageFailure, next_chunk

if TYPE_CHECKING:
    from memory_tencentdb.llm.host_models import HostModelClient
    from memory_tencentdb.pipeline.scheduler import Pipeline
    from memory_tencentdb.store.base import MemoryStore

log = logging.getLogger("memory_tencentdb.pipeline")

MAX_REDO_PER_SCOPE = 200  # ranges kept per scope; older ones keep the rules' result
MAX_REDO_PER_RUN = 10


@dataclass
class Redo:
    session_key: str
    from_cursor: int  # exclusive
    to_seq: int  # inclusive
    rule_ids: list[str]


class HostRedo:
    """The redo list per scope, and the model-or-rules choice for each host-model task."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.p = pipeline
        self._redo: dict[str, deque[Redo]] = {}
        self._lock = threading.Lock()
        self.done = 0
        self.dropped = 0

    # ---------------------------------------------------------------- L1

    def plan(self, chunk: Chunk, scene: str, cursor: int, llm: HostModelClient) -> dict[str, Any]:
        """The model's plan for ``chunk``, or the rules' plan (kept for a redo) when it fails."""
        before = llm.entry.failures
        try:
            with self.p._llm_lock:
                return self.p.l1.plan(chunk, scene)
        except StageFailure as e:
            if llm.entry.failures == before:  # a wrong shape: the client saw a good reply
                llm.entry.failed(str(e))
            log.warning(
                "L1 for %s/%s: the host model failed (%s); the rules serve now, redo later",
                chunk.scope,
                chunk.session_key,
                e,
            )
        self.p.l1.llm = None
        plan = self.p.l1.plan(chunk, scene)
        self._keep(chunk, cursor, plan)
        return plan

    def after_rules(self, chunk: Chunk, cursor: int, plan: dict[str, Any]) -> None:
        """The rules served a chunk while an allowed model rests or the budget is spent."""
        hm = self.p.host_models
        if self.p.llm is None and hm is not None and hm.waiting_for(chunk.scope):
            self._keep(chunk, cursor, plan)

    def _keep(self, chunk: Chunk, cursor: int, plan: dict[str, Any]) -> None:
        if not chunk.new:
            return
        ids = [op["record"]["id"] for op in plan.get("ops", [])]
        with self._lock:
            q = self._redo.setdefault(chunk.scope, deque())
            q.append(Redo(chunk.session_key, cursor, chunk.to_seq, ids))
            while len(q) > MAX_REDO_PER_SCOPE:
                q.popleft()
                self.dropped += 1

    def run(self, scope: str) -> int:
        """Redo the scope's kept chunks with its model while one is usable; memories written."""
        written = 0
        for _ in range(MAX_REDO_PER_RUN):
            with self._lock:
                q = self._redo.get(scope)
                item = q[0] if q else None
            if item is None or self.p._stopping:
                return written
            llm = self.p.llm_for(scope)
            if llm is None or self.p.llm is not None:
                return written
            chunk = _range_chunk(self.p.store, scope, item)
            prior = [
                m
                for m in self.p.store.memories_by_ids(item.rule_ids)
                if m.scope == scope and m.status == "active"
            ]
            before = llm.entry.failures
            self.p.l1.llm = llm
            try:
                if chunk is not None:
                    with self.p._llm_lock:
                        plan = self.p.l1.plan(chunk, "", prior=prior)
                    written += self.p.l1.apply(plan, scope)
            except StageFailure as e:
                if llm.entry.failures == before:
                    llm.entry.failed(str(e))
                log.warning("redo of L1 for %s/%s failed, kept: %s", scope, item.session_key, e)
                return written
            with self._lock:
                if q and q[0] is item:
                    q.popleft()
                if not q:
                    self._redo.pop(scope, None)
                self.done += 1
            log.info(
                "L1 for %s/%s redone with the host model (%d rule memories arbitrated)",
                scope,
                item.session_key,
                len(prior),
            )
        return written

    def wake(self) -> None:
        """Timer (holding the pipeline's condition): queue an L1 run for a scope whose kept
        chunks can be redone now (its model answers again)."""
        with self._lock:
            pending = [(scope, q[0].session_key) for scope, q in self._redo.items() if q]
        for scope, key in pending:
            if any(s.scope == scope and (s.queued or s.running) for s in self.p._sessions.values()):
                continue
            if self.p.llm_for(scope) is not None:
                self.p._enqueue_l1(self.p._session(scope, key))

    # ---------------------------------------------------------------- L2 / L3

    def stage(self, runner: Any, scope: str, fn: Callable[[], Any]) -> Any:
        """Run an L2 or persona step with the scope's LLM; a host model's failure runs it again
        with the rules at once."""
        llm = self.p.llm_for(scope)
        runner.llm = llm
        if llm is None or self.p.llm is not None:
            return fn()
        before = llm.entry.failures
        try:
            return fn()
        except StageFailure as e:
            if llm.entry.failures == before:
                llm.entry.failed(str(e))
            log.warning(
                "%s for %s: the host model failed (%s); the rules serve",
                type(runner).__name__,
                scope,
                e,
            )
        runner.llm = None
        return fn()

    # ---------------------------------------------------------------- health

    def status(self) -> dict[str, Any]:
        with self._lock:
            waiting = sum(len(q) for q in self._redo.values())
            scopes = len(self._redo)
        return {"waiting": waiting, "scopes": scopes, "done": self.done, "dropped": self.dropped}

    def usage(self) -> dict[str, Any]:
        hm = self.p.host_models
        if hm is None:
            return {}
        total: dict[str, dict[str, int]] = {}
        for entry in hm.entries():
            if entry.client is None:
                continue
            for task, u in entry.client.usage_summary().items():
                t = total.setdefault(task, dict.fromkeys(u, 0))
                for k, v in u.items():
                    t[k] += v
        return total


def _range_chunk(store: MemoryStore, scope: str, item: Redo) -> Chunk | None:
    """The kept range as a chunk again (its later messages left out)."""
    chunk = next_chunk(store, scope, item.session_key, item.from_cursor, window=WINDOW_NEW)
    if chunk is None:
        return None
    rows = [r for r in chunk.rows if r.seq <= item.to_seq]
    new = [r for r in chunk.new if r.seq <= item.to_seq]
    if not rows or not new:
        return None
    return Chunk(scope, item.session_key, rows, new, chunk.background, rows[-1].seq)

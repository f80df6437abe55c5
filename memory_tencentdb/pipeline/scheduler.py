"""When L1, L2 and L3 run: the pipeline's scheduler.

Per session (scope + session key):

- every capture counts one conversation; L1 runs when the count reaches the warm-up threshold
  (1, then 2, then 4, then ``everyNConversations``), or after ``l1IdleTimeoutSeconds`` without a
  capture, or at session end (``flush``, which waits for it, bounded);
- a failed run keeps its cursor and is retried with exponential backoff (never given up: the
  messages stay pending and ``/health`` shows the error).

These per-session rules are pure functions in ``pipeline/l1_schedule.py`` (the per-scope L2/L3
timers below in ``pipeline/l2_schedule.py``); this module holds the threads, queues and database
writes around them.

Per scope: L2 runs ``l2DelayAfterL1Seconds`` after an L1 that stored memories, but not sooner
than ``l2MinIntervalSeconds`` after the previous L2; after each L2 a fallback run is armed
``l2MaxIntervalSeconds`` later, dropped when the scope has been inactive for longer than
``sessionActiveWindowHours``. L3 is checked after each L2.

Three serial workers (L1; L2 then L3) and one timer thread. All progress lives in the database
(``pipeline/state.py``); what is kept in memory here is only how soon to do what, and it is
rebuilt from the database at start, so a killed gateway resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any

from memory_tencentdb.llm import LLMClient
from memory_tencentdb.pipeline import l1_schedule, l2_schedule, state
from memory_tencentdb.pipeline.host_redo import HostRedo
from memory_tencentdb.pipeline.l1 import L1Extractor, StageFailure, next_chunk
from memory_tencentdb.pipeline.l1_schedule import L1Policy, L1Session
from memory_tencentdb.pipeline.l2 import L2Result, L2Runner
from memory_tencentdb.pipeline.l2_schedule import L2Policy, L2Scope
from memory_tencentdb.pipeline.persona import PersonaRunner
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.store.common import utc_iso
from memory_tencentdb.store.records import L0Message, ScopeState, SessionBacklog, SessionState
from memory_tencentdb.vectorizer import Vectorizer, mark_background

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.pipeline")

MAX_CHUNKS_PER_RUN = 20
FLUSH_TIMEOUT_SECONDS = 20.0
# On a database shared with other gateways: how often to look for work they left behind.
SHARED_POLL_SECONDS = 2.0
L2_CLAIM = "\x1fl2"  # the claim key of a scope's L2 run (no session key starts with US)
# A scope recalled this recently is in an interactive session: its captures are extracted at
# once instead of in warm-up batches (see Pipeline.expedite).
RECALL_ACTIVE_SECONDS = 600.0
BUILTIN_SKIP = (
    re.compile(r":memory-scene-extract-"),
    re.compile(r":subagent:"),
    re.compile(r"^temp:"),
)


@dataclass
class StageStats:
    runs: int = 0
    failures: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
    last_success_at: str | None = None
    failing: bool = False

    def ok(self) -> None:
        self.runs += 1
        self.failing = False
        self.last_success_at = _now_iso()

    def fail(self, error: str) -> None:
        self.failures += 1
        self.failing = True
        self.last_error = error[:500]
        self.last_error_at = _now_iso()

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "failures": self.failures,
            "failing": self.failing,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_success_at": self.last_success_at,
        }


def _now_iso() -> str:
    return utc_iso(timespec="seconds")


class Pipeline:
    def __init__(
        self, store: MemoryStore, vectorizer: Vectorizer, settings: Settings, tz: tzinfo
    ) -> None:
        self.store = store
        self.vectorizer = vectorizer
        self.settings = settings
        self.cfg = settings.memory.pipeline
        self.tz = tz
        self.llm = LLMClient.from_settings(settings.llm) if settings.llm_configured else None
        self.l1 = L1Extractor(store, vectorizer, settings, tz, self.llm)
        self.l2 = L2Runner(store, settings, tz, self.llm)
        self.l3 = PersonaRunner(store, settings, self.llm)
        self.stats = {s: StageStats() for s in ("l1", "l2", "l3")}
        # Without an LLM of its own: the hosts' models, by scope (set by the engine).
        self.host_models: Any = None
        self.redo = HostRedo(self)
        self.memories_stored = 0
        self._cv = threading.Condition()
        self._llm_lock = threading.Lock()  # one LLM call at a time across stages
        self._sessions: dict[tuple[str, str], L1Session] = {}
        self._scopes: dict[str, L2Scope] = {}
        self._l1_queue: deque[tuple[str, str]] = deque()
        self._l2_queue: deque[tuple[str, str]] = deque()  # (stage, scope)
        self._last_recall: dict[str, float] = {}  # scope -> monotonic time of its last recall
        self._stopping = False
        self._started = False
        self._threads: list[threading.Thread] = []
        # excludeAgents globs: "*" only, matched anywhere in the session key (as the original).
        self._exclude = [
            re.compile(re.escape(g).replace(r"\*", ".*"))
            for g in settings.memory.capture.exclude_agents
        ]

    # ------------------------------------------------------------------ lifecycle

    @property
    def mode(self) -> str:
        if self.llm is not None:
            return "llm"
        return "host-model" if self.host_models and self.host_models.any_registered() else "rules"

    def llm_for(self, scope: str) -> Any:
        """The LLM for one task of ``scope``: the gateway's own, else a host's model allowed
        for the scope (llm/host_models.py), else None (the rules)."""
        if self.llm is not None:
            return self.llm
        return self.host_models.client_for(scope) if self.host_models is not None else None

    @property
    def enabled(self) -> bool:
        return bool(self.settings.memory.extraction.enabled)

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.enabled:
            try:
                with self._cv:
                    self._recover()
            except Exception:  # noqa: BLE001 - a broken state must not keep the gateway down
                log.exception("pipeline recovery failed; new captures are still processed")
        loops = [
            ("pipeline-timer", self._timer_loop),
            ("pipeline-l1", self._l1_loop),
            ("pipeline-l2", self._l2_loop),
        ]
        if self.enabled and self.store.shared:
            loops.append(("pipeline-shared", self._shared_loop))
        for name, target in loops:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("pipeline started (%s mode)", self.mode)

    def close(self, timeout: float = 2.0) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self.llm is not None:
            self.llm.close()

    def _recover(self) -> None:
        """Rebuild the schedule from the database: pending messages, half-done runs, timers."""
        now, mono = time.time(), time.monotonic()
        for note in state.reconcile(
            self.store, lambda scope: bool(self.l2.scene_store(scope).load())
        ):
            log.info("pipeline state: %s", note)
        self._schedule_backlog(state.backlog_sessions(self.store), now, mono)
        for row in state.scopes_with_state(self.store):
            sc = self._scope(row.scope, row)
            if row.l2_plan:
                self._enqueue_l2(sc, "l2")
            elif row.persona_request:
                self._enqueue_l2(sc, "l3")
        n = len(self._l1_queue)
        if n or self._sessions:
            log.info(
                "pipeline resumed: %d session(s) pending, %d queued now", len(self._sessions), n
            )

    def _schedule_backlog(
        self, backlog: list[SessionBacklog], now: float, mono: float, known: bool = True
    ) -> None:
        """Queue (or arm the idle timer of) sessions with messages past their cursor.

        ``known=False`` (the shared-database poll) leaves alone the sessions this gateway is
        already running, queueing or timing."""
        for b in backlog:
            if self._skipped(b.session_key):
                continue
            s = self._sessions.get((b.scope, b.session_key))
            if not known and s is not None and (s.queued or s.running or s.idle_at is not None):
                continue
            st = state.get_session(self.store, b.scope, b.session_key)
            s = self._session(b.scope, b.session_key, st)
            last = _epoch(b.last_recorded_at) or now
            if l1_schedule.backlog_found(
                s, b.pending, b.user_messages, bool(st.plan), last, now, mono, self._policy()
            ):
                self._enqueue_l1(s)

    def _shared_loop(self) -> None:
        """Several gateways on one database: find the work another one left (it stopped or was
        killed mid-run, or its captures wait for an idle timer it will never fire)."""
        while True:
            with self._cv:
                if self._stopping:
                    return
                self._cv.wait(SHARED_POLL_SECONDS)
                if self._stopping:
                    return
            try:
                backlog = state.backlog_sessions(self.store)
                with self._cv:
                    self._schedule_backlog(backlog, time.time(), time.monotonic(), known=False)
            except Exception as e:  # noqa: BLE001 - the database may be briefly unreachable
                log.warning("pipeline: could not read the shared backlog: %s", e)

    # ------------------------------------------------------------------ state helpers

    def _session(self, scope: str, key: str, st: SessionState | None = None) -> L1Session:
        s = self._sessions.get((scope, key))
        if s is None:
            if st is None:
                st = state.get_session(self.store, scope, key)
            threshold = st.warmup_threshold if self.cfg.enable_warmup else 0
            s = L1Session(scope, key, threshold=threshold, last_error=st.last_error or None)
            self._sessions[(scope, key)] = s
        return s

    def _scope(self, scope: str, row: ScopeState | None = None) -> L2Scope:
        sc = self._scopes.get(scope)
        if sc is None:
            row = row or state.get_scope(self.store, scope)
            sc = L2Scope(
                scope,
                due=float(row.l2_due_at or 0),
                due_kind="delay" if row.l2_due_at else "",
                last_run=float(row.l2_last_run or 0),
                last_active=float(row.last_active or 0),
            )
            self._scopes[scope] = sc
        return sc

    def _policy(self) -> L1Policy:
        return L1Policy(
            every_n_conversations=self.cfg.every_n_conversations,
            enable_warmup=self.cfg.enable_warmup,
            idle_timeout_seconds=self.cfg.l1_idle_timeout_seconds,
        )

    def _threshold(self, s: L1Session) -> int:
        return l1_schedule.threshold(s, self._policy())

    def _skipped(self, session_key: str) -> bool:
        if any(p.search(session_key) for p in BUILTIN_SKIP):
            return True
        return any(p.search(session_key) for p in self._exclude)

    def _enqueue_l1(self, s: L1Session, front: bool = False) -> None:
        s.idle_at = None
        if s.queued or self._stopping:
            return
        s.queued = True
        item = (s.scope, s.key)
        if front:
            self._l1_queue.appendleft(item)
        else:
            self._l1_queue.append(item)
        self._cv.notify_all()

    def _enqueue_l2(self, sc: L2Scope, stage: str) -> None:
        if stage in sc.queued or self._stopping:
            return
        sc.queued.add(stage)
        self._l2_queue.append((stage, sc.scope))
        self._cv.notify_all()

    def _l2_policy(self) -> L2Policy:
        return L2Policy(
            delay_after_l1_seconds=self.cfg.l2_delay_after_l1_seconds,
            min_interval_seconds=self.cfg.l2_min_interval_seconds,
            max_interval_seconds=self.cfg.l2_max_interval_seconds,
            active_window_hours=self.cfg.session_active_window_hours,
            idle_timeout_seconds=self.cfg.l1_idle_timeout_seconds,
        )

    def _backoff(self, failures: int) -> float:
        return l1_schedule.backoff(failures, self.cfg.l1_idle_timeout_seconds)

    # ------------------------------------------------------------------ capture / session end

    def on_capture(
        self, scope: str, session_key: str, session_id: str, rows: list[L0Message]
    ) -> None:
        """Capture listener: count the conversation, run L1 now or arm the idle timer."""
        if not rows or not self.enabled or self._skipped(session_key):
            return
        st = None
        if (scope, session_key) not in self._sessions:
            st = state.get_session(self.store, scope, session_key)
        with self._cv:
            s = self._session(scope, session_key, st)
            recalling = self._recalling(scope)
            now = l1_schedule.captured(
                s, len(rows), time.time(), time.monotonic(), recalling, self._policy()
            )
            sc = self._scope(scope) if scope in self._scopes else None
            if sc is not None:
                sc.last_active = s.last_active
            if now:
                self._enqueue_l1(s)
            self._cv.notify_all()

    def _recalling(self, scope: str) -> bool:
        """Whether a host recalls for this scope (a recall in the last few minutes): its next
        turn will ask, so extract this turn now, while the user reads and types."""
        at = self._last_recall.get(scope)
        return (
            at is not None
            and self.settings.memory.pipeline.extract_before_recall
            and time.monotonic() - at < RECALL_ACTIVE_SECONDS
        )

    def flush(self, scope: str, session_key: str, timeout: float = FLUSH_TIMEOUT_SECONDS) -> bool:
        """Session end: extract whatever the session has pending and wait for it (bounded).

        True when nothing is left pending; False on timeout or when the run failed (it is then
        retried in the background like any failed run).
        """
        if not self.enabled or self._skipped(session_key):
            return True
        deadline = time.monotonic() + timeout
        with self._cv:
            s = self._session(scope, session_key)
            s.idle_at = None
        while True:
            pending = self._has_pending(scope, session_key)
            with self._cv:
                if not pending and not s.queued and not s.running:
                    return True
                if pending and not s.queued and not s.running:
                    s.retry_at = None
                    self._enqueue_l1(s, front=True)
                # Checked after queuing, so timeout=0 means "start it, don't wait".
                if time.monotonic() >= deadline or self._stopping:
                    return False
                target = s.runs_done + (1 if s.running or s.queued else 0)
                while s.runs_done < target and time.monotonic() < deadline:
                    self._cv.wait(min(0.5, max(0.01, deadline - time.monotonic())))
                if s.runs_done >= target and not s.last_ok:
                    return False

    def scenes_stale(self, scope: str) -> None:
        """Memories of ``scope`` were forgotten or corrected: run L2 (then L3) for it soon."""
        with self._cv:
            self._l2_after_l1(self._scope(scope))

    def _has_pending(self, scope: str, key: str) -> bool:
        st = state.get_session(self.store, scope, key)
        if st.plan:
            return True
        return next_chunk(self.store, scope, key, st.l1_cursor, window=1) is not None

    # ------------------------------------------------------------------ timer

    def _timer_loop(self) -> None:
        with self._cv:
            while not self._stopping:
                mono, wall = time.monotonic(), time.time()
                wake = mono + 5.0
                for s in list(self._sessions.values()):
                    run, nxt = l1_schedule.timers_fired(s, mono)
                    if run:
                        self._enqueue_l1(s)
                    if nxt is not None:
                        wake = min(wake, nxt)
                    if l1_schedule.forgettable(s, wall):
                        self._sessions.pop((s.scope, s.key), None)  # forget idle sessions
                self.redo.wake()
                for sc in list(self._scopes.values()):
                    l2_due, l3_due, at = l2_schedule.timers_fired(sc, wall)
                    if l2_due:
                        self._fire_l2(sc, wall)
                    if l3_due:
                        self._enqueue_l2(sc, "l3")
                    if at is not None:
                        wake = min(wake, mono + (at - wall))
                self._cv.wait(max(0.01, wake - time.monotonic()))

    def _fire_l2(self, sc: L2Scope, wall: float) -> None:
        if l2_schedule.fire(sc, wall, self._l2_policy()):
            self._enqueue_l2(sc, "l2")
        else:
            hours = self.cfg.session_active_window_hours
            log.info("L2 for scope %s not re-armed: inactive for over %sh", sc.scope, hours)

    def _l2_after_l1(self, sc: L2Scope, now: float | None = None) -> float:
        """New memories: arm L2 (l2_schedule.after_l1); returns when it is due."""
        now = time.time() if now is None else now
        if l2_schedule.after_l1(sc, now, self._l2_policy()):
            self._cv.notify_all()
        return sc.due

    # ------------------------------------------------------------------ L1 worker

    def _l1_loop(self) -> None:
        mark_background()  # its model calls take turns with the embedding fill loop's
        while True:
            with self._cv:
                while not self._l1_queue and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                scope, key = self._l1_queue.popleft()
                s = self._session(scope, key)
                counted, seen = l1_schedule.run_started(s)
            ok, error, stored, truncated = True, None, 0, False
            started = time.monotonic()
            try:
                stored, more = self._run_l1(s)
                log.info(
                    "L1 for %s/%s: %d memories written (%.0f ms)",
                    scope,
                    key,
                    stored,
                    (time.monotonic() - started) * 1000,
                )
            except Exception as e:  # noqa: BLE001 - every failure is retried, never fatal
                ok, more = False, False
                error = str(e) if isinstance(e, StageFailure) else f"{type(e).__name__}: {e}"
                truncated = isinstance(e, StageFailure) and e.truncated
                if not isinstance(e, StageFailure):
                    log.exception("L1 run for %s/%s failed", scope, key)
            writes: list[Any] = []
            with self._cv:
                if ok:
                    self.stats["l1"].ok()
                    done = l1_schedule.run_succeeded(
                        s, counted, seen, more, time.monotonic(), self._policy()
                    )
                    if done.warmup_threshold is not None:
                        writes.append(
                            partial(
                                state.update_session,
                                self.store,
                                scope,
                                key,
                                warmup_threshold=done.warmup_threshold,
                            )
                        )
                    if stored:
                        self.memories_stored += stored
                        sc = self._scope(scope)
                        sc.last_active = max(sc.last_active, s.last_active)
                        due = self._l2_after_l1(sc)
                        writes.append(partial(state.update_scope, self.store, scope, l2_due_at=due))
                    if done.enqueue:
                        self._enqueue_l1(s)
                else:
                    self.stats["l1"].fail(f"{scope}/{key}: {error}")
                    delay = l1_schedule.run_failed(
                        s, error, truncated, time.monotonic(), self._policy()
                    )
                    log.warning(
                        "L1 for %s/%s failed (attempt %d), retrying in %.0fs: %s",
                        scope,
                        key,
                        s.failures,
                        delay,
                        error,
                    )
                    n_fail = s.failures
                    writes.append(
                        partial(
                            state.update_session,
                            self.store,
                            scope,
                            key,
                            failures=n_fail,
                            last_error=error or "",
                        )
                    )
                self._cv.notify_all()
            for write in writes:
                try:
                    write()
                except Exception:  # noqa: BLE001 - bookkeeping only; the cursor is safe
                    log.exception("could not record pipeline state")

    def _run_l1(self, s: L1Session) -> tuple[int, bool]:
        """Process pending chunks of one session; returns (memories stored, more pending).

        The session is claimed in the store first: on a database shared by several gateways
        only the one holding the claim extracts it (the state is read after claiming)."""
        with self.store.claim_session(s.scope, s.key) as held:
            if not held:
                log.info("L1 for %s/%s: another gateway is extracting it", s.scope, s.key)
                return 0, False
            return self._run_l1_claimed(s)

    def _run_l1_claimed(self, s: L1Session) -> tuple[int, bool]:
        st = state.get_session(self.store, s.scope, s.key)
        cursor, scene = st.l1_cursor, st.last_scene_name
        stored = 0
        plan = state.load_plan(st.plan)
        if plan is not None:  # a run that was interrupted after deciding: replay it
            found = self.store.l0_seq(plan.get("to_id", ""))
            if found is not None:  # sequence numbers change on a rebuild; record ids do not
                plan["to_rowid"] = found
            stored += self._apply(s, plan, cursor)
            cursor, scene = plan["to_rowid"], plan.get("scene", scene)
        stored += self.redo.run(s.scope)
        for _ in range(MAX_CHUNKS_PER_RUN):
            if self._stopping:
                return stored, True
            chunk = next_chunk(self.store, s.scope, s.key, cursor, window=s.window)
            if chunk is None:
                return stored, False
            force_rules = s.window == 1 and s.failures >= 3
            llm = self.llm_for(s.scope)
            self.l1.llm = llm
            if llm is not None and self.llm is None:  # a host's model: never blocks the rules
                plan = self.redo.plan(chunk, scene, cursor, llm)
            elif llm is not None and not force_rules:
                with self._llm_lock:
                    plan = self.l1.plan(chunk, scene)
            elif force_rules:
                plan = self._rules_plan(chunk, scene)
            else:
                plan = self.l1.plan(chunk, scene)
                self.redo.after_rules(chunk, cursor, plan)
            if plan["ops"]:
                state.save_plan(self.store, s.scope, s.key, plan)
            stored += self._apply(s, plan, cursor, rows=len(chunk.rows))
            cursor, scene = plan["to_rowid"], plan["scene"]
        return stored, True

    def _rules_plan(self, chunk: Any, scene: str) -> dict[str, Any]:
        """A message the LLM keeps choking on (truncated output on its own): use the rules."""
        log.warning(
            "L1 for %s/%s: falling back to rules for one message", chunk.scope, chunk.session_key
        )
        llm, self.l1.llm = self.l1.llm, None
        try:
            return self.l1.plan(chunk, scene)
        finally:
            self.l1.llm = llm

    def _apply(
        self, s: L1Session, plan: dict[str, Any], cursor: int, rows: int | None = None
    ) -> int:
        n = self.l1.apply(plan, s.scope)
        state.complete_chunk(
            self.store,
            s.scope,
            s.key,
            plan["to_rowid"],
            plan.get("to_id", ""),
            n,
            plan.get("scene", ""),
            time.time(),
        )
        if rows is None:  # a replayed plan: count what it covered
            rows = self.store.count_l0_between(s.scope, s.key, cursor, plan["to_rowid"])
        with self._cv:
            s.pending = max(0, s.pending - rows)
        return n

    # ------------------------------------------------------------------ L2 / L3 worker

    def _l2_loop(self) -> None:
        mark_background()
        while True:
            with self._cv:
                while not self._l2_queue and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                stage, scope = self._l2_queue.popleft()
                sc = self._scope(scope)
                sc.queued.discard(stage)
                sc.running = stage
            try:
                if stage == "l2":
                    self._run_l2(sc)
                else:
                    self._run_l3(sc)
            finally:
                with self._cv:
                    sc.running = None
                    self._cv.notify_all()

    def _run_l2(self, sc: L2Scope) -> None:
        try:
            with (
                self.store.claim_session(sc.scope, L2_CLAIM) as held,
                self._llm_lock,
            ):
                # Another gateway folding this scope now: its run covers these memories.
                lenient = sc.failures >= 3
                result = (
                    self.redo.stage(self.l2, sc.scope, lambda: self.l2.run(sc.scope, lenient))
                    if held
                    else L2Result()
                )
        except Exception as e:  # noqa: BLE001
            error = str(e) if isinstance(e, StageFailure) else f"{type(e).__name__}: {e}"
            if not isinstance(e, StageFailure):
                log.exception("L2 run for %s failed", sc.scope)
            with self._cv:
                self.stats["l2"].fail(f"{sc.scope}: {error}")
                delay = l2_schedule.l2_failed(sc, time.time(), self._l2_policy())
                self._cv.notify_all()
            log.warning(
                "L2 for %s failed (attempt %d), retrying in %.0fs: %s",
                sc.scope,
                sc.failures,
                delay,
                error,
            )
            try:
                state.update_scope(
                    self.store,
                    sc.scope,
                    l2_failures=sc.failures,
                    last_error=error,
                    l2_due_at=sc.due,
                )
            except Exception:  # noqa: BLE001
                log.exception("could not record the L2 failure")
            return
        wall = time.time()
        with self._cv:
            self.stats["l2"].ok()
            l2_schedule.l2_succeeded(sc, wall, bool(result.batches), self._l2_policy())
            self._cv.notify_all()
        state.update_scope(self.store, sc.scope, l2_last_run=sc.last_run, l2_due_at=sc.due)
        if result.batches:
            log.info(
                "L2 for %s: %d memories into scenes (%s)",
                sc.scope,
                result.processed,
                "; ".join(result.log),
            )
            self._run_l3(sc)

    def _run_l3(self, sc: L2Scope) -> None:
        try:
            ss = self.l2.scene_store(sc.scope)
            with self._llm_lock:
                reason = self.redo.stage(self.l3, sc.scope, lambda: self.l3.run(sc.scope, ss))
        except Exception as e:  # noqa: BLE001
            error = str(e) if isinstance(e, StageFailure) else f"{type(e).__name__}: {e}"
            if not isinstance(e, StageFailure):
                log.exception("L3 run for %s failed", sc.scope)
            with self._cv:
                self.stats["l3"].fail(f"{sc.scope}: {error}")
                l2_schedule.l3_failed(sc, time.time(), self._l2_policy())
                self._cv.notify_all()
            return
        with self._cv:
            sc.l3_failures = 0
            if reason is not None:
                self.stats["l3"].ok()
            else:
                self.stats["l3"].failing = False

    # ------------------------------------------------------------------ recall freshness

    def expedite(self, scope: str) -> bool:
        """A recall is about to run for ``scope``: extract what its sessions captured but the
        warm-up/idle schedule has not reached yet, first in the queue, so a fact stated in the
        previous turn (or the previous one-shot session) can be recalled now. Captures alone
        (imports, hosts that never recall) keep the batched schedule. True if L1 is in flight."""
        if not self.enabled or not self.settings.memory.pipeline.extract_before_recall:
            return self.in_flight(scope)
        with self._cv:
            self._last_recall[scope] = time.monotonic()
            for s in list(self._sessions.values()):
                if s.scope != scope or s.queued or s.running or s.retry_at is not None:
                    continue
                if s.pending > 0:
                    self._enqueue_l1(s, front=True)
            return self._in_flight_locked(scope)

    def in_flight(self, scope: str) -> bool:
        with self._cv:
            return self._in_flight_locked(scope)

    def _in_flight_locked(self, scope: str) -> bool:
        return any(s.scope == scope and (s.queued or s.running) for s in self._sessions.values())

    def wait_scope(self, scope: str, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no L1 run of ``scope`` is queued or running; its
        new memories are embedded inside the run. True when none is left in flight."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._in_flight_locked(scope):
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping:
                    return False
                self._cv.wait(min(left, 0.25))
        return True

    # ------------------------------------------------------------------ drain

    def hurry(self) -> None:
        """Before exit: run now what waits for a timer (idle L1, delayed L2), so a gateway that
        stops after its last host still turns the session into memories, scenes and a persona.

        Failed runs keep their backoff (no tight retry loop against a failing LLM). Called
        repeatedly while draining, because an L1 run that stores memories arms a new L2 delay.
        """
        if not self.enabled:
            return
        with self._cv:
            sessions = list(self._sessions.values())
            scopes = list(self._scopes.values())
            for s in sessions:
                if s.queued or s.running or s.retry_at is not None:
                    continue
                if s.pending > 0 or s.idle_at is not None:
                    self._enqueue_l1(s)
            # L2 waits for the scope's L1 runs, so it sees all of the session's memories.
            extracting = {s.scope for s in sessions if s.queued or s.running or s.pending > 0}
        for sc in scopes:
            with self._cv:
                if sc.queued or sc.running or sc.due_kind == "retry" or sc.scope in extracting:
                    continue
                armed_delay = sc.due and sc.due_kind == "delay"
            waiting = 0
            if not armed_delay:
                with contextlib.suppress(Exception):
                    cursor = state.get_scope(self.store, sc.scope).l2_cursor
                    waiting = state.count_pending_l1(self.store, sc.scope, cursor)
            if armed_delay or waiting:
                with self._cv:
                    if sc.due_kind != "retry":
                        sc.due, sc.due_kind = 0.0, ""
                    self._enqueue_l2(sc, "l2")

    def busy(self, until: float | None = None) -> list[str]:
        """What is still pending or running (empty when a drain may exit). With ``until`` (a
        monotonic deadline), work waiting for a retry due after it does not count: a drain
        cannot finish it, and waiting for it would only delay the exit."""
        if not self.enabled:
            return []
        wall_until = None if until is None else time.time() + (until - time.monotonic())

        def backing_off(at: float, limit: float | None) -> bool:
            return bool(at) and limit is not None and at > limit

        out = []
        with self._cv:
            l1 = [
                s
                for s in self._sessions.values()
                if s.queued
                or s.running
                or (
                    (s.pending > 0 or s.retry_at is not None)
                    and not backing_off(s.retry_at or 0.0, until)
                )
            ]
            if l1:
                out.append(f"L1 for {len(l1)} session(s)")
            skip = {
                sc.scope
                for sc in self._scopes.values()
                if not (sc.queued or sc.running)
                and (
                    (sc.due_kind == "retry" and backing_off(sc.due, wall_until))
                    or backing_off(sc.l3_retry_at, wall_until)
                )
            }
            l2 = [
                sc.scope
                for sc in self._scopes.values()
                if sc.scope not in skip
                and (sc.queued or sc.running or sc.due_kind in ("delay", "retry") or sc.l3_retry_at)
            ]
        for sc in list(self._scopes.values()):
            if sc.scope in l2 or sc.scope in skip:
                continue
            with contextlib.suppress(Exception):
                cursor = state.get_scope(self.store, sc.scope).l2_cursor
                if state.count_pending_l1(self.store, sc.scope, cursor):
                    l2.append(sc.scope)
        if l2:
            out.append(f"L2/persona for {len(l2)} scope(s)")
        return out

    # ------------------------------------------------------------------ health

    def status(self) -> dict[str, Any]:
        with self._cv:
            sessions = list(self._sessions.values())
            scopes = list(self._scopes.values())
            l1_running = next((f"{s.scope}/{s.key}" for s in sessions if s.running), None)
            l2_running = next((f"{sc.running}:{sc.scope}" for sc in scopes if sc.running), None)
            backlog = {
                "l1_sessions": sum(1 for s in sessions if s.pending > 0 or s.queued or s.running),
                "l1_messages": sum(max(0, s.pending) for s in sessions),
                "l1_queued": len(self._l1_queue),
                "l1_retrying": sum(1 for s in sessions if s.retry_at is not None),
                "l2_queued": len(self._l2_queue),
                "l2_armed": sum(1 for sc in scopes if sc.due),
            }
            stages = {k: v.as_json() for k, v in self.stats.items()}
        l2_pending = 0
        for sc in scopes:
            with contextlib.suppress(Exception):  # health must answer
                l2_pending += state.count_pending_l1(
                    self.store, sc.scope, state.get_scope(self.store, sc.scope).l2_cursor
                )
        backlog["l2_memories"] = l2_pending
        idle = (
            backlog["l1_messages"] == 0
            and not backlog["l1_queued"]
            and not backlog["l2_queued"]
            and l1_running is None
            and l2_running is None
        )
        stages["dedup"] = {"last_error": self.l1.last_dedup_error}
        return {
            "enabled": self.enabled,
            "mode": self.mode,
            "idle": idle,
            "backlog": backlog,
            "running": {"l1": l1_running, "l2": l2_running},
            "stages": stages,
            "memories_stored": self.memories_stored,
            "llm_usage": self.llm.usage_summary() if self.llm else self.redo.usage(),
            "host_model_redo": self.redo.status(),
        }

    def degraded(self) -> list[str]:
        out = []
        for stage, st in self.stats.items():
            if st.failing and st.last_error:
                out.append(f"pipeline {stage} failing, retrying: {st.last_error}")
        return out


def _epoch(iso: str) -> float:
    if not iso:
        return 0.0
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0

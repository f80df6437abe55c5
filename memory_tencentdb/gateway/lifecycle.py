"""How the gateway stops: drain first, then exit.

A host that auto-started the gateway stops it when it exits, often seconds after the last turn,
while the L1 extraction, the memories' embeddings, L2 scenes and persona of that turn are still
waiting for their timers. Stopping then would leave the next session without them. So every stop
is a drain (the messages' own embedding backlog is not waited for: the next session does not need
it to recall, the next start's scan embeds it, and a long tool result costs seconds of CPU):
``POST /admin/shutdown`` (``{"drain_s": N}``), SIGTERM/SIGINT, and ``serve --idle-exit`` all run
the pending work now (bounded by ``drain_s``, default ``server.drainTimeoutS``), keep answering
requests meanwhile, and only then exit, which releases the data directory's lock. A drain asked
for over HTTP (or by the idle timer) can be cancelled until it exits; a second signal exits at
once. Whatever a bounded drain could not finish stays on disk and resumes at the next start.

A SIGTERM ends the process within ``drain_s`` (+ ``EXIT_GRACE_S``) whatever is pending: the drain
gets ``drain_s`` less ``CLOSE_RESERVE_S`` (closing the engine: pipeline threads, the offload LLM
worker, the embedder), and a watchdog exits the process at the bound if closing still waits on
work it cannot interrupt (a model call, an LLM request). Every write was durable when it was
answered, so that exit is a crash the next start already recovers from: the embedding backlog,
L1/L2 and offload LLM work resume from the files and the database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

if TYPE_CHECKING:
    from memory_tencentdb.engine import Engine

log = logging.getLogger("memory_tencentdb.gateway")

# Closing the engine after a drain: pipeline threads get 2 s, the offload worker 2 s (measured:
# an L1 run caught mid-embedding of a 600-message backlog took 9 s to finish on 2 cores, so a
# close that waits for work in flight is what overran a 5 s drain by 7.7 s).
CLOSE_RESERVE_S = 2.0
EXIT_GRACE_S = 1.0  # past the bound: the watchdog exits (as after a crash)


class ShutdownBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    drain_s: float | None = Field(None, ge=0, le=3600, allow_inf_nan=False)
    cancel: StrictBool = False


@dataclass
class _Drain:
    timeout: float
    reason: str
    cancellable: bool
    cancelled: threading.Event = field(default_factory=threading.Event)


class Lifecycle:
    """Owns "when do we exit": drains, their cancellation, the idle timer, request activity."""

    def __init__(self, engine: Engine, drain_default_s: float, idle_exit_s: float | None = None):
        self.engine = engine
        self.drain_default_s = drain_default_s
        self.idle_exit_s = idle_exit_s
        self.server: Any = None  # the uvicorn.Server to stop, set by bind()
        self.exiting = False
        self._drain: _Drain | None = None
        self._signals = 0
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last_activity = time.monotonic()
        self._exit_by: float | None = None  # monotonic: the watchdog's deadline
        self._watchdog = threading.Condition()

    def bind(self, server: Any) -> None:
        self.server = server
        if self.idle_exit_s:
            threading.Thread(target=self._idle_loop, name="idle-exit", daemon=True).start()
            log.info("idle exit: after %.0fs without a request (and a drain)", self.idle_exit_s)

    @property
    def draining(self) -> bool:
        return self._drain is not None or self.exiting

    # ------------------------------------------------------------------ requests

    def request_drain(
        self, drain_s: float | None = None, reason: str = "request", cancellable: bool = True
    ) -> bool:
        """Start a drain unless one runs; False when one was already running (it continues)."""
        with self._lock:
            if self._drain is not None or self.exiting:
                if not cancellable and self._drain is not None:
                    self._drain.cancellable = False  # a signal makes a running drain final
                return False
            timeout = self.drain_default_s if drain_s is None else drain_s
            drain = self._drain = _Drain(timeout, reason, cancellable)
        log.info(
            "draining (%s): finishing pending work for at most %.0fs, then exit", reason, timeout
        )
        threading.Thread(target=self._run, args=(drain,), name="drain", daemon=True).start()
        return True

    def cancel(self) -> bool:
        """Cancel a drain that has not exited yet; False when there is none (or it is final)."""
        with self._lock:
            drain = self._drain
            if drain is None or self.exiting or not drain.cancellable:
                return False
            drain.cancelled.set()
            self._drain = None
        log.info("drain (%s) cancelled: staying up", drain.reason)
        return True

    def on_signal(self, sig: int) -> bool:
        """First SIGTERM/SIGINT: drain (final), the process gone within ``drain_default_s``
        (+ ``EXIT_GRACE_S``). Second: True = exit now without waiting."""
        self._signals += 1
        name = signal.Signals(sig).name
        if self._signals >= 2:
            log.warning("second %s: exiting now; pending work resumes at the next start", name)
            with self._lock:
                if self._drain is not None:
                    self._drain.cancelled.set()
                self.exiting = True
            self.exit_within(CLOSE_RESERVE_S + EXIT_GRACE_S)
            return True
        bound = self.drain_default_s
        # A drain asked over HTTP may be running with a longer bound: the watchdog holds this one.
        self.exit_within(bound + EXIT_GRACE_S)
        self.request_drain(max(0.0, bound - CLOSE_RESERVE_S), reason=name, cancellable=False)
        return False

    def exit_within(self, seconds: float) -> None:
        """Arm (or bring forward) the watchdog: the process exits ``seconds`` from now if it
        has not by then. Pending work stays on disk, as after a crash."""
        deadline = time.monotonic() + max(0.0, seconds)
        with self._watchdog:
            first = self._exit_by is None
            if self._exit_by is None or deadline < self._exit_by:
                self._exit_by = deadline
            self._watchdog.notify_all()
        if first:
            threading.Thread(target=self._watch, name="exit-watchdog", daemon=True).start()

    def _watch(self) -> None:
        with self._watchdog:
            while True:
                assert self._exit_by is not None
                left = self._exit_by - time.monotonic()
                if left <= 0:
                    break
                self._watchdog.wait(left)
        log.warning(
            "exit: the drain bound passed with work still closing; exiting now, it resumes"
            " at the next start (as after a crash)"
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):  # exiting anyway
                handler.flush()
        os._exit(0)

    def _run(self, drain: _Drain) -> None:
        try:
            self.engine.drain(drain.timeout, drain.cancelled)
        except Exception:  # noqa: BLE001 - a failed drain must still let the gateway stop
            log.exception("drain failed; exiting anyway")
        with self._lock:
            if drain.cancelled.is_set() or self._drain is not drain:
                return
            self.exiting = True
        log.info("drain (%s) finished: exiting", drain.reason)
        self.exit_within(CLOSE_RESERVE_S + EXIT_GRACE_S)  # closing waits on nothing for long
        if self.server is not None:
            self.server.should_exit = True

    # ------------------------------------------------------------------ activity

    def track(self, app: Any) -> Any:
        """ASGI wrapper: note every request but ``GET /health`` (probes must not keep an idle
        gateway alive); a request during an idle drain cancels it, the host came back."""

        async def tracked(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or (
                scope.get("method") == "GET" and scope.get("path") == "/health"
            ):
                await app(scope, receive, send)
                return
            with self._lock:
                self._in_flight += 1
                self._last_activity = time.monotonic()
                idle_drain = self._drain if self._drain and self._drain.reason == "idle" else None
            if idle_drain is not None and scope.get("path") != "/admin/shutdown":
                self.cancel()
            try:
                await app(scope, receive, send)
            finally:
                with self._lock:
                    self._in_flight -= 1
                    self._last_activity = time.monotonic()

        return tracked

    def _idle_loop(self) -> None:
        assert self.idle_exit_s
        # Start-up (loading the models) is not idleness: count from when the gateway is ready.
        self.engine.vectorizer.wait_loaded(600)
        with self._lock:
            self._last_activity = max(self._last_activity, time.monotonic())
        while not self.exiting:
            time.sleep(min(1.0, self.idle_exit_s / 4))
            with self._lock:
                quiet = time.monotonic() - self._last_activity
                idle = self._in_flight == 0 and self._drain is None and quiet >= self.idle_exit_s
            if idle:
                self.request_drain(None, reason="idle")


def serving_with_drain(server_cls: type, lifecycle: Lifecycle) -> type:
    """A uvicorn ``Server`` subclass whose SIGTERM/SIGINT drains first (see ``on_signal``)."""

    class DrainingServer(server_cls):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if lifecycle.on_signal(sig):
                self.should_exit = True
                self.force_exit = sig == signal.SIGINT  # Ctrl-C twice: do not even wait
            # The signal is not re-raised after shutdown: a drained exit is a clean exit (0).

    return DrainingServer


def settle_idle(health: dict[str, Any], busy: list[str]) -> dict[str, Any]:
    """``/health``'s ``idle`` (top level) and ``embedding.idle``: true only when nothing is
    pending anywhere. The embedder's own flag says its last pass found nothing new, which a
    failing pass or a start-up scan can also say while rows still lack a vector; the backlog
    counts them. ``busy`` is ``Engine.busy()`` (L1, L2, persona, embeddings)."""
    emb = health.get("embedding") or {}
    backlog_left = any(
        b.get("l0") or b.get("l1") or b.get("scanning") for b in (emb.get("backlog") or {}).values()
    )
    if "idle" in emb:
        emb["idle"] = bool(emb["idle"]) and not backlog_left
    offload = (health.get("offload") or {}).get("backlog") or {}
    health["idle"] = not busy and not backlog_left and not any(offload.values())
    return health

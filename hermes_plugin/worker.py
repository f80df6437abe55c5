"""One ordered background worker per provider for every write to the gateway.

Why: Hermes calls ``sync_turn`` on its own single ``mem-sync`` worker, which it shares with
``/new`` boundary work and next-turn prefetch queuing; blocking it (as the original's 5 s joins
did) delays all of that. So ``sync_turn`` only enqueues, and this worker sends captures,
memory writes and session ends in order (turn N before turn N+1, captures before the session
end that flushes them). The queue is bounded: when the gateway cannot keep up, the oldest job
is dropped rather than Hermes ever waiting. A job that fails because the gateway is away is
retried when the breaker lets calls through again, until it is ``max_age_s`` old.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .client import GatewayRejected, GatewayUnavailable

log = logging.getLogger("hermes_memory_tencentdb")

RETRY_POLL_S = 0.25


@dataclass
class Job:
    """A named write with the function that performs it."""

    kind: str
    run: Callable[[], object]
    max_age_s: float = 60.0
    created: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)


class OrderedWorker:
    """FIFO, single thread, bounded; started lazily so an idle provider costs no thread."""

    def __init__(
        self,
        name: str,
        maxsize: int = 256,
        on_unavailable: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.maxsize = maxsize
        self.on_unavailable = on_unavailable
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self.dropped = 0
        self.sent = 0
        self.failed = 0

    def submit(self, job: Job) -> bool:
        """Enqueue without blocking; False if the worker is closed."""
        with self._cond:
            if self._closing:
                return False
            if len(self._jobs) >= self.maxsize:
                old = self._jobs.popleft()
                old.done.set()
                self.dropped += 1
                log.warning(
                    "memory_tencentdb: write queue full, dropped oldest %s (%d dropped so far)",
                    old.kind,
                    self.dropped,
                )
            self._jobs.append(job)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return True

    def pending(self) -> int:
        with self._cond:
            return len(self._jobs)

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued so far has been handled (or given up)."""
        with self._cond:
            last = self._jobs[-1] if self._jobs else None
        return True if last is None else last.done.wait(timeout_s)

    def close(self, timeout_s: float) -> int:
        """Stop accepting work, give queued jobs ``timeout_s`` to go out; returns jobs abandoned.

        While closing, a job is tried at most once and never waits for the breaker.
        """
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, timeout_s))
        with self._cond:
            abandoned = len(self._jobs)
            for job in self._jobs:
                job.done.set()
            self._jobs.clear()
        if abandoned:
            log.warning("memory_tencentdb: abandoned %d queued write(s) at shutdown", abandoned)
        return abandoned

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closing:
                    self._cond.wait(5.0)
                if not self._jobs:
                    return
                job = self._jobs[0]
            self._run(job)
            with self._cond:
                if self._jobs and self._jobs[0] is job:
                    self._jobs.popleft()
            job.done.set()

    def _run(self, job: Job) -> None:
        """Try the job; while the gateway is unavailable, retry until the job is too old."""
        while True:
            try:
                job.run()
                self.sent += 1
                return
            except GatewayRejected as exc:
                self.failed += 1
                log.warning("memory_tencentdb: gateway rejected %s: %s", job.kind, exc)
                return
            except GatewayUnavailable as exc:
                if self.on_unavailable is not None:
                    self.on_unavailable()
                if self._closing or time.monotonic() - job.created > job.max_age_s:
                    self.failed += 1
                    log.info("memory_tencentdb: %s not delivered: %s", job.kind, exc)
                    return
            except Exception:
                self.failed += 1
                log.exception("memory_tencentdb: %s failed", job.kind)
                return
            with self._cond:
                if self._closing:
                    continue  # one more (final) attempt happens above, then give up
                self._cond.wait(RETRY_POLL_S)

"""One ordered background worker per provider for every write to the gateway.

Why: Hermes calls ``sync_turn`` on its own single ``mem-sync`` worker, which it shares with
``/new`` boundary work and next-turn prefetch queuing; blocking it (as the original's 5 s joins
did) delays all of that. So ``sync_turn`` only enqueues, and this worker sends captures,
memory writes and session ends in order (turn N before turn N+1, captures before the session
end that flushes them). The queue is bounded: when the gateway cannot keep up, the oldest job
leaves the queue rather than Hermes ever waiting. A job that fails because the gateway is away
is retried when the breaker lets calls through again, until it is ``max_age_s`` old. A job
with a spool entry (spool.py) is removed from disk only once the gateway answered it, so what
leaves the queue unsent (too old, queue full, Hermes exiting) is sent by the next session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .client import GatewayRejected, GatewayUnavailable
from .spool import Entry, Spool

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
    entry: Entry | None = None  # its copy on disk, removed once the gateway answered
    # Sent again by every session and turn (the host-model hand-over): its loss costs nothing.
    optional: bool = False

    @property
    def kept(self) -> bool:
        return self.entry is not None and self.entry.file is not None


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
        self.kept = 0  # left unsent but on disk for the next session

    def submit(self, job: Job) -> bool:
        """Enqueue without blocking; False if the worker is closed."""
        with self._cond:
            if self._closing:
                return False
            if len(self._jobs) >= self.maxsize:
                old = self._jobs.popleft()
                old.done.set()
                self._left(old, "write queue full")
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
        """Stop accepting work, give queued jobs ``timeout_s`` to go out; returns jobs not sent.

        While closing, a job is tried at most once and never waits for the breaker. Jobs not
        sent by then stay on disk (spool) for the next session; a job in flight when the time
        is up (a frozen gateway) is left to its own timeout on this daemon thread, and its file
        stays too (a duplicate send is harmless: captures carry message ids).
        """
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, timeout_s))
        with self._cond:
            left = list(self._jobs)
            self._jobs.clear()
        for job in left:
            job.done.set()
            self._left(job, "Hermes is exiting")
        if left:
            on_disk = sum(1 for j in left if j.kept)
            log.info(
                "memory_tencentdb: %d write(s) not delivered yet, %d kept on disk for the next"
                " session",
                len(left),
                on_disk,
            )
        return len(left)

    def _left(self, job: Job, why: str) -> None:
        """A job leaves the queue unsent: on disk it waits for the next session, else it is lost."""
        if job.kept:
            self.kept += 1
            return
        if job.optional:
            return
        self.dropped += 1
        log.warning("memory_tencentdb: %s, dropped a %s (no copy on disk)", why, job.kind)

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
                if job.entry is not None:
                    Spool.done(job.entry)
                return
            except GatewayRejected as exc:
                self.failed += 1
                log.warning("memory_tencentdb: gateway rejected %s: %s", job.kind, exc)
                if job.entry is not None:
                    Spool.done(job.entry)  # it would be rejected again
                return
            except GatewayUnavailable as exc:
                if self.on_unavailable is not None:
                    self.on_unavailable()
                if self._closing or time.monotonic() - job.created > job.max_age_s:
                    self.failed += 1
                    where = "kept on disk for the next session" if job.kept else "lost"
                    log.info("memory_tencentdb: %s not delivered (%s); %s", job.kind, exc, where)
                    self._left(job, "gateway unavailable")
                    return
            except Exception:
                self.failed += 1
                log.exception("memory_tencentdb: %s failed", job.kind)
                if job.entry is not None:
                    Spool.done(job.entry)
                return
            with self._cond:
                if self._closing:
                    continue  # one more (final) attempt happens above, then give up
                self._cond.wait(RETRY_POLL_S)

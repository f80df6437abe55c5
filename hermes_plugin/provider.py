"""The Hermes ``MemoryProvider``: Hermes's lifecycle mapped onto the gateway's HTTP routes.

Why each method looks the way it does is tied to Hermes 0.19.0's observed behaviour
(hermes-host.md §2b): ``prefetch`` runs once per turn in a thread Hermes abandons after 8 s, so
it answers within its own budget; ``sync_turn`` runs on Hermes's shared worker, so it only
enqueues; ``on_session_end`` fires several times per session, so it is idempotent; Hermes
passes ``session_id=""`` to prefetch, so the provider keeps its own ids; the system prompt is
built once, before the gateway may be up, so the stable memory part rides along with per-turn
recall until a system prompt carries it. No method raises into Hermes and none waits on the
gateway beyond a bounded budget.

Budgets: a turn's recall waits at most ``recall_budget_s`` (2.5 s). The first turn of a session
whose gateway is still starting (a one-shot ``hermes chat -q`` launches it: ~1 s to answer, ~3.5 s
more to load the embedding models) may wait ``first_turn_budget_s`` (7 s, below Hermes's own 8 s
prefetch limit) for the models, so even a one-shot session recalls semantically. Writes are kept
on disk until the gateway has them (spool.py), so exit never waits on a gateway that hangs.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from . import hooks, host_model, offload, recall_placement
from .client import GatewayRejected, GatewayUnavailable
from .config import Settings, config_schema, save
from .link import Gateway, connect
from .ownership import default_scope
from .spool import Spool
from .supervisor import NOT_OURS, STARTING, UP, data_dir, find_gateway_command
from .turns import (
    MAX_CONTENT_CHARS,
    chunks,
    now_ms,
    to_capture_messages,
    tool_record_messages,
    turn_slice,
)
from .worker import Job, OrderedWorker

try:
    from agent.memory_provider import MemoryProvider
except ImportError:  # outside Hermes (unit tests, benchmarks): a plain base class is enough

    class MemoryProvider:  # type: ignore[no-redef]  # the stand-in for the import above
        """Stand-in for Hermes's ABC when Hermes is not installed."""


log = logging.getLogger("hermes_memory_tencentdb")

PROVIDER_NAME = "memory_tencentdb"
MEMORY_SEARCH = "memory_tencentdb_memory_search"
CONVERSATION_SEARCH = "memory_tencentdb_conversation_search"
FORGET = "memory_tencentdb_forget"
TOOL_TIMEOUT_S = 10.0
RECALL_RESERVE_S = 0.5  # of a turn's budget, kept for the recall itself after waiting
MAX_QUERY_CHARS = 4000
SHUTDOWN_START_WAIT_S = 4.0  # only when this process is launching the gateway right now
SHUTDOWN_DRAIN_S = 2.0  # then what is unsent stays on disk for the next session
WRITE_TIMEOUT_S = 10.0
START_WAIT_PER_WRITE_S = 5.0
REPLAY_MAX_AGE_S = 60.0
STABLE_QUERY = "who is the user: profile, preferences, standing instructions, ongoing work"
MEMORY_TYPES = ("persona", "episodic", "instruction")

GUIDE = (
    "## Long-term memory (memory_tencentdb)\n"
    "Memories from earlier conversations are recalled automatically and shown in a "
    "memory-context block next to the user's message: use them as background knowledge, and prefer "
    "what the user says now when the two disagree. To look further back, call "
    f"`{MEMORY_SEARCH}` (facts, preferences, instructions) or `{CONVERSATION_SEARCH}` "
    "(earlier messages, verbatim). When the user asks you to forget something, call "
    f"`{FORGET}` and tell them what it removed."
)
# The same, for recall_placement "appendSystem" (the memories come at the end of this prompt).
GUIDE_SYSTEM_PLACEMENT = GUIDE.replace(
    "memory-context block next to the user's message",
    "relevant-memories block at the end of this system prompt",
)


def _limit(value: Any, default: int = 5) -> int:
    """Coerce a model-supplied limit to 1..20 (models send strings, floats, nonsense)."""
    try:
        n = int(float(value))
    except (TypeError, ValueError):
        n = default
    return max(1, min(20, n))


def _tool_schemas() -> list[dict[str, Any]]:
    limit = {
        "type": "integer",
        "description": "How many results to return (1-20, default 5).",
        "minimum": 1,
        "maximum": 20,
    }
    return [
        {
            "name": MEMORY_SEARCH,
            "description": (
                "Search long-term memory: facts, preferences and instructions distilled from "
                "earlier conversations with this user. Use when the recalled context is not "
                "enough."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": limit,
                    "type": {
                        "type": "string",
                        "enum": list(MEMORY_TYPES),
                        "description": "Only memories of this kind (optional).",
                    },
                },
                "required": ["query"],
            },
        },
        {
            "name": CONVERSATION_SEARCH,
            "description": (
                "Search the raw messages of earlier conversations (including tool calls) when "
                "the exact wording or a detail matters."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": limit,
                },
                "required": ["query"],
            },
        },
        {
            "name": FORGET,
            "description": (
                'Forget long-term memories when the user asks ("forget that I said ...", '
                '"忘掉我说过的..."). Removes the memories that contain what `query` names and '
                "answers what it removed (`forgotten`, `matched`) and close memories it kept "
                "(`candidates`, with ids): call again with `ids` to remove one of those."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to forget, in few words."},
                    "ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Memory ids to forget (from an earlier answer).",
                    },
                },
            },
        },
    ]


def _deliver(gw: Gateway, path: str, body: dict[str, Any]) -> Any:
    """One write (on our worker thread): a gateway being started gets a moment to answer
    first, rather than a burst of refused connections opening the breaker."""
    if gw.supervisor.state == STARTING:
        gw.supervisor.wait_until_settled(START_WAIT_PER_WRITE_S)
    return gw.client.post(path, body, WRITE_TIMEOUT_S)


def _touch(path: Path) -> None:
    """Create a marker file (best effort: a read-only home only loses the marker)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        log.debug("memory_tencentdb: cannot write %s", path, exc_info=True)


def _attach_log_file(settings: Settings) -> None:
    """Log to $HERMES_HOME/logs/memory_tencentdb/provider.log (once per file per process)."""
    from .state import shared

    path = settings.log_dir / "provider.log"
    st = shared()
    with st.lock:
        if str(path) in st.log_files:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path, encoding="utf-8")
        except OSError:
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler.setLevel(logging.INFO)
        log.addHandler(handler)
        if log.level == logging.NOTSET or log.level > logging.INFO:
            log.setLevel(logging.INFO)
        st.log_files.add(str(path))


class MemoryTencentdbProvider(MemoryProvider):
    """memory-tencentdb as Hermes's external memory provider."""

    def __init__(self) -> None:
        # Hermes builds providers for listings and status checks too: no threads, no I/O here.
        self._lock = threading.Lock()
        self._gw: Gateway | None = None
        self._worker: OrderedWorker | None = None
        self._hermes_session = ""
        self._session_key = ""
        self._session_id = ""
        self._scope = "default"
        self._user_id = ""
        self._user_name = ""
        self._read_only = False
        self._ended = True  # nothing captured yet, so nothing to end
        self._last_ts = 0
        self._stable_in_system = False
        # The last stable part the gateway gave (persona, scenes, tool guide): Hermes rebuilds
        # its system prompt after every compaction, and a recall that comes back late then
        # must not drop the block (it changes only with the persona or the scenes).
        self._last_stable = ""
        self._tool_records: deque[dict[str, Any]] = deque(maxlen=200)
        self._initialized = False
        self._closed = False
        self._prefetched = False
        self._spool: Spool | None = None
        self._id_prefix = uuid.uuid4().hex[:8]
        self.last_prefetch_ms = 0.0
        self.tool_calls_seen = 0
        self._offload: bool | None = None  # None: not known before initialize
        self._read_marker: Path | None = None
        # recall_placement (recall_placement.py) and, for "appendSystem", this turn's memories.
        self._placement = "prepend"
        self._turn_memories = ""

    # -- identity ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    def is_available(self) -> bool:
        """True if a gateway answers or one can be started; cheap, starts nothing."""
        try:
            settings = Settings.load()
            if settings.auto_start and find_gateway_command(settings) is not None:
                return True
            from .client import GatewayClient

            probe = GatewayClient(settings.base_url)
            try:
                return probe.health(0.3) is not None
            finally:
                probe.close()
        except Exception:
            log.debug("memory_tencentdb: availability check failed", exc_info=True)
            return False

    # -- lifecycle ---------------------------------------------------------------------------

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Bind to Hermes's session, start the gateway in the background; returns at once."""
        settings = Settings.load(kwargs.get("hermes_home"))
        _attach_log_file(settings)
        gw = connect(settings)
        hermes_session = str(session_id or "") or f"hermes-{uuid.uuid4().hex[:12]}"
        profile = str(kwargs.get("agent_identity") or "default")
        user_id = str(kwargs.get("user_id") or "")
        # Hermes knows the user's display name on some platforms; L0 shows who spoke.
        user_name = str(kwargs.get("user_name") or "").strip()[:80]
        with self._lock:
            # Initialising twice must not take a second reference on the gateway.
            already = self._initialized and not self._closed and self._gw is gw
            self._gw = gw
            self._hermes_session = hermes_session
            self._session_key = self._session_id = hermes_session
            self._user_id = user_id
            self._user_name = user_name
            self._scope = settings.scope or default_scope(settings.home, profile, user_id)
            # Cron and flush agents must not write into the user's memory.
            self._read_only = str(kwargs.get("agent_context") or "primary") != "primary"
            fresh_worker = self._worker is None or not already
            if fresh_worker:
                self._worker = OrderedWorker(
                    "memory-tencentdb-writer", on_unavailable=gw.supervisor.notice_failure
                )
                self._spool = Spool(settings.spool_dir)
            self._initialized = True
            self._closed = False
            self._prefetched = False
        if fresh_worker and not self._read_only and self._worker is not None:
            # First in the writer's order: the session's captures are extracted with it.
            host_model.submit(self._worker, gw, settings)
            self._replay_kept(gw)
        hooks.route(hermes_session, self)
        self._offload = settings.offload
        self._placement = "prepend"
        if settings.recall_placement == "appendSystem":
            if recall_placement.install():
                self._placement = "appendSystem"
            else:  # no seam to put them in the system message: they ride with the user's
                log.warning("memory_tencentdb: recall_placement appendSystem unavailable here")
        self._read_marker = settings.offload_used_marker
        if settings.offload:
            offload.route(hermes_session, self._offload_route())
            _touch(settings.offload_used_marker)
        if not already:
            gw.supervisor.acquire()
        gw.supervisor.ensure_started()
        log.info(
            "memory_tencentdb: session %s scope %s gateway %s",
            hermes_session,
            self._scope,
            settings.base_url,
        )

    def _replay_kept(self, gw: Gateway) -> None:
        """Queue the writes earlier sessions of this Hermes home could not deliver, first."""
        spool, worker = self._spool, self._worker
        if spool is None or worker is None:
            return
        kept = spool.adopt()
        for entry in kept:
            worker.submit(
                Job(
                    entry.kind,
                    functools.partial(_deliver, gw, entry.path, entry.body),
                    REPLAY_MAX_AGE_S,
                    entry=entry,
                )
            )
        if kept:
            log.info(
                "memory_tencentdb: sending %d write(s) kept from an earlier session", len(kept)
            )

    def shutdown(self) -> None:
        """Deliver queued writes (bounded), then let the supervisor stop what it started."""
        with self._lock:
            if self._closed or not self._initialized:
                return
            self._closed = True
            gw, worker = self._gw, self._worker
        if worker is not None:
            launching = gw is not None and gw.supervisor.owned_pid is not None
            if (
                gw is not None
                and launching
                and worker.pending()
                and gw.supervisor.state == STARTING
            ):
                # A quick `hermes chat -q` can end before the gateway it launched answers;
                # a short wait usually delivers the turn now (else it is sent next session).
                gw.supervisor.wait_until_settled(SHUTDOWN_START_WAIT_S)
            worker.close(SHUTDOWN_DRAIN_S)
        hooks.unroute(self._hermes_session, self)
        offload.unroute(self._hermes_session)
        if gw is not None:
            gw.supervisor.release()

    # -- prompt and recall -------------------------------------------------------------------

    def _base(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "session_key": self._session_key,
            "session_id": self._session_id,
            "scope": self._scope,
        }
        if self._user_id:
            body["user_id"] = self._user_id
        return body

    def _recall_body(self, query: str) -> dict[str, Any]:
        # The gateway's tool guide should name the tools as Hermes shows them; a pasted
        # novel is not a better query than its beginning.
        names = {"memory_search": MEMORY_SEARCH, "conversation_search": CONVERSATION_SEARCH}
        return {**self._base(), "query": query[:MAX_QUERY_CHARS], "tool_names": names}

    def system_prompt_block(self) -> str:
        """The tool guide, plus the gateway's stable part (persona, scenes) when it is up."""
        block = self._system_prompt_block()
        return f"{block}\n\n{offload.GUIDE}" if self._offload else block

    def _offload_route(self) -> offload.Route:
        assert self._gw is not None
        return offload.Route(self._gw, self._session_key, self._scope, self._user_id)

    def _offload_on(self) -> bool:
        """Offload switched on (known after initialize; before it, from the settings)."""
        if self._offload is None:
            try:
                return Settings.load().offload
            except Exception:  # noqa: BLE001
                return False
        return self._offload

    def _system_prompt_block(self) -> str:
        guide = GUIDE if self._placement == "prepend" else GUIDE_SYSTEM_PLACEMENT
        gw = self._gw
        if gw is None or self._closed:
            return guide
        self._stable_in_system = False
        stable = self._last_stable
        if gw.supervisor.state == UP:
            try:
                out = gw.client.recall(
                    self._recall_body(STABLE_QUERY), min(1.0, gw.settings.recall_budget_s)
                )
                stable = str(out.get("append_system_context") or "").strip()
                self._last_stable = stable
            except (GatewayUnavailable, GatewayRejected):
                pass  # late or refused: the last block this process had, if any
        if not stable:
            return guide  # not up yet: prefetch carries the stable part instead
        self._stable_in_system = True
        return f"{guide}\n\n{stable}"

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """This turn's memories from /recall, within the recall budget; "" on any trouble."""
        t0 = time.perf_counter()
        try:
            return self._prefetch(query)
        except Exception:
            log.debug("memory_tencentdb: prefetch failed", exc_info=True)
            return ""
        finally:
            self.last_prefetch_ms = (time.perf_counter() - t0) * 1000

    def _prefetch(self, query: str) -> str:
        self._turn_memories = ""  # a turn whose recall fails carries none of the last turn's
        gw = self._gw
        if gw is None or self._closed or not query or not query.strip():
            return ""
        t0 = time.monotonic()
        sup = gw.supervisor
        first, self._prefetched = not self._prefetched, True
        starting = sup.state == STARTING or (sup.state == UP and not sup.ready)
        # The first turn of a session whose gateway is still starting may wait for its models
        # (first_turn_budget_s, below Hermes's 8 s); any other turn waits recall_budget_s.
        budget = gw.settings.first_turn_budget_s if first and starting else 0.0
        deadline = t0 + max(budget, gw.settings.recall_budget_s)
        if not self._ready_within(gw, deadline - RECALL_RESERVE_S):
            return ""
        if starting and sup.state == UP:
            log.info(
                "memory_tencentdb: recall waited %.1f s for the gateway to start (ready: %s)",
                time.monotonic() - t0,
                sup.ready,
            )
        remaining = deadline - time.monotonic()
        if remaining < 0.05:
            return ""
        try:
            out = self._recall_once(gw, query, remaining)
        except GatewayUnavailable:
            gw.supervisor.notice_failure()
            return ""
        except GatewayRejected as exc:
            log.info("memory_tencentdb: recall rejected: %s", exc)
            return ""
        per_turn = str(out.get("prepend_context") or "").strip()
        stable = str(out.get("append_system_context") or "").strip()
        if "prepend_context" not in out and "append_system_context" not in out:
            per_turn = str(out.get("context") or "").strip()  # an older gateway
        if self._placement == "appendSystem":
            # recall_placement.py appends them to the system message of this turn's calls.
            self._turn_memories, per_turn = per_turn, ""
        parts = []
        if stable and not self._stable_in_system:
            parts.append(stable)
        if per_turn:
            parts.append(per_turn)
        return "\n\n".join(parts)

    def system_memories(self) -> str:
        """This turn's memories for the system message (``appendSystem`` placement), else ""."""
        return self._turn_memories if self._placement == "appendSystem" else ""

    def _ready_within(self, gw: Gateway, until: float) -> bool:
        """Wait (until a monotonic deadline) for a starting gateway; False if it is not ours.

        A gateway that is still loading its models at the deadline is used anyway: the gateway
        itself waits for its models within the recall's timeout.
        """
        sup = gw.supervisor
        if sup.state == STARTING:
            sup.wait_until_settled(until - time.monotonic())
        if sup.state == NOT_OURS or gw.client.paused:
            return False
        if sup.state == UP and not sup.ready:
            sup.wait_ready(until - time.monotonic())
        return True

    def _recall_once(self, gw: Gateway, query: str, budget: float) -> dict[str, Any]:
        """POST /recall; if a half-open probe is in flight, wait for its verdict within budget."""
        t0 = time.monotonic()
        try:
            return gw.client.recall(self._recall_body(query), budget)
        except GatewayUnavailable:
            if gw.breaker.state != "half_open":
                raise
        if not gw.breaker.wait_for_probe(budget * 0.6):
            raise GatewayUnavailable("circuit breaker open")
        remaining = budget - (time.monotonic() - t0)
        if remaining < 0.05:
            raise GatewayUnavailable("recall budget spent waiting for the probe")
        return gw.client.recall(self._recall_body(query), remaining)

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Recall is fast enough to run at turn start, so nothing is prepared in advance."""

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        gw = self._gw
        if gw is not None and not self._closed and gw.supervisor.state not in (UP, STARTING):
            gw.supervisor.notice_failure()  # throttled background restart, never blocks

    # -- writes ------------------------------------------------------------------------------

    def _submit(
        self, gw: Gateway, kind: str, path: str, body: dict[str, Any], max_age_s: float = 60.0
    ) -> None:
        """Keep the write on disk, then queue it; the disk copy goes once the gateway has it."""
        worker, spool = self._worker, self._spool
        if worker is None or self._closed:
            return
        entry = spool.put(kind, path, body) if spool is not None else None
        job = Job(kind, lambda: _deliver(gw, path, body), max_age_s, entry=entry)
        if not worker.submit(job) and entry is not None:
            log.info("memory_tencentdb: %s kept on disk for the next session", kind)

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        """Queue this turn (user, tool calls, tool results, reply) for /capture; never blocks."""
        try:
            self._sync_turn(user_content, assistant_content, messages)
        except Exception:
            log.warning("memory_tencentdb: could not queue capture", exc_info=True)

    def _sync_turn(
        self, user_content: str, assistant_content: str, messages: list[dict[str, Any]] | None
    ) -> None:
        gw = self._gw
        if gw is None or self._closed or self._read_only:
            return
        snapshot = list(messages) if messages else []
        turn = turn_slice(snapshot, user_content or "", assistant_content or "") if snapshot else []
        if not turn:
            turn = [
                {"role": "user", "content": user_content or ""},
                {"role": "assistant", "content": assistant_content or ""},
            ]
        with self._lock:
            records = list(self._tool_records)
            self._tool_records.clear()
        known = {
            str(c.get("id"))
            for m in turn
            if m.get("role") == "assistant"
            for c in (m.get("tool_calls") or [])
            if isinstance(c, dict)
        }
        extra = tool_record_messages(records, known)
        if extra:
            turn = turn[:1] + extra + turn[1:]
        with self._lock:
            first = max(now_ms(), self._last_ts + 1)
            captured = to_capture_messages(turn, first)
            if not captured:
                return
            for m in captured:  # stable ids: a capture sent twice is stored once
                m["id"] = f"hermes-{self._id_prefix}-{m['timestamp']}"
            self._last_ts = captured[-1]["timestamp"]
            self._ended = False
            base = self._base()
        if self._user_name:
            base["user_name"] = self._user_name
        if self._worker is not None:  # the host's model first (issue 24; host_model.py)
            host_model.submit(self._worker, gw, turn=True)
        for batch in chunks(captured):
            self._submit(gw, "capture", "/capture", {**base, "messages": batch})

    def record_tool_call(self, payload: dict[str, Any]) -> None:
        """From the post_tool_call hook (turn thread): remember the call for this turn's capture."""
        if not self._initialized or self._closed or self._read_only:
            return
        result = payload.get("result")
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        record = {
            "tool_name": payload.get("tool_name", ""),
            "args": payload.get("args", {}),
            "result": text[:MAX_CONTENT_CHARS],
            "status": payload.get("status", ""),
            "duration_ms": payload.get("duration_ms", 0),
            "tool_call_id": payload.get("tool_call_id", ""),
        }
        with self._lock:
            self._tool_records.append(record)
            self.tool_calls_seen += 1

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """Queue /session/end once per captured stretch (Hermes may call this several times)."""
        with self._lock:
            if self._ended or self._gw is None or self._closed or self._read_only:
                return
            self._ended = True
            # wait: false — the gateway flushes L1 in the background (and finishes it before it
            # stops), so neither /new nor exit waits for an LLM.
            body = {**self._base(), "wait": False}
            gw = self._gw
        self._submit(gw, "session_end", "/session/end", body, max_age_s=30.0)

    def on_session_switch(
        self,
        new_session_id: str,
        *,
        parent_session_id: str = "",
        reset: bool = False,
        rewound: bool = False,
        **kwargs: Any,
    ) -> None:
        """Follow Hermes to a new session id; a reset ends the old session and clears buffers."""
        if not new_session_id or self._gw is None or self._closed:
            return
        if reset:
            self.on_session_end([])  # no-op if Hermes already ended it
        with self._lock:
            old = self._hermes_session
            if rewound and new_session_id == old:
                self._tool_records.clear()
                return
            continuing = not reset and kwargs.get("reason") == "compression"
            if not continuing:
                self._session_key = new_session_id
                self._ended = True
                self._tool_records.clear()
            self._session_id = new_session_id
            self._hermes_session = new_session_id
        if old != new_session_id:
            hooks.unroute(old, self)
            offload.unroute(old)
        hooks.route(new_session_id, self)
        if self._offload:
            offload.route(new_session_id, self._offload_route())

    def on_memory_write(
        self,
        action: str,
        target: str,
        content: str,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Mirror Hermes's built-in memory tool: user facts become persona, notes episodic."""
        gw = self._gw
        if gw is None or self._closed or self._read_only:
            return
        if action not in ("add", "replace") or not (content or "").strip():
            return  # the gateway has no delete route yet; removals stay Hermes-side
        meta = {k: v for k, v in (metadata or {}).items() if isinstance(v, (str, int, float, bool))}
        body = {
            **self._base(),
            "content": content.strip(),
            "type": "persona" if target == "user" else "episodic",
            "metadata": {
                **meta,
                "source": "hermes_memory_tool",
                "action": action,
                "target": target,
            },
        }
        self._submit(gw, "memory_write", "/memories", body)

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        """Tell the summariser the dropped turns stay searchable (no network on the turn thread)."""
        if self._gw is None or self._closed or self._read_only:
            return ""
        return (
            "The full text of these messages is kept in long-term memory (memory_tencentdb); "
            f"details dropped from the summary can be found again with `{CONVERSATION_SEARCH}`."
        )

    # -- tools -------------------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """The search tools, forget, and the offload read tool once this home ever offloaded,
        offload on or off: a session resumed after ``--no-offload`` still holds stubs naming
        it, and a model calling it by that name must find it (Hermes repairs an unknown name to
        the nearest one it offers, which would be ``memory_tencentdb_forget``)."""
        schemas = _tool_schemas()
        if self._read_tool_offered():
            schemas.append(dict(offload.READ_SCHEMA))
        return schemas

    def _read_tool_offered(self) -> bool:
        if self._offload_on():
            return True
        try:
            marker = self._read_marker or Settings.load().offload_used_marker
            return marker.exists()
        except Exception:  # noqa: BLE001
            return False

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Search tools → /search/*; the gateway's JSON verbatim, or a JSON error the model can read."""
        gw = self._gw
        if gw is None or self._closed:
            return json.dumps({"error": "memory_tencentdb is not initialised"})
        args = args if isinstance(args, dict) else {}
        if tool_name == offload.READ_TOOL:
            # Offload on: the session's route; off: the same gateway session and scope (what
            # earlier sessions offloaded is read scope-wide).
            target = offload.route_for(self._hermes_session) or self._offload_route()
            window = offload.window_of(self._hermes_session)
            return offload.read_back(target, args, window)
        if tool_name == FORGET:
            return self._forget(gw, args)
        query = str(args.get("query") or "").strip()
        if not query:
            return json.dumps({"error": "query is required"})
        body: dict[str, Any] = {
            "query": query,
            "limit": _limit(args.get("limit")),
            "scope": self._scope,
        }
        if self._user_id:
            body["user_id"] = self._user_id
        if tool_name not in (MEMORY_SEARCH, CONVERSATION_SEARCH):
            return json.dumps({"error": f"unknown tool {tool_name}"})
        # Like the first turn's recall: a gateway that is starting gets time to load its
        # models, within the tool's own deadline.
        deadline = time.monotonic() + TOOL_TIMEOUT_S
        wait_until = time.monotonic() + min(gw.settings.first_turn_budget_s, TOOL_TIMEOUT_S - 1)
        if not self._ready_within(gw, wait_until):
            return json.dumps(
                {"error": f"long-term memory is paused ({gw.client.paused}); continue without it"}
            )
        timeout = max(0.5, deadline - time.monotonic())
        try:
            if tool_name == MEMORY_SEARCH:
                if args.get("type") in MEMORY_TYPES:
                    body["type"] = args["type"]
                out = gw.client.search_memories(body, timeout)
            else:
                out = gw.client.search_conversations(body, timeout)
        except GatewayUnavailable:
            gw.supervisor.notice_failure()
            return json.dumps(
                {"error": "long-term memory is unavailable right now; continue without it"}
            )
        except GatewayRejected as exc:
            return json.dumps({"error": f"memory search rejected: {exc}"})
        return json.dumps(out, ensure_ascii=False)

    def _forget(self, gw: Gateway, args: dict[str, Any]) -> str:
        """``memory_tencentdb_forget`` → ``POST /memories/forget`` (not a dry run: the user asked).

        Only its own argument shape acts: a call with other arguments (Hermes's repair of an
        unknown tool name to this one carries the other tool's, e.g. ``tool_call_id``) is
        refused and removes nothing."""
        foreign = sorted(k for k in args if k not in ("query", "ids"))
        if foreign:
            hint = (
                f' To read an offloaded result back, call {offload.READ_TOOL} with {{"tool_call_id":'
                ' "..."}.'
                if set(foreign) & {*offload.READ_KEYS, "offset"}
                else ""
            )
            return json.dumps(
                {
                    "error": f"{FORGET} takes only query or ids, not {', '.join(foreign)};"
                    f" nothing was removed.{hint}"
                },
                ensure_ascii=False,
            )
        query = str(args.get("query") or "").strip()[:MAX_QUERY_CHARS]
        ids = [str(i) for i in args.get("ids") or [] if str(i).strip()][:100]
        if not query and not ids:
            return json.dumps({"error": "give query (what to forget) or ids"})
        body: dict[str, Any] = {"scope": self._scope, "dry_run": False}
        body.update({"ids": ids} if ids else {"query": query})
        if self._user_id:
            body["user_id"] = self._user_id
        try:
            out = gw.client.post("/memories/forget", body, TOOL_TIMEOUT_S)
        except GatewayUnavailable:
            gw.supervisor.notice_failure()
            return json.dumps(
                {"error": "long-term memory is unavailable right now; nothing removed"}
            )
        except GatewayRejected as exc:
            return json.dumps({"error": f"forget rejected: {exc}"})
        except Exception as exc:  # noqa: BLE001 - a tool never throws into Hermes
            return json.dumps({"error": f"long-term memory unavailable ({exc}); nothing removed"})
        return json.dumps(out, ensure_ascii=False)

    # -- setup -------------------------------------------------------------------------------

    def get_config_schema(self) -> list[dict[str, Any]]:
        return config_schema()

    def save_config(self, values: dict[str, Any], hermes_home: str) -> None:
        """Save setup answers; a bad one (a port of "abc") raises ValueError and saves nothing."""
        save(values, hermes_home)

    def post_setup(self, hermes_home: str, config: dict[str, Any]) -> None:
        """``hermes memory setup``: our own prompts, so every answer is checked (wizard.py)."""
        from . import wizard

        wizard.run(hermes_home, config)

    def backup_paths(self) -> list[str]:
        """The gateway's data lives outside HERMES_HOME; let ``hermes backup`` take it along."""
        path: Path = data_dir()
        return [str(path)] if path.is_dir() else []

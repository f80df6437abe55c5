"""The offload façade the engine calls: tool results, assembly, read-back, canvases, health.

Each call works on one scope (its own directory) and one session (its own journal and task
state), under that session's lock; canvases are shared by the scope's sessions under the
scope's lock. Everything a host is answered about is on disk (fsync'ed) first. LLM work (when
an LLM is configured) only ever runs on the background worker of ``llm_tasks``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.offload import boundaries, guide, journal
from memory_tencentdb.offload.answer_list import answer_list
from memory_tencentdb.offload.budget import AssembleBudget
from memory_tencentdb.offload.context_blocks import ContextBlocks
from memory_tencentdb.offload.host_status import HostReports
from memory_tencentdb.offload.layout import ScopeLayout
from memory_tencentdb.offload.levels import OVERHEAD, Shrinker, Thresholds
from memory_tencentdb.offload.messages import (
    CANVAS_MARK,
    HISTORY_MARK,
    Call,
    Msg,
    detect_format,
    parse,
    sign,
    user_message,
)
from memory_tencentdb.offload.readback import ReadBack
from memory_tencentdb.offload.records import (
    OffloadRow,
    ToolResult,
)
from memory_tencentdb.offload.store import (
    Scope,
    Session,
    content_of,
    message_id,
    session_canvases,
    split_ref,
)
from memory_tencentdb.offload.summarize import describe_call, summarize
from memory_tencentdb.offload.tasks import Tasks
from memory_tencentdb.offload.tokens import TokenCounter
from memory_tencentdb.text.redact import redact, redact_obj

if TYPE_CHECKING:
    from memory_tencentdb.config import OffloadSettings
    from memory_tencentdb.llm.client import LLMClient
    from memory_tencentdb.llm.host_models import HostModels

log = logging.getLogger("memory_tencentdb.offload")

CANVAS_SHOWN_TOKENS = 1500
# The smallest token_budget /offload/assemble takes: the offload's own messages (the guide
# ~150 tokens with its paths, a canvas squeezed to its goal and newest step ~120, the history
# note ~90) need ~400 of it; below 1,024 no conversation would fit beside them.
MIN_TOKEN_BUDGET = 1024
MARK_KEY_FILE = ".mark-key"  # the key that signs our canvas / history messages (messages.sign)
EmbedProvider = Callable[[], "boundaries.Embed | None"]


class OffloadService:
    def __init__(
        self,
        cfg: OffloadSettings,
        data_dir: Path,
        tz: tzinfo,
        embed: EmbedProvider | None = None,
        llm: LLMClient | None = None,
        host_models: HostModels | None = None,
    ) -> None:
        self.cfg = cfg
        self.tz = tz
        root = Path(cfg.data_dir).expanduser() if cfg.data_dir else Path(data_dir) / "offload"
        self.root = root.resolve()
        self.embed = embed or (lambda: None)
        self.tokens = TokenCounter(cfg.l3_tiktoken_encoding, cfg.l3_token_count_mode)
        self._scopes: dict[str, Scope] = {}
        self._sessions: dict[tuple[str, str], Session] = {}
        self._guard = threading.Lock()
        self.counts = {"tool_results": 0, "assembles": 0, "reads": 0}
        self.hosts = HostReports()  # POST /offload/host-status (host adapters' own seams)
        self.readback = ReadBack(self)  # /offload/read, /offload/canvases, /offload/guide
        self.blocks = ContextBlocks(self)  # the canvas and history messages of an answer
        self.tasks = Tasks(self)  # L1.5 task boundaries and L2 canvas nodes
        # Sessions whose last answer could not fit its budget because the fixed part (system
        # prompt, tool schemas, the request, the canvas) alone exceeds it: /health shows them,
        # an entry leaves when that session's next answer fits.
        self.fixed_over_budget: dict[str, dict[str, Any]] = {}
        self._mark_key: bytes | None = None
        self.last_error: dict[str, str | None] = {"l1": None, "l15": None, "l2": None, "l3": None}
        self.startup_check: dict[str, Any] = {"state": "pending"}
        self.llm_worker = None
        if llm is not None or host_models is not None:  # host models: issue 24, llm_tasks.py
            from memory_tencentdb.offload.llm_tasks import LLMWorker

            self.llm_worker = LLMWorker(self, llm, host_models)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        # No tokenizer here: it loads on the first /offload/* request (see offload/tokens.py).
        if self.llm_worker is not None:
            self.llm_worker.start()
        threading.Thread(target=self._at_start, name="offload-start", daemon=True).start()

    def _at_start(self) -> None:
        self.check_journals()
        if self.llm_worker is not None and self.llm_worker.llm is not None:
            self.resume_backlog()

    def check_journals(self) -> dict[str, Any]:
        """At start, like the store's journal check: every ``offload-*.jsonl`` is read once, so
        a corrupt line (a torn write, a bad edit) is moved to ``<file>.corrupt`` and counted in
        ``/health`` now, not when its session is next used."""
        started = time.perf_counter()
        check: dict[str, Any] = {"state": "running", "journals": 0, "rows": 0, "corrupt_lines": 0}
        self.startup_check = check
        for path in sorted(self.root.glob("*/offload-*.jsonl")):
            try:
                rows, bad = journal.read(path)
            except OSError as e:
                log.warning("offload start-up check: cannot read %s: %s", path.name, e)
                continue
            check["journals"] += 1
            check["rows"] += len(rows)
            check["corrupt_lines"] += bad
            if bad:
                log.warning(
                    "offload start-up check: %d corrupt lines of %s moved to %s.corrupt",
                    bad,
                    path,
                    path.name,
                )
        check["seconds"] = round(time.perf_counter() - started, 3)
        check["state"] = "done"
        return check

    def resume_backlog(self) -> int:
        """At start: every session with steps the LLM had not refined before the gateway
        stopped is loaded, which queues them again (not only at its next use). Sessions are
        found by their state files, which name their scope."""
        n = 0
        for state_file in sorted(self.root.glob("*/sessions/*.json")):
            try:
                state = json.loads(state_file.read_text("utf-8"))
                scope, key = state.get("scope"), state.get("session_key")
                if state_file.parent.parent.name == "default" and scope is None:
                    scope = "default"  # files of before the scope was written down
                if not isinstance(scope, str) or not isinstance(key, str):
                    continue
                if ScopeLayout.of(self.root, scope).root != state_file.parent.parent:
                    continue
                journal_path = ScopeLayout.of(self.root, scope).journal(key)
                if b'"summary_by": "rules"' not in journal_path.read_bytes():
                    continue
                self.session(scope, key)
                n += 1
            except (OSError, ValueError) as e:
                log.warning("offload: could not resume %s: %s", state_file.name, e)
        if n:
            log.info("offload: resumed the LLM backlog of %d sessions", n)
        return n

    def close(self) -> None:
        if self.llm_worker is not None:
            self.llm_worker.stop()

    def now(self) -> str:
        return datetime.now(self.tz).isoformat(timespec="milliseconds")

    def scope(self, name: str) -> Scope:
        with self._guard:
            s = self._scopes.get(name)
            if s is None:
                s = self._scopes[name] = Scope(name, ScopeLayout.of(self.root, name))
            return s

    def session(self, scope: str, key: str) -> Session:
        with self._guard:
            sess = self._sessions.get((scope, key))
        if sess is not None:
            return sess
        sc = self.scope(scope)
        fresh = Session(sc, key)
        fresh.load()
        with self._guard:
            sess = self._sessions.setdefault((scope, key), fresh)
        if sess is fresh and self.llm_worker is not None:
            self.llm_worker.resume(sess)  # rows the LLM had not refined before a restart
        return sess

    def count(self, text: str) -> int:
        return self.tokens.count(text)

    @property
    def mark_key(self) -> bytes:
        """The key our own messages are signed with (made once per data directory, 0600), so
        a canvas we sent is recognised when the host sends it back, and a user's text that
        merely looks like one is not."""
        if self._mark_key is None:
            path = self.root / MARK_KEY_FILE
            try:
                key = path.read_bytes()
            except FileNotFoundError:
                import secrets

                self.root.mkdir(parents=True, exist_ok=True)
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as f:
                        f.write(secrets.token_bytes(32))
                except FileExistsError:
                    pass
                key = path.read_bytes()
            self._mark_key = key
        return self._mark_key

    # ------------------------------------------------------------------ L1: tool results

    def stub(self, sess: Session, row: OffloadRow) -> str:
        path = None
        if row.result_ref:
            name, span = split_ref(row.result_ref)
            part = f" (bytes {span[0]}-{span[1]})" if span else ""
            path = f"{sess.scope.layout.root / name}{part}"
        summary = row.summary
        call, sep, rest = summary.partition("; ")
        if sep and row.tool_call.startswith(call.rstrip("…")):
            summary = rest  # the call is right above the stub, in the assistant message
        summary = summary if len(summary) <= 240 else summary[:239] + "…"
        return (
            f"[Offloaded tool result: {row.tool_name or '?'}, {row.tokens} tokens,"
            f" node {row.node_id or 'N/A'}] {summary}\n"
            f"{guide.read_line(row.tool_call_id, path)}"
        )

    def _record(
        self,
        sess: Session,
        result: ToolResult,
        in_canvas: bool = True,
        stub_over: int | None = None,
        message: bool = False,
    ) -> OffloadRow:
        """Ref first (fsync), then the canvas node, then the row (fsync). Caller holds the lock."""
        found = sess.row(result.tool_call_id)
        if found is not None:
            return found
        if not result.timestamp:
            result.timestamp = self.now()
        # Secrets in tool output (a printed .env, a token in a log) never reach a file: the ref,
        # the row's summary and the canvas all derive from the redacted text, and read-back
        # returns exactly that text (byte-exact for every result without a secret).
        result.content = redact(result.content)
        result.arguments = redact_obj(result.arguments)
        ref = sess.write_ref(result)
        tokens = self.count(result.content)
        if message:  # a conversation message that left the context: its opening is its summary
            call, summary = result.tool_name, _clip(result.content[:400], 160)
        else:
            call = describe_call(result.tool_name, result.arguments)
            summary = summarize(result.tool_name, result.arguments, result.content, result.is_error)
        row = OffloadRow(
            tool_call_id=result.tool_call_id,
            tool_call=call,
            summary=summary,
            timestamp=result.timestamp,
            score=5,
            node_id=None,
            result_ref=ref,
            tool_name=result.tool_name,
            is_error=result.is_error,
            tokens=tokens,
        )
        if stub_over is not None and tokens > stub_over:
            row.offloaded = True  # the host is answered a stub: no rewrite needed for it
        if in_canvas:
            try:
                row.node_id = self.tasks.add_node(sess, row)
            except OSError as e:  # the row and ref still count; the canvas catches up later
                self.last_error["l2"] = f"{type(e).__name__}: {e}"
                log.warning("offload canvas write failed: %s", e)
        sess.add(row)
        if in_canvas and self.llm_worker is not None:
            self.llm_worker.after_row(sess, row)
        return row

    def tool_result(self, scope: str, session_key: str, result: ToolResult) -> dict[str, Any]:
        sess = self.session(scope, session_key)
        with sess.lock:
            found = sess.row(result.tool_call_id)
            row = found or self._record(sess, result, stub_over=self.cfg.tool_result_keep_tokens)
            self.counts["tool_results"] += found is None
            keep = row.tokens <= self.cfg.tool_result_keep_tokens
            if not keep and row.offloaded is None:
                row.offloaded = True
                sess.flush_rows()
        return {
            "offloaded": not keep,
            "replacement": None if keep else self.stub(sess, row),
            "ref": row.result_ref,
            "ref_path": str(sess.scope.layout.root / row.result_ref) if row.result_ref else None,
            "summary": row.summary,
            "tool_call_id": row.tool_call_id,
            "node_id": row.node_id,
            "tokens": row.tokens,
            "duplicate": found is not None,
        }

    # ------------------------------------------------------------------ L1.5 / L2: tasks

    def active_canvas(self, scope: str, session_key: str) -> str | None:
        """The canvas ``{"canvas": "active"}`` means for this caller: its session's own active
        task, never another session's (None before its first step)."""
        sess = self.session(scope, session_key)
        with sess.lock:
            name = sess.state.get("active")
            return name if name in session_canvases(sess) else None

    # ------------------------------------------------------------------ L3: assemble

    def assemble(
        self,
        scope: str,
        session_key: str,
        messages: list[Any],
        token_budget: int,
        prompt: str | None = None,
        system_tokens: int = 0,
        fmt_hint: str | None = None,
        current_turn_follows: bool = False,
        pending_tool_call_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        started = time.perf_counter()
        fmt = detect_format(messages, fmt_hint)
        msgs = parse(messages, fmt, self.mark_key)  # OffloadInputError before any write
        sess = self.session(scope, session_key)
        with sess.lock:
            sess.begin()
            try:
                # Results the host appends after the list (OpenClaw's current turn) count as
                # in the context for this call: ContextBlocks.stub_savings, .shortened.
                sess.pending_ids = list(pending_tool_call_ids or []) if current_turn_follows else []
                out = self._assemble(
                    sess, fmt, msgs, token_budget, prompt, system_tokens, current_turn_follows
                )
            except Exception as e:
                self.last_error["l3"] = f"{type(e).__name__}: {e}"
                raise
            finally:
                sess.pending_ids = []
                sess.commit(self.now())  # refs and rows on disk before the answer (or the error)
        self.counts["assembles"] += 1
        self.last_error["l3"] = None
        out["stats"]["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return out

    def _assemble(
        self,
        sess: Session,
        fmt: str,
        msgs: list[Msg],
        budget: int,
        prompt: str | None,
        system_tokens: int,
        follows: bool = False,
    ) -> dict[str, Any]:
        cfg = self.cfg
        sent_back = [m.body for m in msgs if m.ours and m.body.lstrip().startswith(HISTORY_MARK)]
        msgs = [m for m in msgs if not m.ours]
        if prompt and prompt.strip():
            try:
                self.tasks.on_prompt(sess, prompt)
                self.last_error["l15"] = None
            except Exception as e:  # noqa: BLE001 - a boundary failure never fails assembly
                self.last_error["l15"] = f"{type(e).__name__}: {e}"
                log.warning("offload L1.5 failed: %s", e)
        recorder = _Recorder(self, sess)
        input_tokens = sum(sum(map(self.count, m.parts)) + OVERHEAD for m in msgs) + system_tokens
        guide_text = guide.text(sess.scope.layout.root, sess.journal_path)
        guide_tokens = self.count(guide_text)
        active = sess.state.get("active") or sess.state.get("previous")
        # The original's L2 keeps a canvas under ~4,000 characters; the deterministic one grows
        # a node per step, so only its newest nodes are shown (the file keeps every one).
        canvas_cap = max(200, min(int(budget * cfg.mmd_max_token_ratio), CANVAS_SHOWN_TOKENS))
        # The guide's room is kept; it is sent only if this answer shortens something.
        fixed = system_tokens + guide_tokens
        th = Thresholds(
            budget=budget,
            mild=budget * cfg.mild_offload_ratio,
            aggressive=budget * cfg.aggressive_compress_ratio,
            emergency=budget * cfg.emergency_compress_ratio,
            emergency_target=budget * cfg.emergency_target_ratio,
            scan_ratio=cfg.mild_offload_scan_ratio,
            keep_tokens=cfg.tool_result_keep_tokens,
        )
        shrinker = Shrinker(
            recorder,
            fmt,
            th,
            fixed,
            sess.state.get("task_start"),
            turn_prompt=sess.state.get("turn_prompt"),
            request_follows=follows,
        )
        tally = AssembleBudget(budget, shrinker, self.count, fixed, guide_tokens)
        restored = False if follows else self._restore_request(sess, msgs, fmt)
        shrinker.build(msgs)
        outcome = shrinker.run()
        active = sess.state.get("active") or sess.state.get("previous")  # this call's steps
        if active and not (sess.scope.layout.mmds / active).exists():
            active = None
        block, info = self.blocks.shown(
            sess, active, outcome, canvas_cap, tally.list_tokens(), follows=follows
        )
        tally.put("canvas", block)
        if block and shrinker.emergency():  # the canvas tipped it over: more left, show them too
            outcome.level = "emergency"
            tally.put("canvas", "")
            block, info = self.blocks.shown(
                sess, active, outcome, canvas_cap, tally.list_tokens(), follows=follows
            )
            tally.put("canvas", block)
        if not self.blocks.shortened(sess, outcome):
            guide_text = ""  # nothing to read back: the guide would only cost tokens
            tally.put("guide", guide_text, message=False)
        tally.seal()
        history = (
            self.blocks.history_blocks(sess, outcome.removed, active)
            if outcome.level in ("aggressive", "emergency")
            else []
        )
        first = next((u for u in outcome.units if not u.removed and u.kind != "system"), None)
        removed = sum(len(u.items) for u in outcome.units if u.removed)

        def note_for(n: int) -> str:
            return (
                f'<history_task_context mode="offloaded">\n{n} earlier messages of this'
                " conversation left the context, each kept with its id in"
                f' {sess.journal_path}: {guide.TOOL_NAME} {{"tool_call_id": "<id>"}} returns'
                " it exactly.\n</history_task_context>"
            )

        note = note_for(removed)
        need_head = first is not None and first.kind != "user"
        hist_tokens = sum(tally.cost(h) for h in history)
        while history and not tally.fits(hist_tokens):
            hist_tokens -= tally.cost(history.pop(0))
        # Whatever left is named by a task's history block or this note (also for a host that
        # shows its own canvas instead of ours), and the list never starts with an assistant.
        head = "\n".join(history) if history else (note if removed or need_head else "")
        if not removed and sent_back:  # what left at an earlier call is still gone: say so
            head = sent_back[-1]
        if head and not (not removed and sent_back and head == sent_back[-1]):
            head = sign(head, self.mark_key)  # (a block sent back is signed already)
        tally.put("head", head)
        if tally.over() and block:  # last resort: the canvas shrinks to its newest step
            block, info = self.blocks.shown(
                sess, active, outcome, canvas_cap, 0, squeeze=60, follows=follows
            )
            tally.put("canvas", block)
        if tally.over() and guide_text:
            guide_text = (
                f"Offloaded content: {guide.TOOL_NAME} with tool_call_id, result_ref, node_id"
                f" or canvas; files under {sess.scope.layout.root}."
            )
            tally.put("guide", guide_text, message=False)
        while tally.over() and tally.fit_list():
            # What was added after the levels ran (the history head, the canvas, the guide)
            # tipped it over: more of what may go goes (the note then counts them too). A
            # larger count can lengthen the note by a token and tip it over again (seen: 3,002
            # of 3,000), so this repeats until it fits or nothing more may go.
            outcome.level = "emergency"
            if history:
                break
            # The note counts what left, and the list starts with a user.
            removed = sum(len(u.items) for u in outcome.units if u.removed)
            head = sign(note_for(removed), self.mark_key)
            tally.put("head", head)
        total = tally.total
        # Nothing else may go: the system prompt, the tool schemas, the request and the canvas
        # are what the model needs to go on with the task. Said once (log, /health) per episode.
        self._note_fixed_over(sess, budget, int(total), outcome, system_tokens)
        self._mark(sess, outcome)
        return {
            "messages": answer_list(outcome.units, head, block, fmt, follows),
            "estimated_tokens": int(total),
            "level": outcome.level,
            "system_addition": guide_text,
            "canvas": info,
            "format": fmt,
            "stats": {
                "input_tokens": input_tokens,
                "stubbed": len(outcome.stubbed),
                "removed": sum(len(u.items) for u in outcome.units if u.removed),
                "truncated": outcome.truncated,
                "orphans_dropped": outcome.orphans,
                "synthetic_results": outcome.synthetic,
                "tokenizer": self.tokens.name,
                "over_budget": total > budget,
                "fixed_tokens": outcome.fixed_tokens + system_tokens,
                "request_restored": restored,
                "canvas_tokens": tally.tokens("canvas"),
                "guide_tokens": tally.tokens("guide"),
                "saved_tokens": int(input_tokens - total),
            },
        }

    def _restore_request(self, sess: Session, msgs: list[Msg], fmt: str) -> bool:
        """The turn's request back in the list when the host lost it (seen in Hermes 0.19.0:
        after a compaction its live list lacked the turn's user message although the
        compacted list held it). It goes right after the system messages, before the turn's
        tool calls. ``msgs`` is changed in place."""
        text = sess.state.get("turn_text")

        # Only a list with no user message of the host's (our own signed notes do not count:
        # after a Hermes compaction its list held our history note and no request): a list
        # that has one is the host's own (a new turn whose prompt we were not told keeps its
        # own request).
        # A note that only looks like ours (its signature not checking, e.g. the host
        # re-wrapped it) does not count either: the worst a forged one can do is have the
        # turn's own request put back.
        def the_hosts(m: Msg) -> bool:
            return m.role == "user" and not (
                m.ours or m.text.lstrip().startswith((CANVAS_MARK, HISTORY_MARK))
            )

        if not text or any(the_hosts(m) for m in msgs):
            return False
        if not any(m.role == "assistant" for m in msgs):
            return False  # nothing of a turn in it
        at = 0
        while at < len(msgs) and msgs[at].role == "system":
            at += 1
        msgs.insert(at, parse([user_message(text, fmt)], fmt)[0])
        return True

    def _note_fixed_over(
        self, sess: Session, budget: int, total: int, outcome: Any, system_tokens: int
    ) -> None:
        """Record (and log once) that this session's answer is over its budget because what no
        level may cut does not fit; forget it when the session's next answer fits."""
        key = f"{sess.scope.name}/{sess.key}"
        if total <= budget:
            if self.fixed_over_budget.pop(key, None) is not None:
                log.info("offload assemble: session %s fits its token budget again", sess.key)
            return
        entry = {
            "scope": sess.scope.name,
            "session_key": sess.key,
            "token_budget": budget,
            "estimated_tokens": total,
            "fixed_tokens": outcome.fixed_tokens + system_tokens,
            "since": self.fixed_over_budget.get(key, {}).get("since") or self.now(),
        }
        if key not in self.fixed_over_budget:
            log.warning(
                "offload assemble: session %s needs %d tokens for its fixed part (system prompt,"
                " tool schemas, the request, the canvas); token_budget %d cannot hold it, so the"
                " smallest list that keeps it is sent (%d tokens)",
                sess.key,
                entry["fixed_tokens"],
                budget,
                total,
            )
        while len(self.fixed_over_budget) >= 100 and key not in self.fixed_over_budget:
            self.fixed_over_budget.pop(next(iter(self.fixed_over_budget)))
        self.fixed_over_budget[key] = entry

    def _mark(self, sess: Session, outcome: Any) -> None:
        changed = False
        for row in outcome.stubbed:
            if row.offloaded is None:
                row.offloaded, changed = True, True
        for row in outcome.removed:
            if row.offloaded != "deleted":
                row.offloaded, changed = "deleted", True
        if changed:
            sess.dirty = True  # rewritten at commit, after the refs are synced

    # ------------------------------------------------------------------ read-back

    def read(
        self,
        scope: str,
        session_key: str | None,
        offset: int = 0,
        length: int | None = None,
        **key: str,
    ) -> dict[str, Any]:
        """The original behind a key, paged (offload/readback.py)."""
        return self.readback.read(scope, session_key, offset, length, **key)

    def canvases(self, scope: str, session_key: str | None) -> dict[str, Any]:
        """The session's active canvas and the scope's others (offload/readback.py)."""
        return self.readback.canvases(scope, session_key)

    def guide(self, scope: str, session_key: str | None) -> dict[str, Any]:
        """The read tool's description for this scope (offload/readback.py)."""
        return self.readback.guide(scope, session_key)

    # ------------------------------------------------------------------ health

    def status(self) -> dict[str, Any]:
        worker = self.llm_worker
        with self._guard:
            corrupt = sum(s.corrupt for s in self._sessions.values())
        return {
            "enabled": self.cfg.enabled,
            "data_dir": str(self.root),
            "tokenizer": self.tokens.status(),
            "llm": worker is not None and worker.serving() is not None,
            # "gateway" (TDAI_LLM_*), "host-model" (llm/host_models.py) or null (the rules).
            "llm_source": worker.serving() if worker else None,
            "llm_waiting": worker.waiting() if worker else {"deferred": 0, "kept_rules": 0},
            "backlog": worker.backlog() if worker else {"l1": 0, "l15": 0, "l2": 0},
            "last_error": {**self.last_error, **(worker.errors() if worker else {})},
            "corrupt_lines": corrupt + int(self.startup_check.get("corrupt_lines") or 0),
            "startup_check": dict(self.startup_check),
            "counts": dict(self.counts),
            "hosts": self.hosts.status(),
            # Sessions whose fixed part alone exceeds their token budget (cleared once it fits).
            "fixed_over_budget": list(self.fixed_over_budget.values()),
        }

    def degraded(self) -> list[str]:
        out = []
        if self.tokens.error:
            out.append(
                f"offload tokenizer unavailable ({self.tokens.error}); token counts estimated"
            )
        out.extend(self.hosts.degraded())
        return out


class _Recorder:
    """What the L3 shrinker needs from the service, bound to one session (lock held)."""

    def __init__(self, svc: OffloadService, sess: Session) -> None:
        self.svc, self.sess = svc, sess

    def row(self, tool_call_id: str) -> OffloadRow | None:
        return self.sess.row(tool_call_id)

    def record_result(self, msg: Msg, call: Call | None) -> OffloadRow:
        content, encoding = content_of(msg.raw.get("content"))
        ts = msg.raw.get("timestamp")
        result = ToolResult(
            tool_call_id=msg.call_id or "",
            tool_name=msg.tool_name or (call.name if call else ""),
            arguments=call.arguments if call else {},
            content=content,
            encoding=encoding,
            is_error=msg.is_error,
            timestamp=_iso(ts, self.svc.tz) or self.svc.now(),
        )
        return self.svc._record(self.sess, result, in_canvas=call is not None)

    def record_message(self, msg: Msg) -> OffloadRow:
        mid = message_id(msg.role, msg.body)
        found = self.sess.row(mid)
        if found is not None:
            return found
        result = ToolResult(
            tool_call_id=mid,
            tool_name=f"message:{msg.role}",
            arguments={},
            content=msg.body,
            timestamp=self.svc.now(),
        )
        return self.svc._record(self.sess, result, in_canvas=False, message=True)

    def stub(self, row: OffloadRow) -> str:
        return self.svc.stub(self.sess, row)

    def count(self, text: str) -> int:
        return self.svc.count(text)

    def count_parts(self, parts: list[str]) -> int:
        return sum(self.svc.count(p) for p in parts)


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _iso(value: Any, tz: tzinfo) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        secs = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(secs, tz).isoformat(timespec="milliseconds")
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value.strip():
        try:
            return datetime.fromisoformat(value.strip()).isoformat(timespec="milliseconds")
        except ValueError:
            return None
    return None


def parse_timestamp(value: Any, tz: tzinfo) -> str | None:
    return _iso(value, tz)


__all__ = ["CANVAS_MARK", "HISTORY_MARK", "OffloadService", "parse_timestamp"]

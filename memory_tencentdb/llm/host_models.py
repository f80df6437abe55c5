"""The hosts' own models, handed to the gateway, serving memory's LLM tasks (issue 24).

Why: a zero-config user already has a model configured in Hermes or OpenClaw. When the gateway
has no ``TDAI_LLM_*`` of its own, each host adapter hands over its host's model as an
OpenAI-compatible or Anthropic Messages endpoint (``POST /llm/host-model``, ``api``) and the pipeline uses it for L1, L2 and
the persona instead of the rules.

Rules a reader can state:

- **In memory only.** An endpoint lives in this process until the gateway exits or the same
  principal hands over another one; it is never written to disk, and its key never reaches a
  log line, an error or ``/health`` (which shows the source, the model and the base URL's host).
- **Privacy.** A scope's task goes only to a model handed over by a principal allowed to write
  that scope (``can_write``, the gateway's live access policy, asked at every task). Several
  allowed: a non-owner principal first (the scope's own user), then the latest hand-over.
- **Budget.** At most ``llm.dailyCallBudget`` calls and ``llm.dailyTokenBudget`` tokens a UTC day
  go to host models (all principals together); past either, ``client_for`` answers None and the
  rules serve, and ``/health`` says so.
- **Back off.** A failed call (429, 5xx, timeout, a bad answer) rests that model for 30 s,
  doubling per consecutive failure up to 10 min; meanwhile the rules serve and the pipeline keeps
  the task to redo with the model (pipeline/scheduler.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memory_tencentdb.llm.client import LLMClient, LLMError, Reply

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings

log = logging.getLogger("memory_tencentdb.llm")

SOURCES = ("hermes", "openclaw")
REST_MAX_S = 600.0

# (principal name, scope) -> may that principal write the scope (the live access policy).
CanWrite = Callable[[Any, str], bool]


class BudgetSpent(LLMError):
    """The day's memory LLM budget is spent: the rules serve until midnight UTC."""


@dataclass
class Budget:
    """Calls and tokens spent on host models today (UTC), against the day's limits."""

    calls_limit: int
    tokens_limit: int
    day: str = ""
    calls: int = 0
    tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _roll(self) -> None:
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        if today != self.day:
            self.day, self.calls, self.tokens = today, 0, 0

    def left(self) -> tuple[int, int]:
        with self._lock:
            self._roll()
            return self.calls_limit - self.calls, self.tokens_limit - self.tokens

    def spent(self) -> bool:
        calls, tokens = self.left()
        return calls <= 0 or tokens <= 0

    def charge(self, reply: Reply | None) -> None:
        with self._lock:
            self._roll()
            self.calls += 1
            if reply is not None:
                self.tokens += reply.prompt_tokens + reply.completion_tokens

    def status(self) -> dict[str, Any]:
        calls, tokens = self.left()
        return {
            "day": self.day,
            "calls_limit": self.calls_limit,
            "tokens_limit": self.tokens_limit,
            "calls_left": max(0, calls),
            "tokens_left": max(0, tokens),
            "spent": calls <= 0 or tokens <= 0,
        }


class HostModelClient(LLMClient):
    """An ``LLMClient`` on a host's endpoint that charges the day's budget and rests the model
    after a failure. One attempt per call: a 429 or 5xx is not hammered, the model rests."""

    def __init__(self, entry: HostModel, budget: Budget, timeout_ms: int) -> None:
        super().__init__(
            base_url=entry.base_url.rstrip("/"),
            api_key=entry.api_key,
            model=entry.model,
            timeout_ms=timeout_ms,
            attempts=1,
            api=entry.api,
            # Says whose model this is to the endpoint (a proxy's logs, the tests' fake).
            tag={"X-Memory-Source": "host-model"},
        )
        self.entry = entry
        self.budget = budget

    def chat(
        self, task: str, messages: list[dict[str, str]], max_tokens: int | None = None
    ) -> Reply:
        if self.budget.spent():
            raise BudgetSpent(f"{task}: the day's memory LLM budget is spent")
        try:
            reply = super().chat(task, messages, max_tokens)
        except LLMError as e:
            self.budget.charge(None)
            self.entry.failed(str(e))
            raise
        self.budget.charge(reply)
        self.entry.answered()
        return reply


@dataclass
class HostModel:
    """One principal's handed-over endpoint (or why its host's model cannot be used)."""

    principal: Any  # gateway.access.Principal (kept opaque here: no gateway import below)
    source: str
    model: str = ""
    base_url: str = field(default="", repr=False)
    api_key: str = field(default="", repr=False)
    max_context: int | None = None
    api: str = "openai"  # the protocol it speaks: a key of llm.client.PROTOCOLS
    unusable: str = ""  # "host model not usable: <provider kind>"
    handed_at: float = field(default_factory=time.time)
    failures: int = 0
    rest_until: float = 0.0
    last_error: str | None = None
    calls_ok: int = 0
    client: HostModelClient | None = field(default=None, repr=False)
    rest_first_s: float = 30.0

    def failed(self, error: str) -> None:
        self.failures += 1
        rest = min(REST_MAX_S, self.rest_first_s * 2 ** (self.failures - 1))
        self.rest_until = time.monotonic() + rest
        self.last_error = _mask(error, self.api_key)[:300]
        log.warning(
            "host model %s (%s) failed (%d in a row), resting %.0fs: %s",
            self.model,
            self.source,
            self.failures,
            rest,
            self.last_error,
        )

    def answered(self) -> None:
        self.failures, self.rest_until, self.last_error = 0, 0.0, None
        self.calls_ok += 1

    def resting(self) -> bool:
        return self.rest_until > time.monotonic()

    def public(self) -> dict[str, Any]:
        """What ``/health`` may show: never the key, only the base URL's host."""
        out: dict[str, Any] = {
            "principal": getattr(self.principal, "name", "?"),
            "source": self.source,
        }
        if self.unusable:
            out["usable"] = False
            out["reason"] = self.unusable
            return out
        rest = max(0.0, self.rest_until - time.monotonic())
        out.update(
            {
                "usable": True,
                "model": self.model,
                "api": self.api,
                "host": urlsplit(self.base_url).hostname or "",
                "max_context": self.max_context,
                "calls_ok": self.calls_ok,
                "failures": self.failures,
                "resting_s": round(rest, 1),
                "last_error": self.last_error,
            }
        )
        return out


class HostModels:
    """The handed-over endpoints by principal, and the choice of one per scope."""

    def __init__(self, settings: Settings) -> None:
        llm = settings.llm
        self.budget = Budget(int(llm.daily_call_budget), int(llm.daily_token_budget))
        # Explicitly configured llm.timeoutMs applies to host models too (tests, slow models).
        self.timeout_ms = int(llm.timeout_ms)
        self.rest_first_s = float(llm.host_rest_seconds)
        self.can_write: CanWrite | None = None  # set by the gateway (its live access policy)
        self.alive: Callable[[Any], bool] = lambda principal: True
        self._by_principal: dict[str, HostModel] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- hand-over

    def hand_over(
        self,
        principal: Any,
        source: str,
        base_url: str,
        api_key: str,
        model: str,
        max_context: int | None = None,
        api: str = "openai",
    ) -> HostModel:
        name = principal.name
        with self._lock:
            old = self._by_principal.get(name)
            if (
                old is not None
                and not old.unusable
                and (old.base_url, old.api_key, old.model, old.source, old.api)
                == (base_url, api_key, model, source, api)
            ):
                old.max_context = max_context
                return old  # the same model again (a new session): keep its state
            entry = HostModel(principal, source, model, base_url, api_key, max_context, api)
            entry.rest_first_s = self.rest_first_s
            entry.client = HostModelClient(entry, self.budget, self.timeout_ms)
            self._by_principal[name] = entry
        log.info(
            "host model from %s (%s): %s at %s serves memory for the scopes it may write",
            name,
            source,
            model,
            urlsplit(base_url).hostname or "?",
        )
        return entry

    def not_usable(self, principal: Any, source: str, kind: str) -> HostModel:
        """The host's provider speaks neither protocol (Codex OAuth, Bedrock, ...)."""
        entry = HostModel(principal, source, unusable=f"host model not usable: {kind}")
        with self._lock:
            self._by_principal[principal.name] = entry
        log.info(
            "host model from %s (%s) not usable: %s; the rules serve", principal.name, source, kind
        )
        return entry

    def withdraw(self, principal: Any) -> bool:
        with self._lock:
            return self._by_principal.pop(principal.name, None) is not None

    # ---------------------------------------------------------------- choice

    def candidates(self, scope: str) -> list[HostModel]:
        """Usable endpoints of principals allowed to write ``scope``, best first."""
        with self._lock:
            entries = list(self._by_principal.values())
        can_write = self.can_write
        if can_write is None:
            return []
        ok = [
            e
            for e in entries
            if not e.unusable and self.alive(e.principal) and can_write(e.principal, scope)
        ]
        ok.sort(key=lambda e: (bool(getattr(e.principal, "owner", False)), -e.handed_at))
        return ok

    def client_for(self, scope: str) -> HostModelClient | None:
        """The client to use for one task of ``scope`` now, or None (the rules serve)."""
        if self.budget.spent():
            return None
        for entry in self.candidates(scope):
            if not entry.resting():
                return entry.client
        return None

    def waiting_for(self, scope: str) -> bool:
        """Whether a model allowed for ``scope`` exists but rests or the budget is spent: the
        task is kept to redo with it later."""
        return bool(self.candidates(scope))

    def entries(self) -> list[HostModel]:
        with self._lock:
            return list(self._by_principal.values())

    def any_registered(self) -> bool:
        with self._lock:
            return bool(self._by_principal)

    def status(self) -> dict[str, Any]:
        with self._lock:
            entries = list(self._by_principal.values())
        return {
            "models": [e.public() for e in sorted(entries, key=lambda e: e.handed_at)],
            "budget": self.budget.status(),
        }


def _mask(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text

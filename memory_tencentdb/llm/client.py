"""One chat client for every pipeline task: OpenAI-compatible chat completions, or Anthropic's
Messages API for a host model that speaks it (issue 24; ``api="anthropic"``).

- Configured by ``settings.llm`` (``TDAI_LLM_*`` / ``MEMORY_TENCENTDB_LLM_*``).
- Each task has its own timeout and output limit (``TASKS``); an explicitly configured
  ``llm.timeoutMs`` overrides every task's timeout (tests and slow local models use this).
- Transient failures (connection errors, 408/409/429, 5xx) are retried a few times with
  exponential backoff by tenacity; a timeout is not retried here, the pipeline's own backoff
  decides when to try again.
- The protocol is one pair of plain functions (request, reply) per ``api`` in ``PROTOCOLS``;
  retries, timeouts, error classes and usage are shared, so a host model's budget, rest and
  fallback (llm/host_models.py) behave the same whichever protocol it speaks.
- Token usage is logged per call and totalled per task for ``/health``. The API key never
  reaches a log line or an error message.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from memory_tencentdb.llm.jsonparse import JSONParseError, JSONTruncated, parse_json

if TYPE_CHECKING:
    from memory_tencentdb.config import LLMSettings

log = logging.getLogger("memory_tencentdb.llm")

DEFAULT_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class Task:
    name: str
    timeout_ms: int
    max_tokens: int | None = None  # None: the configured llm.maxTokens


# The original's per-call timeouts: extraction, arbitration and persona 180 s, scenes 300 s.
TASKS = {
    "l1-extraction": Task("l1-extraction", 180_000),
    "l1-dedup": Task("l1-dedup", 180_000),
    "l2-scenes": Task("l2-scenes", 300_000),
    "l3-persona": Task("l3-persona", 180_000),
    # Offload tasks run in the background; shorter, so a stuck call frees the worker soon.
    "offload-l1": Task("offload-l1", 60_000),
    "offload-l15": Task("offload-l15", 30_000),
    "offload-l2": Task("offload-l2", 120_000),
}


class LLMError(RuntimeError):
    """A call failed; the message is safe to log and to show in ``/health``."""


class LLMTimeout(LLMError):
    pass


@dataclass
class Reply:
    text: str
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_ms: int = 0

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class Usage:
    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_error: str | None = None


class _Retryable(Exception):
    """A failure worth another attempt (connection, rate limit, server error)."""


@dataclass
class LLMClient:
    base_url: str
    api_key: str
    model: str
    max_tokens: int = 4096
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    attempts: int = 3
    usage: dict[str, Usage] = field(default_factory=dict)
    tag: dict[str, str] = field(default_factory=dict)  # extra request headers (host models)
    api: str = "openai"  # a key of PROTOCOLS

    def __post_init__(self) -> None:
        self._http = httpx.Client(
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4)
        )
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_settings(cls, llm: LLMSettings) -> LLMClient:
        return cls(
            base_url=llm.base_url.rstrip("/"),
            api_key=llm.api_key,
            model=llm.model,
            max_tokens=llm.max_tokens,
            timeout_ms=llm.timeout_ms,
        )

    def close(self) -> None:
        self._closed = True
        self._http.close()

    def task_timeout(self, task: str) -> float:
        spec = TASKS.get(task)
        if spec is None or self.timeout_ms != DEFAULT_TIMEOUT_MS:
            return self.timeout_ms / 1000
        return spec.timeout_ms / 1000

    # ------------------------------------------------------------------ calls

    def chat(
        self, task: str, messages: list[dict[str, str]], max_tokens: int | None = None
    ) -> Reply:
        """One completion. Raises ``LLMError`` (or ``LLMTimeout``) with a log-safe message."""
        spec = TASKS.get(task)
        limit = max_tokens or (spec.max_tokens if spec else None) or self.max_tokens
        build, _ = PROTOCOLS[self.api]
        url, headers, body = build(self.base_url, self.api_key, self.model, messages, limit)
        headers = {**headers, "X-Memory-Task": task, **self.tag}
        timeout = self.task_timeout(task)
        started = time.monotonic()
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.attempts),
                wait=wait_exponential(multiplier=0.5, min=0.5, max=8),
                retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
                reraise=True,
            ):
                with attempt:
                    reply = self._post(task, url, headers, body, timeout)
        except _Retryable as e:
            self._record(task, None, str(e))
            raise LLMError(f"{task}: {e}") from None
        except RetryError as e:  # pragma: no cover - reraise=True makes this unusual
            self._record(task, None, str(e))
            raise LLMError(f"{task}: {e}") from None
        except LLMError as e:
            self._record(task, None, str(e))
            raise
        reply.elapsed_ms = int((time.monotonic() - started) * 1000)
        self._record(task, reply, None)
        log.info(
            "llm task=%s model=%s prompt_tokens=%d completion_tokens=%d finish=%s ms=%d",
            task,
            self.model,
            reply.prompt_tokens,
            reply.completion_tokens,
            reply.finish_reason or "?",
            reply.elapsed_ms,
        )
        return reply

    def chat_json(
        self,
        task: str,
        system: str,
        user: str,
        expect: type | None = None,
        max_tokens: int | None = None,
    ) -> tuple[Any, Reply]:
        """A completion parsed as JSON. Raises ``JSONParseError``/``JSONTruncated``/``LLMError``."""
        reply = self.chat(
            task,
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_tokens,
        )
        try:
            return parse_json(reply.text, expect), reply
        except JSONTruncated:
            raise
        except JSONParseError as e:
            if reply.truncated:
                raise JSONTruncated(f"{task}: reply cut off at the output limit") from e
            raise

    def _post(
        self, task: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout: float
    ) -> Reply:
        try:
            r = self._http.post(
                url,
                json=body,
                headers=headers,
                timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
            )
        except httpx.TimeoutException:
            raise LLMTimeout(f"{task}: no answer within {timeout:g}s") from None
        except httpx.TransportError as e:
            raise _Retryable(f"connection failed ({type(e).__name__})") from None
        if r.status_code in (408, 409, 429) or r.status_code >= 500:
            raise _Retryable(f"HTTP {r.status_code}: {self._safe(r.text)}")
        if r.status_code >= 400:
            raise LLMError(f"{task}: HTTP {r.status_code}: {self._safe(r.text)}")
        _, read = PROTOCOLS[self.api]
        try:
            return read(r.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(f"{task}: malformed {self.api} response: {self._safe(r.text)}") from None

    def _safe(self, text: str) -> str:
        """A response excerpt for logs and /health, with the key masked should it be echoed."""
        out = _safe(text)
        return out.replace(self.api_key, "***") if self.api_key else out

    def _record(self, task: str, reply: Reply | None, error: str | None) -> None:
        with self._lock:
            u = self.usage.setdefault(task, Usage())
            u.calls += 1
            if reply is not None:
                u.prompt_tokens += reply.prompt_tokens
                u.completion_tokens += reply.completion_tokens
            if error:
                u.failures += 1
                u.last_error = error
                log.warning("llm task=%s failed: %s", task, error)

    def usage_summary(self) -> dict[str, Any]:
        with self._lock:
            return {
                task: {
                    "calls": u.calls,
                    "failures": u.failures,
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                }
                for task, u in sorted(self.usage.items())
            }


# ---------------------------------------------------------------- protocols
# request(base_url, api_key, model, messages, max_tokens) -> (url, headers, body);
# reply(parsed JSON) -> Reply, raising KeyError/TypeError/... on a malformed answer.

Request = tuple[str, dict[str, str], dict[str, Any]]


def openai_request(
    base_url: str, api_key: str, model: str, messages: list[dict[str, str]], max_tokens: int
) -> Request:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": False}
    return f"{base_url}/chat/completions", headers, body


def openai_reply(data: Any) -> Reply:
    choice = data["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content")
    if text is None:
        text = message.get("reasoning_content") or ""
    if isinstance(text, list):  # content parts
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    usage = data.get("usage") or {}
    return Reply(
        text=str(text),
        finish_reason=str(choice.get("finish_reason") or ""),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )


ANTHROPIC_VERSION = "2023-06-01"


def anthropic_request(
    base_url: str, api_key: str, model: str, messages: list[dict[str, str]], max_tokens: int
) -> Request:
    """Anthropic's Messages API: the system messages go to the top-level ``system``; the base
    URL may or may not carry the ``/v1`` (Hermes and OpenClaw keep it without)."""
    headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers["x-api-key"] = api_key
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system")
    turns = [
        {"role": "assistant" if m.get("role") == "assistant" else "user", "content": m["content"]}
        for m in messages
        if m.get("role") != "system"
    ]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": turns,
        "temperature": 0,
    }
    if system:
        body["system"] = system
    path = "/messages" if base_url.endswith("/v1") else "/v1/messages"
    return base_url + path, headers, body


def anthropic_reply(data: Any) -> Reply:
    blocks = data["content"]
    if not isinstance(blocks, list):
        raise TypeError("content is not a list of blocks")
    text = "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    usage = data.get("usage") or {}
    stop = str(data.get("stop_reason") or "")
    return Reply(
        text=text,
        finish_reason="length" if stop == "max_tokens" else stop,  # Reply.truncated reads "length"
        prompt_tokens=int(usage.get("input_tokens") or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
    )


PROTOCOLS = {
    "openai": (openai_request, openai_reply),
    "anthropic": (anthropic_request, anthropic_reply),
}


def _safe(text: str, n: int = 200) -> str:
    """A short, single-line excerpt of a response body (never request headers)."""
    text = " ".join((text or "").split())
    return text[:n] + ("…" if len(text) > n else "")

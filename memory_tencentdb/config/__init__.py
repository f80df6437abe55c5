"""Configuration of the gateway and the memory engine.

Precedence: environment > config file > defaults. Environment values are trimmed and an empty
value counts as unset. A bad value raises ``ConfigError`` naming the field and its source.

Config file (first found): ``$TDAI_GATEWAY_CONFIG`` (must exist if set), ``./tdai-gateway.yaml``,
``./tdai-gateway.json``, the same two names in ``$TDAI_DATA_DIR`` (or
``$MEMORY_TENCENTDB_DATA_DIR``), then in the default data directory. Keys are the original's
camelCase (``memory.recall.maxResults``); snake_case is accepted too. String values may use
``${VAR}``, ``${VAR:-fallback}`` and ``${VAR-fallback}``, also inside longer strings.

Environment: the named variables in ``sources.NAMED_ENV`` (``TDAI_GATEWAY_PORT``,
``TDAI_LLM_API_KEY``..., with ``MEMORY_TENCENTDB_*`` equivalents; when both are set the ``TDAI_``
name wins), plus a generic form for any field: ``TDAI_MEMORY__RECALL__MAX_RESULTS=8`` (double
underscore between levels, case-insensitive). A named variable wins over the generic form.
"""

from .errors import ConfigError
from .loader import load_settings, redacted, tzinfo
from .models import (
    BM25Settings,
    CaptureSettings,
    EmbeddingSettings,
    ExtractionSettings,
    LLMSettings,
    MemoryLLMSettings,
    MemorySettings,
    OffloadSettings,
    PersonaSettings,
    PipelineSettings,
    RecallSettings,
    ReportSettings,
    ServerSettings,
    Settings,
    TCVDBSettings,
    default_data_dir,
)
from .sources import NAMED_ENV

__all__ = [
    "BM25Settings",
    "CaptureSettings",
    "ConfigError",
    "EmbeddingSettings",
    "ExtractionSettings",
    "LLMSettings",
    "MemoryLLMSettings",
    "MemorySettings",
    "NAMED_ENV",
    "OffloadSettings",
    "PersonaSettings",
    "PipelineSettings",
    "RecallSettings",
    "ReportSettings",
    "ServerSettings",
    "Settings",
    "TCVDBSettings",
    "default_data_dir",
    "load_settings",
    "redacted",
    "tzinfo",
]

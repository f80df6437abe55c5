"""Provider settings: environment > ``$HERMES_HOME/memory_tencentdb.json`` > defaults.

Why this shape: zero configuration must work, so every field has a default; ``hermes memory
setup`` writes non-secret answers both to ``.env`` (as the env names below) and, through
``save_config``, to the JSON file, so either route reaches the provider. Environment wins so a
test or a one-off run can override anything without touching files.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("hermes_memory_tencentdb")

CONFIG_FILE = "memory_tencentdb.json"

# key -> (env names, earliest first wins, default, type)
_FIELDS: dict[str, tuple[tuple[str, ...], Any, type]] = {
    "gateway_host": (("MEMORY_TENCENTDB_GATEWAY_HOST",), "127.0.0.1", str),
    "gateway_port": (("MEMORY_TENCENTDB_GATEWAY_PORT",), 8420, int),
    "api_key": (("MEMORY_TENCENTDB_GATEWAY_API_KEY", "TDAI_GATEWAY_API_KEY"), "", str),
    "gateway_cmd": (("MEMORY_TENCENTDB_GATEWAY_CMD",), "", str),
    "auto_start": (("MEMORY_TENCENTDB_AUTO_START",), True, bool),
    "recall_budget_s": (("MEMORY_TENCENTDB_RECALL_BUDGET_S",), 2.5, float),
    "startup_wait_s": (("MEMORY_TENCENTDB_STARTUP_WAIT_S",), 4.0, float),
    "start_timeout_s": (("MEMORY_TENCENTDB_START_TIMEOUT_S",), 60.0, float),
    "breaker_threshold": (("MEMORY_TENCENTDB_BREAKER_THRESHOLD",), 3, int),
    "breaker_cooldown_s": (("MEMORY_TENCENTDB_BREAKER_COOLDOWN_S",), 15.0, float),
    "scope": (("MEMORY_TENCENTDB_SCOPE",), "", str),
}

# Hermes joins prefetch threads after 8 s; stay well below it whatever the user configures.
MAX_RECALL_BUDGET_S = 5.0
MAX_STARTUP_WAIT_S = 5.0


def hermes_home(explicit: str | None = None) -> Path:
    """The active Hermes home (profile aware when Hermes is importable)."""
    if explicit:
        return Path(explicit)
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-not-found]

        return Path(get_hermes_home())
    except Exception:
        return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")


def _coerce(value: Any, kind: type) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() not in ("0", "false", "no", "off", "")
    return kind(value)


@dataclass(frozen=True)
class Settings:
    """Everything the provider reads from its environment, resolved once per initialize."""

    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8420
    api_key: str = ""
    gateway_cmd: str = ""
    auto_start: bool = True
    recall_budget_s: float = 2.5
    startup_wait_s: float = 4.0
    start_timeout_s: float = 60.0
    breaker_threshold: int = 3
    breaker_cooldown_s: float = 15.0
    scope: str = ""
    home: Path = field(default_factory=Path.home)

    @property
    def base_url(self) -> str:
        host = self.gateway_host
        if ":" in host and not host.startswith("["):  # IPv6 literal
            host = f"[{host}]"
        return f"http://{host}:{self.gateway_port}"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs" / "memory_tencentdb"

    @classmethod
    def load(cls, home: str | Path | None = None) -> Settings:
        """Resolve settings; a malformed value is logged and replaced by its default."""
        home_path = hermes_home(str(home) if home else None)
        file_values: dict[str, Any] = {}
        path = home_path / CONFIG_FILE
        if path.is_file():
            try:
                loaded = json.loads(path.read_text("utf-8"))
                if isinstance(loaded, dict):
                    file_values = loaded
            except (OSError, ValueError) as exc:
                log.warning("memory_tencentdb: ignoring unreadable %s: %s", path, exc)
        values: dict[str, Any] = {}
        for key, (env_names, default, kind) in _FIELDS.items():
            raw: Any = None
            for name in env_names:
                if os.environ.get(name, "").strip():
                    raw = os.environ[name].strip()
                    break
            if raw is None and key in file_values and file_values[key] not in (None, ""):
                raw = file_values[key]
            if raw is None:
                values[key] = default
                continue
            try:
                values[key] = _coerce(raw, kind)
            except (TypeError, ValueError):
                log.warning("memory_tencentdb: bad value %r for %s, using %r", raw, key, default)
                values[key] = default
        values["recall_budget_s"] = min(max(values["recall_budget_s"], 0.05), MAX_RECALL_BUDGET_S)
        values["startup_wait_s"] = min(max(values["startup_wait_s"], 0.0), MAX_STARTUP_WAIT_S)
        return cls(home=home_path, **values)


def save(values: dict[str, Any], home: str | Path) -> Path:
    """Merge non-secret answers of ``hermes memory setup`` into the JSON config file."""
    path = Path(home) / CONFIG_FILE
    current: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text("utf-8"))
            current = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            current = {}
    for key, value in values.items():
        if key in _FIELDS and key != "api_key":  # secrets live in .env only
            current[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", "utf-8")
    tmp.replace(path)
    return path


def config_schema() -> list[dict[str, Any]]:
    """Fields for ``hermes memory setup``; every one has an env name, none is required."""
    return [
        {
            "key": "gateway_host",
            "description": "Gateway host",
            "default": "127.0.0.1",
            "env_var": "MEMORY_TENCENTDB_GATEWAY_HOST",
        },
        {
            "key": "gateway_port",
            "description": "Gateway port",
            "default": "8420",
            "env_var": "MEMORY_TENCENTDB_GATEWAY_PORT",
        },
        {
            "key": "api_key",
            "description": "Gateway API key (only if the gateway requires one)",
            "secret": True,
            "env_var": "MEMORY_TENCENTDB_GATEWAY_API_KEY",
        },
        {
            "key": "auto_start",
            "description": "Start the gateway automatically when none is running",
            "default": "true",
            "choices": ["true", "false"],
            "env_var": "MEMORY_TENCENTDB_AUTO_START",
        },
        {
            "key": "recall_budget_s",
            "description": "Seconds a turn may wait for recall (max 5)",
            "default": "2.5",
            "env_var": "MEMORY_TENCENTDB_RECALL_BUDGET_S",
        },
    ]

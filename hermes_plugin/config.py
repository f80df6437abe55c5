"""Provider settings: environment > ``$HERMES_HOME/memory_tencentdb.json`` > defaults.

Why this shape: zero configuration must work, so every field has a default; ``hermes memory
setup`` (our ``post_setup``, wizard.py) checks each answer and writes non-secret ones to the JSON
file and the API key to ``$HERMES_HOME/.env``. Environment wins so a test or a one-off run can
override anything without touching files. Values are parsed strictly (``parse_value``): a bad
one is refused at setup and, if it reaches us anyway, logged and replaced by its default.
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

# key -> (env names, earliest first wins, default, type, lowest, highest)
_FIELDS: dict[str, tuple[tuple[str, ...], Any, type, float | None, float | None]] = {
    "gateway_host": (("MEMORY_TENCENTDB_GATEWAY_HOST",), "127.0.0.1", str, None, None),
    "gateway_port": (("MEMORY_TENCENTDB_GATEWAY_PORT",), 8420, int, 1, 65535),
    "api_key": (("MEMORY_TENCENTDB_GATEWAY_API_KEY", "TDAI_GATEWAY_API_KEY"), "", str, None, None),
    "gateway_cmd": (("MEMORY_TENCENTDB_GATEWAY_CMD",), "", str, None, None),
    "data_dir": (("TDAI_DATA_DIR", "MEMORY_TENCENTDB_DATA_DIR"), "", str, None, None),
    "auto_start": (("MEMORY_TENCENTDB_AUTO_START",), True, bool, None, None),
    "recall_budget_s": (("MEMORY_TENCENTDB_RECALL_BUDGET_S",), 2.5, float, 0.05, 5.0),
    "first_turn_budget_s": (("MEMORY_TENCENTDB_FIRST_TURN_BUDGET_S",), 7.0, float, 0.5, 7.5),
    "start_timeout_s": (("MEMORY_TENCENTDB_START_TIMEOUT_S",), 60.0, float, 1.0, 600.0),
    "breaker_threshold": (("MEMORY_TENCENTDB_BREAKER_THRESHOLD",), 3, int, 1, 100),
    "breaker_cooldown_s": (("MEMORY_TENCENTDB_BREAKER_COOLDOWN_S",), 15.0, float, 0.0, 3600.0),
    "scope": (("MEMORY_TENCENTDB_SCOPE",), "", str, None, None),
    # Context offload (issue 10): off by default; see offload.py.
    "offload": (("MEMORY_TENCENTDB_OFFLOAD",), False, bool, None, None),
    "offload_token_budget": (("MEMORY_TENCENTDB_OFFLOAD_TOKEN_BUDGET",), 0, int, 0, 10_000_000),
    "offload_tool_timeout_s": (("MEMORY_TENCENTDB_OFFLOAD_TOOL_TIMEOUT_S",), 3.0, float, 0.1, 30.0),
    "offload_request_timeout_s": (
        ("MEMORY_TENCENTDB_OFFLOAD_REQUEST_TIMEOUT_S",),
        1.5,
        float,
        0.05,
        10.0,
    ),
    "offload_compress_timeout_s": (
        ("MEMORY_TENCENTDB_OFFLOAD_COMPRESS_TIMEOUT_S",),
        20.0,
        float,
        1.0,
        120.0,
    ),
    "offload_previous_engine": ((), "", str, None, None),
    # Hermes's own model distils memory when the gateway has no LLM (issue 24; host_model.py).
    "host_llm": (("MEMORY_TENCENTDB_HOST_LLM",), True, bool, None, None),
    # Where this turn's memories go: "prepend" or "appendSystem" (recall_placement.py).
    "recall_placement": (("MEMORY_TENCENTDB_RECALL_PLACEMENT",), "prepend", str, None, None),
}
# Settings of type str that take one of a few values.
_CHOICES: dict[str, tuple[str, ...]] = {"recall_placement": ("prepend", "appendSystem")}

# The gateway's floor for /offload/assemble's token_budget (a 422 below it): the system prompt,
# the turn's request and the canvas need at least this much.
OFFLOAD_MIN_BUDGET = 1024

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_KIND_NAMES = {int: "a whole number", float: "a number of seconds", bool: "true or false"}


def hermes_home(explicit: str | None = None) -> Path:
    """The active Hermes home (profile aware when Hermes is importable)."""
    if explicit:
        return Path(explicit)
    try:
        from hermes_constants import get_hermes_home

        return Path(get_hermes_home())
    except Exception:
        return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")


def parse_value(key: str, raw: Any) -> Any:
    """One setting from text (env, JSON file, a setup answer); ValueError says what is wrong.

    Why strict: ``hermes memory setup`` used to accept "abc" as a port, which then silently
    became the default at the next start; now the answer is refused with this message.
    """
    _, _, kind, low, high = _FIELDS[key]
    text = raw.strip() if isinstance(raw, str) else raw
    if kind is bool:
        if isinstance(text, bool):
            return text
        if str(text).lower() in _TRUE:
            return True
        if str(text).lower() in _FALSE:
            return False
        raise ValueError(f"{key}: {raw!r} is not true or false (use true/false, yes/no, 1/0)")
    if kind is str:
        choices = _CHOICES.get(key)
        if choices and str(text) not in choices:
            raise ValueError(f"{key}: {raw!r} is not one of {', '.join(choices)}")
        return str(text)
    try:
        if isinstance(text, bool):
            raise ValueError
        value = kind(float(text)) if kind is float else int(str(text), 10)
        if kind is float and value != value:  # NaN
            raise ValueError
    except (TypeError, ValueError):
        what = _KIND_NAMES[kind]
        span = f" between {_num(low)} and {_num(high)}" if low is not None else ""
        raise ValueError(f"{key}: {raw!r} is not {what}{span}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{key}: {_num(value)} is out of range ({_num(low)} to {_num(high)})")
    if key == "offload_token_budget" and 0 < value < OFFLOAD_MIN_BUDGET:
        raise ValueError(
            f"{key}: {value} is below {OFFLOAD_MIN_BUDGET}, the least the gateway assembles a"
            " request in (0 = the model's context length)"
        )
    return value


def _num(value: float | None) -> str:
    return "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


def default_data_dir() -> Path:
    """The gateway's default data directory, resolved the way the gateway resolves it."""
    root = os.environ.get("MEMORY_TENCENTDB_ROOT", "").strip()
    current = Path(root or "~/.memory-tencentdb").expanduser() / "memory-tdai"
    if not root and not current.exists():
        legacy = Path("~/memory-tdai").expanduser()  # the original's directory, if only it exists
        if legacy.is_dir():
            return legacy
    return current


@dataclass(frozen=True)
class Settings:
    """Everything the provider reads from its environment, resolved once per initialize."""

    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8420
    api_key: str = ""
    gateway_cmd: str = ""
    data_dir: str = ""
    auto_start: bool = True
    recall_budget_s: float = 2.5
    first_turn_budget_s: float = 7.0
    start_timeout_s: float = 60.0
    breaker_threshold: int = 3
    breaker_cooldown_s: float = 15.0
    scope: str = ""
    offload: bool = False
    offload_token_budget: int = 0
    offload_tool_timeout_s: float = 3.0
    offload_request_timeout_s: float = 1.5
    offload_compress_timeout_s: float = 20.0
    offload_previous_engine: str = ""
    host_llm: bool = True
    recall_placement: str = "prepend"
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

    @property
    def spool_dir(self) -> Path:
        """Writes not yet delivered, kept for the next session (0700, files 0600).

        Hyphenated on purpose: a ``memory_tencentdb/`` folder in the Hermes home (the gateway's
        working directory) would shadow the package for ``python -m memory_tencentdb``.
        """
        return self.home / "memory-tencentdb" / "spool"

    @property
    def offload_used_marker(self) -> Path:
        """Exists once a session of this Hermes home ran with offload on: from then on some
        session may hold stubs naming the read tool, so the tool stays offered (offload off
        too; a home that never offloaded sends what it always sent)."""
        return self.home / "memory-tencentdb" / "offload-used"

    @property
    def expected_data_dir(self) -> Path:
        """The data directory our gateway serves: configured, else the gateway's default."""
        return Path(self.data_dir).expanduser() if self.data_dir else default_data_dir()

    @property
    def checks_data_dir(self) -> bool:
        """A configured key alone identifies a remote or custom gateway; otherwise the directory."""
        return bool(self.data_dir) or not self.api_key

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
        for key, (env_names, default, _kind, _low, _high) in _FIELDS.items():
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
                values[key] = parse_value(key, raw)
            except ValueError as exc:
                log.warning("memory_tencentdb: %s; using %r", exc, default)
                values[key] = default
        return cls(home=home_path, **values)


def check(values: dict[str, Any]) -> dict[str, Any]:
    """Parse every known, non-empty answer; ValueError naming each bad one (nothing is saved)."""
    parsed: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in values.items():
        if key not in _FIELDS or value is None or (isinstance(value, str) and not value.strip()):
            continue
        try:
            parsed[key] = parse_value(key, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    return parsed


def save(values: dict[str, Any], home: str | Path) -> Path:
    """Merge non-secret answers of ``hermes memory setup`` into the JSON config file.

    Every value is checked first: one bad answer raises ValueError and nothing is written.
    """
    parsed = check(values)
    path = Path(home) / CONFIG_FILE
    current: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text("utf-8"))
            current = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            current = {}
    for key, value in parsed.items():
        if key != "api_key":  # secrets live in .env only
            current[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", "utf-8")
    tmp.replace(path)
    return path


def config_schema() -> list[dict[str, Any]]:
    """Fields for ``hermes memory setup`` and the dashboard; none is required."""
    return [
        {
            "key": "gateway_host",
            "description": "Gateway host",
            "default": "127.0.0.1",
            "env_var": "MEMORY_TENCENTDB_GATEWAY_HOST",
        },
        {
            "key": "gateway_port",
            "description": "Gateway port (1-65535)",
            "default": "8420",
            "env_var": "MEMORY_TENCENTDB_GATEWAY_PORT",
        },
        {
            "key": "api_key",
            "description": "Gateway API key (only for a gateway configured with one)",
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
            "description": "Seconds a turn may wait for recall (0.05-5)",
            "default": "2.5",
            "env_var": "MEMORY_TENCENTDB_RECALL_BUDGET_S",
        },
        {
            "key": "first_turn_budget_s",
            "description": "Seconds the first turn may wait for a gateway that is starting (0.5-7.5)",
            "default": "7",
            "env_var": "MEMORY_TENCENTDB_FIRST_TURN_BUDGET_S",
        },
        {
            "key": "offload",
            "description": (
                "Context offload: large tool results become stubs, a task canvas is shown on every"
                " call, the context engine folds old turns (sets context.engine)"
            ),
            "default": "false",
            "choices": ["true", "false"],
            "env_var": "MEMORY_TENCENTDB_OFFLOAD",
        },
        {
            "key": "data_dir",
            "description": "Gateway data directory (blank: ~/.memory-tencentdb/memory-tdai)",
            "default": "",
            "env_var": "TDAI_DATA_DIR",
        },
        {
            "key": "recall_placement",
            "description": "Where each turn's recalled memories go: with the user's message"
            " (prepend: the system prompt stays cacheable) or appendSystem",
            "default": "prepend",
            "choices": ["prepend", "appendSystem"],
            "env_var": "MEMORY_TENCENTDB_RECALL_PLACEMENT",
        },
    ]

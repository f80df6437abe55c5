"""``load_settings``: defaults < config file < environment, validated, errors that name the field.

Also ``tzinfo`` (the zone dates follow) and ``redacted`` (a loggable view without secrets).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import tzinfo as TzInfo
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .errors import ConfigError, FieldProblem
from .models import MemorySettings, Settings, camel, mask_url_password
from .sources import (
    Layer,
    block_of,
    discover_config_file,
    match_field,
    read_config_file,
    read_env,
    resolve_default_data_dir,
)
from .timezones import parse_timezone


def load_settings(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Build the settings for this process; raise ConfigError if anything is unusable.

    ``env`` and ``cwd`` default to the real process environment and working directory; tests
    pass their own so they never see the developer's machine.
    """
    env = dict(os.environ if env is None else env)
    cwd = Path.cwd() if cwd is None else Path(cwd)
    config_file = discover_config_file(env, cwd)
    file_layer = read_config_file(config_file, env) if config_file else Layer()
    merged = read_env(env, cwd).over(file_layer)
    if "data_dir" not in merged.values:
        merged.values["data_dir"] = resolve_default_data_dir(env)
    try:
        return Settings(**merged.values, config_file=config_file)
    except ValidationError as exc:
        raise ConfigError(_describe_errors(exc, merged)) from None


# --------------------------------------------------------------------------- error messages


def _describe_errors(exc: ValidationError, layer: Layer) -> list[str]:
    lines: list[str] = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblem):
            loc = (*loc, *cause.field.split("."))
            message = cause.message
            given = _lookup(layer.values, loc)
        elif error["type"] in ("value_error", "assertion_error"):
            message = re.sub(r"^(Value|Assertion) error, ", "", error["msg"])
            given = error.get("input")
        else:
            message = f"must be {_expectation(loc)}"
            given = error.get("input")
        names = _field_names(loc)
        line = f"{_display(names)}: {message}"
        if given is not _MISSING:
            line += f", got {_show(given, secret=_is_secret(names))}"
        origin = _origin(names, layer)
        if origin:
            line += f" ({'from ' if origin.startswith('env ') else 'in '}{origin})"
        if line not in lines:
            lines.append(line)
    return lines


_MISSING = object()


def _lookup(values: dict[str, Any], loc: tuple[str, ...]) -> Any:
    node: Any = values
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _field_names(loc: tuple[str, ...]) -> tuple[str, ...]:
    """Pydantic's location mapped to field names (it may use aliases or add list indexes)."""
    model: type[BaseModel] | None = Settings
    names: list[str] = []
    for part in loc:
        if model is None or (name := match_field(model, part)) is None:
            if part.isdigit():
                names.append(f"[{part}]")
            continue
        names.append(name)
        model = block_of(model.model_fields[name].annotation)
    return tuple(names)


def _display(names: tuple[str, ...]) -> str:
    """Field names as the config file spells them: ``memory.recall.maxResults``."""
    if names[:1] == ("data_dir",):
        names = ("data", "base_dir", *names[1:])
    text = ".".join(camel(n) for n in names)
    return text.replace(".[", "[")


def _origin(names: tuple[str, ...], layer: Layer) -> str | None:
    path = tuple(n for n in names if not n.startswith("["))
    while path:
        if path in layer.origins:
            return layer.origins[path]
        path = path[:-1]
    return None


def _field_info(names: tuple[str, ...]) -> Any:
    model: type[BaseModel] | None = Settings
    info = None
    for name in names:
        if model is None or name not in model.model_fields:
            break
        info = model.model_fields[name]
        model = block_of(info.annotation)
    return info


def _is_secret(names: tuple[str, ...]) -> bool:
    info = _field_info(names)
    return info is not None and info.repr is False


def _expectation(loc: tuple[str, ...]) -> str:
    """What a field accepts, in words: "an integer >= 1", 'one of "zh", "en"'."""
    info = _field_info(_field_names(loc))
    if info is None:
        return "a valid value"
    return _describe(info.annotation, list(info.metadata))


def _describe(annotation: Any, metadata: list[Any]) -> str:
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return _describe(base, metadata + [m for m in extra if not callable(m)])
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(annotation))
    if args and get_origin(annotation) not in (list, Literal):  # Optional[X]
        return _describe(args[0], metadata)
    if block_of(annotation):
        return "a mapping of settings"
    words = {bool: "true or false", int: "an integer", float: "a number", Path: "a path"}
    if get_origin(annotation) is list:
        return "a list of strings (or one comma-separated string)"
    text = words.get(annotation, "a string")
    bounds: dict[str, Any] = {}
    for item in metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if getattr(item, attr, None) is not None:
                bounds[attr] = getattr(item, attr)
        if getattr(item, "min_length", None):
            return f"{text} that is not empty"
    if bounds.keys() == {"ge", "le"}:
        return f"{text} from {bounds['ge']} to {bounds['le']}"
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    limits = " and ".join(f"{symbols[k]} {v}" for k, v in bounds.items())
    return f"{text} {limits}" if limits else text


def _show(value: Any, secret: bool = False) -> str:
    if secret:
        return '"***"'
    if isinstance(value, str):
        value = mask_url_password(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------- helpers for others


def tzinfo(settings: Settings | MemorySettings | str) -> TzInfo:
    """The zone that dates follow: "system" = this process's zone, an IANA zone, or an offset."""
    if isinstance(settings, Settings):
        settings = settings.memory
    name = settings.timezone if isinstance(settings, MemorySettings) else settings
    return parse_timezone(name)


def redacted(settings: Settings) -> dict[str, Any]:
    """The settings as the config file spells them, safe to log: secrets shown as "***".

    URLs lose any password in their user-info part too (``https://user:***@host``).
    """
    return {
        "configFile": str(settings.config_file) if settings.config_file else None,
        "server": _redact_block(settings.server),
        "data": {"baseDir": str(settings.data_dir)},
        "llm": {**_redact_block(settings.llm), "configured": settings.llm_configured},
        "memory": _redact_block(settings.memory),
        "storeBackend": settings.store_backend,
        "postgres": _redact_block(settings.postgres),
    }


def _redact_block(block: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in type(block).model_fields.items():
        value = getattr(block, name)
        if isinstance(value, BaseModel):
            value = _redact_block(value)
        elif info.repr is False:
            value = "***" if value else value
        elif isinstance(value, str):
            value = mask_url_password(value)
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, list):
            value = list(value)
        out[info.alias or name] = value
    return out

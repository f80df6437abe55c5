"""Where raw values come from: the config file and the environment.

Each source produces a ``Layer``: a nested dict keyed by snake_case field names plus, for every
value, where it came from ("env TDAI_LLM_MODEL", "/etc/tdai-gateway.yaml"), so a validation error
can say which variable or file to fix. Pydantic validates the merged result afterwards.

Why not pydantic-settings' own sources (``Settings`` switches them off): they report a bad
value by field, not by the variable or file it came from (tests/test_config.py holds "from env
TDAI_MEMORY__RECALL__MAX_RESULTS"); they read ``os.environ``, where ``load_settings`` takes the
mapping it is given; and the file here is YAML 1.2 with ``${VAR:-default}`` interpolation and
the original's camelCase keys, with a suggestion for a mistyped one. The precedence (a named
``TDAI_`` variable over its ``MEMORY_TENCENTDB_`` twin over ``TDAI_SECTION__FIELD``, the
environment over the file) is stated once: ``NAMED_ENV``, ``read_env`` and ``load_settings``.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field

from .errors import ConfigError
from .models import (
    Block,
    LLMSettings,
    MemorySettings,
    PostgresSettings,
    ServerSettings,
    camel,
    default_data_dir,
    expand_home,
)

log = logging.getLogger("memory_tencentdb.config")

Path_ = tuple[str, ...]
CONFIG_NAMES = ("tdai-gateway.yaml", "tdai-gateway.json")

# Named variables, in priority order per field: the TDAI_ name wins over MEMORY_TENCENTDB_.
# A named variable also wins over the generic TDAI_SECTION__FIELD form for the same field.
NAMED_ENV: dict[Path_, tuple[str, ...]] = {
    ("server", "host"): ("TDAI_GATEWAY_HOST", "MEMORY_TENCENTDB_GATEWAY_HOST"),
    ("server", "port"): ("TDAI_GATEWAY_PORT", "MEMORY_TENCENTDB_GATEWAY_PORT"),
    ("server", "api_key"): ("TDAI_GATEWAY_API_KEY", "MEMORY_TENCENTDB_GATEWAY_API_KEY"),
    ("server", "auth"): ("TDAI_GATEWAY_AUTH", "MEMORY_TENCENTDB_GATEWAY_AUTH"),
    ("server", "keys_file"): ("TDAI_GATEWAY_KEYS_FILE",),
    ("server", "cors_origins"): ("TDAI_CORS_ORIGINS",),
    ("server", "allowed_hosts"): ("TDAI_GATEWAY_ALLOWED_HOSTS",),
    ("server", "max_body_bytes"): ("TDAI_GATEWAY_MAX_BODY_BYTES",),
    ("data_dir",): ("TDAI_DATA_DIR", "MEMORY_TENCENTDB_DATA_DIR"),
    ("llm", "base_url"): ("TDAI_LLM_BASE_URL", "MEMORY_TENCENTDB_LLM_BASE_URL"),
    ("llm", "api_key"): ("TDAI_LLM_API_KEY", "MEMORY_TENCENTDB_LLM_API_KEY"),
    ("llm", "model"): ("TDAI_LLM_MODEL", "MEMORY_TENCENTDB_LLM_MODEL"),
    ("llm", "max_tokens"): ("TDAI_LLM_MAX_TOKENS", "MEMORY_TENCENTDB_LLM_MAX_TOKENS"),
    ("llm", "timeout_ms"): ("TDAI_LLM_TIMEOUT_MS", "MEMORY_TENCENTDB_LLM_TIMEOUT_MS"),
    ("memory", "timezone"): ("TDAI_TIMEZONE",),
    ("memory", "embedding", "provider"): ("TDAI_EMBEDDING_PROVIDER",),
    ("memory", "embedding", "model"): ("TDAI_EMBEDDING_MODEL",),
    ("memory", "embedding", "base_url"): ("TDAI_EMBEDDING_BASE_URL",),
    ("memory", "embedding", "api_key"): ("TDAI_EMBEDDING_API_KEY",),
    ("memory", "embedding", "dimensions"): ("TDAI_EMBEDDING_DIMENSIONS",),
    ("memory", "recall", "strategy"): ("TDAI_RECALL_STRATEGY",),
    ("memory", "recall", "timeout_ms"): ("TDAI_RECALL_TIMEOUT_MS",),
    ("store_backend",): ("TDAI_STORE_BACKEND",),
    ("postgres", "dsn"): ("TDAI_POSTGRES_DSN",),
}
GENERIC_PREFIX = "TDAI_"


class DataBlock(Block):
    """``data:`` in the file; only ``baseDir`` is defined."""

    base_dir: str = ""


class FileShape(Block):
    """The top level of ``tdai-gateway.yaml``; used only to recognise keys."""

    server: ServerSettings = Field(default_factory=ServerSettings)
    data: DataBlock = Field(default_factory=DataBlock)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    store_backend: str = "sqlite"
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)


@dataclass
class Layer:
    """Raw values keyed by field name, and the origin of each value by path."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[Path_, str] = field(default_factory=dict)

    def put(self, path: Path_, value: Any, origin: str) -> None:
        node = self.values
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[path[-1]] = value
        self.origins[path] = origin

    def over(self, lower: Layer) -> Layer:
        """This layer on top of ``lower`` (deep merge; this layer wins)."""
        merged = Layer(_deep_merge(lower.values, self.values), dict(lower.origins))
        merged.origins.update(self.origins)
        return merged


def _deep_merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# --------------------------------------------------------------------------- schema helpers


def _squash(key: str) -> str:
    """Key spelling that camelCase, snake_case and any letter case share."""
    return key.replace("_", "").lower()


def block_of(annotation: Any) -> type[BaseModel] | None:
    """The settings block class behind an annotation, if the field is a block."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is Union or type(annotation).__name__ == "UnionType":
        for arg in get_args(annotation):
            found = block_of(arg)
            if found:
                return found
    return None


def match_field(model: type[BaseModel], key: str) -> str | None:
    """The field of ``model`` that ``key`` names (camelCase, snake_case, any case), if any."""
    if key in model.model_fields:
        return key
    wanted = _squash(key)
    for name in model.model_fields:
        if _squash(name) == wanted:
            return name
    return None


def _suggest(model: type[BaseModel], key: str) -> str:
    known = [info.alias or name for name, info in model.model_fields.items()]
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


# --------------------------------------------------------------------------- config file


def discover_config_file(env: Mapping[str, str], cwd: Path) -> Path | None:
    """First existing of: $TDAI_GATEWAY_CONFIG, ./tdai-gateway.yaml|json, <data dir>/same.

    An explicit $TDAI_GATEWAY_CONFIG that does not exist is an error: the user asked for it.
    """
    explicit = env_value(env, "TDAI_GATEWAY_CONFIG")
    if explicit:
        path = _resolve(explicit, env, cwd)
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            raise ConfigError(f"TDAI_GATEWAY_CONFIG={explicit}: {path} {what}")
        return path
    dirs = [cwd]
    named_dir = env_value(env, "TDAI_DATA_DIR") or env_value(env, "MEMORY_TENCENTDB_DATA_DIR")
    if named_dir:
        dirs.append(_resolve(named_dir, env, cwd))
    dirs.append(resolve_default_data_dir(env))
    for directory in dirs:
        for name in CONFIG_NAMES:
            if (directory / name).is_file():
                return directory / name
    return None


def resolve_default_data_dir(env: Mapping[str, str]) -> Path:
    """The default data dir, or the original's legacy ``~/memory-tdai`` if only that exists."""
    current = default_data_dir(dict(env))
    if not env_value(env, "MEMORY_TENCENTDB_ROOT") and not current.exists():
        legacy = expand_home("~/memory-tdai", dict(env))
        if legacy.is_dir():
            log.warning("using legacy data directory %s; move it to %s", legacy, current)
            return legacy
    return current


def _resolve(text: str, env: Mapping[str, str], base: Path) -> Path:
    path = expand_home(text, dict(env))
    return path if path.is_absolute() else (base / path)


def read_config_file(path: Path, env: Mapping[str, str]) -> Layer:
    """Parse, interpolate ``${VAR}`` and map keys to field names; unknown keys are warnings."""
    data = _parse(path)
    _check_gateway_key_reference(data, env, path)
    data = interpolate(data, env)
    layer = Layer()
    origin = str(path)
    _walk(data, FileShape, (), layer, origin)
    data_block = layer.values.pop("data", {})
    if not isinstance(data_block, dict):
        raise ConfigError(f"{path}: data: must be a mapping such as {{baseDir: /path}}")
    base_dir = data_block.get("base_dir")
    layer.origins = {p: o for p, o in layer.origins.items() if p[:1] != ("data",)}
    if base_dir:
        resolved = _resolve(base_dir, env, path.parent) if isinstance(base_dir, str) else base_dir
        layer.put(("data_dir",), resolved, origin)
    return layer


def _parse(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise ConfigError(f"{path}: not valid JSON: {exc.msg} ({where})") from None
    else:
        try:
            data = yaml.load(text, Loader=Yaml12Loader)  # a SafeLoader: no arbitrary objects
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{path}: not valid YAML: {problem}{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got a {kind}")
    return data


def _walk(
    raw: dict[Any, Any], model: type[BaseModel], path: Path_, out: Layer, origin: str
) -> None:
    """Copy ``raw`` into ``out`` under field names. Blank strings and nulls count as unset."""
    for key, value in raw.items():
        name = match_field(model, str(key))
        if name is None:
            dotted = ".".join([*_display(path), str(key)])
            log.warning("%s: unknown key %s ignored%s", origin, dotted, _suggest(model, str(key)))
            continue
        sub = block_of(model.model_fields[name].annotation)
        if isinstance(value, str):
            value = value.strip()
        if value is None or value == "":
            continue
        if sub is not None and isinstance(value, dict):
            _walk(value, sub, (*path, name), out, origin)
            out.origins.setdefault((*path, name), origin)
        else:
            out.put((*path, name), value, origin)


def _display(path: Path_) -> list[str]:
    return [camel(p) for p in path]


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars, as the original's parser.

    PyYAML follows YAML 1.1, where ``cleanTime: 3:30`` is the integer 210 (base 60), ``on``/``no``
    are booleans and ``010`` is octal. Here only true/false are booleans and numbers are decimal
    (or 0x hex).
    """


_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float"))
Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
Yaml12Loader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
Yaml12Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _yaml_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    return int(text, 16) if text.lower().startswith("0x") else int(text, 10)


Yaml12Loader.add_constructor(_INT, _yaml_int)


# --------------------------------------------------------------------------- interpolation

_VAR = re.compile(r"(\$?)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Replace ``${VAR}`` in every string of a parsed file, recursively.

    ``${VAR}`` -> the variable or "" when unset (the original's rule, there for whole values
    only; here also inside longer strings). ``${VAR:-fallback}`` -> fallback when unset or empty,
    ``${VAR-fallback}`` -> fallback only when unset. ``$${VAR}`` is a literal ``${VAR}``.
    """
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if isinstance(value, str) and "${" in value:
        return _VAR.sub(lambda m: _substitute(m, env), value)
    return value


def _check_gateway_key_reference(data: Any, env: Mapping[str, str], path: Path) -> None:
    """``server.apiKey: ${VAR}`` with VAR unset is an error, not "no key": the gateway would
    silently run with another key (or none) than the one its clients were given. A fallback
    written out (``${VAR:-}``, ``${VAR-...}``) is an explicit choice and stays allowed."""
    server = data.get("server") if isinstance(data, dict) else None
    if not isinstance(server, dict):
        return
    for key, value in server.items():
        if str(key).replace("_", "").lower() != "apikey" or not isinstance(value, str):
            continue
        for m in _VAR.finditer(value):
            escaped, name, operator, _ = m.groups()
            if not escaped and operator is None and env_value(env, name) is None:
                raise ConfigError(
                    f"{path}: server.{key} is {m.group(0)} but {name} is not set; set it, or"
                    f" write ${{{name}:-}} to use the data directory's own gateway.key instead"
                )


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    escaped, name, operator, fallback = match.groups()
    if escaped:
        return match.group(0)[1:]
    current = env.get(name)
    current = current.strip() if current is not None else None
    if operator == ":-" and not current:
        return fallback
    if operator == "-" and current is None:
        return fallback
    return current or ""


# --------------------------------------------------------------------------- environment


def env_value(env: Mapping[str, str], name: str) -> str | None:
    """A trimmed variable, or None when unset or blank (blank counts as unset)."""
    value = env.get(name)
    if value is None:
        return None
    return value.strip() or None


def read_env(env: Mapping[str, str], cwd: Path) -> Layer:
    """Named variables (``TDAI_LLM_MODEL``...) and the generic ``TDAI_MEMORY__RECALL__MAX_RESULTS``.

    Generic names are case-insensitive and every segment may be snake_case or camelCase.
    """
    layer = Layer()
    for name in sorted(env, key=lambda n: n == n.upper()):  # upper case last, so it wins
        upper = name.upper()
        value = env_value(env, name)
        if value is None or not upper.startswith(GENERIC_PREFIX) or "__" not in upper:
            continue
        path = _generic_path(upper[len(GENERIC_PREFIX) :].split("__"))
        if path is None:
            log.warning("environment variable %s names no setting; ignored", name)
            continue
        layer.put(path, _env_leaf(path, value, name), f"env {name}")
    for path, names in NAMED_ENV.items():
        for name in names:
            value = env_value(env, name)
            if value is not None:
                layer.put(path, _env_leaf(path, value, name), f"env {name}")
                break
    if "data_dir" in layer.values:
        layer.values["data_dir"] = _resolve(layer.values["data_dir"], env, cwd)
    return layer


def _generic_path(segments: list[str]) -> Path_ | None:
    model: type[BaseModel] | None = FileShape
    path: list[str] = []
    for segment in segments:
        if model is None or not segment or (name := match_field(model, segment)) is None:
            return None
        path.append(name)
        model = block_of(model.model_fields[name].annotation)
    if model is not None:  # names a whole section, not a value
        return None
    if path[0] == "data":
        return ("data_dir",) if path == ["data", "base_dir"] else None
    return tuple(path)


def _env_leaf(path: Path_, value: str, name: str) -> Any:
    """Lists may be JSON (``["a","b"]``) or comma-separated; everything else stays a string."""
    if value.startswith("[") and path[-1] in ("cors_origins", "allowed_hosts", "exclude_agents"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"env {name}: not a valid JSON list: {exc.msg}") from None
    return value

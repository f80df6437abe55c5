"""``hermes memory setup memory_tencentdb``: ask, check each answer, save, activate.

Why our own ``post_setup``: Hermes's generic wizard stores whatever is typed (a port of "abc"
went into ``.env`` and silently became the default at the next start). Hermes hands the whole
setup to a provider that has ``post_setup``, so every answer is parsed here with the same rules
the provider uses at start-up, and a bad one is refused with its reason and asked again.
Non-secret answers go to ``$HERMES_HOME/memory_tencentdb.json``, the API key to ``.env``.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any, TextIO

from .config import CONFIG_FILE, config_schema, parse_value, save

MAX_ATTEMPTS = 5
PROVIDER_NAME = "memory_tencentdb"


def _ask(label: str, default: str, secret: bool, stdin: TextIO, stdout: TextIO) -> str | None:
    """One answer ("" keeps the default); None at end of input."""
    suffix = f" [{default}]" if default and not secret else ""
    prompt = f"  {label}{suffix}: "
    if secret and stdin.isatty():
        try:
            return getpass.getpass(prompt).strip()
        except (EOFError, KeyboardInterrupt):
            return None
    stdout.write(prompt)
    stdout.flush()
    line = stdin.readline()
    if not line:
        return None
    return line.strip()


def _current(home: Path) -> dict[str, Any]:
    import json

    try:
        loaded = json.loads((home / CONFIG_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _write_env(home: Path, values: dict[str, str]) -> None:
    """Set KEY=VALUE lines in ``$HERMES_HOME/.env`` (Hermes's own writer when available)."""
    env_path = home / ".env"
    try:
        from hermes_cli.memory_setup import _write_env_vars

        _write_env_vars(env_path, values)
        return
    except ImportError:
        pass
    lines = env_path.read_text("utf-8").splitlines() if env_path.exists() else []
    kept = [ln for ln in lines if ln.split("=", 1)[0].strip() not in values]
    kept += [f"{k}={v}" for k, v in values.items()]
    env_path.write_text("\n".join(kept) + "\n", "utf-8")
    env_path.chmod(0o600)


def _activate(config: dict[str, Any] | None, home: Path, offload: bool | None = None) -> bool:
    """``memory.provider: memory_tencentdb`` in config.yaml, through Hermes's config writer.

    With ``offload`` given, ``context.engine`` follows it the way ``install-hermes.sh
    --offload/--no-offload`` sets it: on selects our engine and remembers the one it replaces
    (``offload_previous_engine`` in memory_tencentdb.json); off puts that one back.
    """
    try:
        from hermes_cli.config import load_config, save_config
    except ImportError:
        return False
    cfg = config if isinstance(config, dict) else load_config()
    if not isinstance(cfg.get("memory"), dict):
        cfg["memory"] = {}
    cfg["memory"]["provider"] = PROVIDER_NAME
    if offload is not None:
        _set_engine(cfg, home, offload)
    save_config(cfg)
    return True


def _set_engine(cfg: dict[str, Any], home: Path, offload: bool) -> None:
    ctx = raw if isinstance(raw := cfg.get("context"), dict) else {}
    current = str(ctx.get("engine") or "")
    saved = _current(home)
    if offload and current != PROVIDER_NAME:
        saved["offload_previous_engine"] = current
        ctx["engine"] = PROVIDER_NAME
    elif not offload and current == PROVIDER_NAME:
        previous = str(saved.pop("offload_previous_engine", "") or "")
        if previous:
            ctx["engine"] = previous
        else:
            ctx.pop("engine", None)
    else:
        return
    cfg["context"] = ctx
    _write_json(home, saved)


def _write_json(home: Path, values: dict[str, Any]) -> None:
    import json

    path = home / CONFIG_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n", "utf-8")
    tmp.replace(path)


def offload_status(home: Path, config: dict[str, Any] | None) -> str:
    """One line for the setup screen: is offload on, and does config.yaml select our engine."""
    on = bool(_current(home).get("offload"))
    engine = ""
    if isinstance(config, dict) and isinstance(config.get("context"), dict):
        engine = str(config["context"].get("engine") or "")
    shown = engine or "compressor (Hermes's default)"
    if on and engine != PROVIDER_NAME:
        return (
            f"Context offload: on, but context.engine is {shown}: stubs and the canvas work,"
            " compaction stays Hermes's (answer true again to select memory_tencentdb)"
        )
    return f"Context offload: {'on' if on else 'off'} (context.engine: {shown})"


def run(
    hermes_home: str | Path,
    config: dict[str, Any] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> dict[str, Any]:
    """The interactive setup; returns the answers that were saved."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    home = Path(hermes_home)
    current = _current(home)
    out = stdout.write
    out(f"\n  Configuring {PROVIDER_NAME} (Enter keeps the value in brackets):\n")
    out(f"  {offload_status(home, config)}\n\n")
    answers: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for field in config_schema():
        key = field["key"]
        secret = bool(field.get("secret"))
        label = str(field.get("description", key))
        if field.get("choices"):
            label += f" ({'/'.join(field['choices'])})"
        value = current.get(key, field.get("default", ""))
        default = "" if secret else (str(value).lower() if isinstance(value, bool) else str(value))
        for attempt in range(MAX_ATTEMPTS):
            raw = _ask(label, default, secret, stdin, stdout)
            if raw is None:  # end of input: keep what we have
                break
            if not raw:
                break
            try:
                value = parse_value(key, raw)
            except ValueError as exc:
                left = MAX_ATTEMPTS - attempt - 1
                more = "try again" if left else "keeping the previous value"
                out(f"  ✗ {exc}; {more}\n")
                continue
            if secret:
                secrets[str(field["env_var"])] = str(value)
            else:
                answers[key] = value
            break
        if raw is None:
            break
    if answers:
        path = save(answers, home)
        out(f"\n  Saved to {path}\n")
    if secrets:
        _write_env(home, secrets)
        out("  API key saved to .env\n")
    offload = answers.get("offload")
    if _activate(config, home, offload if isinstance(offload, bool) else None):
        out(f"  Memory provider: {PROVIDER_NAME} (activation saved to config.yaml)\n")
        if isinstance(offload, bool):
            out(f"  {offload_status(home, config)}\n")
    out("  Start a new session to use it.\n\n")
    return answers

#!/usr/bin/env bash
# Install memory-tencentdb as Hermes's memory provider.
#
#   scripts/install-hermes.sh                 install (or repair) for $HERMES_HOME (default ~/.hermes)
#   scripts/install-hermes.sh --hermes-home D install into another Hermes home / profile
#   scripts/install-hermes.sh --uninstall     remove the symlink and the provider setting
#   scripts/install-hermes.sh --offload       install, and switch context offload on
#   scripts/install-hermes.sh --no-offload    install, and switch context offload off
#
# What it does, each step idempotent:
#   1. creates the gateway venv (.venv at the repository root, `make install`) if missing;
#   2. symlinks hermes_plugin/ to $HERMES_HOME/plugins/memory_tencentdb;
#   3. sets `memory.provider: memory_tencentdb` in $HERMES_HOME/config.yaml, keeping a backup
#      of the previous file whenever it changes it;
#   4. with --offload: `context.engine: memory_tencentdb` in config.yaml and `"offload": true`
#      in $HERMES_HOME/memory_tencentdb.json (the engine it replaces is saved there as
#      "offload_previous_engine"); --no-offload sets `"offload": false` and puts the saved
#      engine back (removes the key if there was none). --uninstall does that too.
# Nothing else is needed: the provider finds and starts the gateway on its own.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="memory_tencentdb"
mode="install"
offload=""
hermes_home="${HERMES_HOME:-$HOME/.hermes}"

while [ $# -gt 0 ]; do
  case "$1" in
    --uninstall) mode="uninstall" ;;
    --offload) offload="on" ;;
    --no-offload) offload="off" ;;
    --hermes-home) shift; hermes_home="${1:?--hermes-home needs a directory}" ;;
    --hermes-home=*) hermes_home="${1#*=}" ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "install-hermes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

link="$hermes_home/plugins/$name"
config="$hermes_home/config.yaml"
venv_py="$repo/.venv/bin/python"

# Edit config.yaml with PyYAML from the gateway venv. The edit is line-based so the user's
# comments and layout survive; the result is re-parsed and checked, and only if that check
# fails is the file rewritten from the parsed data.
set_provider() {
  "$venv_py" - "$config" "$1" <<'PY'
import re, shutil, sys, time
from pathlib import Path
import yaml

path, want = Path(sys.argv[1]), sys.argv[2]
text = path.read_text("utf-8") if path.exists() else ""
data = yaml.safe_load(text) if text.strip() else {}
data = data if isinstance(data, dict) else {}
mem = data.get("memory") if isinstance(data.get("memory"), dict) else None
current = (mem or {}).get("provider") or ""
if current == want or (not want and current != "memory_tencentdb"):
    print(f"config.yaml: memory.provider already {current!r}")
    sys.exit(0)

def line_edit(src: str) -> str:
    lines = src.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^memory:\s*(#.*)?$", line):  # block mapping
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t", "#"))):
                m = re.match(r"^(\s+)provider:", lines[j])
                if m:
                    lines[j] = f'{m.group(1)}provider: "{want}"'
                    return "\n".join(lines) + "\n"
                j += 1
            lines.insert(i + 1, f'  provider: "{want}"')
            return "\n".join(lines) + "\n"
        if line.startswith("memory:"):
            raise ValueError("flow-style memory mapping")
    sep = "" if not src or src.endswith("\n") else "\n"
    return f'{src}{sep}memory:\n  provider: "{want}"\n'

try:
    new = line_edit(text)
    check = yaml.safe_load(new) or {}
    if (check.get("memory") or {}).get("provider", "") != want:
        raise ValueError("line edit did not take")
except (ValueError, yaml.YAMLError):
    data.setdefault("memory", {})
    if not isinstance(data["memory"], dict):
        data["memory"] = {}
    data["memory"]["provider"] = want
    new = yaml.safe_dump(data, default_flow_style=False, sort_keys=False)

if path.exists():
    stamp, n = time.strftime('%Y%m%d-%H%M%S'), 0
    backup = path.with_name(f"config.yaml.bak-{stamp}")
    while backup.exists():  # two edits in one second keep both originals
        n += 1
        backup = path.with_name(f"config.yaml.bak-{stamp}-{n}")
    shutil.copy2(path, backup)
    print(f"config.yaml: backup at {backup}")
path.parent.mkdir(parents=True, exist_ok=True)
tmp = path.with_name(".config.yaml.tmp")
tmp.write_text(new, "utf-8")
tmp.replace(path)
print(f"config.yaml: memory.provider = {want!r}")
PY
}

# The offload switch: context.engine in config.yaml (line edit like set_provider, parsed and
# checked) and the flag in memory_tencentdb.json, which also remembers the replaced engine.
set_offload() {
  "$venv_py" - "$hermes_home" "$1" <<'PY'
import json, re, shutil, sys, time
from pathlib import Path
import yaml

home, want_on = Path(sys.argv[1]), sys.argv[2] == "on"
ENGINE = "memory_tencentdb"
cfg_path, js_path = home / "config.yaml", home / "memory_tencentdb.json"
settings = {}
if js_path.exists():
    try:
        loaded = json.loads(js_path.read_text("utf-8"))
        settings = loaded if isinstance(loaded, dict) else {}
    except ValueError:
        print(f"install-hermes.sh: {js_path} is not JSON; fix or remove it", file=sys.stderr)
        sys.exit(1)
original = dict(settings)
text = cfg_path.read_text("utf-8") if cfg_path.exists() else ""
data = yaml.safe_load(text) if text.strip() else {}
data = data if isinstance(data, dict) else {}
ctx = data.get("context") if isinstance(data.get("context"), dict) else {}
current = str(ctx.get("engine") or "")

def line_edit(src: str, value: str | None) -> str:
    """context.engine = value (None: remove the key, and the context block if it empties)."""
    lines = src.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^context:\s*(#.*)?$", line):
            j = i + 1
            body = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t", "#"))):
                body.append(j)
                j += 1
            for k in body:
                m = re.match(r"^(\s+)engine:", lines[k])
                if m:
                    if value is None:
                        rest = [
                            x for x in body
                            if x != k and lines[x].strip() and not lines[x].lstrip().startswith("#")
                        ]
                        del lines[k]
                        if not rest:
                            del lines[i]
                    else:
                        lines[k] = f'{m.group(1)}engine: "{value}"'
                    return "\n".join(lines) + ("\n" if lines else "")
            if value is None:
                return src
            lines.insert(i + 1, f'  engine: "{value}"')
            return "\n".join(lines) + "\n"
        if line.startswith("context:"):
            raise ValueError("flow-style context mapping")
    if value is None:
        return src
    sep = "" if not src or src.endswith("\n") else "\n"
    return f'{src}{sep}context:\n  engine: "{value}"\n'

if want_on:
    target = ENGINE
    if current != ENGINE:
        settings["offload_previous_engine"] = current
else:
    target = str(settings.get("offload_previous_engine") or "") if current == ENGINE else current
    if current == ENGINE:
        settings.pop("offload_previous_engine", None)

if target != current:
    value = target or None
    try:
        new = line_edit(text, value)
        check = yaml.safe_load(new) or {}
        got = str(((check.get("context") or {}) if isinstance(check.get("context"), dict) else {}).get("engine") or "")
        if got != target:
            raise ValueError("line edit did not take")
    except (ValueError, yaml.YAMLError):
        section = data.setdefault("context", {}) if isinstance(data.get("context"), dict) else {}
        data["context"] = section
        if value is None:
            section.pop("engine", None)
            if not section:
                data.pop("context", None)
        else:
            section["engine"] = value
        new = yaml.safe_dump(data, default_flow_style=False, sort_keys=False)
    if cfg_path.exists():
        stamp, n = time.strftime('%Y%m%d-%H%M%S'), 0
        backup = cfg_path.with_name(f"config.yaml.bak-{stamp}")
        while backup.exists():  # two edits in one second keep both originals
            n += 1
            backup = cfg_path.with_name(f"config.yaml.bak-{stamp}-{n}")
        shutil.copy2(cfg_path, backup)
        print(f"config.yaml: backup at {backup}")
    home.mkdir(parents=True, exist_ok=True)
    tmp = cfg_path.with_name(".config.yaml.tmp")
    tmp.write_text(new, "utf-8")
    tmp.replace(cfg_path)
    print(f"config.yaml: context.engine = {target!r}" if target else "config.yaml: context.engine removed")
else:
    print(f"config.yaml: context.engine already {current!r}")

if js_path.exists() or want_on:
    settings["offload"] = want_on
if settings != original or (want_on and not js_path.exists()):
    home.mkdir(parents=True, exist_ok=True)
    tmp = js_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", "utf-8")
    tmp.replace(js_path)
print(f"memory_tencentdb.json: offload = {str(want_on).lower()}")
PY
}

ensure_venv() {
  if [ ! -x "$venv_py" ] || [ ! -x "$repo/.venv/bin/memory-tencentdb" ]; then
    echo "creating the gateway venv ($repo/.venv) with make install"
    make -C "$repo" install
  fi
}

if [ "$mode" = "install" ]; then
  ensure_venv
  mkdir -p "$hermes_home/plugins"
  if [ -L "$link" ]; then
    if [ "$(readlink "$link")" != "$repo/hermes_plugin" ]; then
      ln -sfn "$repo/hermes_plugin" "$link"
      echo "plugin: relinked $link -> $repo/hermes_plugin"
    else
      echo "plugin: $link already linked"
    fi
  elif [ -e "$link" ]; then
    echo "install-hermes.sh: $link exists and is not a symlink; move it away first" >&2
    exit 1
  else
    ln -s "$repo/hermes_plugin" "$link"
    echo "plugin: linked $link -> $repo/hermes_plugin"
  fi
  set_provider "$name"
  if [ -n "$offload" ]; then
    set_offload "$offload"
  fi
  echo "done: start Hermes as usual; the memory gateway starts with it."
else
  if [ -L "$link" ]; then
    rm "$link"
    echo "plugin: removed $link"
  else
    echo "plugin: no symlink at $link"
  fi
  if [ -f "$config" ]; then
    if [ -x "$venv_py" ]; then
      set_provider ""
      if [ -f "$hermes_home/memory_tencentdb.json" ] || grep -q "memory_tencentdb" "$config"; then
        set_offload off
      fi
    else
      echo "install-hermes.sh: no $venv_py to edit $config; unset memory.provider by hand" >&2
    fi
  fi
  echo "done: memory-tencentdb is no longer Hermes's memory provider (its data is kept)."
fi

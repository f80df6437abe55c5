#!/usr/bin/env bash
# Install the memory-tencentdb plugin into OpenClaw.
#
#   scripts/install-openclaw.sh [--host HOST] [--port PORT] [--api-key KEY] [--data-dir DIR]
#                               [--auto-start]
#
# Links openclaw_bridge/ into OpenClaw (a link, not a copy: updating this checkout updates the
# plugin), grants it the conversation hooks it needs, and optionally writes the gateway address.
# --data-dir: the gateway's data directory, if not the default (the bridge reads its key there).
# --auto-start: start the gateway when nothing listens on its port (detached, exits after 15 min
# unused), in one-shot `openclaw agent --local` runs as in `openclaw gateway run`; the command is
# $MEMORY_TENCENTDB_CMD, else memory-tencentdb on PATH, else this checkout's .venv.
# Safe to run again: an already-installed plugin is relinked and keeps its settings.
# Set OPENCLAW to the command to use (default: `openclaw` on PATH).
set -euo pipefail

PLUGIN_ID="memory-tencentdb"
here="$(cd "$(dirname "$0")" && pwd)"
bridge="$(cd "$here/../openclaw_bridge" && pwd)"
read -r -a openclaw <<<"${OPENCLAW:-openclaw}"

host="" port="" api_key="" data_dir="" auto_start=""
while [ $# -gt 0 ]; do
  case "$1" in
    --host) host="${2:?--host needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --api-key) api_key="${2:?--api-key needs a value}"; shift 2 ;;
    --data-dir) data_dir="${2:?--data-dir needs a value}"; shift 2 ;;
    --auto-start) auto_start=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$data_dir" in ""|/*|"~"*) ;; *) data_dir="$PWD/$data_dir" ;; esac
if [ -n "$port" ] && [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "--port must be a number, got: $port" >&2
  exit 2
fi

json_string() {  # a shell value as a JSON string literal
  local v="${1//\\/\\\\}"
  printf '"%s"' "${v//\"/\\\"}"
}

if ! command -v "${openclaw[0]}" >/dev/null 2>&1; then
  echo "OpenClaw not found: install it (Node >= 24.16, then: npm install -g openclaw@2026.9.6) or set OPENCLAW" >&2
  exit 1
fi

# OpenClaw 2026.9 needs Node >= 24.16 (node:sqlite); say so before it fails obscurely.
node_cmd=node
case "$(basename "${openclaw[0]}")" in node|node[0-9]*) node_cmd="${openclaw[0]}" ;; esac
if node_version="$("$node_cmd" -p 'process.versions.node' 2>/dev/null)"; then
  IFS=. read -r node_major node_minor _ <<<"$node_version"
  if [ "$node_major" -lt 24 ] || { [ "$node_major" -eq 24 ] && [ "$node_minor" -lt 16 ]; }; then
    echo "warning: $node_cmd is Node $node_version; OpenClaw 2026.9 needs Node >= 24.16 (see the README)" >&2
  fi
fi

gateway_cmd=""
if [ -n "$auto_start" ]; then
  if [ -n "${MEMORY_TENCENTDB_CMD:-}" ]; then
    gateway_cmd="$MEMORY_TENCENTDB_CMD"
  elif command -v memory-tencentdb >/dev/null 2>&1; then
    gateway_cmd="$(command -v memory-tencentdb)"
  elif [ -x "$here/../.venv/bin/memory-tencentdb" ]; then
    gateway_cmd="$(cd "$here/../.venv/bin" && pwd)/memory-tencentdb"
  else
    echo "--auto-start: memory-tencentdb not found (install it, or set MEMORY_TENCENTDB_CMD to its path)" >&2
    exit 1
  fi
fi

# Non-interactive installs need --force (local source) and --accept-capabilities (consent).
echo "linking $bridge"
"${openclaw[@]}" plugins install -l "$bridge" --force --accept-capabilities

# One `config set`, since every OpenClaw start costs seconds: the hook grant (without it OpenClaw
# drops the recall and capture hooks of a non-bundled plugin) plus any settings given. --merge
# keeps whatever else the entry already holds.
settings=()
[ -n "$host" ] && settings+=("\"host\": $(json_string "$host")")
[ -n "$port" ] && settings+=("\"port\": $port")
[ -n "$api_key" ] && settings+=("\"apiKey\": $(json_string "$api_key")")
[ -n "$data_dir" ] && settings+=("\"dataDir\": $(json_string "$data_dir")")
[ -n "$auto_start" ] && settings+=("\"autoStart\": {\"enabled\": true, \"command\": $(json_string "$gateway_cmd")}")
entry='{"enabled": true, "hooks": {"allowConversationAccess": true}'
if [ ${#settings[@]} -gt 0 ]; then
  entry="$entry, \"config\": {$(IFS=,; echo "${settings[*]}")}"
fi
entry="$entry}"
"${openclaw[@]}" config set "plugins.entries.$PLUGIN_ID" "$entry" --strict-json --merge

if [ -n "$auto_start" ]; then
  start_line="  1. The gateway starts by itself when nothing answers on its port ($gateway_cmd serve
     --idle-exit 900, detached): the first one-shot \`openclaw agent --local\` run waits for it
     (a few seconds, within autoStart.waitMs); it exits after 15 minutes unused."
else
  start_line="  1. Start the memory gateway:   memory-tencentdb serve     (or re-run with --auto-start)"
fi
cat <<MSG
memory-tencentdb is installed in OpenClaw.
$start_line
  2. Check the plugin:           ${openclaw[*]} plugins inspect $PLUGIN_ID --runtime
A running OpenClaw Gateway picks the change up by itself; restart it if it does not.
Turns that cannot reach the gateway are kept under the OpenClaw state directory
(memory-tencentdb/spool) and sent once it answers again.
MSG

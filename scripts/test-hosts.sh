#!/usr/bin/env bash
# Installs the real host agents the end-to-end tests drive, into $TEST_CACHE
# (outside the repository, reused across runs). Each part is idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${TEST_CACHE:=$HOME/.cache/memory-tencentdb-test}"
mkdir -p "$TEST_CACHE"
for part in "$here"/test-hosts.d/*.sh; do
  [ -e "$part" ] || continue
  if ! TEST_CACHE="$TEST_CACHE" bash "$part"; then
    # CI (MEMORY_TENCENTDB_REQUIRE_HOSTS=1) must have every host; elsewhere (e.g. no root for
    # apt-get chromium) the tests that need the missing one skip and say why.
    if [ "${MEMORY_TENCENTDB_REQUIRE_HOSTS:-}" = 1 ]; then exit 1; fi
    echo "test-hosts: $(basename "$part") failed; the tests that need it will skip" >&2
  fi
done

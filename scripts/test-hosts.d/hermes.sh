#!/usr/bin/env bash
# Installs the real Hermes agent (hermes-agent 0.19.0 from PyPI) into its own venv at
# $TEST_CACHE/hermes-venv for the end-to-end tests in tests/hermes/. Hermes pins many
# packages exactly and ships generic top-level module names, so it never shares our venv.
# Idempotent: a venv that already holds the pinned version is left alone.
set -euo pipefail
: "${TEST_CACHE:=$HOME/.cache/memory-tencentdb-test}"
HERMES_VERSION="${HERMES_VERSION:-0.19.0}"
venv="$TEST_CACHE/hermes-venv"
stamp="$venv/.hermes-agent-$HERMES_VERSION"

if [ -f "$stamp" ] && [ -x "$venv/bin/hermes" ]; then
  echo "hermes-agent $HERMES_VERSION already installed in $venv"
  exit 0
fi

# Hermes needs Python >=3.11,<3.14; prefer an explicit choice, then common names.
py="${HERMES_PYTHON:-}"
if [ -z "$py" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)'; then
      py="$cand"
      break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "hermes.sh: no Python 3.11-3.13 found (set HERMES_PYTHON)" >&2
  exit 1
fi

mkdir -p "$TEST_CACHE"
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "hermes-agent==$HERMES_VERSION"
touch "$stamp"
echo "hermes-agent $HERMES_VERSION installed in $venv"

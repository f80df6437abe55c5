#!/usr/bin/env bash
# Installs Debian's Chromium (and its driver) for the Memory Hub browser tests in tests/hub/,
# driven by Playwright from PyPI (dev extras) with executable_path=/usr/bin/chromium: Playwright's
# own browser download (`playwright install`) is never used. A CJK font comes along so the
# Chinese fixtures render as text in the screenshots, not as boxes.
# Idempotent: nothing to do when the browser, the driver and the font are there. Needs root (CI
# runs as root) or sudo without a password.
set -euo pipefail

have_font() { command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh 2>/dev/null | grep -q .; }
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && have_font; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1) already installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: no apt-get here; install Chromium at /usr/bin/chromium yourself" >&2
  exit 1
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "chromium: needs root to apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends \
  chromium chromium-driver fonts-wqy-zenhei fontconfig >/dev/null
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1) installed"

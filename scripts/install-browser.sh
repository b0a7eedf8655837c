#!/usr/bin/env bash
# Install Debian's chromium for the web page test (tests/daemon/test_web_live.py drives it headless).
# Idempotent: does nothing when chromium is already there. Needs root (or sudo).
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "chromium already installed: $(chromium --version 2>/dev/null || echo unknown version)"
  exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: not root and no sudo" >&2; exit 1; }
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends chromium chromium-driver
chromium --version

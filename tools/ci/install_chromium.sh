#!/usr/bin/env bash
# Install headless Chromium (Debian package `chromium`) for the `browser`-marked report tests.
# Idempotent: does nothing when a chromium binary is already on PATH.
set -euo pipefail

for bin in chromium chromium-browser google-chrome; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "chromium present: $(command -v "$bin")"
    exit 0
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_chromium.sh: need root or sudo to apt-get install chromium" >&2; exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium

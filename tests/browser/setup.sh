#!/usr/bin/env bash
# Install what the browser tests need: Debian's chromium and chromium-driver (never a
# downloaded browser build), and the Python packages that drive them.
# Usage: bash tests/browser/setup.sh [PYTHON]   (PYTHON defaults to .venv/bin/python)
set -euo pipefail

PYTHON="${1:-.venv/bin/python}"

if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
    SUDO=""
    if [[ "$(id -u)" != "0" ]]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version

if [[ -x "$PYTHON" ]]; then
    "$PYTHON" -m pip install --quiet "selenium>=4.20"
fi

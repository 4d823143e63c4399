#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver for the browser tests
# (tests/test_dashboard_browser.py drives them through Selenium, headless); quick when
# both are there already. Selenium itself comes with the `test` extra (.venv).
set -euo pipefail

source "$(dirname "$0")/apt_missing.sh"
apt_install_missing install_browser chromium chromium-driver
command -v chromedriver >/dev/null || { echo "install_browser: no chromedriver on PATH" >&2; exit 1; }

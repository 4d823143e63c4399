#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver for the browser tests
# (tests/test_dashboard_browser.py drives them through Selenium, headless); quick when
# both are there already. Selenium itself comes with the `test` extra (.venv).
set -euo pipefail
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)

pkgs=(chromium chromium-driver)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' \
    || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install_browser: apt-get install ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v chromedriver >/dev/null || { echo "install_browser: no chromedriver on PATH" >&2; exit 1; }

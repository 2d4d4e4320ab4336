#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium (and a font for the report's SVG text) for the
# report's browser check (tools/browser_check.py, tests/report_browser.rs). Idempotent: does
# nothing when a Chromium is already on PATH. Prints the browser's path on stdout (last line).
#
#   bash tools/install_chromium.sh            # install if missing, print path
#   CHROMIUM=/path/to/chrome bash tools/...   # use this binary instead
set -euo pipefail

find_browser() {
    if [[ -n "${CHROMIUM:-}" && -x "${CHROMIUM}" ]]; then
        echo "${CHROMIUM}"
        return 0
    fi
    local c
    for c in chromium chromium-browser google-chrome-stable google-chrome chrome; do
        if command -v "$c" >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

if path="$(find_browser)"; then
    echo "chromium already installed: ${path}" >&2
    echo "${path}"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: no Chromium on PATH and no apt-get to install one (install Debian's 'chromium' package," >&2
    echo "       or set CHROMIUM=/path/to/chrome)" >&2
    exit 1
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: need root (or sudo) to apt-get install chromium" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "installing chromium from the Debian archive ..." >&2
${SUDO} apt-get update -qq >&2
# fonts-dejavu-core: the SVG figures ask for font-family sans-serif; any sans font renders them,
# DejaVu is Debian's default and keeps the screenshots identical across machines.
${SUDO} apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2

path="$(find_browser)" || { echo "error: chromium installed but not found on PATH" >&2; exit 1; }
echo "installed: $("${path}" --version 2>/dev/null || echo "${path}")" >&2
echo "${path}"

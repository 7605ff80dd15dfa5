#!/bin/sh
# Installs Debian's chromium for the status page's browser test (tests/daemon/test_demo.py), if it is missing.
# Playwright drives it (executable_path=/usr/bin/chromium); `playwright install` is never run: its browser
# builds are downloaded from outside the package registries. Idempotent; needs root (or sudo) to install.
set -eu

if [ -x /usr/bin/chromium ]; then
    echo "tools/setup-chromium.sh: /usr/bin/chromium found"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "tools/setup-chromium.sh: need root to install chromium; the browser test will be skipped" >&2
        exit 0
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "tools/setup-chromium.sh: no apt-get here; install chromium yourself (the browser test is skipped)" >&2
    exit 0
fi
echo "tools/setup-chromium.sh: apt-get install chromium"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "tools/setup-chromium.sh: done"

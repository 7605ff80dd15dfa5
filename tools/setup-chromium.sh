#!/bin/sh
# Installs Debian's chromium for the status page's browser test (tests/daemon/test_demo.py), if it is missing.
# Playwright drives it (executable_path=/usr/bin/chromium); `playwright install` is never run: its browser
# builds are downloaded from outside the package registries. Idempotent. Where it cannot be installed (no
# root, no apt-get) it says so and the browser test is skipped with that reason; make test goes on.
set -eu

if [ -x /usr/bin/chromium ]; then
    echo "tools/setup-chromium.sh: /usr/bin/chromium found"
    exit 0
fi
sh "$(dirname "$0")/apt-install.sh" tools/setup-chromium.sh chromium fonts-dejavu-core ||
    echo "tools/setup-chromium.sh: chromium not installed; the browser test will be skipped" >&2

#!/bin/sh
# Installs Debian's chromium for the status page's browser test (tests/daemon/test_demo.py) when it is missing.
# Playwright drives it (executable_path=/usr/bin/chromium); `playwright install` is never run: its browser
# builds are downloaded from outside the package registries. One group of tools/setup.sh, which make test
# runs for every group.
exec sh "$(dirname "$0")/setup.sh" browser

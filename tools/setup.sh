#!/bin/sh
# setup.sh [GROUP...]: installs, with apt-get, every program the tests run that is missing here, and says what
# it found. The programs, their Debian packages and their groups are in tools/programs.py
# (`python3 -m tools.programs list`); no GROUP means all of them (what make test runs). Idempotent; needs root
# or sudo only when something is missing. Exit 1, saying why, when something could not be installed.
# The Debian packages it may install today (the table is the authority): iproute2, nftables, faketime,
# chromium, fonts-dejavu-core, wrk, procps. Java 17 and Maven are expected from the base machine.
set -eu
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m tools.programs setup "$@"

#!/bin/sh
# apt-install.sh WHO PACKAGE...: install Debian packages with apt-get, as root or through sudo; WHO starts
# every message. Exit 1 (saying why) when it cannot: no root and no sudo, or no apt-get.
# Used by tools/setup.sh (make test), through tools/programs.py.
set -eu

who=$1
shift
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "$who: need root to install: $*" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: no apt-get here; install these packages yourself: $*" >&2
    exit 1
fi
echo "$who: apt-get install $*"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@"
echo "$who: done"

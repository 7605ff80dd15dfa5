#!/bin/sh
# Installs what the Jepsen suite needs on a fresh Debian/Ubuntu machine, if it is missing:
#   ip (iproute2), nft (nftables), iptables, and libfaketime's multi-threaded library (faketime).
# Idempotent: prints what it finds and installs only what is missing. Needs root (or sudo) to install.
set -eu

missing=""
need() { # need <command-or-file> <package>
    if command -v "$1" >/dev/null 2>&1 || [ -e "$1" ]; then
        echo "jepsen/setup.sh: $1 found"
    else
        echo "jepsen/setup.sh: $1 missing (package $2)"
        missing="$missing $2"
    fi
}

need ip iproute2
need nft nftables
need iptables iptables
faketime_lib=""
for d in /usr/lib/x86_64-linux-gnu/faketime /usr/lib/aarch64-linux-gnu/faketime /usr/lib/faketime; do
    if [ -e "$d/libfaketimeMT.so.1" ]; then faketime_lib="$d/libfaketimeMT.so.1"; fi
done
if [ -n "$faketime_lib" ]; then
    echo "jepsen/setup.sh: $faketime_lib found"
else
    echo "jepsen/setup.sh: libfaketimeMT.so.1 missing (package faketime)"
    missing="$missing faketime"
fi

if [ -z "$missing" ]; then
    echo "jepsen/setup.sh: nothing to install"
    exit 0
fi

# shellcheck disable=SC2086 # one word per package
exec sh "$(dirname "$0")/../tools/apt-install.sh" jepsen/setup.sh $missing

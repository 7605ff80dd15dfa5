#!/bin/sh
# Installs what the Jepsen suite needs when it is missing: ip (iproute2), nft (nftables) and libfaketime's
# multi-threaded library (faketime). One group of tools/setup.sh, which make test runs for every group.
exec sh "$(dirname "$0")/../tools/setup.sh" jepsen

#!/bin/sh
# build.sh: resolves the RocketMQ jars pinned in pom.xml into build/lib (mvn dependency:copy-dependencies) and
# compiles the interop Java client (src/) against them into build/classes. `make rocketmq` runs it; cached:
# nothing is fetched again while build/.stamp is newer than pom.xml and src/. Fails at once, naming what it
# could not fetch, when Maven Central cannot be reached.
set -eu
cd "$(dirname "$0")"
who="make rocketmq"

. ../jars.sh

jars_fresh "RocketMQ jars and the interop client are"
version=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' pom.xml)
jars_resolve "RocketMQ $version" "the interop suite"
# Two copies of org.rocksdb on one `lib/*` classpath would load in directory order: RocketMQ's own must win.
if ls build/lib.new/rocksdbjni-*.jar >/dev/null 2>&1; then
    echo "$who: build/lib has rocksdbjni beside rocketmq-rocksdb; RocketMQ excludes it: check pom.xml" >&2
    exit 1
fi
jars_install "interop client"

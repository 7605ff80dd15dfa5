#!/bin/sh
# build.sh: resolves the RocketMQ jars pinned in pom.xml into build/lib (mvn dependency:copy-dependencies) and
# compiles the interop Java client (src/) against them into build/classes. `make rocketmq` runs it; cached:
# nothing is fetched again while build/.stamp is newer than pom.xml and src/. Fails at once, naming what it
# could not fetch, when Maven Central cannot be reached.
set -eu
cd "$(dirname "$0")"
who="make rocketmq"

stale=""
[ -f build/.stamp ] || stale=1
[ -z "$stale" ] && [ -n "$(find pom.xml build.sh src -newer build/.stamp 2>/dev/null | head -n 1)" ] && stale=1
if [ -z "$stale" ]; then
    echo "$who: RocketMQ jars and the interop client are up to date (build/)"
    exit 0
fi

for tool in java javac mvn; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$who: '$tool' not found: the interop suite needs Java 17 (JDK) and Maven" >&2; exit 1; }
done
version=$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' pom.xml)
echo "$who: resolving RocketMQ $version from Maven Central into interop/rocketmq/build/lib"
rm -rf build/lib.new
mkdir -p build
if ! mvn -B -q -Dstyle.color=never -f pom.xml -Dmaven.wagon.http.retryHandler.count=1 \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=build/lib.new >build/mvn.log 2>&1; then
    echo "$who: Maven could not resolve RocketMQ $version (full log: interop/rocketmq/build/mvn.log):" >&2
    grep -E 'Could not (resolve|transfer|find)|could not be resolved|Unknown host|Connection|timed out' build/mvn.log \
        | sed 's/^\[ERROR\] */  /; s/ -> \[Help 1\]//' | cut -c1-600 | head -n 5 >&2
    exit 1
fi
# Two copies of org.rocksdb on one `lib/*` classpath would load in directory order: RocketMQ's own must win.
if ls build/lib.new/rocksdbjni-*.jar >/dev/null 2>&1; then
    echo "$who: build/lib has rocksdbjni beside rocketmq-rocksdb; RocketMQ excludes it: check pom.xml" >&2
    exit 1
fi
rm -rf build/lib && mv build/lib.new build/lib
rm -rf build/classes && mkdir -p build/classes
javac -nowarn -encoding UTF-8 -d build/classes -cp 'build/lib/*' src/interop/*.java
touch build/.stamp
echo "$who: $(ls build/lib | wc -l) jars ($(du -sh build/lib | cut -f1)), interop client compiled"

#!/bin/sh
# build.sh: resolves Hadoop's MiniDFSCluster (hadoop-client-minicluster, pinned in pom.xml at the Hadoop version
# of PySpark's bundled client) into build/lib and compiles src/ (interop.MiniHdfs) into build/classes. `make hadoop`
# runs it, and `make test` before the suite (tests/tools/audit/test_cluster.py audits hdfs:// on it). Cached:
# nothing is fetched again while build/.stamp is newer than pom.xml, build.sh and src/. Fails at once, naming
# what it could not fetch, when Maven Central cannot be reached.
set -eu
cd "$(dirname "$0")"
who="make hadoop"

stale=""
[ -f build/.stamp ] || stale=1
[ -z "$stale" ] && [ -n "$(find pom.xml build.sh src -newer build/.stamp 2>/dev/null | head -n 1)" ] && stale=1
if [ -z "$stale" ]; then
    echo "$who: Hadoop's MiniDFSCluster is up to date (interop/hadoop/build/)"
    exit 0
fi

for tool in java javac mvn; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$who: '$tool' not found: the HDFS test needs Java 17 (JDK) and Maven" >&2; exit 1; }
done
version=$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' pom.xml)
echo "$who: resolving hadoop-client-minicluster $version from Maven Central into interop/hadoop/build/lib"
rm -rf build/lib.new
mkdir -p build
if ! mvn -B -q -Dstyle.color=never -f pom.xml -Dmaven.wagon.http.retryHandler.count=1 \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=build/lib.new >build/mvn.log 2>&1; then
    echo "$who: Maven could not resolve Hadoop $version (full log: interop/hadoop/build/mvn.log):" >&2
    grep -E 'Could not (resolve|transfer|find)|could not be resolved|Unknown host|Connection|timed out' build/mvn.log \
        | sed 's/^\[ERROR\] */  /; s/ -> \[Help 1\]//' | cut -c1-600 | head -n 5 >&2
    exit 1
fi
rm -rf build/lib && mv build/lib.new build/lib
rm -rf build/classes && mkdir -p build/classes
javac -nowarn -encoding UTF-8 -d build/classes -cp 'build/lib/*' src/interop/*.java
touch build/.stamp
echo "$who: $(ls build/lib | wc -l) jars ($(du -sh build/lib | cut -f1)), interop.MiniHdfs compiled"

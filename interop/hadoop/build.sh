#!/bin/sh
# build.sh: resolves Hadoop's MiniDFSCluster (hadoop-client-minicluster, pinned in pom.xml at the Hadoop version
# of PySpark's bundled client) into build/lib and compiles src/ (interop.MiniHdfs) into build/classes. `make hadoop`
# runs it, and `make test` before the suite (tests/tools/audit/test_cluster.py audits hdfs:// on it). Cached:
# nothing is fetched again while build/.stamp is newer than pom.xml, build.sh and src/. Fails at once, naming
# what it could not fetch, when Maven Central cannot be reached. The steps are interop/jars.sh's.
set -eu
cd "$(dirname "$0")"
who="make hadoop"
. ../jars.sh

jars_fresh "Hadoop's MiniDFSCluster is"
version=$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' pom.xml)
jars_resolve "hadoop-client-minicluster $version" "the HDFS test"
jars_install "interop.MiniHdfs"

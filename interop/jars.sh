# jars.sh: the steps every interop/*/build.sh shares, sourced from that folder (`. ../jars.sh`) after it set
# `who` (the make target, for messages). A build resolves its pom.xml's runtime jars from Maven Central into
# build/lib and compiles its src/ against them into build/classes; it is cached while build/.stamp is newer than
# pom.xml, build.sh and src/ (cli/rocketmq.py's newer_than_build applies the same rule).

# jars_fresh LABEL: exit 0, saying so, when nothing changed since the last build.
jars_fresh() {
    if [ -f build/.stamp ] && [ -z "$(find pom.xml build.sh src -newer build/.stamp 2>/dev/null | head -n 1)" ]; then
        echo "$who: $1 up to date (interop/$(basename "$(pwd)")/build/)"
        exit 0
    fi
}

# jars_resolve WHAT NEEDED_BY: the pom's runtime jars into build/lib.new; fails naming what Maven could not fetch.
jars_resolve() {
    for tool in java javac mvn; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$who: '$tool' not found: $2 needs Java 17 (JDK) and Maven" >&2; exit 1; }
    done
    echo "$who: resolving $1 from Maven Central into interop/$(basename "$(pwd)")/build/lib"
    rm -rf build/lib.new
    mkdir -p build
    if ! mvn -B -q -Dstyle.color=never -f pom.xml -Dmaven.wagon.http.retryHandler.count=1 \
            dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=build/lib.new >build/mvn.log 2>&1; then
        echo "$who: Maven could not resolve $1 (full log: interop/$(basename "$(pwd)")/build/mvn.log):" >&2
        grep -E 'Could not (resolve|transfer|find)|could not be resolved|Unknown host|Connection|timed out' build/mvn.log \
            | sed 's/^\[ERROR\] */  /; s/ -> \[Help 1\]//' | cut -c1-600 | head -n 5 >&2
        exit 1
    fi
}

# jars_install WHAT_COMPILED: build/lib.new replaces build/lib, src/ is compiled, the stamp is touched.
jars_install() {
    rm -rf build/lib && mv build/lib.new build/lib
    rm -rf build/classes && mkdir -p build/classes
    javac -nowarn -encoding UTF-8 -d build/classes -cp 'build/lib/*' src/interop/*.java
    touch build/.stamp
    echo "$who: $(ls build/lib | wc -l) jars ($(du -sh build/lib | cut -f1)), $1 compiled"
}

"""A class-data-sharing archive for the local JVM of the audit (AppCDS, a JDK 13+ dynamic archive).

    python -m tools.audit.cds DIR      # builds DIR/spark-<key>.jsa unless it is there; prints its path

A local audit's JVM spends about half of its start reading, parsing and verifying Spark's classes from its jars.
An archive of the classes one small local job loaded lets every later JVM map them instead: measured on 2 cores
(2026-11-30, a local[2] session and one count), 13.8-14.6 CPU-s and 12 s to the answer without, 7.1-7.2 CPU-s and
6 s with. `session()` (tools/audit/job.py) passes the archive to the JVM it starts when `RMQ_AUDIT_CDS_ARCHIVE`
names one that is whole (its size as built; the test suite sets it, tests/conftest.py; make test builds it first).
The key in the name is a digest of the java binary and of PySpark's jars (paths, sizes, times): another Java or
PySpark gets an archive of its own. A JVM given an archive it cannot use (another JDK, a flipped byte caught by
-XX:+VerifySharedSpaces) runs without it, silently (`-Xlog:cds=off`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ENV = "RMQ_AUDIT_CDS_ARCHIVE"
ROOT = Path(__file__).resolve().parent.parent.parent
DIR = ROOT / "build" / "spark-cds"  # where make audit-env builds it and the test suite looks
# Checked (a CRC of every region at each start, ~0.1 s): JDK 17 otherwise maps a damaged archive and dies of SIGBUS
# in FileMapInfo::relocate_pointers_in_core_regions (seen here, tests/tools/audit/test_cds.py); quiet, since a JVM
# that cannot use the archive says so on stdout.
QUIET = "-XX:+VerifySharedSpaces -Xlog:cds=off -Xlog:cds+dynamic=off"

# One small local job: a session, a Python-side DataFrame, a shuffle and a collect, as every audit run does.
_JOB = """
import os, sys
sys.path.insert(0, {root!r})
import tools.audit.job as job
job.LOCAL_JVM_OPTIONS = job.LOCAL_JVM_OPTIONS + " -XX:ArchiveClassesAtExit=" + {tmp!r} + " " + {quiet!r}
spark = job.session("local[2]", "ERROR", spark_ui_enabled="false", spark_ui_showConsoleProgress="false")
df = spark.createDataFrame([(i % 7, str(i)) for i in range(2000)], ["k", "v"])
df.groupBy("k").count().orderBy("k").collect()
spark.range(1000).selectExpr("id % 3 AS k").groupBy("k").count().collect()
spark.stop()
"""


def key() -> str:
    """A digest of what the archive depends on: the java binary and PySpark's jars."""
    import pyspark

    java = Path(os.path.realpath(shutil.which("java") or "java"))
    parts = []
    for p in [java, *sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))]:
        st = p.stat()
        parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive(directory: Path = DIR) -> Path:
    """The archive's path for this Java and PySpark in `directory`, whether it is there or not."""
    return directory / f"spark-{key()}.jsa"


def whole(path: str | Path) -> bool:
    """The archive is there with the size `build` recorded beside it (PATH.bytes). JDK 17 maps a shorter file and
    dies of SIGBUS reading past its end, before any check of its own; a flipped byte is -XX:+VerifySharedSpaces's."""
    try:
        with open(f"{path}.bytes") as f:
            return os.path.getsize(path) == int(f.read())
    except (OSError, ValueError):
        return False


def options() -> str:
    """The JVM options that map the archive `RMQ_AUDIT_CDS_ARCHIVE` names, or "" when it names none that is whole."""
    path = os.environ.get(ENV, "")
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path and whole(path) else ""


def build(directory: Path) -> Path:
    """DIR/spark-<key>.jsa, dumped by a JVM that ran _JOB when it exited, renamed into place whole."""
    out = archive(directory)
    if whole(out):
        return out
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{out.name}.{os.getpid()}.tmp"
    code = _JOB.format(root=str(ROOT), tmp=str(tmp), quiet=QUIET)
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"tools.audit.cds: no archive from the local job (exit {r.returncode}): {r.stderr[-2000:]}")
    size = directory / f".{out.name}.bytes.{os.getpid()}.tmp"
    size.write_text(str(tmp.stat().st_size))
    for path in (tmp, size):  # a cache, but never a torn one
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    os.replace(tmp, out)
    os.replace(size, f"{out}.bytes")  # last: until it is there, no JVM is given the archive
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.audit.cds DIR", file=sys.stderr)
        return 2
    print(build(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""How the audit runs on a cluster: its inputs as every executor sees them, the executors' Python, and an
input an executor cannot read told as a usage error (docs/audit.md, "On a cluster").

Driver side: `absolute` makes a local path absolute before any task carries it (an executor's working
directory is its worker's, not the driver's); `executor_pythons` asks the executors which Python runs their
tasks and whether it can import the audit (a packed environment shipped with --archives, or not);
`unreadable_input` finds, in a failed job's error, the Hadoop input an executor could not read and where.

Executor side: `unreadable` is what a task returns, in place of its result, for a local input it cannot read;
the driver turns it into a usage error (InputError). Inputs read through Hadoop (file://, hdfs://) fail in the
JVM: `unreadable_input` reads the path and the executor from Spark's error.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Any

# Spark's own words for a failed task: "Lost task 0.3 in stage 1.0 (TID 7) (127.0.0.1 executor 0): ..."
_LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ \(TID \d+\) \((\S+) executor (\S+?)\): (\S+?): ([^\n]*)")
# Hadoop's (file:// and hdfs:// inputs read by binaryFiles on the executors, or listed on the driver)
_JAVA_NOT_FOUND = re.compile(r"java\.io\.FileNotFoundException: (?:File )?(\S+?)(?: does not exist| \(.*\))?\.?$")
_NO_INPUT = re.compile(r"Input path does not exist: (\S+)")


@dataclass(frozen=True)
class Unreadable:
    path: str
    host: str  # the executor's host as Spark names it, else as the task saw it (executor_host)
    reason: str
    executor: str | None = None

    def light(self) -> Unreadable:
        """What the driver collects (as ScanOut.light and SnapshotOut.light)."""
        return self

    def message(self) -> str:
        where = f"executor {self.executor} on host {self.host}" if self.executor else f"host {self.host}"
        return (
            f"{self.path}: cannot be read on {where} ({self.reason}): every executor reads the inputs at the path "
            "the driver lists them under: put the data dirs on a mount all hosts share at that path, or give a "
            "URI they all read (hdfs://, s3a://...; docs/audit.md, On a cluster)"
        )


def absolute(path: str) -> str:
    """A local path, absolute (a URI unchanged): tasks carry it to executors whose working directory is not
    the driver's."""
    return path if "://" in path else os.path.abspath(path)


def executor_host() -> str:
    """This host as a task can tell: its name, and the address Spark binds to when SPARK_LOCAL_IP sets one
    (Spark gives a Python task neither its executor id nor its executor's address)."""
    name, ip = socket.gethostname(), os.environ.get("SPARK_LOCAL_IP")
    return f"{name} ({ip})" if ip and ip != name else name


def unreadable(path: str, err: BaseException) -> Unreadable:
    """What a task returns for a local input it cannot read, in place of its result: the driver stops with a
    usage error naming the path, this host and why (a task that raised would be retried, and its traceback
    logged by Spark for each try)."""
    reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    return Unreadable(path, executor_host(), reason)


def stop_if_unreadable(results: list[Any]) -> None:
    """On the driver, over a stage's collected results: the first Unreadable a task returned, as InputError."""
    from tools.audit.discover import InputError

    for x in results:
        if isinstance(x, Unreadable):
            raise InputError(x.message())


def unreadable_input(err: BaseException) -> Unreadable | None:
    """The input a failed job could not read, from the error Spark raised on the driver (a PythonException or a
    Py4JJavaError carrying the executor's text); None for any other failure."""
    text = str(err)
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            text += "\n" + str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone: the Python text is enough
            pass
    lost = _LOST_TASK.search(text)
    if lost and lost.group(3) == "java.io.FileNotFoundException":
        nf = _JAVA_NOT_FOUND.match(f"java.io.FileNotFoundException: {lost.group(4)}")
        return Unreadable(nf.group(1) if nf else lost.group(4), lost.group(1), "no such file", lost.group(2))
    m = _NO_INPUT.search(text)
    if m:
        return Unreadable(m.group(1), "the driver", "no such file")
    return None


@dataclass(frozen=True)
class ExecutorPython:
    host: str
    executable: str
    prefix: str
    version: str
    error: str | None  # why `import tools.audit.tasks` failed there, or None


def _probe(_: Any) -> tuple[str, str, str, str, str | None]:
    import platform
    import sys

    try:
        import tools.audit.tasks  # noqa: F401 - what every task of the audit imports
    except Exception as e:  # noqa: BLE001 - any failure is reported, with the module that is missing
        error: str | None = f"{type(e).__name__}: {e}"
    else:
        error = None
    return socket.gethostname(), sys.executable, sys.prefix, platform.python_version(), error


def executor_pythons(sc: Any) -> list[ExecutorPython]:
    """The Pythons the executors run tasks with (one small job, a task per core): where each is (a packed
    environment unpacked by --archives is under the executor's working directory) and whether it can import
    the audit with the code ship_code added."""
    n = max(2, 2 * sc.defaultParallelism)
    rows = sc.parallelize(range(n), n).map(_probe).distinct().collect()
    # `error` is None where the import worked: sorted on a key, so that both kinds of executor can be reported
    return sorted((ExecutorPython(*r) for r in set(rows)), key=lambda p: (p.host, p.executable, p.error or ""))

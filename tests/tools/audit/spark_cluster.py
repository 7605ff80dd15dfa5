"""A real Spark standalone cluster from the installed PySpark (one master, two workers, all on 127.0.0.1),
Hadoop's own HDFS (interop/hadoop), the audit run as a user runs it, and what the tests compare and watch:
the reports minus their timing, and every TCP socket of a process tree (nothing but loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pyspark

from cli.rocketmq import free_port, wait_until
from tools.audit.job import jvm_options

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SPARK_HOME = Path(pyspark.__file__ or "pyspark").parent
HADOOP = ROOT / "interop" / "hadoop"
ARCHIVE = ROOT / "build" / "audit-env.tar.gz"  # make audit-env (tools/audit/pack_env.py)
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
# Not findings: when and where a run happened.
TIMING = ("seconds", "out", "runDate")
# Every JVM of a cluster test (master, workers, drivers, executors): C1 and the serial collector, as a local run's
# JVM, and the audit's class-data archive when make test built one (tools/audit/cds.py; they share the local JVM's
# class path). Measured 2026-11-30, three alternating rounds of a cluster's start and two small applications:
# 13.6-14.8 CPU-s and 50-53 for the two applications without it, 9.3-10.1 and 35-39 with it.
JVM_OPTIONS = jvm_options()


def die_with_parent() -> None:
    """preexec_fn: the process (and what it execs) gets SIGKILL when the test process dies, even by SIGKILL,
    so that no cluster outlives a test run however it ends (prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME), **extra)
    return env


@dataclass
class Standalone:
    """Master + two workers (1 core, 1 GB each), their logs and work dirs under `root`. `hidden`: a directory
    the workers (and so their executors) see as an empty tmpfs, in a mount namespace of their own, while the
    driver sees what is there: data a driver lists and no executor can read."""

    root: Path
    hidden: Path
    master_port: int = 0
    ui_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[TextIO] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, argv: list[str], name: str) -> None:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self.logs.append(log)
        env = base_env(SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(self.root), SPARK_WORKER_DIR=str(self.root))
        env["SPARK_DAEMON_JAVA_OPTS"] = JVM_OPTIONS
        kw: dict[str, Any] = {"start_new_session": True, "preexec_fn": die_with_parent}
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, **kw))

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.hidden.mkdir(parents=True, exist_ok=True)
        self.master_port, self.ui_port = free_port(), free_port()
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        master = "org.apache.spark.deploy.master.Master"
        argv = [spark_class, master, "--host", "127.0.0.1", "--port", str(self.master_port)]
        self._start([*argv, "--webui-port", str(self.ui_port)], "master")
        for k in (1, 2):
            work = self.root / f"worker{k}"
            work.mkdir(exist_ok=True)
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0"]
            worker += ["--webui-port", str(free_port()), "--cores", "1", "--memory", "1g", "--work-dir", str(work)]
            # its own mount namespace, with an empty tmpfs over `hidden`; then the worker, as the same process
            script = 'mount -t tmpfs -o size=1m rmq-audit-hidden "$0" && exec "$@"'
            ns = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(self.hidden)]
            self._start([*ns, *worker, self.url], f"worker{k}")

        def registered() -> str | None:
            dead = [f"{p.args!r} exited with {p.returncode}" for p in self.procs if p.poll() is not None]
            return "; ".join(dead) or ("ok" if self.alive_workers() == 2 else None)

        outcome = wait_until("two workers registered with the master", registered, 90)
        assert outcome == "ok", f"two workers registered with the master: {outcome}"

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except OSError:
            return 0

    def pids(self) -> set[int]:
        return {p.pid for p in self.procs}

    def stop(self) -> None:
        for p in self.procs:  # each started in a session of its own: its group holds its executors too
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=20)
        for log in self.logs:
            log.close()


@contextmanager
def standalone(root: Path, hidden: Path) -> Iterator[Standalone]:
    cluster = Standalone(root, hidden)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def hadoop_version() -> str:
    """The Hadoop version of PySpark's bundled client (pyspark/jars/hadoop-client-api-X.jar)."""
    (jar,) = (SPARK_HOME / "jars").glob("hadoop-client-api-*.jar")
    return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


@contextmanager
def mini_hdfs(base: Path, copies: dict[str, Path]) -> Iterator[str]:
    """Hadoop's MiniDFSCluster (interop/hadoop, built by make hadoop) on 127.0.0.1 with each local dir of
    `copies` copied to its HDFS path; yields hdfs://127.0.0.1:PORT. Its stdin is held: it stops when closed."""
    classes, lib = HADOOP / "build" / "classes", HADOOP / "build" / "lib"
    assert (HADOOP / "build" / ".stamp").exists(), "interop/hadoop is not built: make hadoop"
    argv = ["java", "-Xmx256m", "-cp", f"{classes}:{lib}/*", "interop.MiniHdfs", str(base)]
    for dst, src in copies.items():
        argv += [str(src), dst]
    log = open(base.parent / "hdfs.log", "w")  # noqa: SIM115 - closed below
    p = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()  # READY hdfs://127.0.0.1:PORT, or EOF when it failed (its log says why)
        assert line.startswith("READY "), f"MiniHdfs failed: {(base.parent / 'hdfs.log').read_text()[-3000:]}"
        yield line.split()[1]
    finally:
        assert p.stdin is not None
        p.stdin.close()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=20)
        log.close()


def descendants(roots: set[int]) -> set[int]:
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    out = set(roots)
    grew = True
    while grew:
        more = {pid for pid, pp in parent.items() if pp in out} - out
        grew = bool(more)
        out |= more
    return out


@dataclass
class SocketLog:
    """Every TCP socket (`ss -tanp`) held by a process of the watched trees, as (state, local, peer, pid)."""

    seen: set[tuple[str, str, str, int]] = field(default_factory=set)

    def sample(self, roots: set[int]) -> None:
        pids = descendants(roots)
        out = subprocess.run(["ss", "-tanpH"], capture_output=True, text=True, timeout=20).stdout
        for line in out.splitlines():
            cols = line.split()
            if len(cols) < 6 or "pid=" not in line:
                continue
            for part in cols[5].split("pid=")[1:]:
                pid = int(part.split(",")[0])
                if pid in pids:
                    self.seen.add((cols[0], cols[3], cols[4], pid))

    def not_loopback(self) -> list[tuple[str, str, str, int]]:
        def host(addr: str) -> str:
            return addr.rsplit(":", 1)[0].strip("[]")

        return sorted(
            s for s in self.seen if host(s[1]) not in LOOPBACK or (s[0] != "LISTEN" and host(s[2]) not in LOOPBACK)
        )


def run_watched(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    sockets: SocketLog,
    also: set[int] = frozenset(),  # type: ignore[assignment]
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end (bounded), sampling the sockets of its process tree (and of `also`)."""
    with open(cwd / "stdout.txt", "w+") as out, open(cwd / "stderr.txt", "w+") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd, text=True, start_new_session=True)
        end = time.monotonic() + timeout
        try:
            while True:
                sockets.sample({p.pid} | set(also))
                try:
                    p.wait(timeout=0.3)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > end:
                        raise AssertionError(f"{argv[:3]} still running after {timeout:.0f}s") from None
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=20)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, p.returncode, out.read(), err.read())


def report(out: Path, replace: tuple[str, str] = ("", "")) -> dict[str, Any]:
    """summary.json minus timing, with every finding (topFindings holds them all at these sizes); `replace`
    rewrites an input's prefix (an hdfs:// root) as the local run's."""
    text = (out / "summary.json").read_text()
    if replace[0]:
        text = text.replace(replace[0], replace[1])
    s = json.loads(text)
    assert s["findings"] <= 100
    for k in TIMING:
        s.pop(k, None)
    return s

"""The audit on a real Spark standalone cluster (a master and two workers from the installed PySpark, on
127.0.0.1), its executors' Python shipped as docs/audit.md tells users (a venv-pack archive through --archives,
PYSPARK_PYTHON inside it), through `rmq-audit --master spark://...` and `spark-submit`, on local paths and on
hdfs:// (Hadoop's own MiniDFSCluster): the reports equal the local[2] run's on the clean data and on one fault of
each kind test_audit.py injects (faults.ON_CLUSTER). One cluster for the module."""

from __future__ import annotations

import inspect
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testdata.cluster_data import build_cluster_data
from tests.tools.audit.faults import ON_CLUSTER, make_datasets
from tests.tools.audit.spark_cluster import (
    ARCHIVE,
    BIN,
    HADOOP,
    JVM_OPTIONS,
    ROOT,
    SocketLog,
    Standalone,
    base_env,
    hadoop_version,
    mini_hdfs,
    report,
    run_watched,
    standalone,
)
from tools.audit.model import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE
from tools.audit.pack_env import base_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

MANY = ROOT / "tests" / "tools" / "audit" / "audit_many.py"
# The executors' memory: two 1-core workers of 1 GB, one 512 MB executor each. Every JVM of the test (driver,
# executors, and the master and workers in spark_cluster.py) runs C1 with the serial collector, as a local run's
# does (docs/audit.md): on 2 cores C2's compiler threads were most of the test's CPU. They map the audit's
# class-data archive too (spark_cluster.JVM_OPTIONS).
EXECUTOR = ["--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false"]
EXECUTOR += ["--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}"]
EXECUTOR += ["--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}"]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-cluster")


@pytest.fixture(scope="module")
def cluster(tmp: Path) -> Iterator[Standalone]:
    with standalone(tmp / "spark", tmp / "hidden") as c:
        yield c


@pytest.fixture(scope="module")
def archive() -> Path:
    from tools.audit.pack_env import build

    return build(ARCHIVE)  # make audit-env built it already; cached


@pytest.fixture(scope="module")
def datasets(tmp: Path) -> dict[str, Path]:
    clean = tmp / "clean-source"
    marks = build_cluster_data(clean)
    return make_datasets(clean, marks, tmp / "data", ON_CLUSTER)


@pytest.fixture(scope="module")
def local_reports(tmp: Path, datasets: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Every dataset audited on local[2], in one application."""
    out = tmp / "local"
    out.mkdir()
    argv = [sys.executable, str(MANY), "--master", "local[2]", str(out)]
    p = subprocess.run(
        argv + [f"{k}={v}" for k, v in datasets.items()],
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=out,
        timeout=400,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return {k: report(out / k) for k in datasets}


def cluster_env() -> dict[str, str]:
    """As docs/audit.md says: executors run ./env/bin/python from the archive; the driver runs this venv's."""
    return base_env(PYSPARK_PYTHON="./env/bin/python", PYSPARK_DRIVER_PYTHON=sys.executable)


def executor_prefixes(stderr: str) -> list[str]:
    """The `(prefix ...)` of every `rmq-audit: executor host` line (tools/audit/job.py check_executors)."""
    return [
        line.rsplit("(prefix ", 1)[1].rstrip(")")
        for line in stderr.splitlines()
        if "executor host" in line and "(prefix " in line
    ]


def assert_archive_python(cluster: Standalone, stderr: str) -> None:
    prefixes = executor_prefixes(stderr)
    assert prefixes, stderr[-3000:]
    for prefix in prefixes:  # unpacked by each executor from the archive, in its worker's directory
        assert prefix.startswith(str(cluster.root / "worker")) and prefix.endswith("/env"), prefix
        assert prefix != sys.prefix and not prefix.startswith(str(ROOT / ".venv"))


def rmq_audit_on_standalone_matches_local(
    cluster: Standalone, archive: Path, datasets: dict[str, Path], local_reports: dict[str, dict[str, Any]], tmp: Path
) -> None:
    """The issue's run: a relative path given to `rmq-audit --master spark://...` (executors resolved it in
    their worker's directory). Every process of the run and of the cluster holds loopback sockets only."""
    work = tmp / "rmq-audit"
    work.mkdir()
    (work / "data").symlink_to(datasets["clean"].parent)
    sockets = SocketLog()
    argv = [str(BIN / "rmq-audit"), "--master", cluster.url, "--conf", f"spark.archives={archive}#env"]
    argv += [*EXECUTOR, "--no-plots", "--run-id", "cluster-test", "--out", "out", "data/clean"]
    p = run_watched(argv, cluster_env(), work, 400, sockets, also=cluster.pids())
    assert p.returncode == EXIT_OK, p.stdout[-3000:] + p.stderr[-5000:]
    assert_archive_python(cluster, p.stderr)
    got = report(work / "out", (str(work / "data"), str(datasets["clean"].parent)))
    assert got == local_reports["clean"]
    assert sockets.seen and sockets.not_loopback() == []


def spark_submit_on_standalone_matches_local_on_every_fault(
    cluster: Standalone, archive: Path, datasets: dict[str, Path], local_reports: dict[str, dict[str, Any]], tmp: Path
) -> None:
    """spark-submit with --archives, the clean data and one injected fault of each kind (faults.ON_CLUSTER) in
    one application (audit_many.py: the pipeline as rmq-audit runs it): each report equals local[2]'s."""
    out = tmp / "submit-many"
    out.mkdir()
    argv = [str(BIN / "spark-submit"), "--master", cluster.url, "--archives", f"{archive}#env", *EXECUTOR, str(MANY)]
    argv += [str(out)] + [f"{k}={v}" for k, v in datasets.items()]
    p = subprocess.run(argv, capture_output=True, text=True, env=cluster_env(), cwd=out, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    assert_archive_python(cluster, p.stdout + p.stderr)
    assert set(datasets) == {"clean", *ON_CLUSTER}
    for name in datasets:
        assert report(out / name) == local_reports[name], name
    assert {k: r["exitCode"] for k, r in local_reports.items()}["flipped_bit"] == EXIT_CORRUPT


def spark_submit_of_job_py_on_standalone(
    cluster: Standalone, archive: Path, datasets: dict[str, Path], local_reports: dict[str, dict[str, Any]], tmp: Path
) -> None:
    """tools/audit/job.py itself through spark-submit (its master kept), on a fault: exit code and report."""
    out = tmp / "submit-job"
    argv = [str(BIN / "spark-submit"), "--master", cluster.url, "--archives", f"{archive}#env", *EXECUTOR]
    argv += [str(ROOT / "tools" / "audit" / "job.py"), "--no-plots", "--run-id", "cluster-test"]
    argv += ["--out", str(out), str(datasets["flipped_bit"])]
    p = subprocess.run(argv, capture_output=True, text=True, env=cluster_env(), cwd=tmp, timeout=400)
    assert p.returncode == EXIT_CORRUPT, p.stdout[-3000:] + p.stderr[-5000:]
    assert f"master {cluster.url}" in p.stdout + p.stderr
    assert_archive_python(cluster, p.stdout + p.stderr)
    assert report(out) == local_reports["flipped_bit"]


def input_no_executor_can_read_is_a_usage_error(
    cluster: Standalone, archive: Path, datasets: dict[str, Path], tmp: Path
) -> None:
    """Data the driver lists but no executor has (the workers see an empty mount at its path, as hosts without
    the data would): exit 2 and a message naming the path and the executor's host, no traceback."""
    data = cluster.hidden / "data"
    shutil.copytree(datasets["clean"], data)
    argv = [str(BIN / "rmq-audit"), "--master", cluster.url, "--conf", f"spark.archives={archive}#env", *EXECUTOR]
    argv += ["--no-plots", "--out", str(tmp / "hidden-out"), str(data)]
    p = subprocess.run(argv, capture_output=True, text=True, env=cluster_env(), cwd=tmp, timeout=400)
    assert p.returncode == EXIT_USAGE, p.stdout[-3000:] + p.stderr[-5000:]
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("rmq-audit: error:")]
    assert f"rmq-audit: error: {data}/n" in line and f"on host {socket.gethostname()} (127.0.0.1)" in line, line
    assert "No such file or directory" in line and "Traceback" not in p.stderr


def hdfs_inputs_on_standalone_match_local(
    cluster: Standalone, archive: Path, datasets: dict[str, Path], local_reports: dict[str, dict[str, Any]], tmp: Path
) -> None:
    """The data copied into a real HDFS (Hadoop's own MiniDFSCluster, at the version of PySpark's client) and
    audited through hdfs:// on the cluster (spark-submit, one application): the clean data, a damaged segment
    and a snapshot with a wrong value, every file read by the executors' JVMs."""
    pom = (HADOOP / "pom.xml").read_text()
    assert f"<hadoop.version>{hadoop_version()}</hadoop.version>" in pom, "interop/hadoop/pom.xml: PySpark's Hadoop"
    names = ["clean", "flipped_bit", "snapshot_wrong_value"]
    out = tmp / "hdfs" / "out"
    out.mkdir(parents=True)
    with mini_hdfs(tmp / "hdfs" / "base", {f"/audit/{n}": datasets[n] for n in names}) as hdfs:
        argv = [str(BIN / "spark-submit"), "--master", cluster.url, "--archives", f"{archive}#env", *EXECUTOR]
        argv += [str(MANY), str(out)] + [f"{n}={hdfs}/audit/{n}" for n in names]
        p = subprocess.run(argv, capture_output=True, text=True, env=cluster_env(), cwd=out, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    assert_archive_python(cluster, p.stdout + p.stderr)
    for n in names:
        got = report(out / n, (f"{hdfs}/audit", str(datasets[n].parent)))
        assert got == local_reports[n], n
        rows = json.loads((out / n / "summary.json").read_text())["topFindings"]
        paths = [f["path"] for f in rows if "path" in f]  # the findings name the hdfs:// files
        assert all(x.startswith(f"{hdfs}/audit/{n}/") for x in paths) and (paths or n == "clean"), paths


def executors_without_the_environment_is_a_usage_error(
    cluster: Standalone, datasets: dict[str, Path], tmp: Path
) -> None:
    """No archive, and PYSPARK_PYTHON a bare venv (what an executor's host has when nothing was shipped): the
    run stops before its first stage with exit 2, naming the host, the Python and the missing module."""
    bare = tmp / "bare-venv"
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    env = base_env(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=sys.executable)
    argv = [str(BIN / "rmq-audit"), "--master", cluster.url, *EXECUTOR, "--no-plots", "--out", str(tmp / "bare-out")]
    p = subprocess.run([*argv, str(datasets["clean"])], capture_output=True, text=True, env=env, cwd=tmp, timeout=400)
    assert p.returncode == EXIT_USAGE, p.stdout[-3000:] + p.stderr[-5000:]
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("rmq-audit: error:")]
    assert f"{python} cannot run the audit (ModuleNotFoundError: No module named" in line, line
    assert "Traceback" not in p.stderr and not (tmp / "bare-out" / "_SUCCESS").exists()


# One test, its scenarios as subtests: one cluster for all of them. (`xdist_group` would keep separate tests on
# one worker, but pytest-xdist 3.8 marks the group on `item._nodeid`, which pytest 9 no longer reads, so with
# `-n 2` separate tests would go to both workers, each starting a cluster of its own.)
SCENARIOS: list[Callable[..., None]] = [
    rmq_audit_on_standalone_matches_local,
    spark_submit_on_standalone_matches_local_on_every_fault,
    spark_submit_of_job_py_on_standalone,
    input_no_executor_can_read_is_a_usage_error,
    hdfs_inputs_on_standalone_match_local,
    executors_without_the_environment_is_a_usage_error,
]


def test_audit_on_a_standalone_cluster(
    subtests: pytest.Subtests,
    cluster: Standalone,
    archive: Path,
    datasets: dict[str, Path],
    local_reports: dict[str, dict[str, Any]],
    tmp: Path,
) -> None:
    given = {"cluster": cluster, "archive": archive, "datasets": datasets, "local_reports": local_reports, "tmp": tmp}
    for scenario in SCENARIOS:
        with subtests.test(scenario.__name__):
            wanted = inspect.signature(scenario).parameters
            scenario(**{k: v for k, v in given.items() if k in wanted})

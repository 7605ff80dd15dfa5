"""Inputs as executors see them (tools/audit/cluster.py): local paths go out absolute, and an input the driver
listed that an executor cannot read stops the run with a usage error naming the path and the host."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from tools.audit.cluster import Unreadable, absolute, executor_pythons, unreadable_input
from tools.audit.discover import InputError
from tools.audit.pipeline import Options, run

pytestmark = pytest.mark.xdist_group("spark-audit")  # the module's local[2] session (conftest.py)


def test_local_paths_go_out_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute("data/n0") == str(tmp_path / "data" / "n0")
    assert absolute("/srv/data") == "/srv/data"
    for uri in ("hdfs://127.0.0.1:8020/data", "file:///srv/data", "s3a://bucket/data"):
        assert absolute(uri) == uri


def test_segment_no_executor_has_is_a_usage_error(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """The driver lists n1's segment, then it is gone before the executors read it (as on hosts that do not
    have the data): the run stops with InputError naming the segment and the host, before any finding."""
    root, _ = data
    (segment,) = (root / "n1" / "log").glob("*.wal")

    def progress(message: str) -> None:
        if "scanning and decoding" in message:  # discovery is done; the first stage has not started
            segment.unlink()

    with pytest.raises(InputError) as e:
        run(spark, Options([str(root)], str(tmp_path / "out"), "t", plots=False), progress=progress)
    assert str(e.value).startswith(f"{segment}: cannot be read on host {socket.gethostname()}")
    assert "No such file or directory" in str(e.value) and "hdfs://" in str(e.value)
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_snapshot_no_executor_has_is_a_usage_error(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    root, marks = data
    snap = root / "n2" / "snapshot" / f"snapshot_{marks['second']:020d}"

    def progress(message: str) -> None:
        if "scanning and decoding" in message:
            snap.rename(snap.parent / "elsewhere")

    with pytest.raises(InputError) as e:
        run(spark, Options([str(root)], str(tmp_path / "out"), "t", plots=False), progress=progress)
    assert str(e.value).startswith(f"{snap}: cannot be read on host")


def test_hadoop_input_lost_on_an_executor_is_named_with_its_executor() -> None:
    """Inputs read through Hadoop fail in the JVM: Spark's own error gives the executor and its host."""
    text = (
        "Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most recent failure: Lost task 0.3 in "
        "stage 0.0 (TID 7) (10.0.0.7 executor 3): java.io.FileNotFoundException: File file:/srv/data/n0/log/x.wal "
        "does not exist\n\tat org.apache.hadoop.fs.RawLocalFileSystem.deprecatedGetFileStatus"
    )
    assert unreadable_input(RuntimeError(text)) == Unreadable(
        "file:/srv/data/n0/log/x.wal", "10.0.0.7", "no such file", "3"
    )
    assert unreadable_input(RuntimeError("Input path does not exist: hdfs://nn:8020/x")) == Unreadable(
        "hdfs://nn:8020/x", "the driver", "no such file"
    )
    assert unreadable_input(RuntimeError("Lost task 0.0 in stage 1.0 (TID 1) (h executor 1): java.lang.OOM")) is None


def test_executor_python_is_reported(spark: Any) -> None:
    """local[2]: the executors run this interpreter, which imports the audit."""
    (p,) = executor_pythons(spark.sparkContext)
    assert (p.executable, p.error, p.host) == (os.environ.get("PYSPARK_PYTHON"), None, socket.gethostname())

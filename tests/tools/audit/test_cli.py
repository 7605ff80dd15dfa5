"""The two entry points as a user runs them: `rmq-audit` (usage errors before any JVM starts) and
`spark-submit tools/audit/job.py` on Hadoop URIs, whose master is kept."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raft.storage.identity import read_identity
from snapshot.format import META_FILE, decode_meta, encode_meta
from tests.testdata.cluster_data import build_cluster_data
from tools.audit.job import jvm_options, main
from tools.audit.model import EXIT_CORRUPT, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]


def test_missing_input_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == EXIT_USAGE
    assert "nope: not a directory" in capsys.readouterr().err
    assert main(["--fail-on", "sometimes", str(tmp_path)]) == EXIT_USAGE
    assert (
        main([str(tmp_path), "--broker-epochs", str(tmp_path / "brokers"), "--out", str(tmp_path / "out")])
        == EXIT_USAGE
    )
    assert f"--broker-epochs {tmp_path / 'brokers'}: not a directory" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_spark_submit_on_file_uris_keeps_its_master(tmp_path: Path) -> None:
    marks = build_cluster_data(tmp_path / "data")
    meta_path = tmp_path / "data" / "n2" / "snapshot" / f"snapshot_{marks['second']:020d}" / META_FILE
    meta = decode_meta(meta_path.read_bytes(), str(meta_path))
    meta_path.write_bytes(encode_meta(dataclasses.replace(meta, term=meta.term + 3)))
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = dict(
        os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"
    )
    out = tmp_path / "out"
    p = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--driver-java-options",  # C1, the serial collector and the class-data archive, as the suite's other JVMs
            jvm_options(),
            str(ROOT / "tools" / "audit" / "job.py"),
            f"file://{tmp_path / 'data'}",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
    )
    assert p.returncode == EXIT_CORRUPT, p.stdout[-3000:] + p.stderr[-3000:]
    said = p.stdout + p.stderr  # spark-submit may merge the Python process's stderr into its stdout
    assert "master local[1]" in said and "Spark UI disabled" in said
    assert "snapshot.meta" in p.stdout and f"output in {out}" in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exitCode"] == EXIT_CORRUPT and summary["findings"] == 1
    ids = {d: read_identity(str(tmp_path / "data" / d)) for d in ("n0", "n1", "n2")}  # labels come from IDENTITY
    assert {n["node"]: Path(n["dataDir"]).name for n in summary["nodes"]} == {i.node: d for d, i in ids.items() if i}
    assert [c["check"] for c in summary["checks"] if c["findings"]] == ["snapshot.meta"]
    (row,) = summary["topFindings"]
    assert (row["node"], row["snapshot_index"], row["path"]) == (
        ids["n2"].node,  # type: ignore[union-attr]
        marks["second"],
        f"file://{meta_path.parent}",
    )

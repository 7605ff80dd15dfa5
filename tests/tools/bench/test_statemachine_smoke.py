"""The state machine benchmark is not a test: this only checks that it runs on tiny input through
`python -m tools.bench statemachine` and writes its JSON. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys

from tests.tools.bench.conftest import RunBench


def test_statemachine_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    proc, report = run_bench("statemachine", "--sets", "20", "--count", "300", timeout=120)
    assert "heartbeats applied/s" in proc.stdout and "snapshot bytes per broker" in proc.stdout
    assert set(report) >= {"workload", "setup", "heartbeats", "mixed", "snapshot"}
    assert report["workload"]["sets"] == 20
    for part in ("setup", "heartbeats", "mixed"):
        assert report[part]["applied"] > 0 and report[part]["malformed"] == 0
    assert report["heartbeats"]["applied"] == report["mixed"]["applied"] == 300
    snap = report["snapshot"]
    assert set(snap["sections"]) == {
        "replicaInfoTable",
        "syncStateSetInfoTable",
        "brokerLiveTable",
        "kvConfig",
        "controllerConfig",
    }
    assert snap["raw_bytes_per_broker"] > 0 and snap["lz4_bytes"] > 0


def test_usage_lists_the_statemachine_benchmark() -> None:
    proc = subprocess.run([sys.executable, "-m", "tools.bench"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "statemachine" in proc.stderr

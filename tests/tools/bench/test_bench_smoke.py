"""Benchmarks are not tests: this only checks that the raft benchmark runs on tiny input and writes
its JSON. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tools.bench.conftest import RunBench


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_raft_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    proc, report = run_bench("raft", "--seconds", "0.5", "--concurrency", "4", timeout=110)
    assert "committed entries/s" in proc.stdout
    assert report["ours"]["load"]["committed"] > 0 and report["ours"]["serial"]["committed"] > 0


def test_bench_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "tools.bench", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_remoting_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    """Both protocols answer every heartbeat (code 0) through one group; no timing is asserted."""
    _, report = run_bench("remoting", "--quick", timeout=170)
    assert report["remoting"]["requests"] > 0 and report["http"]["requests"] > 0
    assert report["remoting"]["errors"] == 0 and report["http"]["errors"] == 0


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tls_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    """Plain and TLS (client certificates) heartbeats alternate against one group and every one is answered;
    no timing is asserted."""
    _, report = run_bench("tls", "--quick", "--reps", "1", timeout=170)
    for mode in ("plain", "tls"):
        (run,) = report["runs"][mode]
        assert run["requests"] > 0 and run["errors"] == 0, (mode, run)
    assert report["ratio"] > 0

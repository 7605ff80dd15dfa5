"""Benchmarks are not tests: this only checks that `python -m tools.bench all --quick` runs every section (but
remoting and peers, smoke-tested on their own) on tiny input and writes well-formed JSON, one row per figure with a
target and a verdict. No timing is asserted."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.tools.bench.conftest import RunBench
from tools.bench import all as bench_all


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_all_benchmarks_run_on_tiny_input_and_write_rows(run_bench: RunBench) -> None:
    # Every section but remoting, which tests/tools/bench/test_ratios.py runs on its own (in the interop suite:
    # RocketMQ's client is its load), and peers, tests/interop/test_peers_bench_smoke.py's.
    sections = [s for s in bench_all.SECTIONS if s not in ("remoting", "peers")]
    proc, report = run_bench("all", "--quick", "--only", ",".join(sections), timeout=880)
    assert report["errors"] == {}
    rows = report["rows"]
    for r in rows:
        assert set(r) >= {"name", "value", "unit", "target", "met"}, r
        assert isinstance(r["value"], (int, float)) and math.isfinite(r["value"]), r
        assert (r["target"] is None) == (r["met"] is None), r  # a verdict exactly where there is a target
    names = " | ".join(r["name"] for r in rows)
    for figure in (
        "committed/s",
        "PySyncObj",
        "serial client commit p50",
        "serial client commit p99",
        "Heartbeats through consensus over HTTP",
        "% of bare",
        "InstallSnapshot",
        "Restart with a snapshot",
        "apply stall",
        "Controller failover",
        "Broker master failover",
        "RSS of a leader",
        "bytes per broker",
        "Scale",
        # issue 25: ratios to references measured in the same run, each reference a row of its own
        "reference: best PySyncObj",
        "serial commit p50 / the machine's fdatasync p50",
        "reference: fdatasync p50",
        "% of the bare lean path",
        "reference: bare lean path",
        "% of the machine's sequential write + fsync bandwidth",
        "reference: sequential write + fsync",
    ):
        assert figure in names, figure
    targeted = [r for r in rows if r["target"] is not None]
    assert len(targeted) >= 14 and all(isinstance(r["met"], bool) for r in targeted)
    assert report["details"]["failover"]["runs"] == 2 and report["details"]["failover_idle"]["runs"] == 2
    assert "under wrk heartbeat load" in names and report["details"]["broker_failover"]["runs"] == 2
    assert "figure" in proc.stdout and "target" in proc.stdout


def test_an_unknown_section_is_refused_by_name() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "all", "--only", "raft,nope"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "nope" in proc.stderr

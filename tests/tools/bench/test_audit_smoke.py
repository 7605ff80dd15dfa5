"""Benchmarks are not tests: this only checks that the audit benchmark runs on tiny input (one local[1]
session) and writes its JSON with the expected keys. No timing is asserted."""

from __future__ import annotations

import pytest

from tests.tools.bench.conftest import RunBench


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_audit_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    proc, report = run_bench("audit", "--entries", "3000", "--cores", "1", timeout=230)
    assert "audit local[1]" in proc.stdout and "rmqctl log replay" in proc.stdout
    built = report["built"]
    assert built["entries"] == 3000 and built["indexes"] == 1000 and built["heartbeat_share"] >= 0.9
    (audit, replay) = report["rows"]
    assert audit["what"] == "audit local[1]" and audit["findings"] == 0 and audit["entries_per_s"] > 0
    assert replay["indexes_per_s"] > 0 and report["speedup_local2_over_local1"] is None

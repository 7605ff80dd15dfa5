"""Benchmarks are not tests: this only checks that the audit benchmark runs on tiny input (one local[1]
session) and writes its JSON with the expected keys. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_audit_benchmark_runs_on_tiny_input(tmp_path) -> None:
    out = tmp_path / "audit.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench", "audit", "--entries", "3000", "--cores", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=230,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "audit local[1]" in proc.stdout and "rmqctl log replay" in proc.stdout
    report = json.loads(out.read_text())
    built = report["built"]
    assert built["entries"] == 3000 and built["indexes"] == 1000 and built["heartbeat_share"] >= 0.9
    (audit, replay) = report["rows"]
    assert audit["what"] == "audit local[1]" and audit["findings"] == 0 and audit["entries_per_s"] > 0
    assert replay["indexes_per_s"] > 0 and report["speedup_local2_over_local1"] is None

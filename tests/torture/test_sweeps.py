"""Small forms of the crash-point and corruption sweeps (the full forms: `python -m tools.torture crash|corrupt`,
figures in docs/reliability.md). Real controllerd processes on loopback."""

from __future__ import annotations

import pytest

from tools.torture import corrupt, crash

pytestmark = [pytest.mark.slow]


@pytest.mark.xdist_group("torture-crash")
def test_crash_sweep_small_loses_no_acknowledged_write(tmp_path):
    report = crash.run(str(tmp_path / "crash"), max_hit=2, window=30, budget_s=50, echo=lambda _: None)
    assert report.lost == [], report.lines()
    assert report.refusals == [], report.refusals  # every crash point recovers by itself
    assert report.fired >= 15, report.lines()  # the points are really reached, not just armed
    assert {"wal.fsync", "meta.save", "snapshot.before_rename", "wal.roll.before_header"} <= set(report.fired_points)
    assert report.restarts >= report.fired and report.checked == 3 * report.acked > 0


@pytest.mark.xdist_group("torture-corrupt")
def test_corruption_sweep_small_is_never_silent(tmp_path):
    report = corrupt.run(str(tmp_path / "corrupt"), sample=23, writes=40, echo=lambda _: None)
    assert report.cases >= 10
    assert report.silent == [], report.silent
    assert report.unnamed == [], report.unnamed  # each refusal names the file and the byte offset
    assert report.detected >= report.cases - report.benign and report.refused > 0 and report.fallback > 0

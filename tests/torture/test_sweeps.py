"""Small forms of the crash-point and corruption sweeps (the full forms: `python -m tools.torture crash|corrupt`,
figures in docs/reliability.md). Real controllerd processes on loopback."""

from __future__ import annotations

import pytest

from tools.torture import corrupt, crash

pytestmark = [pytest.mark.slow]


@pytest.mark.xdist_group("torture-crash")
def test_crash_sweep_small_loses_no_acknowledged_write(tmp_path):
    # A fixed set of points this workload meets on every run, each at hits 1 and 2: the sweep ends when all
    # 24 cases are done, not at a time budget (that is only a cap), so a loaded CI machine gets the same cases.
    points = ("wal.append.before_write", "wal.append.before_fsync", "wal.append.after_fsync", "wal.fsync",
              "wal.roll.before_header", "wal.roll.before_dir_fsync", "wal.meta.before_write",
              "wal.truncate_prefix.before_unlink", "meta.save", "file.before_rename", "snapshot.before_meta",
              "snapshot.before_rename")  # fmt: skip
    report = crash.run(str(tmp_path / "crash"), points=points, max_hit=2, window=40, budget_s=400, echo=lambda _: None)
    assert report.armed == 2 * len(points), report.lines()  # every case was tried: the cap was not what ended it
    assert report.lost == [], report.lines()
    assert report.refusals == [], report.refusals  # every crash point recovers by itself
    assert report.fired >= 15, report.lines()  # the points are really reached, not just armed
    assert {"wal.fsync", "meta.save", "snapshot.before_rename", "wal.roll.before_header"} <= set(report.fired_points), (
        report.lines())
    assert report.restarts >= report.fired and report.checked == 3 * report.acked > 0


@pytest.mark.xdist_group("torture-corrupt")
def test_corruption_sweep_small_is_never_silent(tmp_path):
    report = corrupt.run(str(tmp_path / "corrupt"), sample=23, writes=40, echo=lambda _: None)
    assert report.cases >= 10
    assert report.silent == [], report.silent
    assert report.unnamed == [], report.unnamed  # each refusal names the file and the byte offset
    assert report.detected >= report.cases - report.benign and report.refused > 0 and report.fallback > 0

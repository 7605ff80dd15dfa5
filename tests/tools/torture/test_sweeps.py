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
    points = (
        "wal.append.before_write",
        "wal.append.before_fsync",
        "wal.append.after_fsync",
        "wal.fsync",
        "wal.roll.before_header",
        "wal.roll.before_dir_fsync",
        "wal.meta.before_write",
        "wal.truncate_prefix.before_unlink",
        "meta.save",
        "file.before_rename",
        "snapshot.before_meta",
        "snapshot.before_rename",
    )
    report = crash.run(str(tmp_path / "crash"), points=points, max_hit=2, window=40, budget_s=400, echo=lambda _: None)
    assert report.armed == 2 * len(points), report.lines()  # every case was tried: the cap was not what ended it
    assert report.lost == [], report.lines()
    assert report.refusals == [], report.refusals  # every crash point recovers by itself
    assert report.fired >= 15, report.lines()  # the points are really reached, not just armed
    assert {"wal.fsync", "meta.save", "snapshot.before_rename", "wal.roll.before_header"} <= set(report.fired_points), (
        report.lines()
    )
    assert report.restarts >= report.fired and report.checked == 3 * report.acked > 0


@pytest.mark.xdist_group("torture-crash")
def test_crash_sweep_meets_install_snapshot_and_membership_points_by_construction(tmp_path):
    # These are met only by the sweep's own workloads: a node frozen until the leader compacted past it (then
    # an InstallSnapshot in 1 KiB chunks), and a learner added and removed through the admin API (leadership
    # moved to the node armed at membership.propose first). Before them the sweep never reached install.chunk,
    # wal.reset.before_unlink nor membership.*.
    install = ("install.chunk", "install.before_adopt", "install.after_adopt", "wal.reset.before_unlink")
    points = (*install, "membership.propose", "membership.apply")
    report = crash.run(str(tmp_path / "crash"), points=points, max_hit=1, window=300, budget_s=300, echo=lambda _: None)
    assert report.armed == len(points), report.lines()
    assert report.lost == [] and report.refusals == [], report.lines()
    assert set(install) <= set(report.fired_points), report.lines()
    # The sweep's freeze first puts a node behind the compacted log. A node that then crashes in the middle of its
    # download is still behind when it restarts, armed at the next point: it installs again and can meet that
    # point with no freeze of its own (CI saw 3 freezes for the 4 points). So at least one, not one per point.
    assert report.freezes >= 1, report.lines()
    assert {"membership.propose", "membership.apply"} & set(report.fired_points), report.lines()
    assert report.checked == 3 * report.acked > 0


@pytest.mark.xdist_group("torture-corrupt")
def test_corruption_sweep_small_is_never_silent(tmp_path):
    report = corrupt.run(str(tmp_path / "corrupt"), spread=12, writes=40, echo=lambda _: None)
    assert report.cases >= 12
    assert report.silent == [], report.silent
    assert report.unnamed == [], report.unnamed  # each refusal names the file and the byte offset
    assert report.detected >= report.cases - report.benign and report.refused > 0 and report.fallback > 0

"""The audit on exactly the data `make run` leaves: `controllerd local-cluster` (3 nodes, the simulated brokers)
run as real processes into a temp dir until the brokers heartbeat, stopped with Ctrl-C (SIGINT), then
audited. Three fresh nodes that never changed membership and took no snapshot: their logs hold no CONF
entry, so only IDENTITY and the generated `conf/nK.conf` (jRaftInitConf) say they are one group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli.localcluster import REMOTING_OFFSET
from raft.storage.identity import IDENTITY_FILE
from raft.storage.walscan import list_segments, scan_segment_bytes
from raft.testing.cluster import free_port_base
from tools.audit.model import EXIT_DIVERGENCE, EXIT_OK
from tools.audit.pipeline import Options, Result, run
from tools.audit.plots import growth_series

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-audit")]

ROOT = Path(__file__).resolve().parents[3]
NODES = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def make_run_data() -> Iterator[Path]:
    """`controllerd local-cluster --data D` (make run's command) on free ports, stopped once the six simulated
    brokers answered their heartbeats; D as it leaves it."""
    with tempfile.TemporaryDirectory(prefix="mr") as tmp:  # short: the control socket lives in it
        data = os.path.join(tmp, "data")
        base = free_port_base((0, 1, 2, 3, 4, 5, 3 + REMOTING_OFFSET, 4 + REMOTING_OFFSET, 5 + REMOTING_OFFSET))
        args = ["local-cluster", "--data", data, "--raft-port", str(base), "--http-port", str(base + 3)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.controllerd", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            deadline, lines = time.monotonic() + 90, []
            while time.monotonic() < deadline:  # each readline returns at the supervisor's next line
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                if "heartbeats: 6 of 6 brokers answered" in line:
                    break
            else:
                raise AssertionError(f"the local cluster did not settle within 90 s: {lines}")
            assert any("heartbeats: 6 of 6" in x for x in lines), lines
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: every node stops (leader transfer, flush)
            out = proc.communicate(timeout=60)[0]
            assert proc.returncode == 0 and "stopped." in out, out
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.communicate(timeout=60)
        yield Path(data)


def audit(spark: Any, root: Path, out: Path) -> Result:
    return run(spark, Options([str(root)], str(out), "test-run", plots=True))


def status(r: Result) -> dict[str, tuple[str, str | None]]:
    return {c["check"]: (c["status"], c["why"]) for c in r.checks}


def test_make_run_data_is_one_group_whose_logs_are_matched(spark: Any, make_run_data: Path, tmp_path: Path) -> None:
    r = audit(spark, make_run_data, tmp_path / "out")
    assert r.findings == [] and r.exit_code == EXIT_OK
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(s["groups"]) == ["jRaft-Controller"]
    assert sorted(Path(n["dataDir"]).name for n in s["nodes"] if n["group"] == "jRaft-Controller") == list(NODES)
    checks = status(r)
    assert checks["log.matching"] == ("ok", None)  # compared: three nodes of one group
    assert checks["group.unplaced"] == ("ok", None)
    # No snapshot yet: the snapshot checks had nothing to check, and say so.
    for check in ("snapshot.readable", "snapshot.replay", "snapshot.digest", "snapshot.meta"):
        st, why = checks[check]
        assert st == "skipped" and why is not None and "no snapshot" in why, (check, st, why)
    assert [c["status"] for c in s["checks"] if c["check"] == "snapshot.readable"] == ["skipped"]
    # Sizes are the bytes holding entries, not the preallocated segments' size.
    for n in s["nodes"]:
        log = make_run_data / Path(n["dataDir"]).name / "log"
        allocated = sum(f.stat().st_size for f in log.iterdir() if f.name.endswith(".wal"))
        assert n["logAllocatedBytes"] == allocated and allocated >= 64 << 20
        assert 0 < n["logDataBytes"] < 1 << 20 and n["entries"] > 0
    assert s["logDataBytes"] == sum(n["logDataBytes"] for n in s["nodes"])
    assert "why" in r.table().splitlines()[0] and "no snapshot in any data dir" in r.table()


def test_without_identity_the_generated_conf_places_the_nodes(spark: Any, make_run_data: Path, tmp_path: Path) -> None:
    """IDENTITY removed: `conf/nK.conf` beside the data (controllerStorePath, jRaftInitConf) still makes the
    three nodes one group; the labels come from the directory names, with the identity warning."""
    root = tmp_path / "data"
    shutil.copytree(make_run_data, root)
    for n in NODES:
        (root / n / IDENTITY_FILE).unlink()
    r = audit(spark, root, tmp_path / "out")
    assert {f["check"] for f in r.findings} == {"identity.missing"} and r.exit_code == EXIT_OK
    assert len({n["group"] for n in r.summary["nodes"]}) == 1
    assert status(r)["log.matching"] == ("ok", None)


def test_a_node_nothing_places_is_a_warning_not_a_silent_group_of_one(
    spark: Any, make_run_data: Path, tmp_path: Path
) -> None:
    root = tmp_path / "data"
    shutil.copytree(make_run_data, root)
    (root / "n3" / IDENTITY_FILE).unlink()
    os.unlink(root / "conf" / "n3.conf")
    r = audit(spark, root, tmp_path / "out")
    (f,) = [f for f in r.findings if f["check"] == "group.unplaced"]
    assert (f["node"], f["severity"], f["path"]) == ("n3", "warning", str(root / "n3"))
    assert "no IDENTITY file" in f["detail"] and r.exit_code == EXIT_DIVERGENCE
    groups = {Path(n["dataDir"]).name: n["group"] for n in r.summary["nodes"]}
    assert groups["n1"] == groups["n2"] == "jRaft-Controller" and groups["n3"] == "unplaced[n3]"


def test_log_growth_is_drawn_from_the_data_extent(make_run_data: Path) -> None:
    """The plot's bytes for a preallocated segment: where its entries end (only zeros after), not 64 MiB."""
    log = make_run_data / "n1" / "log"
    listing = list_segments([(f.name, f.stat().st_size) for f in log.iterdir()], None)
    (seg,) = listing.segments
    data = (log / seg.name).read_bytes()
    scan = scan_segment_bytes(data, seg, str(log / seg.name))
    xs, ys = growth_series([SimpleNamespace(scan=scan)])
    assert len(data) >= 64 << 20 and 0 < scan.valid_end < 1 << 20 and not data[scan.valid_end :].strip(b"\0")
    assert ys == [0.0, scan.valid_end / 1e6] and xs == [1, scan.spans[-1].first_index + scan.spans[-1].count - 1]

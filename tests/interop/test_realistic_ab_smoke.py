"""A smoke run of tools/bench/realistic_ab.py on tiny input: two "trees" (this one twice), one round, one window
of 30 brokers. Checks that each tree's group was started, registered every broker and had its heartbeats
answered, that the leader's CPU over the window was read and py-spy sampled it, and that the summary covers every
window, never how fast."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli import rocketmq
from tools.bench import peers, realistic_ab
from tools.cluster import ROOT

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("interop")]


def test_realistic_ab_two_trees_one_window_each(tmp_path: Path) -> None:
    rocketmq.require()
    out = tmp_path / "ab.json"
    argv = ["--trees", f"a={ROOT},b={ROOT}", "--rounds", "1", "--windows", "1", "--seconds", "2", "--brokers", "30"]
    argv += ["--warmup", "1", "--disk-alone", "0.5", "--scrape", "0.5"]
    prof = tmp_path / "profiles"
    assert realistic_ab.main([*argv, "--json", str(out), "--profile", str(prof), "--profile-node", "follower"]) == 0
    data = json.loads(out.read_text())
    assert list(data["windows"]) == ["a", "b"]
    assert data["machine"]["cpus"] == os.cpu_count()  # which machine the figures came from
    alone = data["disk_alone"]  # the disk's own stalls, before the groups
    assert alone["seconds"] == 0.5 and alone["writes"] > 0 and 0 <= alone["over"] <= alone["writes"], alone
    for name, rows in data["windows"].items():
        [row] = rows
        assert row["acknowledged"] > 0 and row["errors"] == 0 and row["unanswered"] == 0, (name, row)
        assert row["p99_ms"] >= row["p50_ms"] > 0, (name, row)
        # the leader applied entries over the window (its heartbeats, one entry per loop turn, and its scans)
        assert isinstance(row["entries"], int) and row["entries"] > 0, (name, row)
        assert row["warmup"]["seconds"] == 1 and row["warmup"]["acknowledged"] > 0, (name, row)  # before the window
        assert 0 < row["leader_cpu_pct"] < 100 * (os.cpu_count() or 1), (name, row)  # the leader's, never idle
        assert 0 <= row["leader_wait_pct"] < 100, (name, row)  # one thread: never more than the window
        # Two followers, each applying what the leader commits: at 30 brokers for 2 s that is a few 10 ms clock
        # ticks of CPU each, so only their sum is sure to be above zero.
        assert len(row["followers_cpu_pct"]) == 2 and sum(row["followers_cpu_pct"]) > 0, (name, row)
        assert all(0 <= pct < 100 * (os.cpu_count() or 1) for pct in row["followers_cpu_pct"]), (name, row)
        assert data["summary"][name]["windows"] == 1 and data["summary"][name]["p99_ms"]["median"] == row["p99_ms"]
        # per node, from its /metrics: its log writes (the heartbeats' entries) and loop turns over the window,
        # and the leader's commits, each with the slowest one's bucket
        assert set(row["over_50ms"]) == set(row["slowest_ms"]) == set(peers.HISTOGRAMS), row
        assert all(len(ns) == 3 and all(n >= 0 for n in ns) for ns in row["over_50ms"].values()), row
        assert all(ms > 0 for ms in row["slowest_ms"]["log_write"] + row["slowest_ms"]["loop_lag"]), row
        assert any(ms is not None and ms > 0 for ms in row["slowest_ms"]["commit"]), row  # the leader's
        stalled = any(row["over_50ms"]["log_write"])
        assert data["summary"][name]["disk_stall_windows"] == int(stalled), data["summary"][name]
        quiet = data["summary"][name]["p99_ms_without_disk_stall"]
        assert quiet is None if stalled else quiet["median"] == row["p99_ms"], data["summary"][name]
        # every node's whole /metrics, every 0.5 s of the 2 s window, as Prometheus would
        assert row["scrapes"]["count"] >= 3 and row["scrapes"]["failed"] == 0 and row["scrapes"]["slowest_ms"] > 0
        assert row["profile"] == str(prof / f"{name}-r0-w0.txt") and os.path.getsize(row["profile"]) > 0
        assert data["summary"][name]["profile"]["samples"] > 0  # the sampled follower was busy in some samples


def test_conf_reaches_its_trees_nodes() -> None:
    # a bad value stops the node (its controller.conf is checked at start), so the lines were in its file
    argv = ["--trees", f"b={ROOT}", "--conf", "b=statemachineSnapshotThreshold=-1", "--rounds", "1", "--brokers", "3"]
    argv += ["--windows", "1", "--seconds", "1", "--disk-alone", "0"]
    with pytest.raises(AssertionError, match=r"statemachineSnapshotThreshold=-1: must be >= 0"):
        realistic_ab.main(argv)
    two = realistic_ab.parse(["--trees", f"a={ROOT},b={ROOT}", "--conf", "b=x=1;y=2", "--conf", "b=z=3"])
    assert two.conf == {"b": ";x=1;y=2;z=3"}  # a gets only --extra


@pytest.mark.parametrize(
    "argv",
    [
        ["--trees", "a"],
        ["--trees", "a=/nonexistent"],
        ["--trees", f"a={ROOT}", "--rounds", "0"],
        ["--trees", f"a={ROOT}", "--conf", "c=x=1"],
        ["--trees", f"a={ROOT}", "--warmup", "-1"],
        ["--trees", f"a={ROOT}", "--disk-alone", "-1"],
        ["--trees", f"a={ROOT}", "--scrape", "-1"],
    ],
)
def test_bad_arguments_name_the_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        realistic_ab.parse(argv)
    assert e.value.code == 2 and "--" in capsys.readouterr().err

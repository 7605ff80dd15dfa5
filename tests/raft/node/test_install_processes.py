"""InstallSnapshot with real processes: a wiped follower receives the leader's snapshot in throttled chunks,
and a SIGKILL halfway through (of the follower, or of the leader) resumes from the last checkpoint."""

from __future__ import annotations

import shutil

import pytest

from raft.testing.cluster import ProcessCluster

# Throttled to 400 kB/s with 64 KiB chunks and a checkpoint every 64 KiB, so a ~1.6 MB snapshot takes
# about 4 s: long enough to kill a process in the middle, deterministically observed via wait_download.
ARGS = ("--log-margin", "10", "--throttle", "400000", "--chunk-bytes", "65536", "--sync-every", "65536")
# Nothing here waits on an election but the first and the restarted leader's: 1000 ms, not 300. At 300 the fill
# of seed_two_snapshots (3.2 MB) answered ok: false on a loaded 2-core machine (a fresh-clone `make test`,
# 2026-11-30; its nodes log nothing, so the cause is inferred): the leader, busy writing, most likely went one
# election timeout without a heartbeat to its one live follower, which stood for election.
ELECTION_MS = 1000


def seed_two_snapshots(cluster: ProcessCluster, leader: str) -> int:
    """~3.2 MB of state, then two snapshots, so the log no longer starts at 1 (the first snapshot keeps
    the whole log for fallback; the second truncates it to the first)."""
    assert cluster.call(leader, {"op": "fill", "prefix": "k", "n": 400, "size": 8000}, timeout=60)["ok"]
    assert cluster.call(leader, {"op": "snapshot"}, timeout=30)["index"]
    assert cluster.call(leader, {"op": "put", "k": "between", "v": 1})["ok"]
    assert cluster.call(leader, {"op": "snapshot"}, timeout=30)["index"]
    st = cluster.call(leader, {"op": "status"})["status"]
    assert st["first_index"] > 1
    return st["commit"]


def assert_installed_and_equal(cluster: ProcessCluster, node: str, leader: str, commit: int) -> dict:
    assert cluster.call(node, {"op": "wait_applied", "index": commit, "timeout": 60}, timeout=70)["ok"]
    st = cluster.call(node, {"op": "status"})
    lst = cluster.call(leader, {"op": "status"})
    assert st["keys"] == lst["keys"] == 401
    snap = st["status"]["snapshot"]
    assert snap["installs"] == 1 and snap["download"]["completed"] == 1
    return snap


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_follower_killed_halfway_resumes_download(tmp_path) -> None:
    cluster = ProcessCluster(str(tmp_path), n=3, election_ms=ELECTION_MS, extra_args=ARGS)
    try:
        cluster.start_all()
        leader = cluster.wait_leader()
        victim = next(i for i in cluster.ids if i != leader)
        cluster.kill(victim)
        shutil.rmtree(tmp_path / victim)
        commit = seed_two_snapshots(cluster, leader)

        cluster.start(victim)
        got = cluster.call(victim, {"op": "wait_download", "bytes": 400_000, "timeout": 30}, timeout=40)["received"]
        cluster.kill(victim)  # halfway: the checkpoint on disk is <= what it had received
        cluster.start(victim)
        snap = assert_installed_and_equal(cluster, victim, leader, commit)
        assert 0 < snap["download"]["resumed"] <= got
        # The restarted follower fetched only the rest: what it kept plus what it fetched covers the files
        # (and the small meta file, fetched again), not more.
        size = cluster.call(leader, {"op": "status"})["status"]["snapshot"]["bytes"]
        dl = snap["download"]
        assert dl["received"] < size <= dl["received"] + dl["resumed"] < size + 4096, (dl, size)
    finally:
        cluster.stop_all()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_leader_killed_halfway_follower_resumes_from_restarted_leader(tmp_path) -> None:
    cluster = ProcessCluster(str(tmp_path), n=2, election_ms=ELECTION_MS, extra_args=ARGS)
    try:
        cluster.start_all()
        leader = cluster.wait_leader()
        victim = next(i for i in cluster.ids if i != leader)
        commit = seed_two_snapshots(cluster, leader)
        cluster.kill(victim)
        shutil.rmtree(tmp_path / victim)

        size = cluster.call(leader, {"op": "status"})["status"]["snapshot"]["bytes"]
        cluster.start(victim)
        cluster.call(victim, {"op": "wait_download", "bytes": 400_000, "timeout": 30}, timeout=40)
        cluster.kill(leader)
        cluster.start(leader)  # the only node with the log: it must lead again and offer the same snapshot
        assert cluster.wait_leader(timeout=30) == leader
        snap = assert_installed_and_equal(cluster, victim, leader, commit)
        # The victim resumed from a checkpoint (not from 0, not past the end) and fetched the snapshot in full
        # over both downloads (its counters span both: the process was not restarted). Not bounded by what it
        # had received when wait_download answered: chunks on their way still arrive, and may be checkpointed,
        # until the kill lands (a fresh run saw 524,288 resumed against 458,911 read earlier).
        dl = snap["download"]
        assert 0 < dl["resumed"] < size <= dl["received"], (dl, size)
    finally:
        cluster.stop_all()

"""Three real node processes over loopback TCP: SIGKILL the leader, a new leader commits, the old node
restarts from its WAL and catches up."""

from __future__ import annotations

import time

import pytest

from raft.testing.cluster import ProcessCluster


def put(cluster: ProcessCluster, node: str, k: str, v: int) -> dict:
    return cluster.call(node, {"op": "put", "k": k, "v": v})


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_leader_new_leader_commits_old_node_catches_up(tmp_path) -> None:
    cluster = ProcessCluster(str(tmp_path), n=3, election_ms=300)
    try:
        cluster.start_all()
        leader = cluster.wait_leader()
        for k in range(50):
            assert put(cluster, leader, f"k{k}", k)["ok"]
        follower = next(i for i in cluster.ids if i != leader)
        redirect = put(cluster, follower, "x", 1)
        assert redirect == {**redirect, "ok": False, "error": "EPERM", "leader": leader}

        cluster.kill(leader)
        t0 = time.monotonic()
        survivors = [i for i in cluster.ids if i != leader]
        new_leader = cluster.wait_leader(among=survivors)
        failover = time.monotonic() - t0
        assert new_leader != leader
        for k in range(50, 80):
            assert put(cluster, new_leader, f"k{k}", k)["ok"]
        assert cluster.call(new_leader, {"op": "get", "k": "k10"})["value"] == 10  # acked before the kill

        cluster.start(leader)
        target = cluster.call(new_leader, {"op": "status"})["status"]["commit"]
        assert cluster.call(leader, {"op": "wait_applied", "index": target, "timeout": 30}, timeout=40)["ok"]
        st = cluster.call(leader, {"op": "status"})
        assert st["status"]["applied"] >= target, st
        assert st["keys"] == 80  # every acknowledged key, from before and after the kill
        assert st["status"]["role"] == "follower" and st["status"]["leader"] == new_leader
        assert failover < 5.0
    finally:
        cluster.stop_all()

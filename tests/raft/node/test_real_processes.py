"""Three real node processes over loopback TCP: SIGKILL the leader, a new leader commits, the old node
restarts from its WAL and catches up."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from raft.testing.cluster import ProcessCluster


def put(cluster: ProcessCluster, node: str, k: str, v: int) -> dict:
    return cluster.call(node, {"op": "put", "k": k, "v": v})


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_leader_new_leader_commits_old_node_catches_up(tmp_path) -> None:
    # 1000 ms, not 300: at 300 a loaded 2-core machine can move the leadership in the middle of the 50 puts to
    # the leader found first (the daemon and torture tests moved off 300 ms for the same reason)
    cluster = ProcessCluster(str(tmp_path), n=3, election_ms=1000)
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


# 1000 ms, not 300: the lease-confirming read, `isolate` and the SIGSTOP must all come within one election timeout
# of each other, from this process, on a machine the three nodes keep busy
ELECTION_MS = 1000


def paused_leader_read(tmp_path, *flags: str) -> tuple[dict, float]:
    """A leader with a fresh lease is cut off (its raft traffic dropped, as if its peers' messages had not yet
    been read) and SIGSTOPped for 3x the election timeout. Meanwhile the others elect a new leader and commit
    k=2. A read sent to the old leader while it is stopped is the first thing it handles on SIGCONT."""
    cluster = ProcessCluster(str(tmp_path), n=3, election_ms=ELECTION_MS, extra_args=("--lease-read", *flags))
    try:
        cluster.start_all()
        old = cluster.wait_leader()
        assert put(cluster, old, "k", 1)["ok"]
        assert cluster.call(old, {"op": "get", "k": "k"}) == {"ok": True, "value": 1}  # confirms the lease
        assert cluster.call(old, {"op": "isolate"})["ok"]
        cluster.signal(old, signal.SIGSTOP)
        stopped = time.monotonic()
        new = cluster.wait_leader(among=[i for i in cluster.ids if i != old])
        assert put(cluster, new, "k", 2)["ok"]
        with socket.create_connection(("127.0.0.1", cluster.client_ports[old]), timeout=10) as s:
            # The pause is the fault under test: it lasts 3 election timeouts, whatever the new leader did.
            time.sleep(max(0.0, stopped + 3 * ELECTION_MS / 1000 - time.monotonic()))
            s.sendall(json.dumps({"op": "get", "k": "k"}).encode() + b"\n")
            paused = time.monotonic() - stopped
            cluster.signal(old, signal.SIGCONT)
            return json.loads(s.makefile().readline()), paused
    finally:
        cluster.stop_all()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_paused_leader_does_not_serve_a_read_from_its_stale_lease(tmp_path) -> None:
    resp, paused = paused_leader_read(tmp_path)
    assert paused >= 3 * ELECTION_MS / 1000  # three election timeouts: the lease cannot have survived them
    # Its lease, measured on the monotonic clock, expired during the pause: the read needs a heartbeat round,
    # which cannot succeed, so it fails (never the stale value 1).
    assert resp["ok"] is False and resp["error"] in ("ELEADERCHANGED", "EPERM"), resp


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_old_tick_counted_lease_serves_the_stale_read(tmp_path) -> None:
    """The negative control: with the old lease (ticks, which a stopped process drops) the same scenario
    reads the value from before the pause, so the test above can tell a broken lease from a sound one."""
    resp, _ = paused_leader_read(tmp_path, "--unsafe-tick-lease")
    assert resp == {"ok": True, "value": 1}

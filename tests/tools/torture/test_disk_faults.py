"""fsync failure and slow fsync against real controllerd processes, through the failpoints.

Elections time out after 1000 ms: at 300 ms a loaded 2-core machine (the whole suite on two workers) moved the
leadership by itself, with no slow disk needed (the CI run of 2026-11-30)."""

from __future__ import annotations

import httpx
import pytest

from tests.daemon.cluster import ControllerdCluster
from tools.torture.crash import Writers

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torture")]
ELECTION_MS = 1000


def test_fsync_eio_stops_the_node_instead_of_retrying(tmp_path):
    """fsyncgate: after EIO from fdatasync the node exits 1 naming the error; the others keep every write."""
    c = ControllerdCluster(str(tmp_path), election_ms=ELECTION_MS)
    for i in range(3):
        c.start(i, {"CONTROLLERD_UNSAFE_LOCAL_READS": "1"})
    try:
        leader = c.index_of(c.wait_ready())
        victim = (leader + 1) % 3
        c.kill(victim)
        c.start(victim, {"CONTROLLERD_FAILPOINTS": "wal.fsync=error(EIO)@3", "CONTROLLERD_UNSAFE_LOCAL_READS": "1"})
        w = Writers(c, n=2)
        w.start()
        assert c.procs[victim].wait(60) == 1
        with w.cond:
            n = len(w.acked)
            w.cond.wait_for(lambda: len(w.acked) >= n + 20, 60)  # the two others go on
        w.stop()
        c.readers[victim].join(10)
        log = c.tail(victim, 40)
        assert "Input/output error (failpoint wal.fsync)" in log and "fatal" in log
        assert "raft log writer stopped" in log
        c.start(victim, {"CONTROLLERD_UNSAFE_LOCAL_READS": "1"})  # a restart re-reads the disk and catches up
        c.wait_ready(timeout=60)
        leader = c.index_of(c.wait_ready())
        commit = httpx.get(c.url(leader, "/api/v1/raft/status")).json()["body"]["commitIndex"]
        assert c.wait_applied(victim, commit)
        with httpx.Client(timeout=5) as client:
            for key, value in w.acked.items():
                assert client.get(c.url(victim, f"/api/v1/kv/t/{key}")).json()["body"]["value"] == value
    finally:
        c.stop_all()


def test_slow_fsync_does_not_cost_the_leader_its_leadership(tmp_path):
    """Every fsync of every node takes 1.5 times the election timeout: heartbeats and their answers do not wait
    for the disk, so the term never changes; writes get slower and none is lost. (Before 2026-11-30 a follower
    answered a heartbeat only after its pending append was durable: the leader stepped down and the group
    elected again and again, no write acknowledged in 40 s.)"""
    c = ControllerdCluster(str(tmp_path), election_ms=ELECTION_MS)
    for i in range(3):
        c.start(i, {"CONTROLLERD_FAILPOINTS": f"wal.fsync=delay({ELECTION_MS * 3 // 2})"})
    try:
        leader = c.index_of(c.wait_ready())
        term = httpx.get(c.url(leader, "/api/v1/raft/status")).json()["body"]["term"]
        w = Writers(c, n=4, timeout=15)  # a write waits for two slow fsyncs in a row at most
        w.start()
        with w.cond:
            assert w.cond.wait_for(lambda: len(w.acked) >= 20, 120)
        w.stop()
        st = httpx.get(c.url(leader, "/api/v1/raft/status")).json()["body"]
        assert st["role"] == "leader" and st["term"] == term
        for key, value in w.acked.items():
            assert httpx.get(c.url(leader, f"/api/v1/kv/t/{key}")).json()["body"]["value"] == value
    finally:
        c.stop_all()

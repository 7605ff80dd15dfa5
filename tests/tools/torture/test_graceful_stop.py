"""SIGTERM of the leader during a write burst: leadership is handed over first, every request that reached it
is answered (success or a retryable error), it exits 0 within a bound, and no acknowledged write is lost."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.daemon.cluster import ControllerdCluster
from tools.torture.crash import Writers

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torture-disk")]
STOP_BOUND_S = 15.0


def test_sigterm_of_the_leader_under_load(tmp_path):
    c = ControllerdCluster(str(tmp_path), election_ms=1000)  # 300 ms: a loaded machine may move the leadership first
    c.start_all()
    try:
        leader = c.index_of(c.wait_ready())
        # A request waits out the hand-over (up to transfer_on_stop_s, 5 s) and the election after it, longer on a
        # starved machine: only a dropped connection or no answer within the stop bound and 10 s is unanswered.
        w = Writers(c, n=4, timeout=STOP_BOUND_S + 10)
        w.start()
        with w.cond:
            assert w.cond.wait_for(lambda: len(w.acked) >= 50, 60)
        t0 = time.monotonic()
        assert c.terminate(leader, timeout=STOP_BOUND_S) == 0
        assert time.monotonic() - t0 < STOP_BOUND_S
        with w.cond:
            n = len(w.acked)
            assert w.cond.wait_for(lambda: len(w.acked) >= n + 50, 60)  # the others go on under a new leader
        w.stop()
        assert w.unanswered == [], w.unanswered[:5]
        log = c.tail(leader, 30)
        assert "leadership handed to" in log, log
        survivors = [i for i in range(3) if i != leader]
        new = c.index_of(c.wait_ready(survivors))
        with httpx.Client(timeout=5) as client:
            for key, value in w.acked.items():
                assert client.get(c.url(new, f"/api/v1/kv/t/{key}")).json()["body"]["value"] == value
    finally:
        c.stop_all()

"""A real 3-node controllerd group with simulated broker groups beside it (tools.brokersim), with short
timeouts, for the failover and status-page tests. Waiting is on the simulator's events (a condition the
event callback notifies) or on the cluster's log lines, always with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.daemon.cluster import ControllerdCluster
from tools.brokersim.sim import SimConfig, SimThread, Simulator

HEARTBEAT_TIMEOUT_MS = 1000
SCAN_INTERVAL_MS = 300
FAST = SimConfig(
    heartbeat_interval_s=0.2,
    heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
    sync_metadata_period_s=0.2,
    check_sync_state_set_period_s=0.2,
    ha_max_time_slave_not_catchup_ms=1500,
    ha_interval_s=0.05,
    produce_interval_s=0.05,
    request_timeout_s=2.0,
)
# What the failover may take: the dead master's heartbeat expires, the next scan elects, plus one second.
FAILOVER_BOUND_S = (HEARTBEAT_TIMEOUT_MS + SCAN_INTERVAL_MS) / 1000 + 1.0


def election_stamp(state: dict[str, Any], name: str, master_id: int, epoch: int) -> float | None:
    """When a status page's state (/ui/api/state) says the controller elected `master_id` master of `name` at
    `epoch`: its broker-election event's time, as the leader stamped it (seconds since the epoch); None if absent."""
    text = f"{name}: broker {master_id} elected master at epoch {epoch}"
    stamps = [e["t"] for e in state.get("events", []) if e["kind"] == "broker-election" and e["text"] == text]
    return stamps[0] if stamps else None


class Demo:
    def __init__(self, cluster: ControllerdCluster, groups: int = 2, replicas: int = 3, cfg: SimConfig = FAST) -> None:
        self.cluster = cluster
        self._changed = threading.Condition()
        self.events: list[dict[str, Any]] = []
        self.sim = Simulator(list(cluster.https), groups, replicas, cfg, on_event=self._on_event)
        self.runner = SimThread(self.sim)

    def _on_event(self, event: dict[str, Any]) -> None:  # on the simulator's loop thread
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait(self, what: str, predicate: Callable[[], Any], timeout: float) -> Any:
        """The first truthy `predicate()` (run on the simulator's loop, re-run at each event), else fail."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = len(self.events)
            value = self.runner.call(lambda _sim: predicate())
            if value:
                return value
            with self._changed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{what}: not within {timeout:g}s; last events: {self.events[-8:]}")
                # Woken by the next event, or re-checked after 0.1 s (writes get acknowledged without events).

                def grown(seen: int = seen) -> bool:
                    return len(self.events) > seen

                self._changed.wait_for(grown, min(left, 0.1))

    def elected_at(self, name: str, master_id: int, epoch: int) -> float | None:
        """When the controller elected `master_id` master of `name` at `epoch`, as its leader stamped it (the
        broker-election event of /ui/api/state, seconds since the epoch); None until the leader shows it. The
        controller's own time, not when a poll saw it: the poll and the simulator's thread share two cores with
        the group (tests/interop/test_interop.py's `elected_after` does the same)."""
        leader = self.cluster.rafts.index(self.cluster.wait_ready())
        return election_stamp(
            httpx.get(self.cluster.url(leader, "/ui/api/state"), timeout=5).json(), name, master_id, epoch
        )

    def group(self, name: str) -> Any:
        return self.sim.sets[name]

    def settled(self, name: str) -> Any:
        """The group's master once every replica is in its SyncStateSet."""
        g = self.group(name)
        m = g.master()
        return m if m is not None and len(m.sync_set) == len(g.brokers) and len(g.acked) > 0 else None


@contextmanager
def running_demo(root: str, groups: int = 2) -> Iterator[Demo]:
    cluster = ControllerdCluster(root, election_ms=500, extra=f"scanNotActiveBrokerInterval={SCAN_INTERVAL_MS}\n")
    cluster.start_all()
    demo = None
    try:
        cluster.wait_ready()
        demo = Demo(cluster, groups)
        demo.runner.start()
        yield demo
    finally:
        if demo is not None and demo.runner.thread.is_alive():
            demo.runner.stop()
        cluster.stop_all()

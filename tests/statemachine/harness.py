"""A thin driver for the state machine in tests: every call builds a real command (the bytes the leader
would propose) at the harness's current time and applies it, so tests exercise the log path end to end."""

from __future__ import annotations

from typing import Any

from statemachine import ControllerStateMachine, Result
from statemachine import commands as cmd

CLUSTER = "DefaultCluster"
BROKER = "broker-set-a"
IPS = ("127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002")
T0 = 1_700_000_000_000
TIMEOUT = 10_000  # RocketMQ's default heartbeat timeout


def tables(sm: ControllerStateMachine) -> dict[int, bytes]:
    """The snapshot sections as if the clock were 0: what "this command changed nothing" compares, since
    every applied command may move the state machine's clock (the time of the last applied command)."""
    clock, sm.live.clock = sm.live.clock, 0
    try:
        return sm.encode_sections()
    finally:
        sm.live.clock = clock


def header(r: Result) -> dict[str, Any]:
    """`r.header`, which the command under test is known to send (a None fails here, naming the result)."""
    assert r.header is not None, r
    return r.header


def remark(r: Result) -> str:
    """`r.remark`, which the command under test is known to send (a None fails here, naming the result)."""
    assert r.remark is not None, r
    return r.remark


class Ctl:
    def __init__(self, sm: ControllerStateMachine | None = None, now: int = T0) -> None:
        self.sm = sm or ControllerStateMachine()
        self.now = now
        self.log: list[bytes] = []  # every command applied, for replays

    def run(self, data: bytes) -> Result:
        self.log.append(data)
        return self.sm.apply(data)

    def advance(self, ms: int) -> None:
        self.now += ms

    # --- one method per request -------------------------------------------------------------------------

    def next_id(self, name: str = BROKER, cluster: str = CLUSTER) -> Result:
        return self.run(cmd.get_next_broker_id(self.now, cluster, name))

    def apply_id(
        self, broker_id: int, addr: str, name: str = BROKER, cluster: str = CLUSTER, code: str | None = None
    ) -> Result:
        return self.run(cmd.apply_broker_id(self.now, cluster, name, broker_id, code or f"{addr};{T0}"))

    def register(self, broker_id: int, addr: str, name: str = BROKER, cluster: str = CLUSTER) -> Result:
        return self.run(cmd.register_broker(self.now, cluster, name, broker_id, addr))

    def hb(
        self, broker_id: int, addr: str | None = None, name: str = BROKER, cluster: str = CLUSTER, **fields: int | None
    ) -> Result:
        addr = addr or IPS[(broker_id - 1) % 3]
        return self.run(cmd.heartbeat(self.now, cluster, name, addr, broker_id, **fields))

    def elect(
        self, broker_id: int | None = None, name: str = BROKER, cluster: str = CLUSTER, designate: bool = False
    ) -> Result:
        return self.run(
            cmd.elect_master(self.now, name, cluster_name=cluster, broker_id=broker_id, designate_elect=designate)
        )

    def alter(self, master: int, master_epoch: int, ids: set[int], ss_epoch: int, name: str = BROKER) -> Result:
        return self.run(cmd.alter_sync_state_set(self.now, name, master, master_epoch, ids, ss_epoch))

    def info(self, name: str = BROKER) -> Result:
        return self.run(cmd.get_replica_info(self.now, name))

    def data(self, *names: str) -> Result:
        return self.run(cmd.get_sync_state_data(self.now, list(names or (BROKER,))))

    def clean(
        self, name: str = BROKER, ids: str | None = None, living: bool = False, cluster: str | None = CLUSTER
    ) -> Result:
        return self.run(
            cmd.clean_broker_data(
                self.now, name, cluster_name=cluster, broker_controller_ids_to_clean=ids, is_clean_living_broker=living
            )
        )

    def scan(self, alive_since: int | None = None) -> Result:
        """1015 at the harness's time; `alive_since`: aliveSinceMillis (None: the form without the field)."""
        return self.run(cmd.check_not_active_broker(self.now, alive_since))

    def close(self, broker_id: int, name: str = BROKER, cluster: str = CLUSTER) -> Result:
        return self.run(cmd.close_channel(self.now, cluster, name, broker_id))

    def live_info(self, identity: tuple[str, str, int] | None = None) -> Result:
        return self.run(cmd.get_broker_live_info(self.now, identity))

    def config(self, **values: object) -> Result:
        return self.run(cmd.update_controller_config(self.now, values))

    # --- flows ------------------------------------------------------------------------------------------

    def register_new(self, addr: str, name: str = BROKER, cluster: str = CLUSTER) -> int:
        """RocketMQ's three registration steps (spec §8), each asserted to succeed; returns the new id."""
        nxt = self.next_id(name, cluster)
        assert nxt.ok, nxt
        broker_id = header(nxt)["nextBrokerId"]
        applied = self.apply_id(broker_id, addr, name, cluster)
        assert applied.ok, applied
        registered = self.register(broker_id, addr, name, cluster)
        assert registered.ok, registered
        return broker_id

    def group(self, n: int = 3, name: str = BROKER, alive: bool = True) -> None:
        """A broker-set of n registered brokers, 1 elected master (first election), SyncStateSet all of them."""
        for i in range(n):
            assert self.register_new(IPS[i], name) == i + 1
            if alive:
                self.hb(i + 1, IPS[i], name)
        assert self.elect(1, name).ok
        if n > 1:
            assert self.alter(1, 1, set(range(1, n + 1)), 1, name).ok

    def state(self, name: str = BROKER) -> tuple[int | None, int, list[int], int]:
        """(masterBrokerId, masterEpoch, SyncStateSet, syncStateSetEpoch) read through the log."""
        r = self.info(name)
        assert r.ok, r
        h = header(r)
        return h["masterBrokerId"], h["masterEpoch"], r.body["syncStateSet"], r.body["syncStateSetEpoch"]

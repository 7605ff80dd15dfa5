"""The simulated brokers (tools/brokersim/sim.py) without controller processes.

- The acknowledged-write check means something: with allAckInSyncStateSet a master killed with writes only
  it holds loses no acknowledged write (its successor from the SyncStateSet holds them all; the old master,
  back as a slave, truncates the rest at the RIP-44 consistent point), and with it off the same schedule
  loses acknowledged writes, which `lost()` names. Driven step by step, no network, no timing.
- Against a one-node controller in process (httpx's ASGI transport, every request recorded): brokers go
  through the three steps, persist their ids and heartbeat with heartbeatTimeoutMills, epoch and max offset;
  a second simulator on the same data directory registers the same ids at once (no next-broker-id, no
  apply-broker-id)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.harness import TOKEN, http_address, solo
from tools.brokersim.sim import BrokerGroup, SimBroker, SimConfig, Simulator
from tools.brokersim.store import CommitLog, load_identity


def replica_group(all_ack: bool, data: str | None = None) -> BrokerGroup:
    """broker-a with ids 1, 2, 3 serving: 1 master at epoch 1 with SyncStateSet {1, 2, 3}, 2 and 3 its slaves."""
    cfg = SimConfig(all_ack_in_sync_state_set=all_ack, ack_timeout_s=3600)
    sim = Simulator(["127.0.0.1:1"], 1, 3, cfg, data=data)
    g = sim.sets["broker-a"]
    for i, b in enumerate(g.brokers, 1):
        b.id, b.state = i, "running"
    master, *slaves = g.brokers
    master._change_to_master(1, [1, 2, 3], 1)
    for s in slaves:
        s._change_to_slave(1, 1)
    return g


def fail_over(g: BrokerGroup) -> tuple[SimBroker, SimBroker, SimBroker]:
    """Three writes replicated to both slaves, two more only the master has, the master killed, broker 2
    master at epoch 2 with {2, 3} (as the controller elects from the SyncStateSet), 3 following it."""
    old, new, other = g.brokers
    for _ in range(3):
        g.produce_one()
        new._replicate()
        other._replicate()
    g._settle()
    assert len(g.acked) == 3
    g.produce_one()
    g.produce_one()
    assert old.log.end == 5 * g.sim.cfg.message_bytes > new.log.end
    old.kill()
    new._change_to_master(2, [2, 3], 2)
    other._change_to_slave(2, 2)
    other._replicate()
    return old, new, other


def test_with_all_ack_in_sync_state_set_a_killed_master_loses_no_acknowledged_write() -> None:
    g = replica_group(all_ack=True)
    old, new, other = fail_over(g)
    assert len(g.acked) == 3  # the two writes only the old master had were never acknowledged
    assert g.lost(new) == [] and g.lost(other) == []
    g.produce_one()
    other._replicate()
    g._settle()
    assert len(g.acked) == 4 and g.lost(new) == []
    # The old master back as a slave: its two unacknowledged writes of epoch 1 are cut where epoch 2 begins.
    old._reset()
    old.state = "running"
    old._change_to_slave(2, 2)
    fork = dict(new.log.epochs)[2]
    old._replicate()
    [cut] = [e for e in g.sim.events if e["event"] == "truncate"]
    assert (cut["fromOffset"], cut["toOffset"]) == (5 * 1024, fork)
    assert old.log.epochs == new.log.epochs and old.log.end == new.log.end
    assert g.lost(old) == []


def test_without_all_ack_in_sync_state_set_the_check_names_the_acknowledged_writes_lost() -> None:
    g = replica_group(all_ack=False)
    _old, new, other = fail_over(g)
    assert len(g.acked) == 5  # acknowledged when written, before any slave had them
    assert g.lost(new) == [(3 * 1024, 4 * 1024, 1), (4 * 1024, 5 * 1024, 1)]
    # The summary line make run prints says so too, and counts the brokers whose heartbeats were answered.
    before = g.sim.beats()
    new.beats += 2
    other.beats += 1
    assert g.sim.summary(before, 10) == (
        "heartbeats: 2 of 3 brokers answered in the last 10s (3 heartbeats); broker-a master 2 (epoch 2); "
        "5 writes acknowledged, 2 lost"
    )


@pytest.mark.anyio
async def test_a_stopped_simulator_leaves_each_epoch_file_at_its_logs_end(tmp_path: Path) -> None:
    g = replica_group(all_ack=True, data=str(tmp_path))
    fail_over(g)
    g.produce_one()  # the new master's own write: in memory only, until the stop
    new = g.brokers[1]
    assert new.log.path is not None and CommitLog.load(new.log.path).end < new.log.end
    await g.sim.stop()
    for b in g.brokers:
        on_disk = CommitLog.load(str(b.log.path))
        assert (on_disk.epochs, on_disk.end) == (b.log.epochs, b.log.end)


class Recording(httpx.AsyncBaseTransport):
    """The controller's app in process; every request's path and JSON body kept."""

    def __init__(self, app: Any) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.url.path.rsplit("/", 1)[1], json.loads(request.content or b"{}")))
        return await self.inner.handle_async_request(request)

    def bodies(self, step: str) -> list[dict[str, Any]]:
        return [body for path, body in self.sent if path == step]


FAST = SimConfig(heartbeat_interval_s=0.05, sync_metadata_period_s=0.05, check_sync_state_set_period_s=0.05)


async def run_until_registered(node_app: Any, addresses: list[str], data: str) -> tuple[dict[str, int], Recording]:
    """A simulator of one set of two brokers on `data` until both registered and heartbeated: {address: id}."""
    transport = Recording(node_app)
    registered: dict[str, int] = {}
    done = asyncio.Event()

    def on_event(e: dict[str, Any]) -> None:
        if e["event"] == "registered":
            registered[e["address"]] = e["brokerId"]
            if len(registered) == 2:
                done.set()

    sim = Simulator(addresses, 1, 2, FAST, data=data, token=TOKEN, on_event=on_event, transport=transport)
    await sim.start()
    try:
        await asyncio.wait_for(done.wait(), 10)
    finally:
        await sim.stop()
    return registered, transport


@pytest.mark.anyio
async def test_brokers_register_in_three_steps_heartbeat_and_keep_their_ids_across_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "brokers")
    async with solo(tmp_path / "ctl") as node:
        addresses = [http_address(node.id)]
        first, sent = await run_until_registered(node.app, addresses, data)
        assert sorted(first.values()) == [1, 2]
        assert len(sent.bodies("next-broker-id")) >= 2
        assert {b["appliedBrokerId"] for b in sent.bodies("apply-broker-id")} == {1, 2}
        for address, broker_id in first.items():
            ident = load_identity(os.path.join(data, "broker-a", address.replace(":", "_"), "identity"))
            assert ident is not None and (ident.broker_id, ident.applied) == (broker_id, True)
            assert ident.check_code.startswith(address + ";")
        beats = sent.bodies("heartbeat")
        assert beats and all(b["heartbeatTimeoutMills"] == FAST.heartbeat_timeout_ms for b in beats)
        assert {(b["brokerAddr"], b["brokerId"]) for b in beats} == set(first.items())
        assert all("epoch" in b and "maxOffset" in b for b in beats)

        again, resent = await run_until_registered(node.app, addresses, data)
        assert again == first
        assert resent.bodies("next-broker-id") == [] and resent.bodies("apply-broker-id") == []
        assert {(b["brokerAddress"], b["brokerId"]) for b in resent.bodies("register-broker")} == set(first.items())

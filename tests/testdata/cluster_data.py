"""Data directories from a real 3-node controller group (ControllerServices on loopback, real WAL and
snapshot storage, the harness of the API tests), driven through the HTTP API like RocketMQ brokers would:
registrations, heartbeats, elections, SyncStateSet changes, KV puts, a config change, inactive-broker
scans, and snapshots taken on every node at two points."""

from __future__ import annotations

import asyncio
from pathlib import Path

from raft.core import Role
from raft.options import LogStorageOptions, RaftOptions
from tests.api.harness import Node, group, register

CTL = "/api/v1/controller"
SETS = [f"broker-{k}" for k in range(6)]
# One event loop runs the three nodes and their fsyncs: on a slow, busy 2-core machine (the other pytest worker
# beside it) it can stall past the API tests' 300 ms election timeout, and a lost leadership fails a request
# of the traffic below. The data needs no election to be quick, only the traffic to reach one leader.
RAFT = RaftOptions(election_timeout_ms=2000)
# Segments of 1 MiB, preallocated as in production: each node's log (a few KB here) is still one segment with a
# zero tail the audit reads past, and every copy a test makes (the fault datasets, HDFS, the executors' reads) is
# 3 MiB instead of the 192 MiB that 64 MiB segments made of it once copied dense.
LOG = LogStorageOptions(segment_bytes=1024 * 1024)


async def _wait_applied(nodes: list[Node], index: int) -> None:
    for _ in range(2000):
        if all(n.service.node.status().applied >= index for n in nodes):
            return
        await asyncio.sleep(0.005)  # polling a condition, bounded (10 s)
    raise AssertionError(f"nodes did not apply {index}")


async def _snapshot_all(nodes: list[Node], leader: Node) -> int:
    await _wait_applied(nodes, leader.last_index())
    index = 0
    for n in nodes:
        r = await n.call("POST", "/api/v1/raft/snapshot", token=True)
        assert r.status_code == 200, r.text
        index = r.json()["body"]["index"]
    return index


async def _traffic(leader: Node, round_: int) -> None:
    for k, name in enumerate(SETS):
        for bid in (1, 2):
            addr = f"10.0.{k}.{bid}:10911"
            if round_ == 0:
                await register(leader, "c1", name, bid, addr)
            else:
                await leader.ok(
                    "POST",
                    f"{CTL}/heartbeat",
                    json={
                        "clusterName": "c1",
                        "brokerName": name,
                        "brokerAddr": addr,
                        "brokerId": bid,
                        "heartbeatTimeoutMills": 60_000,
                        "epoch": round_,
                        "maxOffset": 100 * round_ + bid,
                    },
                )
        if round_ == 0:
            await leader.ok(
                "POST", f"{CTL}/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1}
            )
            alter = {
                "brokerName": name,
                "masterBrokerId": 1,
                "masterEpoch": 1,
                "syncStateSet": {"syncStateSet": [1, 2], "syncStateSetEpoch": 1},
            }
            await leader.ok("POST", f"{CTL}/alter-sync-state-set", json=alter)
        await leader.ok("PUT", f"/api/v1/kv/ns{k % 2}/key-{k}", json={"value": f"v{round_}-{k}"})
    if round_ == 1:
        await leader.ok("PUT", "/api/v1/admin/config", token=True, json={"electMasterMaxRetryCount": "5"})


async def _build(root: Path) -> dict[str, int]:
    async with group(root, raft=RAFT, on_disk=True, log=LOG) as nodes:
        leader = next(n for n in nodes if n.service.node.status().role is Role.LEADER)
        await _traffic(leader, 0)
        first = await _snapshot_all(nodes, leader)
        await _traffic(leader, 1)
        await _traffic(leader, 2)
        second = await _snapshot_all(nodes, leader)
        await _traffic(leader, 3)
        await _wait_applied(nodes, leader.last_index())
        return {"first": first, "second": second, "last": leader.last_index()}


def build_cluster_data(root: Path) -> dict[str, int]:
    """Run the group, stop it; its data dirs are root/n0, root/n1, root/n2. Returns the snapshot indexes."""
    return asyncio.run(_build(root))

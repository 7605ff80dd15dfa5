"""Broker endpoints on a one-node group: the register flow and RocketMQ's answer codes."""

from __future__ import annotations

import time

import pytest

from api.http import models as M
from statemachine import codes as C
from tests.api.harness import Counter, Node, http_address, register

pytestmark = pytest.mark.anyio
CTL = "/api/v1/controller"


async def test_register_flow_elect_and_replica_info(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.0.0.1:10911")
    env = await node.ok("POST", f"{CTL}/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1})
    answer = M.ElectMasterAnswer.model_validate(env)
    assert env["header"] == {
        "masterBrokerId": 1,
        "masterAddress": "10.0.0.1:10911",
        "masterEpoch": 1,
        "syncStateSetEpoch": 1,
    }
    assert answer.body is not None and answer.body.brokerMemberGroup is not None
    assert answer.body.brokerMemberGroup.brokerAddrs == {"1": "10.0.0.1:10911"} and answer.body.syncStateSet == [1]
    env = await node.ok("POST", f"{CTL}/replica-info", json={"brokerName": name})
    M.ReplicaInfoAnswer.model_validate(env)
    assert env["header"] == {"masterBrokerId": 1, "masterAddress": "10.0.0.1:10911", "masterEpoch": 1}
    assert env["body"] == {"syncStateSet": [1], "syncStateSetEpoch": 1}

    # A second broker learns the alive master when it registers.
    await register(node, "c1", name, 2, "10.0.0.2:10911")
    env = await node.ok(
        "POST",
        f"{CTL}/register-broker",
        json={"clusterName": "c1", "brokerName": name, "brokerId": 2, "brokerAddress": "10.0.0.2:10911"},
    )
    assert env["header"]["masterBrokerId"] == 1
    # Where nobody was ever elected, the controller trigger finds no SyncStateSet member (the first
    # election is a broker's).
    other = unique("broker")
    await register(node, "c1", other, 1, "10.0.3.2:10911")
    await node.ok(
        "POST", f"{CTL}/elect-master", json={"brokerName": other}, code=C.CONTROLLER_MASTER_NOT_AVAILABLE
    ) and env["header"]["masterAddress"] == "10.0.0.1:10911"

    # The broker trigger of a member while the master lives keeps it: 2011.
    await node.ok(
        "POST",
        f"{CTL}/elect-master",
        json={"clusterName": "c1", "brokerName": name, "brokerId": 2},
        code=C.CONTROLLER_MASTER_STILL_EXIST,
    )


async def test_alter_sync_state_set_and_fencing(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.0.1.1:10911")
    await register(node, "c1", name, 2, "10.0.1.2:10911")
    await node.ok("POST", f"{CTL}/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1})
    alter = {
        "brokerName": name,
        "masterBrokerId": 1,
        "masterEpoch": 1,
        "syncStateSet": {"syncStateSet": [1, 2], "syncStateSetEpoch": 1},
    }
    env = await node.ok("POST", f"{CTL}/alter-sync-state-set", json=alter)
    M.AlterSyncStateSetAnswer.model_validate(env)
    assert env["header"] == {"newSyncStateSetEpoch": 2}
    assert env["body"] == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}
    # The same set again: 2013; then the fences, each checked after the one before passes.
    await node.ok("POST", f"{CTL}/alter-sync-state-set", json=alter, code=C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED)
    stale = {**alter, "syncStateSet": {"syncStateSet": [1], "syncStateSetEpoch": 1}}
    await node.ok("POST", f"{CTL}/alter-sync-state-set", json=stale, code=C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)
    wrong_master = {**alter, "masterBrokerId": 2, "syncStateSet": {"syncStateSet": [2], "syncStateSetEpoch": 2}}
    await node.ok("POST", f"{CTL}/alter-sync-state-set", json=wrong_master, code=C.CONTROLLER_INVALID_MASTER)
    old_epoch = {**alter, "masterEpoch": 0, "syncStateSet": {"syncStateSet": [1], "syncStateSetEpoch": 2}}
    await node.ok("POST", f"{CTL}/alter-sync-state-set", json=old_epoch, code=C.CONTROLLER_FENCED_MASTER_EPOCH)


async def test_unknown_broker_set_codes(node: Node, unique: Counter) -> None:
    name = unique("ghost")
    env = await node.ok(
        "POST", f"{CTL}/replica-info", json={"brokerName": name}, code=C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    )
    assert env["codeName"] == "CONTROLLER_BROKER_METADATA_NOT_EXIST" and env["remark"]
    await node.ok(
        "POST",
        f"{CTL}/register-broker",
        json={"clusterName": "c1", "brokerName": name, "brokerId": 1, "brokerAddress": "a:1"},
        code=C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
    )
    await node.ok(
        "POST", f"{CTL}/elect-master", json={"brokerName": name}, code=C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    )
    await node.ok(
        "POST",
        f"{CTL}/alter-sync-state-set",
        json={
            "brokerName": name,
            "masterBrokerId": 1,
            "masterEpoch": 1,
            "syncStateSet": {"syncStateSet": [1], "syncStateSetEpoch": 1},
        },
        code=C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
    )
    # Applying id 2 first into an unknown set is refused (ids start at 1).
    await node.ok(
        "POST",
        f"{CTL}/apply-broker-id",
        json={"clusterName": "c1", "brokerName": name, "appliedBrokerId": 2, "registerCheckCode": "a:1;1"},
        code=C.CONTROLLER_BROKER_ID_INVALID,
    )


async def test_apply_broker_id_conflict(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.0.2.1:10911")
    await node.ok(
        "POST",
        f"{CTL}/apply-broker-id",
        json={"clusterName": "c1", "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "10.0.2.9:10911;9"},
        code=C.CONTROLLER_BROKER_ID_INVALID,
    )
    # The same check code again is an idempotent retry.
    await node.ok(
        "POST",
        f"{CTL}/apply-broker-id",
        json={"clusterName": "c1", "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "10.0.2.1:10911;1"},
    )


async def test_heartbeat_is_replicated_with_the_leader_clock_and_starts_the_scan_guard(
    node: Node, unique: Counter
) -> None:
    name = unique("broker")
    before = int(time.time() * 1000)
    env = await node.ok(
        "POST",
        f"{CTL}/heartbeat",
        json={
            "clusterName": "c9",
            "brokerName": name,
            "brokerAddr": "10.9.9.9:10911",
            "brokerId": 3,
            "heartbeatTimeoutMills": 4321,
            "epoch": 2,
            "maxOffset": 100,
            "electionPriority": 1,
        },
    )
    M.HeartbeatAnswer.model_validate(env)
    assert env["remark"] == "Heart beat success"
    row = node.service.sm.live.table[("c9", name, 3)]
    # [cluster, name, id, addr, lastUpdateTimestamp, heartbeatTimeoutMillis, epoch, maxOffset, confirm, priority]
    assert row[3] == "10.9.9.9:10911" and row[5] == 4321 and row[6:] == [2, 100, -1, 1]
    assert before <= row[4] <= int(time.time() * 1000)
    assert node.service.first_heartbeat_ms is not None


async def test_elect_master_without_broker_id_is_the_controller_trigger(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.0.3.1:10911")
    await node.ok("POST", f"{CTL}/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1})
    env = await node.ok(
        "POST", f"{CTL}/elect-master", json={"brokerName": name, "brokerId": -1}, code=C.CONTROLLER_MASTER_STILL_EXIST
    )
    assert env["header"]["masterBrokerId"] == 1
    # Where nobody was ever elected, the controller trigger finds no SyncStateSet member (the first
    # election is a broker's).
    other = unique("broker")
    await register(node, "c1", other, 1, "10.0.3.2:10911")
    await node.ok("POST", f"{CTL}/elect-master", json={"brokerName": other}, code=C.CONTROLLER_MASTER_NOT_AVAILABLE)


async def test_metadata_is_local(node: Node) -> None:
    before = node.last_index()
    env = await node.ok("GET", f"{CTL}/metadata")
    M.MetadataAnswer.model_validate(env)
    assert env["header"] == {
        "group": "jRaft-Controller",
        "controllerLeaderId": node.id,
        "controllerLeaderAddress": http_address(node.id),
        "isLeader": True,
        "peers": f"{http_address(node.id)};",
    }
    assert node.last_index() == before

"""Admin and KV endpoints on a one-node group."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from api.http import models as M
from statemachine import codes as C
from tests.api.harness import LOCAL_CONFIG, Counter, Node, assert_rejected, register

pytestmark = pytest.mark.anyio
ADMIN = "/api/v1/admin"
KV = "/api/v1/kv"


async def test_kv_get_put_cas_delete(node: Node, unique: Counter) -> None:
    key = f"{KV}/ns/{unique('key')}"
    env = await node.ok("GET", key, code=C.QUERY_NOT_FOUND)
    assert env["codeName"] == "QUERY_NOT_FOUND" and env["remark"].startswith("No config item, Namespace: ns Key: ")
    assert M.KvValueAnswer.model_validate(await node.ok("PUT", key, json={"value": "v1"})).body == M.KvValueBody(
        value="v1"
    )
    assert (await node.ok("GET", key))["body"] == {"value": "v1"}
    env = await node.ok("POST", f"{key}/cas", json={"expect": "nope", "value": "v2"})
    assert M.KvCasAnswer.model_validate(env).body == M.KvCasBody(succeeded=False, value="v1")
    assert (await node.ok("POST", f"{key}/cas", json={"expect": None, "value": "v2"}))["body"] == {
        "succeeded": False,
        "value": "v1",
    }
    assert (await node.ok("POST", f"{key}/cas", json={"expect": "v1", "value": "v2"}))["body"] == {
        "succeeded": True,
        "value": "v2",
    }
    assert M.KvDeleteAnswer.model_validate(await node.ok("DELETE", key)).body == M.KvDeleteBody(deleted=True)
    assert (await node.ok("DELETE", key))["body"] == {"deleted": False}
    await node.ok("GET", key, code=C.QUERY_NOT_FOUND)
    # expect null: only if absent.
    assert (await node.ok("POST", f"{key}/cas", json={"expect": None, "value": "v3"}))["body"] == {
        "succeeded": True,
        "value": "v3",
    }


async def test_kv_url_encoded_names(node: Node, unique: Counter) -> None:
    ns, key = "name space ü", f"{unique('k')} ?#%&"
    path = f"{KV}/{quote(ns, safe='')}/{quote(key, safe='')}"
    await node.ok("PUT", path, json={"value": "x"})
    assert node.service.sm.kv.get_value(ns, key) == "x"
    assert (await node.ok("GET", path))["body"] == {"value": "x"}


async def test_admin_sync_state_data_and_designated_election(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.1.0.1:10911")
    await register(node, "c1", name, 2, "10.1.0.2:10911")
    await node.ok(
        "POST", "/api/v1/controller/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1}
    )
    await node.ok(
        "POST",
        "/api/v1/controller/alter-sync-state-set",
        json={
            "brokerName": name,
            "masterBrokerId": 1,
            "masterEpoch": 1,
            "syncStateSet": {"syncStateSet": [1, 2], "syncStateSetEpoch": 1},
        },
    )
    env = await node.ok("POST", f"{ADMIN}/sync-state-data", token=True, json={"brokerNames": [name, "unknown"]})
    data = M.SyncStateDataAnswer.model_validate(env).body
    assert data is not None and set(data.replicasInfoTable) == {name}
    info = data.replicasInfoTable[name]
    assert info.masterBrokerId == 1 and [r.brokerId for r in info.inSyncReplicas] == [1, 2]
    assert all(r.alive for r in info.inSyncReplicas) and info.notInSyncReplicas == []

    env = await node.ok(
        "POST", f"{ADMIN}/elect-master", token=True, json={"clusterName": "c1", "brokerName": name, "brokerId": 2}
    )
    assert env["header"]["masterBrokerId"] == 2 and env["header"]["masterEpoch"] == 2
    M.ElectMasterAnswer.model_validate(env)


async def test_admin_broker_sets_lists_every_set_of_a_cluster_or_of_all(node: Node, unique: Counter) -> None:
    cluster, other = unique("cluster"), unique("cluster")
    a, b, c = unique("broker"), unique("broker"), unique("broker")
    await register(node, cluster, a, 1, "10.4.0.1:10911")
    await register(node, cluster, b, 1, "10.4.0.2:10911")
    await register(node, other, c, 1, "10.4.0.3:10911")
    await node.ok(
        "POST", "/api/v1/controller/elect-master", json={"clusterName": cluster, "brokerName": a, "brokerId": 1}
    )

    env = await node.ok("GET", f"{ADMIN}/broker-sets?clusterName={cluster}", token=True)
    table = M.SyncStateDataAnswer.model_validate(env).body.replicasInfoTable  # type: ignore[union-attr]
    assert list(table) == sorted([a, b])
    assert table[a].masterBrokerId == 1 and [r.brokerId for r in table[a].inSyncReplicas] == [1]
    assert table[b].masterBrokerId is None and [r.brokerAddress for r in table[b].notInSyncReplicas] == [
        "10.4.0.2:10911"
    ]
    # the same rows as 1006 asked by name
    named = await node.ok("POST", f"{ADMIN}/sync-state-data", token=True, json={"brokerNames": [a, b]})
    assert env["body"] == named["body"]

    everything = (await node.ok("GET", f"{ADMIN}/broker-sets", token=True))["body"]["replicasInfoTable"]
    assert {a, b, c} <= set(everything)
    empty = await node.ok("GET", f"{ADMIN}/broker-sets?clusterName={unique('cluster')}", token=True)
    assert (empty["code"], empty["body"]) == (0, {"replicasInfoTable": {}})
    r = await node.client.get(f"{ADMIN}/broker-sets")  # admin endpoints need the token
    assert r.status_code == 401


async def test_admin_clean_broker_metadata(node: Node, unique: Counter) -> None:
    name = unique("broker")
    await register(node, "c1", name, 1, "10.2.0.1:10911")
    await node.ok(
        "POST", "/api/v1/controller/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1}
    )
    clean = {"clusterName": "c1", "brokerName": name}
    env = await node.ok(
        "POST",
        f"{ADMIN}/clean-broker-metadata",
        token=True,
        json=clean,
        code=C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
    )
    assert "still alive" in env["remark"]
    env = await node.ok(
        "POST", f"{ADMIN}/clean-broker-metadata", token=True, json={**clean, "isCleanLivingBroker": True}
    )
    M.EmptyAnswer.model_validate(env)
    await node.ok(
        "POST",
        "/api/v1/controller/replica-info",
        json={"brokerName": name},
        code=C.CONTROLLER_BROKER_METADATA_NOT_EXIST,
    )
    env = await node.ok(
        "POST",
        f"{ADMIN}/clean-broker-metadata",
        token=True,
        json={"brokerName": name, "brokerControllerIdsToClean": "1;x"},
        code=C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
    )
    assert "NumberFormatException" in env["remark"]


async def test_config_get_shows_local_and_replicated_keys(node: Node) -> None:
    env = await node.ok("GET", f"{ADMIN}/config", token=True)
    body = M.ConfigAnswer.model_validate(env).body
    assert body is not None
    assert {k: body[k] for k in LOCAL_CONFIG} == LOCAL_CONFIG
    assert set(body) >= {"enableElectUncleanMaster", "electMasterMaxRetryCount", "notifyBrokerRoleChanged"}
    assert all(isinstance(v, str) for v in body.values())


async def test_config_put_replicates_the_decision_keys(node: Node) -> None:
    before = node.last_index()
    env = await node.ok(
        "PUT", f"{ADMIN}/config", token=True, json={"enableElectUncleanMaster": "true", "electMasterMaxRetryCount": "5"}
    )
    M.EmptyAnswer.model_validate(env)
    assert node.last_index() == before + 1
    assert node.service.sm.config.enable_elect_unclean_master is True
    body = (await node.ok("GET", f"{ADMIN}/config", token=True))["body"]
    assert body["enableElectUncleanMaster"] == "true" and body["electMasterMaxRetryCount"] == "5"
    # JSON values of the key's type are accepted too.
    await node.ok(
        "PUT", f"{ADMIN}/config", token=True, json={"enableElectUncleanMaster": False, "electMasterMaxRetryCount": 3}
    )
    assert node.service.sm.config_values() == {
        "electMasterMaxRetryCount": 3,
        "enableElectUncleanMaster": False,
        "notifyBrokerRoleChanged": True,
    }


@pytest.mark.parametrize("key", ["configStorePath", "configBlackList", "rocketmqHome", "jRaftServerId"])
async def test_config_put_black_listed_key_is_no_permission(node: Node, key: str) -> None:
    before = node.last_index()
    env = await node.ok(
        "PUT", f"{ADMIN}/config", token=True, json={key: "/x", "electMasterMaxRetryCount": "4"}, code=C.NO_PERMISSION
    )
    assert env["remark"] == "Can not update config in black list."
    assert node.last_index() == before


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"noSuchKey": "1"}, "noSuchKey", "not a controller config key"),
        ({"scanNotActiveBrokerInterval": "1000"}, "scanNotActiveBrokerInterval", "node-local"),
        ({"enableElectUncleanMaster": "yes"}, "enableElectUncleanMaster", '"true" or "false"'),
        ({"enableElectUncleanMaster": 1}, "enableElectUncleanMaster", '"true" or "false"'),
        ({"electMasterMaxRetryCount": "-1"}, "electMasterMaxRetryCount", "an integer from 0"),
        ({"electMasterMaxRetryCount": 1.5}, "electMasterMaxRetryCount", "an integer from 0"),
        ({"electMasterMaxRetryCount": True}, "electMasterMaxRetryCount", "an integer from 0"),
        ({"electMasterMaxRetryCount": None}, "electMasterMaxRetryCount", "an integer from 0"),
        ({"electMasterMaxRetryCount": str(2**31)}, "electMasterMaxRetryCount", "an integer from 0"),
        ({}, "body", "no config key"),
    ],
)
async def test_config_put_refusals_name_the_key(node: Node, body: dict[str, object], field: str, says: str) -> None:
    err = await assert_rejected(node, "PUT", f"{ADMIN}/config", 422, json=body)
    assert err["error"] == "VALIDATION_ERROR"
    assert err["errors"][0]["field"] == field and says in err["errors"][0]["message"], err


async def test_config_put_names_every_bad_key(node: Node) -> None:
    err = await assert_rejected(
        node, "PUT", f"{ADMIN}/config", 422, json={"a": "1", "enableElectUncleanMaster": "true", "b": "2"}
    )
    assert [e["field"] for e in err["errors"]] == ["a", "b"]

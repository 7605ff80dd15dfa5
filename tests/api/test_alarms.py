"""NOSPACE on one node with its real data directory: the store passes controllerStoreQuotaBytes, the node
raises the replicated alarm, the leader refuses writes that grow the state (naming the alarm, nothing
proposed) but not heartbeats of known brokers, reads, deletions or the scan; disarming while still full
raises it again at the next check; freed and disarmed, writes go through. GET /api/v1/alarms, the metrics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statemachine import codes as C
from tests.api.harness import Node, register, scrape, solo, value

pytestmark = pytest.mark.anyio
QUOTA = 256 << 20  # above the preallocated 64 MiB WAL segment and the snapshot


def heartbeat(node: Node, name: str, broker_id: int, addr: str) -> dict[str, object]:
    return {"clusterName": "ac", "brokerName": name, "brokerAddr": addr, "brokerId": broker_id}


async def test_nospace_refuses_growing_writes_until_freed_and_disarmed(tmp_path: Path) -> None:
    async with solo(tmp_path, on_disk=True, store_quota_bytes=QUOTA, alarm_check_interval_ms=3_600_000) as node:
        svc = node.service
        await register(node, "ac", "known", 1, "10.9.1.1:10911")
        assert await svc.check_store() is None and (await node.ok("GET", "/api/v1/alarms", token=True))["body"] == {
            "alarms": []
        }
        filler = Path(svc.opts.node.data_dir) / "filler.bin"
        with open(filler, "wb") as f:
            f.truncate(QUOTA)  # sparse: counts in the store's bytes, costs no disk
        reason = await svc.check_store()
        assert reason is not None and "> controllerStoreQuotaBytes 268435456" in reason
        (row,) = (await node.ok("GET", "/api/v1/alarms", token=True))["body"]["alarms"]
        assert (row["alarm"], row["memberId"], row["detail"]) == ("NOSPACE", svc.id, reason)
        samples = await scrape(node)
        assert value(samples, "controllerd_alarm_active", alarm="NOSPACE") == 1
        assert value(samples, "controllerd_alarm_raised", alarm="NOSPACE", member=svc.id) == 1
        assert value(samples, "controllerd_store_checks_total", outcome="ok") == 1
        assert value(samples, "controllerd_store_checks_total", outcome="nospace") == 1

        # A new registration is refused naming the alarm, and nothing is proposed.
        before = node.last_index()
        env = await node.ok(
            "POST",
            "/api/v1/controller/next-broker-id",
            json={"clusterName": "ac", "brokerName": "new"},
        )  # a read: answered
        env = await node.ok(
            "POST",
            "/api/v1/controller/apply-broker-id",
            json={"clusterName": "ac", "brokerName": "new", "appliedBrokerId": 1, "registerCheckCode": "10.9.2.1:1;1"},
            code=C.SYSTEM_ERROR,
        )
        assert env["remark"].startswith(f"alarm NOSPACE raised by {svc.id} (store ")
        assert "CONTROLLER_APPLY_BROKER_ID refused" in env["remark"] and "rmqctl alarm disarm" in env["remark"]
        env = await node.ok("PUT", "/api/v1/kv/ns/k", json={"value": "v"}, code=C.SYSTEM_ERROR)
        assert "PUT_KV_CONFIG refused" in env["remark"]
        unknown = heartbeat(node, "stranger", 1, "10.9.3.1:10911")
        await node.ok("POST", "/api/v1/controller/heartbeat", json=unknown, code=C.SYSTEM_ERROR)
        assert node.last_index() == before
        # Heartbeats of known brokers, reads and deletions go on.
        await node.ok("POST", "/api/v1/controller/heartbeat", json=heartbeat(node, "known", 1, "10.9.1.1:10911"))
        await node.ok("POST", "/api/v1/controller/replica-info", json={"brokerName": "known"})
        await node.ok("DELETE", "/api/v1/kv/ns/k")
        assert node.last_index() == before + 2

        # Disarmed while still full: raised again at the next check.
        env = await node.ok("POST", "/api/v1/alarms/disarm", json={}, token=True)
        assert env["body"]["disarmed"] == [{"alarm": "NOSPACE", "memberId": svc.id}]
        assert await svc.check_store() is not None and svc.raised_alarms("NOSPACE")
        # Freed and disarmed: writes go through again.
        os.unlink(filler)
        await node.ok("POST", "/api/v1/alarms/disarm", json={"alarm": "NOSPACE"}, token=True)
        assert await svc.check_store() is None and svc.raised_alarms("NOSPACE") == []
        await register(node, "ac", "new", 1, "10.9.2.1:10911")
        assert value(await scrape(node), "controllerd_alarm_active", alarm="NOSPACE") == 0


async def test_bad_alarm_and_autopilot_requests_are_422_naming_the_field(tmp_path: Path) -> None:
    async with solo(tmp_path) as node:
        before = node.last_index()
        for path, body, field in (
            ("/api/v1/alarms", {"alarm": "FULL", "memberId": "x"}, "alarm"),
            ("/api/v1/alarms", {"alarm": "NOSPACE", "memberId": ""}, "memberId"),
            ("/api/v1/alarms/disarm", {"alarm": "nospace"}, "alarm"),
        ):
            r = await node.call("POST", path, json=body, token=True)
            assert r.status_code == 422 and field in r.text, (path, r.text)
        for field in ("minQuorum", "deadServerSecs", "x"):
            r = await node.call("PUT", "/api/v1/raft/autopilot", json={field: 0}, token=True)
            assert r.status_code == 422 and field in r.text, (field, r.text)
        assert (await node.ok("GET", "/api/v1/raft/autopilot", token=True))["body"]["enabled"] is False
        r = await node.call("GET", "/api/v1/alarms")  # no token
        assert r.status_code == 401
        assert node.last_index() == before

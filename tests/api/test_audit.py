"""The audit log (api/service/audit.py): accepted state-changing admin requests from both front ends, with who,
from where, what and outcome; refused, unauthenticated and read requests are not in it; `rmqctl audit` lists it
and names a damaged record's line and byte offset."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.remoting.client import RemotingClient
from api.remoting.server import RemotingServer
from api.service.acl import sign
from cli.rmqctl import main as rmqctl
from statemachine import codes as C
from tests.api.harness import SETTINGS, solo

pytestmark = pytest.mark.anyio


async def test_both_front_ends_record_accepted_admin_requests_and_rmqctl_lists_them(tmp_path: Path) -> None:
    log_path = tmp_path / "audit" / "audit.log"
    users = tmp_path / "users.properties"
    users.write_text("user.ops.secretKey=s3cret\nuser.ops.role=admin\n")
    settings = replace(SETTINGS, audit_log=str(log_path), remoting_acl_file=str(users))
    async with solo(tmp_path / "node", settings) as n:
        server = RemotingServer(n.service, settings, ("127.0.0.1", 0))
        await server.start()
        client = await RemotingClient.connect("127.0.0.1", server.port)
        try:
            body = b"enableElectUncleanMaster=true\n"
            signed = sign({}, body, "ops", "s3cret")
            assert (await client.request(C.UPDATE_CONTROLLER_CONFIG, signed, body)).code == C.SUCCESS
            unsigned = await client.request(C.CLEAN_BROKER_DATA, {"brokerName": "x"})  # refused: not recorded
            assert unsigned.code == C.NO_PERMISSION
            signed = sign({"brokerName": "nobody", "clusterName": "c"}, None, "ops", "s3cret")
            clean = await client.request(C.CLEAN_BROKER_DATA, signed)  # accepted, failed: recorded with its code
            assert clean.code != C.SUCCESS
            assert (await client.request(1005, {})).code == C.SUCCESS  # a read: not recorded
        finally:
            client.close()
            await server.stop()
        put = {"enableElectUncleanMaster": "false"}
        assert (await n.call("PUT", "/api/v1/admin/config", json=put)).status_code == 401  # no token: not recorded
        await n.ok("PUT", "/api/v1/admin/config", token=True, json=put)
        await n.ok("POST", "/api/v1/admin/sync-state-data", token=True, json={"brokerNames": ["x"]})  # a read
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [(r["frontEnd"], r["who"], r["request"], r["code"]) for r in records] == [
        ("remoting", "ops", "CONTROLLER_UPDATE_CONTROLLER_CONFIG", C.SUCCESS),
        ("remoting", "ops", "CONTROLLER_CLEAN_BROKER_DATA", clean.code),
        ("http", "admin-token", "PUT /api/v1/admin/config", C.SUCCESS),
    ]
    assert records[0]["from"].startswith("127.0.0.1:") and records[0]["fields"]["body"] == body.decode()
    assert "Signature" not in records[1]["fields"] and records[1]["fields"]["brokerName"] == "nobody"
    assert records[1]["remark"] == clean.remark
    assert records[2]["fields"]["body"] == put
    assert stat.S_IMODE(os.stat(log_path).st_mode) == 0o600

    listed = CliRunner().invoke(rmqctl, ["audit", str(log_path), "--who", "ops", "-o", "json"])
    assert listed.exit_code == 0, listed.output
    assert [json.loads(line)["request"] for line in listed.output.splitlines()] == [
        "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
        "CONTROLLER_CLEAN_BROKER_DATA",
    ]
    good = log_path.read_bytes()
    first = len(good.splitlines(keepends=True)[0])
    log_path.write_bytes(good[: first + 10])  # a record cut short, as a crash inside its write would leave it
    damaged = CliRunner().invoke(rmqctl, ["audit", str(log_path)])
    assert damaged.exit_code == 4
    assert f"{log_path}: line 2, byte offset {first}: the last record is cut short" in damaged.output

"""ACL on the remoting port (api/service/acl.py): RocketMQ's AclClientRPCHook signature checked against the users
of controllerAclFile; roles; NO_PERMISSION with a remark and no state change; replayed admin requests refused.
One node and one listener serve every case (module-scoped)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.codec import RemotingCommand
from api.remoting.server import RemotingServer
from api.service.acl import AclFileError, load_users, sign, signature
from statemachine import codes as C
from tests.api.harness import SETTINGS, Counter, solo

pytestmark = pytest.mark.anyio

USERS = """\
user.ops.secretKey=ops-secret
user.ops.role=admin
user.broker-a-ak.secretKey=a-secret
user.broker-a-ak.role=broker
user.broker-a-ak.brokerNames={name}
"""


@dataclass
class World:
    server: RemotingServer
    client: RemotingClient
    acl_file: Path
    name: str  # the broker set broker-a-ak may act for

    async def send(self, code: int, ext: dict[str, object], user: tuple[str, str] | None = None) -> RemotingCommand:
        fields = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in ext.items()}
        if user is not None:
            fields = sign(fields, None, *user)
        return await self.client.request(code, fields)


OPS = ("ops", "ops-secret")
BROKER_A = ("broker-a-ak", "a-secret")


@pytest.fixture(scope="module")
async def world(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("acl")
    acl_file = root / "users.properties"
    name = "acl-a"
    acl_file.write_text(USERS.format(name=name))
    async with solo(root / "node") as n:
        server = RemotingServer(n.service, replace(SETTINGS, remoting_acl_file=str(acl_file)), ("127.0.0.1", 0))
        await server.start()
        client = await RemotingClient.connect("127.0.0.1", server.port)
        try:
            w = World(server, client, acl_file, name)
            # Every test finds the set `name` registered by its own broker user, whichever worker runs it.
            assert await register(w, name, BROKER_A) == C.SUCCESS
            yield w
        finally:
            client.close()
            await server.stop()


async def register(w: World, name: str, user: tuple[str, str] | None) -> int:
    """A broker of set `name` through 1012, 1013, 904 and 1003 signed by `user`; the last answer's code."""
    base: dict[str, object] = {"clusterName": "c1", "brokerName": name}
    steps: tuple[tuple[int, dict[str, object]], ...] = (
        (C.GET_NEXT_BROKER_ID, base),
        (C.APPLY_BROKER_ID, {**base, "appliedBrokerId": 1, "registerCheckCode": "10.0.0.1:10911;1"}),
        (H.BROKER_HEARTBEAT, {**base, "brokerAddr": "10.0.0.1:10911", "brokerId": 1, "heartbeatTimeoutMills": 60000}),
        (C.REGISTER_BROKER, {**base, "brokerId": 1, "brokerAddress": "10.0.0.1:10911"}),
    )
    for code, ext in steps:
        r = await w.send(code, ext, user)
        if r.code != C.SUCCESS:
            return r.code
    return C.SUCCESS


async def replica_info(w: World, name: str) -> int:
    return (await w.send(C.GET_REPLICA_INFO, {"brokerName": name})).code  # a read: never signed


async def test_a_broker_user_acts_for_its_own_set_only(world: World, unique: Counter) -> None:
    assert await replica_info(world, world.name) == C.SUCCESS  # registered by the set's broker user (the fixture)
    elect = {"clusterName": "c1", "brokerName": world.name, "brokerId": 1, "designateElect": False}
    assert (await world.send(C.ELECT_MASTER, elect, BROKER_A)).code == C.SUCCESS
    other = unique("other-set")
    r = await world.send(C.GET_NEXT_BROKER_ID, {"clusterName": "c1", "brokerName": other}, BROKER_A)
    assert r.code == C.NO_PERMISSION and f"broker sets {world.name} only, not '{other}'" in (r.remark or "")
    r = await world.send(C.CLEAN_BROKER_DATA, {"brokerName": world.name, "isCleanLivingBroker": True}, BROKER_A)
    assert r.code == C.NO_PERMISSION and "(role broker) may not send request 1011" in (r.remark or "")
    assert await replica_info(world, world.name) == C.SUCCESS  # nothing was cleaned


async def test_unsigned_and_badly_signed_requests_change_nothing(world: World, unique: Counter) -> None:
    name = unique("open-set")
    assert await register(world, name, None) == C.NO_PERMISSION
    assert await replica_info(world, name) == C.CONTROLLER_BROKER_METADATA_NOT_EXIST  # nothing registered
    r = await world.send(C.CLEAN_BROKER_DATA, {"brokerName": world.name, "isCleanLivingBroker": True})
    assert r.code == C.NO_PERMISSION and "needs a signed request (AccessKey and Signature)" in (r.remark or "")
    r = await world.send(C.CLEAN_BROKER_DATA, {"brokerName": world.name, "isCleanLivingBroker": True}, ("ops", "x"))
    assert r.code == C.NO_PERMISSION and "Signature of AccessKey 'ops' does not match" in (r.remark or "")
    r = await world.send(C.CLEAN_BROKER_DATA, {"brokerName": world.name}, ("nobody", "x"))
    assert r.code == C.NO_PERMISSION and "'nobody' is not a user" in (r.remark or "")
    # a signed request altered on the way (the set name changed after signing)
    fields = sign({"brokerName": "elsewhere", "isCleanLivingBroker": "true"}, None, *OPS)
    r = await world.client.request(C.CLEAN_BROKER_DATA, {**fields, "brokerName": world.name})
    assert r.code == C.NO_PERMISSION
    assert await replica_info(world, world.name) == C.SUCCESS


async def test_an_admin_cleans_once_and_a_replay_is_refused(world: World, unique: Counter) -> None:
    name = unique("clean-set")
    world.acl_file.write_text(USERS.format(name=f"{world.name},{name}"))  # reloaded on change
    assert await register(world, name, BROKER_A) == C.SUCCESS
    fields = sign({"clusterName": "c1", "brokerName": name, "isCleanLivingBroker": "true"}, None, *OPS)
    assert (await world.client.request(C.CLEAN_BROKER_DATA, fields)).code == C.SUCCESS
    assert await replica_info(world, name) == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert await register(world, name, BROKER_A) == C.SUCCESS  # the set again, then the same signed request
    r = await world.client.request(C.CLEAN_BROKER_DATA, fields)
    assert r.code == C.NO_PERMISSION and "replayed signed request" in (r.remark or "")
    assert await replica_info(world, name) == C.SUCCESS  # the replay cleaned nothing


def test_the_signature_is_rocketmqs_and_the_users_file_is_checked(tmp_path: Path) -> None:
    # AclClientRPCHook: the values (not the keys) in key order, then the body; HmacSHA1, Base64.
    # Reference: printf 'a-keyxy-valuebody' | openssl dgst -sha1 -hmac secret -binary | base64
    assert signature({"b": "y-value", "AccessKey": "a-key", "Signature": "ignored", "a": "x"}, b"body", "secret") == (
        signature({"AccessKey": "a-key", "a": "x", "b": "y-value"}, b"body", "secret")
    )
    assert (
        signature({"AccessKey": "a-key", "a": "x", "b": "y-value"}, b"body", "secret") == "R1U0PUtcTMWbYqc4oEt6+ggMCoM="
    )
    bad = tmp_path / "users.properties"
    bad.write_text("user.x.secretKey=s\nuser.x.role=root\n")
    with pytest.raises(AclFileError, match=rf"{bad}:2: user x: role 'root' must be one of admin, broker"):
        load_users(str(bad))
    bad.write_text("user.b.secretKey=s\nuser.b.role=broker\n")
    with pytest.raises(AclFileError, match="role broker but no brokerNames"):
        load_users(str(bad))
    bad.write_text("secretKey=s\n")
    with pytest.raises(AclFileError, match=rf"{bad}:1: secretKey: expected user.<accessKey>"):
        load_users(str(bad))

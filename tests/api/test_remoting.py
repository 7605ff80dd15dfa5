"""The remoting listener on real services over loopback TCP: the HTTP fidelity scenarios of test_controller
(and mqadmin's 1006/1002-designate/1011 ones of test_admin_kv) replayed as RemotingCommands (through an adapter that turns each HTTP call into its RocketMQ code, header and
body), errors and limits, concurrency, the close-channel path, and a 3-node failover."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient, broker_request, envelope
from api.remoting.server import FORWARDED_BY, RemotingServer
from api.service import ControllerService
from raft.testing.cluster import free_ports
from statemachine import codes as C
from statemachine import commands
from tests.api.harness import (
    GROUP_RAFT,
    SETTINGS,
    Counter,
    Node,
    build,
    register,
    remoting_group,
    running,
    service_options,
    settled,
    solo,
)
from tests.api.test_admin_kv import (  # noqa: F401  (mqadmin's scenarios, over remoting)
    test_admin_clean_broker_metadata,
    test_admin_sync_state_data_and_designated_election,
)
from tests.api.test_controller import (  # noqa: F401  (the HTTP scenarios, collected here over remoting)
    test_alter_sync_state_set_and_fencing,
    test_apply_broker_id_conflict,
    test_elect_master_without_broker_id_is_the_controller_trigger,
    test_heartbeat_is_replicated_with_the_leader_clock_and_starts_the_scan_guard,
    test_register_flow_elect_and_replica_info,
    test_unknown_broker_set_codes,
)
from tests.api.test_remoting_codec import INTERNAL

pytestmark = pytest.mark.anyio

# mqadmin's calls the HTTP API serves under /api/v1/admin: getSyncStateSet (1006), electMaster (1002 with
# designateElect), cleanBrokerMetadata (1011). The broker requests are api.remoting.client.ROUTES.
ADMIN_PATHS = {
    "/api/v1/admin/sync-state-data": C.GET_SYNC_STATE_DATA,
    "/api/v1/admin/elect-master": C.ELECT_MASTER,
    "/api/v1/admin/clean-broker-metadata": C.CLEAN_BROKER_DATA,
}


async def connect(addr: str) -> RemotingClient:
    """A client connected to `addr` ("host:port")."""
    host, port = addr.rsplit(":", 1)
    return await RemotingClient.connect(host, int(port))


class RemotingNode:
    """The `Node` of the HTTP tests, speaking remoting: `ok(method, path, json=...)` sends the request's fields
    as extFields (the SyncStateSet of 1001 as the body)."""

    def __init__(self, service: ControllerService, server: RemotingServer, client: RemotingClient) -> None:
        self.service, self.server, self.client = service, server, client

    @property
    def id(self) -> str:
        return self.service.id

    def last_index(self) -> int:
        return int(self.service.node.status().last_index)

    async def ok(
        self, method: str, path: str, *, code: int = 0, json: dict[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        fields: dict[str, Any] = dict(json or {})
        body = None
        if path in ADMIN_PATHS:
            rcode = ADMIN_PATHS[path]
            if rcode == C.GET_SYNC_STATE_DATA:  # mqadmin sends the names as the body, a JSON array
                body = _json.dumps(fields.pop("brokerNames")).encode()
            if rcode == C.ELECT_MASTER:  # an admin trigger: designateElect, brokerId the wanted one
                fields = {"clusterName": "", "designateElect": True} | fields
        else:
            rcode, fields, body = broker_request(path.removeprefix("/api/v1/controller/"), fields)
        resp = await self.client.request(rcode, fields, body)
        # Only the fields of the Java response header class (or of 2007) travel in extFields.
        schema = H.NOT_LEADER if resp.code == C.CONTROLLER_NOT_LEADER else H.RESPONSE.get(rcode, ())
        assert set(resp.ext_fields) <= {name for name, _, _ in schema}, resp.ext_fields
        env = envelope(rcode, resp)
        assert env["code"] == code, env
        return env


_json = json


@pytest.fixture(scope="module", params=[codec.ROCKETMQ, codec.JSON], ids=["rocketmq", "json"])
async def node(
    request: pytest.FixtureRequest, anyio_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RemotingNode]:
    async with solo(tmp_path_factory.mktemp("remoting")) as n:
        server = RemotingServer(n.service, SETTINGS, ("127.0.0.1", 0))
        await server.start()
        client = await RemotingClient.connect("127.0.0.1", server.port, request.param)
        try:
            yield RemotingNode(n.service, server, client)
        finally:
            client.close()
            await server.stop()


async def wait_for(nodes: list[Any], cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Until `cond` holds, woken by the nodes' processing rounds (Node._wait_for), not by a timer."""
    waits = [asyncio.ensure_future(n.service.node._wait_for(cond)) for n in nodes]
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        assert done, f"not within {timeout} s"
    finally:
        for w in waits:
            w.cancel()


async def test_unknown_code_is_not_supported_as_java_answers(node: RemotingNode) -> None:
    """Codes RocketMQ's controller registers no processor for, including the jRaft-internal 1014-1018 sent with
    their Java request classes' fields (test_remoting_codec's golden frames): 3 with RocketMQ's remark, in the
    request's serialization, and nothing proposed."""
    before = node.last_index()
    for code, ext in [(1, {}), (1007, {}), (1008, {}), (9999, {}), *sorted(INTERNAL.items())]:
        r = await node.client.request(code, ext)
        assert (r.code, r.remark, r.is_response, r.serialize_type, r.ext_fields) == (
            C.REQUEST_CODE_NOT_SUPPORTED,
            f" request type {code} not supported",
            True,
            node.client.serialize_type,
            {},
        )
    assert node.last_index() == before


async def test_malformed_fields_and_bodies_are_answered_with_a_remark(node: RemotingNode) -> None:
    r = await node.client.request(C.GET_NEXT_BROKER_ID, {"clusterName": "c1"})
    assert r.code == C.SYSTEM_ERROR and r.remark == "the custom field <brokerName> is null"
    # @CFNotNull holds even where the Java field has an initial value (Java's client always sends it).
    r = await node.client.request(C.ELECT_MASTER, {"clusterName": "c1", "brokerName": "b", "brokerId": 1})
    assert r.code == C.SYSTEM_ERROR and r.remark == "the custom field <designateElect> is null"
    r = await node.client.request(
        C.APPLY_BROKER_ID, {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "x1", "registerCheckCode": "a;1"}
    )
    assert r.code == C.SYSTEM_ERROR and r.remark is not None and "appliedBrokerId" in r.remark
    r = await node.client.request(C.ALTER_SYNC_STATE_SET, {"brokerName": "b"}, b"{nope")
    assert r.code == C.SYSTEM_ERROR and r.remark is not None and "body is not JSON" in r.remark
    r = await node.client.request(C.GET_SYNC_STATE_DATA, body=b"[" * 100_000)  # Python's json recursion limit
    assert (r.code, r.remark) == (
        C.SYSTEM_ERROR,
        "the body is not JSON (a JSON array of brokerNames): nested too deeply",
    )
    # A header nested past the recursion limit: answered, not a dropped connection.
    fut = asyncio.get_running_loop().create_future()
    header = b"[" * 100_000
    node.client.pending[0] = fut
    node.client.send_raw(struct.pack(">ii", 4 + len(header), len(header)) + header)
    bad = await asyncio.wait_for(fut, 10)
    assert bad.code == C.SYSTEM_ERROR and "nested too deeply" in bad.remark
    r = await node.client.request(H.BROKER_HEARTBEAT, {"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1"})
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
    # An unreadable JSON header: answered (opaque 0), the stream stays usable.
    fut = asyncio.get_running_loop().create_future()
    header = b"{broken"
    node.client.pending[0] = fut
    node.client.send_raw(struct.pack(">ii", 4 + len(header), len(header)) + header)
    bad = await asyncio.wait_for(fut, 10)
    assert bad.code == C.SYSTEM_ERROR and "not valid JSON" in bad.remark
    assert (await node.client.request(H.GET_METADATA_INFO)).code == C.SUCCESS


async def test_a_broken_stream_closes_only_that_connection(node: RemotingNode) -> None:
    other = await RemotingClient.connect("127.0.0.1", node.server.port)
    other.send_raw(struct.pack(">i", 2))  # a length below 4
    await asyncio.wait_for(other.closed, 10)
    big = await RemotingClient.connect("127.0.0.1", node.server.port)
    big.send_raw(struct.pack(">i", codec.DEFAULT_MAX_FRAME + 1))
    await asyncio.wait_for(big.closed, 10)
    assert (await node.client.request(H.GET_METADATA_INFO)).code == C.SUCCESS


async def test_the_max_frame_size_is_the_configured_one(node: RemotingNode) -> None:
    limit = 65536  # controllerRemotingMaxFrameBytes's minimum, far below the 16 MiB default
    server = RemotingServer(node.service, replace(SETTINGS, remoting_max_frame_bytes=limit), ("127.0.0.1", 0))
    await server.start()
    try:

        def frame(total: int) -> bytes:  # a 1005 whose length field says `total`, padded with body bytes
            header = len(codec.encode(codec.RemotingCommand(H.GET_METADATA_INFO, opaque=1))) - 8
            data = codec.encode(codec.RemotingCommand(H.GET_METADATA_INFO, opaque=1, body=b"x" * (total - 4 - header)))
            assert struct.unpack_from(">i", data)[0] == total
            return data

        at_limit = await RemotingClient.connect("127.0.0.1", server.port)
        fut = asyncio.get_running_loop().create_future()
        at_limit.pending[1] = fut
        at_limit.send_raw(frame(limit))
        assert (await asyncio.wait_for(fut, 10)).code == C.SUCCESS  # a frame of exactly the limit is served
        over = await RemotingClient.connect("127.0.0.1", server.port)
        over.send_raw(frame(limit + 1))
        await asyncio.wait_for(over.closed, 10)  # one byte more: the stream is out of step, closed
        assert not at_limit.closed.done()
        assert (await at_limit.request(H.GET_METADATA_INFO)).code == C.SUCCESS
        at_limit.close()
    finally:
        await server.stop()


async def test_many_in_flight_answered_as_they_complete(node: RemotingNode, unique: Counter) -> None:
    name = unique("busy")
    beats = [
        node.client.request_nowait(
            H.BROKER_HEARTBEAT, {"clusterName": "c", "brokerName": name, "brokerAddr": f"a:{i}", "brokerId": i}
        )
        for i in range(1, 201)
    ]
    meta = node.client.request_nowait(H.GET_METADATA_INFO)
    first = await asyncio.wait_for(asyncio.wait([meta, *beats], return_when=asyncio.FIRST_COMPLETED), 10)
    assert meta in first[0]  # the local answer did not wait behind 200 commits
    answers = await asyncio.wait_for(asyncio.gather(*beats), 10)
    assert [a.code for a in answers] == [C.SUCCESS] * 200
    assert len({a.opaque for a in answers}) == 200
    assert all(("c", name, i) in node.service.sm.live.table for i in range(1, 201))


async def test_oneway_heartbeat_is_served_unanswered(node: RemotingNode, unique: Counter) -> None:
    name = unique("oneway")
    unmatched = len(node.client.unmatched)
    node.client.request_nowait(
        H.BROKER_HEARTBEAT, {"clusterName": "c", "brokerName": name, "brokerAddr": "a:1", "brokerId": 1}, oneway=True
    )
    await wait_for([node], lambda: ("c", name, 1) in node.service.sm.live.table)
    assert not node.client.pending
    # A later request on the same connection commits after the oneway one, so its answer comes after any
    # answer to the oneway one would have: none came.
    beat = {"clusterName": "c", "brokerName": name, "brokerAddr": "a:1", "brokerId": 1}
    assert (await node.client.request(H.BROKER_HEARTBEAT, beat)).code == C.SUCCESS
    assert node.client.unmatched[unmatched:] == []


async def test_metadata_config_and_sync_state_data(node: RemotingNode, unique: Counter) -> None:
    meta = envelope(H.GET_METADATA_INFO, await node.client.request(H.GET_METADATA_INFO))
    assert meta["header"]["isLeader"] is True and meta["header"]["controllerLeaderId"] == node.id
    cfg = await node.client.request(H.GET_CONTROLLER_CONFIG)
    assert cfg.code == C.SUCCESS and cfg.body is not None and b"enableElectUncleanMaster=false\n" in cfg.body
    r = await node.client.request(C.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/tmp/x\n")
    assert (r.code, r.remark) == (C.NO_PERMISSION, "Can not update config in black list.")
    r = await node.client.request(C.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=maybe\n")
    assert r.code == C.SYSTEM_ERROR and r.remark is not None and "enableElectUncleanMaster" in r.remark
    assert (await node.client.request(C.UPDATE_CONTROLLER_CONFIG, body=b"electMasterMaxRetryCount=4\n")).code == 0
    cfg = await node.client.request(H.GET_CONTROLLER_CONFIG)
    assert cfg.body is not None and b"electMasterMaxRetryCount=4\n" in cfg.body
    name = unique("ssd")
    for path, fields in (
        ("next-broker-id", {"clusterName": "c", "brokerName": name}),
        (
            "apply-broker-id",
            {"clusterName": "c", "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "h:1;1"},
        ),
    ):
        await node.ok("POST", f"/api/v1/controller/{path}", json=fields)
    r = await node.client.request(C.GET_SYNC_STATE_DATA, body=json.dumps([name]).encode())
    assert r.body is not None
    table = json.loads(r.body)["replicasInfoTable"]
    assert r.code == C.SUCCESS and table[name]["masterEpoch"] == 0
    r = await node.client.request(
        C.CLEAN_BROKER_DATA, {"clusterName": "c", "brokerName": name, "isCleanLivingBroker": True}
    )
    assert r.code == C.SUCCESS and name not in node.service.sm.manager.replicas.sets


async def test_a_closed_connection_goes_through_close_channel(node: RemotingNode, unique: Counter) -> None:
    name = unique("closing")
    broker = await RemotingClient.connect("127.0.0.1", node.server.port)
    r = await broker.request(
        H.BROKER_HEARTBEAT,
        {"clusterName": "c", "brokerName": name, "brokerAddr": "a:1", "brokerId": 1, "heartbeatTimeoutMills": 600000},
    )
    assert r.code == C.SUCCESS and ("c", name, 1) in node.service.sm.live.table
    before = node.last_index()
    broker.close()
    await wait_for([node], lambda: ("c", name, 1) not in node.service.sm.live.table)
    assert node.last_index() > before  # removed through the log (1014), not locally


async def test_the_scan_closes_the_connection_of_a_broker_it_expired(node: RemotingNode, unique: Counter) -> None:
    """RocketMQ's leader closes an expired broker's channel (scanNotActiveBroker); the broker is not also sent
    through close-channel (1014): the scan's entry is the last one about it."""
    name = unique("expired")
    identity = ("c", name, 1)
    broker = await RemotingClient.connect("127.0.0.1", node.server.port)
    beat = {"clusterName": "c", "brokerName": name, "brokerAddr": "a:1", "brokerId": 1, "heartbeatTimeoutMills": 1}
    assert (await broker.request(H.BROKER_HEARTBEAT, beat)).code == C.SUCCESS
    assert identity in node.server.channels
    while identity in node.service.sm.live.table:  # each scan commits after the 1 ms timeout passed
        await node.service.write(commands.check_not_active_broker, "CHECK_NOT_ACTIVE_BROKER")
    await asyncio.wait_for(broker.closed, 10)
    assert identity not in node.server.channels  # forgotten before the close: channel_closed proposes no 1014
    assert (await node.client.request(H.GET_METADATA_INFO)).code == C.SUCCESS  # others' connections unaffected


async def test_closing_an_older_connection_leaves_a_reconnected_broker_alone(
    node: RemotingNode, unique: Counter
) -> None:
    """A broker that heartbeats on a newer connection is not closed when its older one goes (Java keeps the
    channel per broker identity); the newer one's close then removes it."""
    name = unique("moved")
    identity = ("c", name, 1)
    beat = {"clusterName": "c", "brokerName": name, "brokerAddr": "a:1", "brokerId": 1, "heartbeatTimeoutMills": 600000}
    old = await RemotingClient.connect("127.0.0.1", node.server.port)
    new = await RemotingClient.connect("127.0.0.1", node.server.port)
    assert (await old.request(H.BROKER_HEARTBEAT, beat)).code == C.SUCCESS
    old_conn = node.server.channels[identity]
    assert (await new.request(H.BROKER_HEARTBEAT, beat)).code == C.SUCCESS
    lost = asyncio.Event()
    seen_lost = old_conn.connection_lost

    def connection_lost(exc: Exception | None) -> None:
        seen_lost(exc)
        lost.set()

    old_conn.connection_lost = connection_lost  # type: ignore[method-assign]
    old.close()
    await asyncio.wait_for(lost.wait(), 10)
    # A read through the log on the newer connection: a 1014 proposed at the close would have applied before it.
    r = await new.request(C.GET_SYNC_STATE_DATA, body=json.dumps([name]).encode())
    assert r.code == C.SUCCESS and identity in node.service.sm.live.table
    new.close()
    await wait_for([node], lambda: identity not in node.service.sm.live.table)


# ---------------------------------------------------------------------------------- 3 nodes, failover


async def test_three_node_failover_with_remoting_brokers(tmp_path: Path) -> None:
    async with remoting_group(tmp_path) as g:
        nodes, rports, remoting = g.nodes, g.rports, g.remoting
        ids = list(remoting)
        leader = await settled(nodes)
        follower = next(n for n in nodes if n is not leader)
        # A broker asks a follower: 2007 names the leader's remoting address, as 1005 does.
        fclient = await RemotingClient.connect("127.0.0.1", rports[nodes.index(follower)])
        r = await fclient.request(C.GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"})
        assert r.code == C.CONTROLLER_NOT_LEADER and r.ext_fields["controllerLeaderAddress"] == remoting[leader.id]
        assert r.remark == "The controller is not in leader state"  # RocketMQ's remark (issue 12, bug 8)
        meta = await fclient.request(H.GET_METADATA_INFO)
        assert meta.ext_fields["controllerLeaderAddress"] == remoting[leader.id]
        assert meta.ext_fields["peers"] == "".join(f"{remoting[i]};" for i in sorted(ids, key=ids.index)) or set(
            meta.ext_fields["peers"].rstrip(";").split(";")
        ) == set(remoting.values())
        fclient.close()
        # mqadmin updateControllerConfig -a <every address>: 1009 to each node in turn, and any answer but
        # SUCCESS fails the command. A follower passes it to the leader (the keys are replicated), once.
        followers_first = sorted(nodes, key=lambda n: n is leader)
        for value, n in enumerate(followers_first, start=5):
            c = await connect(remoting[n.id])
            r = await c.request(C.UPDATE_CONTROLLER_CONFIG, body=f"electMasterMaxRetryCount={value}\n".encode())
            assert (r.code, r.remark) == (C.SUCCESS, None), (n.id, r)
            c.close()
        await wait_for(
            nodes, lambda: all(n.service.replicated_config()["electMasterMaxRetryCount"] == 7 for n in nodes)
        )
        c = await connect(remoting[follower.id])
        r = await c.request(C.UPDATE_CONTROLLER_CONFIG, {FORWARDED_BY: leader.id}, b"electMasterMaxRetryCount=3\n")
        assert r.code == C.CONTROLLER_NOT_LEADER  # already forwarded once: not passed on again
        c.close()
        # Discovery: every node's HTTP status and peers list name each member's remoting address.
        for n in nodes:
            for path in ("/api/v1/raft/status", "/api/v1/raft/peers"):
                rows = (await n.ok("GET", path, token=True))["body"]["peers"]
                assert {p["id"]: p["remotingAddress"] for p in rows} == remoting, (n.id, path)

        async def broker_step(fn: Callable[[RemotingClient], Awaitable[Any]]) -> Any:
            """Run fn against the leader found through 1005, as a broker's controller client does."""
            async with asyncio.timeout(20):
                while True:
                    for addr in remoting.values():
                        try:
                            c = await connect(addr)
                        except OSError:
                            continue
                        try:
                            m = await c.request(H.GET_METADATA_INFO, timeout=2)
                            lead = m.ext_fields.get("controllerLeaderAddress")
                            if m.ext_fields.get("isLeader") == "true":
                                result = await fn(c)
                                if result is not None:
                                    return result
                            elif lead is None:
                                pass
                        except (ConnectionError, TimeoutError):
                            pass
                        finally:
                            c.close()
                    await asyncio.sleep(0.05)

        async def register(c: RemotingClient, bid: int) -> Any:
            addr = f"10.1.0.{bid}:10911"
            for code, ext in (
                (
                    C.APPLY_BROKER_ID,
                    {
                        "clusterName": "c",
                        "brokerName": "b",
                        "appliedBrokerId": bid,
                        "registerCheckCode": f"{addr};1",
                    },
                ),
                (
                    H.BROKER_HEARTBEAT,
                    {
                        "clusterName": "c",
                        "brokerName": "b",
                        "brokerAddr": addr,
                        "brokerId": bid,
                        "heartbeatTimeoutMills": 600000,
                    },
                ),
                (
                    C.REGISTER_BROKER,
                    {"clusterName": "c", "brokerName": "b", "brokerId": bid, "brokerAddress": addr},
                ),
            ):
                r = await c.request(code, ext)
                if r.code != C.SUCCESS:
                    return None
            return True

        await broker_step(lambda c: register(c, 1))
        await broker_step(lambda c: register(c, 2))

        async def elect(c: RemotingClient) -> Any:
            r = await c.request(
                C.ELECT_MASTER, {"clusterName": "c", "brokerName": "b", "brokerId": 1, "designateElect": False}
            )
            return r if r.code in (C.SUCCESS, C.CONTROLLER_MASTER_STILL_EXIST) else None

        assert (await broker_step(elect)).ext_fields["masterBrokerId"] == "1"
        # The leader goes away; the brokers find the new one and keep heartbeating and reading.
        await leader.service.stop(transfer=False)
        rest = [n for n in nodes if n is not leader]
        await wait_for(rest, lambda: any(n.service.node.is_leader() for n in rest), 20)

        async def beat_and_read(c: RemotingClient) -> Any:
            r = await c.request(
                H.BROKER_HEARTBEAT,
                {"clusterName": "c", "brokerName": "b", "brokerAddr": "10.1.0.2:10911", "brokerId": 2},
            )
            if r.code != C.SUCCESS:
                return None
            r = await c.request(C.GET_REPLICA_INFO, {"brokerName": "b"})
            return r if r.code == C.SUCCESS else None

        r = await broker_step(beat_and_read)
        assert r.ext_fields["masterBrokerId"] == "1" and json.loads(r.body)["syncStateSet"] == [1]


async def test_controller_server_serves_remoting_beside_http_and_names_a_busy_port(tmp_path: Path) -> None:
    from api.server import ControllerServer

    raft, http, rport = free_ports(3)
    opts = service_options(tmp_path, [raft], 0, GROUP_RAFT)
    server = ControllerServer(opts, SETTINGS, ("127.0.0.1", http), remoting_address=("127.0.0.1", rport))
    await server.start()
    try:
        await server.service.node.wait_for_leader(10)
        client = await RemotingClient.connect("127.0.0.1", rport, codec.JSON)
        r = await client.request(
            H.BROKER_HEARTBEAT, {"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1", "brokerId": 1}
        )
        assert (r.code, r.remark, r.serialize_type) == (C.SUCCESS, "Heart beat success", codec.JSON)
        client.close()
        # A second node on the same remoting port fails to start, saying which address.
        (raft2, http2) = free_ports(2)
        other = ControllerServer(
            service_options(tmp_path / "o", [raft2], 0, GROUP_RAFT),
            SETTINGS,
            ("127.0.0.1", http2),
            remoting_address=("127.0.0.1", rport),
        )
        with pytest.raises(OSError, match=f"cannot listen for remoting on 127.0.0.1:{rport}"):
            await other.start()
        assert not other.service.started
    finally:
        await server.stop()


async def test_an_election_pushes_notify_role_changed_to_the_alive_brokers(node: RemotingNode, unique: Counter) -> None:
    """1008 travels on a connection the controller opens to the broker's registered address, oneway."""
    got: asyncio.Queue[codec.RemotingCommand] = asyncio.Queue()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()
        for frame in codec.FrameDecoder().feed(data):
            got.put_nowait(codec.decode(frame))
        writer.close()

    listener = await asyncio.start_server(broker, "127.0.0.1", 0)
    addr = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    name = unique("notified")
    try:
        for path, fields in (
            ("next-broker-id", {"clusterName": "c", "brokerName": name}),
            (
                "apply-broker-id",
                {"clusterName": "c", "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": f"{addr};1"},
            ),
            (
                "heartbeat",
                {
                    "clusterName": "c",
                    "brokerName": name,
                    "brokerAddr": addr,
                    "brokerId": 1,
                    "heartbeatTimeoutMills": 600000,
                },
            ),
            ("register-broker", {"clusterName": "c", "brokerName": name, "brokerId": 1, "brokerAddress": addr}),
            ("elect-master", {"clusterName": "c", "brokerName": name, "brokerId": 1}),
        ):
            await node.ok("POST", f"/api/v1/controller/{path}", json=fields)
        note = await asyncio.wait_for(got.get(), 10)
    finally:
        listener.close()
    assert (note.code, note.is_oneway) == (1008, True)
    assert note.ext_fields == {
        "masterAddress": addr,
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
        "masterBrokerId": "1",
    }
    assert note.body is not None and json.loads(note.body) == {"syncStateSet": [1], "syncStateSetEpoch": 1}


def _expectation(stream: bytes) -> str:
    """What the listener must do with `stream` followed by a probe: "closes" (a broken length), "incomplete"
    (it waits for the rest of a frame, as TCP framing must) or "answers"."""
    d = codec.FrameDecoder()
    try:
        d.feed(stream)
    except codec.FrameError:
        return "closes"
    return "incomplete" if d.pending else "answers"


async def test_fuzzed_frames_never_crash_or_hang_the_listener(
    node: RemotingNode, caplog: pytest.LogCaptureFixture
) -> None:
    """Seeded random streams: valid lengths around random headers (both types, random codes and ext fields) and
    raw garbage. Each connection is answered or closed; the listener keeps serving and logs no exception."""
    import random

    rng = random.Random(17)
    seen = {"answers": 0, "closes": 0, "incomplete": 0}
    codes = [904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013, 1014, rng.randrange(-32768, 32767)]
    for round_ in range(60):
        c = await RemotingClient.connect("127.0.0.1", node.server.port, round_ % 2)
        if round_ % 3 == 0:
            mangled = rng.randbytes(rng.randrange(1, 200))
            c.send_raw(mangled)
        else:
            ext = {
                rng.choice(["brokerName", "clusterName", "brokerId", "masterEpoch", "designateElect", "x"]): rng.choice(
                    ["", "1", "-1", "9" * 30, "true", "b\u00e9", "1;2"]
                )
                for _ in range(rng.randrange(4))
            }
            body = rng.choice([None, b"[]", b"{", b'{"syncStateSet":[1],"syncStateSetEpoch":"x"}', rng.randbytes(9)])
            frame = codec.encode(
                codec.RemotingCommand(rng.choice(codes), 5, 0, None, ext, body, serialize_type=round_ % 2)
            )
            cut = rng.randrange(4, len(frame) + 1)
            mangled = frame[:cut] + rng.randbytes(rng.randrange(3)) if round_ % 5 == 0 else frame
            c.send_raw(mangled)
        expect = _expectation(mangled)
        if expect == "answers":
            assert (await c.request(H.GET_METADATA_INFO)).code == C.SUCCESS
        elif expect == "closes":
            await asyncio.wait_for(c.closed, 10)
        seen[expect] += 1
        c.close()
    assert seen["answers"] and seen["closes"] and seen["incomplete"], seen
    assert (await node.client.request(H.GET_METADATA_INFO)).code == C.SUCCESS
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]


async def test_a_member_added_at_runtime_is_served_at_its_remoting_address_also_after_a_restart(tmp_path: Path) -> None:
    """Issue 17: the remoting address of a member added by POST /api/v1/raft/peers travels in the CONF entry, so
    every member (and one restarted with a config that never named it) serves it in 1005 and in its 2007."""
    ports, rports = free_ports(4), free_ports(4)
    ids = [f"127.0.0.1:{p}" for p in ports]
    remoting = {i: f"127.0.0.1:{p}" for i, p in zip(ids, rports, strict=True)}
    boot = {i: remoting[i] for i in ids[:3]}  # the three original files name only each other
    opts = [service_options(tmp_path, ports[:3], i, GROUP_RAFT, remoting_addresses=boot) for i in range(3)]
    opts.append(service_options(tmp_path, ports, 3, GROUP_RAFT, voters=tuple(ids[:3]), remoting_addresses=remoting))
    nodes: list[Any] = [None] * 4
    servers: list[RemotingServer | None] = [None] * 4

    async def start(i: int) -> None:
        nodes[i] = build(opts[i])
        server = servers[i] = RemotingServer(nodes[i].service, SETTINGS, ("127.0.0.1", rports[i]))
        await server.start()
        await nodes[i].service.start()

    async def stop(i: int) -> None:
        if (server := servers[i]) is not None:
            await server.stop()
        if nodes[i] is not None:
            await nodes[i].client.aclose()
            await nodes[i].service.stop(transfer=False)
        nodes[i] = servers[i] = None

    async def ask(i: int, code: int, ext: dict[str, Any] | None = None) -> codec.RemotingCommand:
        client = await RemotingClient.connect("127.0.0.1", rports[i])
        try:
            return await client.request(code, ext)
        finally:
            client.close()

    new = ids[3]
    try:
        for i in range(4):
            await start(i)
        leader = await settled(nodes[:3])
        env = await leader.ok(
            "POST",
            "/api/v1/raft/peers",
            token=True,
            json={"id": new, "httpAddress": "127.0.0.2:1", "remotingAddress": remoting[new]},
        )
        assert new in env["body"]["voters"]
        for n in nodes[:3]:  # woken by each of the node's processing rounds, no polling
            await asyncio.wait_for(n.service.node._wait_for(lambda n=n: new in n.service.node.status().voters), 10)
        for i in range(3):
            meta = (await ask(i, H.GET_METADATA_INFO)).ext_fields
            assert set(meta["peers"].rstrip(";").split(";")) == set(remoting.values()), i
            peers = {p.id: p.remoting_address for p in nodes[i].service.peers()}
            assert peers[new] == remoting[new], i
        # A follower restarts from its own data and its file, which never named the new member.
        f = next(i for i in range(3) if nodes[i] is not leader)
        await stop(f)
        await start(f)
        await nodes[f].service.node.wait_for_leader(10)
        meta = (await ask(f, H.GET_METADATA_INFO)).ext_fields
        assert set(meta["peers"].rstrip(";").split(";")) == set(remoting.values())
        # The new member leads: the restarted node names its remoting address to brokers (1005 and 2007).
        await leader.ok("POST", "/api/v1/raft/transfer-leader", token=True, json={"to": new})
        await asyncio.wait_for(nodes[f].service.node._wait_for(lambda: nodes[f].service.node.leader_id() == new), 10)
        assert (await ask(f, H.GET_METADATA_INFO)).ext_fields["controllerLeaderAddress"] == remoting[new]
        r = await ask(f, C.GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"})
        assert r.code == C.CONTROLLER_NOT_LEADER and r.ext_fields["controllerLeaderAddress"] == remoting[new]
    finally:
        for i in range(4):
            await stop(i)


async def test_an_http_client_on_the_remoting_port_is_redirected_and_warned_once_per_host(
    node: RemotingNode, caplog: pytest.LogCaptureFixture
) -> None:
    """jRaftControllerRPCAddr was the HTTP address in earlier builds: an HTTP request there gets 307 to the node's
    controllerHttpAddr entry, and the log a warning saying what to change (once per client host, then info)."""
    http = node.service.http_address(node.id)

    async def get(path: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", node.server.port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), 10)  # the listener closes after answering
        writer.close()
        return answer

    node.server.http_clients_warned.clear()
    with caplog.at_level("INFO", logger="controllerd.remoting"):
        for _ in range(2):
            head = (await get("/api/v1/raft/status?x=1")).split(b"\r\n\r\n")[0].decode()
            assert head.startswith("HTTP/1.1 307 ") and f"Location: http://{http}/api/v1/raft/status?x=1" in head
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"at controllerHttpAddr {http}" in warned[0], warned
    assert (await node.client.request(H.GET_METADATA_INFO)).code == C.SUCCESS  # brokers' connections unaffected


async def test_idle_connections_close_and_their_brokers_go_through_close_channel(
    node: RemotingNode, unique: Counter
) -> None:
    """As Netty's IdleStateHandler (serverChannelMaxIdleTimeSeconds): a connection silent for the idle time is
    closed, a half-sent frame included, and a broker that heartbeated on it is removed through 1014."""
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0), idle_timeout_s=0.2)
    await server.start()
    try:
        name = unique("idle")
        broker = await RemotingClient.connect("127.0.0.1", server.port)
        r = await broker.request(
            H.BROKER_HEARTBEAT,
            {
                "clusterName": "c",
                "brokerName": name,
                "brokerAddr": "a:1",
                "brokerId": 1,
                "heartbeatTimeoutMills": 600000,
            },
        )
        assert r.code == C.SUCCESS and ("c", name, 1) in node.service.sm.live.table
        half = await RemotingClient.connect("127.0.0.1", server.port)
        half.send_raw(codec.encode(codec.RemotingCommand(H.GET_METADATA_INFO, 1))[:9])
        await asyncio.wait_for(asyncio.gather(broker.closed, half.closed), 10)
        await wait_for([node], lambda: ("c", name, 1) not in node.service.sm.live.table)
        assert not server.connections
    finally:
        await server.stop()
    assert not node.client.closed.done()  # the default listener (120 s) kept its connection


async def test_without_a_leader_1005_and_2007_name_no_leader(tmp_path: Path) -> None:
    """A broker's controller client takes controllerLeaderAddress from 1005 only when it is not empty, else asks
    the next controller: with no leader known the address is left out and the id is "" (JRaftController)."""
    ports, rports = free_ports(3), free_ports(3)
    ids = [f"127.0.0.1:{p}" for p in ports]
    remoting = {i: f"127.0.0.1:{p}" for i, p in zip(ids, rports, strict=True)}
    alone = build(service_options(tmp_path, ports, 0, GROUP_RAFT, remoting_addresses=remoting))  # 1 of 3 running
    server = RemotingServer(alone.service, SETTINGS, ("127.0.0.1", rports[0]))
    await server.start()
    try:
        async with running([alone]):
            client = await RemotingClient.connect("127.0.0.1", rports[0])
            meta = await client.request(H.GET_METADATA_INFO)
            assert meta.code == C.SUCCESS and meta.ext_fields == {
                "group": alone.service.opts.group_id,
                "controllerLeaderId": "",
                "isLeader": "false",
                "peers": "".join(f"{remoting[i]};" for i in sorted(ids)),
            }
            r = await client.request(C.GET_NEXT_BROKER_ID, {"clusterName": "c", "brokerName": "b"})
            assert (r.code, r.ext_fields) == (C.CONTROLLER_NOT_LEADER, {})
            client.close()
    finally:
        await server.stop()


async def test_a_connection_with_too_many_unanswered_requests_stops_being_read(
    node: RemotingNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading pauses once a connection has MAX_IN_FLIGHT unanswered requests and resumes below half of it;
    every request is then answered. (The requests of one read are all taken: the pause stops the next read.)"""
    from api.remoting import server as S

    monkeypatch.setattr(S, "MAX_IN_FLIGHT", 4)
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0))
    release = asyncio.Event()
    started: list[int] = []
    answer = server.dispatcher.answer

    async def slow(cmd: codec.RemotingCommand, peer: str = "?", cert_name: str | None = None) -> codec.RemotingCommand:
        if cmd.code == H.GET_METADATA_INFO:  # held until released; other codes pass
            started.append(cmd.opaque)
            await release.wait()
        return await answer(cmd, peer, cert_name)

    server.dispatcher.answer = slow  # type: ignore[method-assign]
    await server.start()
    try:
        client = await RemotingClient.connect("127.0.0.1", server.port)
        replies = [client.request_nowait(H.GET_METADATA_INFO) for _ in range(4)]
        await asyncio.wait_for(node.service.node._wait_for(lambda: len(started) == 4), 10)
        conn = next(c for c in server.connections)
        assert conn.paused
        replies += [client.request_nowait(H.GET_METADATA_INFO) for _ in range(6)]
        # A round trip on another connection of the same listener: the six frames were already in the paused
        # connection's socket buffer (loopback), and were not read.
        other = await RemotingClient.connect("127.0.0.1", server.port)
        assert (await other.request(H.GET_CONTROLLER_CONFIG)).code == C.SUCCESS
        assert len(started) == 4 and conn.in_flight == 4
        release.set()
        answers = await asyncio.wait_for(asyncio.gather(*replies), 10)
        assert [a.code for a in answers] == [C.SUCCESS] * 10 and sorted(started) == list(range(1, 11))
        assert not conn.paused and conn.in_flight == 0
        client.close()
        other.close()
    finally:
        await server.stop()


async def test_simulated_brokers_over_remoting_through_a_controller_failover(tmp_path: Path) -> None:
    """tools.brokersim's brokers speaking remoting to a 3-node group: they register, elect and fill their
    SyncStateSet; the controller leader dies and they carry on with the new one (found by 2007 and the next
    address, as a broker's controller client); then their master dies and the new controller leader elects one
    from the SyncStateSet, with no acknowledged write lost."""
    from tests.daemon.demo import FAST  # the short broker timeouts of the process-level failover tests
    from tools.brokersim.sim import Simulator

    changed = asyncio.Event()

    async def until(what: str, predicate: Callable[[], Any], timeout: float) -> Any:
        """The first truthy predicate(), re-checked at each simulator event (and every 0.1 s: writes are
        acknowledged without events)."""
        async with asyncio.timeout(timeout):
            while not (value := predicate()):
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 0.1)
        assert value, what
        return value

    async with remoting_group(tmp_path, scan_interval_ms=300, first_scan_delay_ms=0) as g:
        nodes, servers, remoting = g.nodes, g.servers, g.remoting
        sim = Simulator(
            list(remoting.values()),
            1,
            3,
            FAST,
            base_port=free_ports(1)[0],
            on_event=lambda e: changed.set(),
            remoting=True,
        )
        try:
            leader = await settled(nodes)
            await sim.start()
            group = sim.sets["broker-a"]

            def settled_master() -> Any:
                m = group.master()
                return m if m is not None and len(m.sync_set) == 3 and len(group.acked) > 0 else None

            old = await until("broker-a settled with 3 in sync", settled_master, 20)
            assert sim.client.leader == remoting[leader.id]
            # The controller leader goes; the brokers keep being served, by the new leader.
            await servers[nodes.index(leader)].stop()
            await leader.service.stop(transfer=False)
            rest = [n for n in nodes if n is not leader]
            await wait_for(rest, lambda: any(n.service.node.is_leader() for n in rest), 20)
            new_leader = next(n for n in rest if n.service.node.is_leader())
            acked = len(group.acked)
            await until(
                "served by the new controller leader",
                lambda: sim.client.leader == remoting[new_leader.id] and len(group.acked) > acked + 5,
                20,
            )
            # The broker master dies: the new controller leader's scan elects a master from the SyncStateSet.
            in_sync, epoch = set(old.sync_set), old.master_epoch
            old.kill()
            new = await until(
                "a new broker master",
                lambda: (m := group.master()) is not None and m.master_epoch > epoch and m,
                20,
            )
            assert new.id in in_sync and new.id != old.id
            assert group.lost(new) == []
            info = await new_leader.ok("POST", "/api/v1/controller/replica-info", json={"brokerName": "broker-a"})
            assert info["header"]["masterBrokerId"] == new.id
        finally:
            await sim.stop()


async def test_a_huge_refused_value_is_quoted_short_and_an_answer_too_big_to_encode_is_still_answered(
    node: RemotingNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remark quotes 64 characters of a refused value and its length (4.2 MB of NULs quoted in full would not
    fit a header's 24-bit length: the request was never answered). An answer that cannot be encoded anyway is
    replaced by SYSTEM_ERROR saying so, never left waiting."""
    client = await RemotingClient.connect("127.0.0.1", node.server.port, codec.ROCKETMQ)
    try:
        bad = "\x00" * 4_200_000
        r = await client.request(
            C.APPLY_BROKER_ID,
            {"clusterName": "c", "brokerName": "b", "appliedBrokerId": bad, "registerCheckCode": "a;1"},
        )
        assert (r.code, r.remark) == (
            C.SYSTEM_ERROR,
            f"the custom field <appliedBrokerId> is not a Long: {bad[:64]!r}... (4200000 characters)",
        )
        answer = node.server.dispatcher.answer

        async def oversized(
            cmd: codec.RemotingCommand, peer: str = "?", cert_name: str | None = None
        ) -> codec.RemotingCommand:
            return (await answer(cmd, peer, cert_name)).response(C.SUCCESS, "x" * (codec.MAX_HEADER + 1))

        monkeypatch.setattr(node.server.dispatcher, "answer", oversized)
        r = await client.request(H.GET_METADATA_INFO)
        assert r.code == C.SYSTEM_ERROR and r.remark is not None
        assert r.remark.startswith("the answer could not be encoded: header of ")
    finally:
        client.close()


async def flood_unread(
    node: RemotingNode, server: RemotingServer, client: RemotingClient
) -> tuple[Any, list[asyncio.Future[codec.RemotingCommand]]]:
    """The client stops reading (small socket buffers on both ends) and sends 2,000 requests: the listener's
    answers pile up. Returns the listener's side of the connection and the pending replies.

    The count is not tight on purpose: the shrunk buffers do not take back the receive window the connection
    already advertised (64 KiB and more), so the kernel still takes that much of the answers before the
    listener's own buffer fills. 300 answers (140 bytes each, 42 KB) were sometimes all taken (a fresh-clone run,
    2026-11-29); 2,000 are 280 KB."""
    assert client.transport is not None
    client.transport.pause_reading()
    client.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await asyncio.wait_for(node.service.node._wait_for(lambda: len(server.connections) == 1), 10)
    (conn,) = server.connections
    assert conn.transport is not None
    conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    conn.transport.set_write_buffer_limits(high=4096)
    return conn, [client.request_nowait(H.GET_METADATA_INFO) for _ in range(2000)]


async def test_stopping_does_not_wait_for_a_client_that_does_not_read(node: RemotingNode) -> None:
    """A listener stopping with answers still unsent to a client that does not read drops that connection
    instead of waiting to flush them (a graceful close would wait forever, and so would controllerd's stop)."""
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0))
    await server.start()
    client = await RemotingClient.connect("127.0.0.1", server.port)
    try:
        conn, replies = await flood_unread(node, server, client)
        assert client.transport is not None
        await asyncio.wait_for(node.service.node._wait_for(lambda: conn.write_blocked), 10)
        await asyncio.wait_for(server.stop(), 5)
        assert server.connections == set()
        client.transport.resume_reading()
        results = await asyncio.gather(*replies, return_exceptions=True)
        assert any(isinstance(r, BaseException) for r in results)  # the unsent answers never came
    finally:
        client.close()


async def test_a_client_that_does_not_read_its_answers_stops_being_read(node: RemotingNode) -> None:
    """Answers piling up unread (the transport's write buffer above its high-water mark) pause reading that
    connection, so its requests wait in the socket instead of growing the listener's memory; once the client
    reads again every request is answered."""
    server = RemotingServer(node.service, SETTINGS, ("127.0.0.1", 0))
    await server.start()
    try:
        client = await RemotingClient.connect("127.0.0.1", server.port)
        conn, replies = await flood_unread(node, server, client)
        assert client.transport is not None
        await asyncio.wait_for(node.service.node._wait_for(lambda: conn.write_blocked and conn.paused), 10)
        assert not conn.transport.is_reading()
        # The client reads again, with socket buffers of the usual size.
        client.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        client.transport.resume_reading()
        answers = await asyncio.wait_for(asyncio.gather(*replies), 20)
        assert {a.code for a in answers} == {C.SUCCESS} and not conn.write_blocked and not conn.paused
        client.close()
    finally:
        await server.stop()


async def test_a_refused_alter_sync_state_set_carries_new_sync_state_set_epoch_0(
    node: RemotingNode, unique: Counter
) -> None:
    """AlterSyncStateSetResponseHeader.newSyncStateSetEpoch is a Java `int`: RocketMQ's JRaftController sends it
    on every refused 1001, as "0" (seen by tests/interop/test_differential.py against RocketMQ 5.5.0)."""
    name = unique("refused")
    http_like = cast(Node, node)  # register() drives a harness Node; a RemotingNode answers the same calls
    await register(http_like, "c1", name, 1, "10.0.9.1:10911")
    await register(http_like, "c1", name, 2, "10.0.9.2:10911")
    await node.ok(
        "POST", "/api/v1/controller/elect-master", json={"clusterName": "c1", "brokerName": name, "brokerId": 1}
    )
    ext = {"brokerName": name, "masterBrokerId": 1, "masterEpoch": 1}
    for ids, epoch, master, code in (
        ([1], 0, 1, C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # the set it already is
        ([1, 2], 0, 1, C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ([1, 2], 1, 2, C.CONTROLLER_INVALID_MASTER),
    ):
        body = json.dumps({"syncStateSet": ids, "syncStateSetEpoch": epoch}).encode()
        r = await node.client.request(C.ALTER_SYNC_STATE_SET, ext | {"masterBrokerId": master}, body)
        assert (r.code, r.ext_fields, r.body) == (code, {"newSyncStateSetEpoch": "0"}, None), r


async def test_a_broker_registering_over_remoting_during_nospace_gets_the_alarm_named(node: RemotingNode) -> None:
    """The same gate as HTTP (api/service/alarms.py): a broker's CONTROLLER_APPLY_BROKER_ID is refused with
    SYSTEM_ERROR naming the alarm and the member, and nothing is proposed; disarmed, it goes through."""
    raised = await node.service.raise_alarm("NOSPACE", "store 3 GiB > controllerStoreQuotaBytes 2 GiB")
    assert raised.code == C.SUCCESS
    try:
        before = node.last_index()
        fields = {"clusterName": "ns-c", "brokerName": "ns-b", "appliedBrokerId": "1", "registerCheckCode": "h:1;1"}
        r = await node.client.request(C.APPLY_BROKER_ID, fields)
        assert r.code == C.SYSTEM_ERROR and r.remark is not None
        assert r.remark.startswith(f"alarm NOSPACE raised by {node.id} (store 3 GiB > controllerStoreQuotaBytes 2 GiB)")
        assert node.last_index() == before
    finally:
        assert (await node.service.disarm_alarm()).code == C.SUCCESS
    assert (await node.client.request(C.APPLY_BROKER_ID, fields)).code == C.SUCCESS

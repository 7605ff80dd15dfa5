"""The simulated brokers' clients (tools/brokersim/client.py, HTTP and remoting) follow the leader: a 2007 naming the leader
is followed at once and remembered, a dead node is skipped, and a request no node serves answers None with
the reason (a broker never exits on an unreachable controller)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest

from api.remoting import codec
from raft.testing.cluster import free_ports
from tools.brokersim.client import AsyncControllerClient, RemotingControllerClient

pytestmark = pytest.mark.anyio

A, B, C = "127.0.0.1:9770", "127.0.0.1:9771", "127.0.0.1:9772"


def envelope(code: int = 0, **header: object) -> dict:
    return {"code": code, "codeName": "X", "remark": None, "header": header or None, "body": None}


async def test_a_2007_is_followed_to_the_named_leader_and_a_dead_node_is_skipped() -> None:
    asked: list[str] = []
    leader = {"now": B}

    def handler(request: httpx.Request) -> httpx.Response:
        node = f"{request.url.host}:{request.url.port}"
        asked.append(node)
        if node == C:
            raise httpx.ConnectError("refused")
        if node != leader["now"]:
            return httpx.Response(200, json=envelope(2007, controllerLeaderAddress=leader["now"]))
        return httpx.Response(200, json=envelope())

    client = AsyncControllerClient([A, C, B], transport=httpx.MockTransport(handler))
    try:
        reply = await client.post("/api/v1/controller/heartbeat", {})
        assert reply is not None and reply.node == B
        assert asked == [A, B] and client.leader == B
        asked.clear()
        reply = await client.post("/api/v1/controller/heartbeat", {})
        assert reply is not None and reply.node == B
        assert asked == [B]  # the leader is asked first
        asked.clear()
        leader["now"] = A  # a new leader: B answers 2007 naming it
        reply = await client.post("/api/v1/controller/heartbeat", {})
        assert reply is not None and reply.node == A
        assert asked == [B, A]
    finally:
        await client.aclose()


async def test_no_node_serving_answers_none_with_the_reason() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": "UNAVAILABLE", "message": "not committed"})

    client = AsyncControllerClient([A], timeout_s=0.2, transport=httpx.MockTransport(handler))
    try:
        assert await client.post("/api/v1/controller/heartbeat", {}) is None
        assert client.last_problem.startswith(f"{A}: HTTP 503")
    finally:
        await client.aclose()


async def test_the_remoting_client_follows_a_2007_skips_a_dead_node_and_sends_java_fields() -> None:
    """The same leader following over RocketMQ remoting: a request is a RemotingCommand with the Java header's
    fields, a 2007 naming the leader is followed at once, a refused connection moves on."""
    got: list[tuple[str, codec.RemotingCommand]] = []
    servers = []
    leader_port = [0]

    def serve(name: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            decoder = codec.FrameDecoder()
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    req = codec.decode(frame)
                    got.append((name, req))
                    if name == "leader":
                        resp = req.response(
                            0, None, {"masterBrokerId": "1"}, b'{"syncStateSet":[1],"syncStateSetEpoch":1}'
                        )
                    else:
                        named = {"controllerLeaderAddress": f"127.0.0.1:{leader_port[0]}"}
                        resp = req.response(2007, "The controller is not in leader state", named)
                    writer.write(codec.encode(resp))
            writer.close()

        return handle

    for name in ("follower", "leader"):
        servers.append(await asyncio.start_server(serve(name), "127.0.0.1", 0))
    follower, leader = (f"127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers)
    leader_port[0] = servers[1].sockets[0].getsockname()[1]
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    client = RemotingControllerClient([dead, follower, leader])
    try:
        reply = await client.send(("replica-info", {"brokerName": "b"}))
        assert reply is not None and reply.node == leader and client.leader == leader
        assert reply.header == {"masterBrokerId": 1, "masterAddress": None, "masterEpoch": None}
        assert reply.body == {"syncStateSet": [1], "syncStateSetEpoch": 1}
        assert [(n, r.code, r.ext_fields) for n, r in got] == [
            ("follower", 1004, {"brokerName": "b"}),
            ("leader", 1004, {"brokerName": "b"}),
        ]
        got.clear()
        await client.send(("elect-master", {"clusterName": "c", "brokerName": "b", "brokerId": 2}))
        assert [(n, r.code, r.ext_fields) for n, r in got] == [
            ("leader", 1002, {"clusterName": "c", "brokerName": "b", "brokerId": "2", "designateElect": "false"})
        ]
    finally:
        await client.aclose()
        for s in servers:
            s.close()

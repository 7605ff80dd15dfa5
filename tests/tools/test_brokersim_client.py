"""The simulated brokers' client (tools/brokersim/client.py) follows the leader: a 2007 naming the leader
is followed at once and remembered, a dead node is skipped, and a request no node serves answers None with
the reason (a broker never exits on an unreachable controller)."""

from __future__ import annotations

import httpx
import pytest

from tools.brokersim.client import AsyncControllerClient

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
        assert (await client.post("/api/v1/controller/heartbeat", {})).node == B
        assert asked == [A, B] and client.leader == B
        asked.clear()
        assert (await client.post("/api/v1/controller/heartbeat", {})).node == B
        assert asked == [B]  # the leader is asked first
        asked.clear()
        leader["now"] = A  # a new leader: B answers 2007 naming it
        assert (await client.post("/api/v1/controller/heartbeat", {})).node == A
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

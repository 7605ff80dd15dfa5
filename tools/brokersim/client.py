"""The simulated brokers' clients, following the leader as rmqctl's client does: over the HTTP API
(`AsyncControllerClient`, httpx's AsyncClient) or, as a real broker, over RocketMQ remoting to the
jRaftControllerRPCAddr entries (`RemotingControllerClient`: one connection per node, many requests in flight).

A request goes to the last node that served one (the leader, usually); a 2007 names the leader and the request
is sent there at once; a refused connection, a timeout or a 503 moves on to the next address; after a round
in which no node served it, a short pause and another round, until the request's deadline. A broker never
exits on an unreachable controller: `post` answers None and the broker tries again at its next period.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from api.remoting.client import RemotingClient, broker_request, envelope
from cli.rmqctl.brokerproto import API, Step
from cli.rmqctl.client import NOT_LEADER, Reply
from statemachine import codes as C


class LeaderFollowingClient(abc.ABC):
    """The leader-following loop both clients share; `_attempt` is one exchange with one node."""

    def __init__(self, addresses: Sequence[str], timeout_s: float) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = [a.rpartition("://")[2] for a in addresses]
        self.timeout_s = timeout_s
        self.leader: str | None = None  # host:port of the node that served the last request
        self.last_problem = ""  # why the last request that no node served was not served

    @abc.abstractmethod
    async def _attempt(self, node: str, path: str, body: Any) -> Reply | str:
        """The node's answer as the HTTP API's envelope, or why there is none."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close every connection."""

    async def send(self, step: Step) -> Reply | None:
        path, body = step
        return await self.post(f"{API}/{path}", body)

    async def post(self, path: str, body: Any) -> Reply | None:
        """The first answer that is not a 2007, or None when no node served it within the timeout (then
        `last_problem` says why, until the caller's next await: the client is shared by many brokers)."""
        deadline = time.monotonic() + self.timeout_s
        pause = 0.05
        problem = f"no answer within {self.timeout_s:g}s"
        while time.monotonic() < deadline:
            queue = ([self.leader] if self.leader else []) + [a for a in self.addresses if a != self.leader]
            tried: set[str] = set()
            while queue and time.monotonic() < deadline:
                node = queue.pop(0)
                if node in tried:
                    continue
                tried.add(node)
                reply = await self._attempt(node, path, body)
                if isinstance(reply, str):
                    problem = reply
                    continue
                if reply.code == NOT_LEADER:
                    named = reply.header.get("controllerLeaderAddress")
                    problem = f"{node}: 2007 not the leader (leader: {named or 'unknown'})"
                    if named:
                        queue.insert(0, str(named).rpartition("://")[2])
                    continue
                self.leader = node
                return reply
            self.leader = None
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)
        self.last_problem = problem
        return None


class AsyncControllerClient(LeaderFollowingClient):
    """Over the HTTP API (controllerHttpAddr)."""

    def __init__(
        self,
        addresses: Sequence[str],
        timeout_s: float = 2.0,
        token: str | None = None,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(addresses, timeout_s)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 1.0)),
            headers=headers,
            limits=limits,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _attempt(self, node: str, path: str, body: Any) -> Reply | str:
        """The answer of an HTTP 200, or why there is none."""
        try:
            response = await self._http.post(f"http://{node}{path}", json=body)
        except httpx.HTTPError as e:
            return f"{node}: {type(e).__name__}"
        if response.status_code != 200:
            # 503 (not committed in time: sent again), or a refusal (401 token, 422 field) the next period repeats
            return f"{node}: HTTP {response.status_code} {response.text[:200]}"
        try:
            return Reply.of(node, response.json())
        except ValueError:
            return f"{node}: an answer that is not JSON"


class RemotingControllerClient(LeaderFollowingClient):
    """Over RocketMQ remoting (jRaftControllerRPCAddr), as a real broker: each request a RemotingCommand with
    the Java header's fields (api.remoting.client.broker_request), on one connection per controller node shared
    by every simulated broker; a connection that fails or times out is closed and opened again when needed."""

    def __init__(self, addresses: Sequence[str], timeout_s: float = 2.0) -> None:
        super().__init__(addresses, timeout_s)
        self._conns: dict[str, RemotingClient] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def aclose(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    async def _connection(self, node: str) -> RemotingClient:
        async with self._locks.setdefault(node, asyncio.Lock()):
            conn = self._conns.get(node)
            if conn is None or conn.closed.done():
                host, _, port = node.rpartition(":")
                connect = RemotingClient.connect(host.strip("[]"), int(port))
                conn = self._conns[node] = await asyncio.wait_for(connect, min(self.timeout_s, 1.0))
            return conn

    async def _attempt(self, node: str, path: str, body: Any) -> Reply | str:
        code, ext, payload = broker_request(path.removeprefix(f"{API}/"), body)
        try:
            conn = await self._connection(node)
            answer = await conn.request(code, ext, payload, timeout=self.timeout_s)
        except (OSError, TimeoutError) as e:  # ConnectionError is an OSError
            dropped = self._conns.pop(node, None)
            if dropped is not None:
                dropped.close()
            return f"{node}: {type(e).__name__}"
        if answer.code == C.SYSTEM_ERROR:  # not committed in time, or a refusal (HTTP's 503 and 422): move on
            return f"{node}: SYSTEM_ERROR {answer.remark}"
        return Reply(node, envelope(code, answer))

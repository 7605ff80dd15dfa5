"""The simulated brokers' HTTP client: httpx's AsyncClient, following the leader as rmqctl's client does.

A request goes to the last node that served one (the leader, usually); a 2007 names the leader and the request
is sent there at once; a refused connection, a timeout or a 503 moves on to the next address; after a round
in which no node served it, a short pause and another round, until the request's deadline. A broker never
exits on an unreachable controller: `post` answers None and the broker tries again at its next period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from cli.rmqctl.brokerproto import API, Step
from cli.rmqctl.client import NOT_LEADER, Reply


class AsyncControllerClient:
    def __init__(
        self,
        addresses: Sequence[str],
        timeout_s: float = 2.0,
        token: str | None = None,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = [a.rpartition("://")[2] for a in addresses]
        self.timeout_s = timeout_s
        self.leader: str | None = None  # host:port of the node that served the last request
        self.last_problem = ""  # why the last request that no node served was not served
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

"""The one path every envelope operation takes: the service call, the envelope, the request metrics.

Route functions only validate (their pydantic models) and build the command; `Gateway.write` / `read`
do the rest: a command constructor's refusal is a 422 (nothing proposed), NotLeaderError the 2007
envelope, UnavailableError a 503 (counted `timeout` when it came after the commit wait), a Result its
envelope with HTTP 200. How an outcome is counted is api.service.observe's, shared with the remoting front
end. The Gateway calls only the service (api.service), never the Raft node.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from api.http.errors import not_leader_envelope
from api.service import ControllerService, NotLeaderError, UnavailableError, checked, observe
from api.service import requests as Q
from api.service.metrics import ControllerMetrics
from api.service.settings import ApiSettings
from statemachine.result import Result
from statemachine.values import JSONObject

Build = Callable[[int], bytes]


def rocketmq(code: int, request_type: str) -> JSONObject:
    """OpenAPI extension of a route serving a RocketMQ request; the error handlers read `x-request-type`."""
    return {"x-rocketmq-code": code, "x-request-type": request_type}


class Gateway:
    def __init__(self, service: ControllerService, settings: ApiSettings, metrics: ControllerMetrics) -> None:
        self.service = service
        self.settings = settings
        self.metrics = metrics

    def require_started(self) -> None:
        if not self.service.started:
            raise UnavailableError("the node has not started")

    async def write(
        self, request_type: str, build: Build, on_result: Callable[[Result], None] | None = None
    ) -> JSONResponse:
        """Propose the command `build(leader's now)` and answer its applied Result."""
        return await self._run(request_type, lambda: self.service.write(checked(build), request_type), on_result)

    async def submit(self, request: Q.Request, on_result: Callable[[Result], None] | None = None) -> JSONResponse:
        """A RocketMQ request (api/service/requests.py) through `service.submit`, the remoting front end's door."""
        return await self._run(request.REQUEST_TYPE, lambda: self.service.submit(request), on_result)

    async def read(self, request_type: str, build: Build) -> JSONResponse:
        """A linearizable read (ReadIndex barrier, then the read command on the local state)."""
        return await self._run(request_type, lambda: self.service.read(checked(build)))

    async def call(self, request_type: str, call: Callable[[], Awaitable[Result]]) -> JSONResponse:
        """Any other service request answering a Result (e.g. `service.broker_sets`), with the same mapping."""
        return await self._run(request_type, call)

    async def local(self, request_type: str | None, answer: Callable[[], Result]) -> JSONResponse:
        """An answer from this node's own state (no consensus): metadata, config, raft status."""
        self.require_started()
        t0 = time.perf_counter()
        result = answer()
        if request_type:
            self.metrics.observe_request(request_type, "success", (time.perf_counter() - t0) * 1e6)
        return JSONResponse(result.to_envelope())

    async def elect(self, request: Q.ElectMaster) -> JSONResponse:
        """1002 from a broker, the controller or an admin; the outcome counts in election_total."""
        name = request.brokerName
        return await self.submit(
            request,
            on_result=lambda r: self.metrics.observe_election(
                self.metrics.cluster_of(name, request.clusterName), name, r.code
            ),
        )

    async def _run(
        self,
        request_type: str,
        call: Callable[[], Awaitable[Result]],
        on_result: Callable[[Result], None] | None = None,
    ) -> JSONResponse:
        t0 = time.perf_counter()
        timeout_s = self.service.opts.request_timeout_s
        try:
            result = await call()
        except NotLeaderError as e:
            observe(self.metrics, request_type, t0, timeout_s, e)
            return JSONResponse(not_leader_envelope(e))
        except UnavailableError as e:
            observe(self.metrics, request_type, t0, timeout_s, e)
            raise
        # A CommandArgumentError goes on to its handler: a 422, counted `failed` there.
        observe(self.metrics, request_type, t0, timeout_s)
        if on_result is not None:
            on_result(result)
        return JSONResponse(result.to_envelope())


async def gateway(request: Request) -> Gateway:  # async: a sync dependency would run in a thread pool
    gw: Gateway = request.app.state.gateway
    return gw


GatewayDep = Annotated[Gateway, Depends(gateway)]

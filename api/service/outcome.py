"""How a request's outcome is counted and how RocketMQ's 2007 reads: one mapping for every front end.

Both front ends (api/http/, api/remoting/) time a service call and hand its outcome here:

* `request_status`: the `request_handle_status` label of `request_total` (RocketMQ's): `success` for a
  Result and for NotLeaderError (RocketMQ answers 2007 as a normal response), `timeout` for an
  UnavailableError that came after the whole commit wait (the outcome is unknown), `failed` for anything
  else; `observe` records it, with the latency of answered requests as RocketMQ does (only on success);
* `not_leader_result`: 2007 as RocketMQ answers it, its fixed remark, who leads in the header (the HTTP
  front end names the leader's HTTP address, the remoting front end its remoting address).
"""

from __future__ import annotations

import time
from typing import Protocol

from api.service.errors import NotLeaderError, UnavailableError
from statemachine import codes as C
from statemachine.result import Result

SUCCESS, FAILED, TIMEOUT = "success", "failed", "timeout"
NOT_LEADER_REMARK = "The controller is not in leader state"  # RocketMQ's remark for 2007


class RequestObserver(Protocol):
    """What counts requests (api.service.metrics.ControllerMetrics)."""

    def observe_request(self, request_type: str, status: str, latency_us: float | None = None) -> None: ...


def request_status(error: BaseException | None, waited_s: float, timeout_s: float) -> str:
    """The metric status of a service call that answered (error None) or raised `error` after `waited_s`."""
    if error is None or isinstance(error, NotLeaderError):
        return SUCCESS
    if isinstance(error, UnavailableError) and waited_s >= timeout_s:
        return TIMEOUT
    return FAILED


def observe(
    metrics: RequestObserver | None,
    request_type: str,
    started: float,
    timeout_s: float,
    error: BaseException | None = None,
) -> None:
    """Count one request that began at `started` (time.perf_counter) and ended now, answered or raising `error`."""
    if metrics is None:
        return
    waited = time.perf_counter() - started
    status = request_status(error, waited, timeout_s)
    metrics.observe_request(request_type, status, waited * 1e6 if status == SUCCESS else None)


def not_leader_result(e: NotLeaderError, address: str | None) -> Result:
    """2007 naming the leader (`controllerLeaderId` null when unknown) at `address` (the front end's)."""
    return Result(
        C.CONTROLLER_NOT_LEADER,
        NOT_LEADER_REMARK,
        header={"controllerLeaderId": e.leader_id or None, "controllerLeaderAddress": address},
    )

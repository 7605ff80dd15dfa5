"""Alarms /api/v1/alarms (bearer token when one is configured; docs/http.md "Alarms").

GET answers this node's applied list (any node, no consensus, as /raft/status); raising and disarming are
proposals, on the leader (2007 elsewhere). A follower's own NOSPACE check raises through POST here on the
leader (`forwarder`), with the node's admin token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Depends, Response

from api.http import models as M
from api.http.auth import require_admin
from api.http.members import member_request
from api.http.routes import PROTECTED_ERRORS
from api.http.routes.common import GatewayDep
from api.service import ControllerService
from api.service.settings import ApiSettings
from statemachine import codes as C
from statemachine.result import Result

REQUEST_TYPE = "CONTROLLER_ALARM"
router = APIRouter(
    prefix="/api/v1/alarms", tags=["alarms"], dependencies=[Depends(require_admin)], responses=PROTECTED_ERRORS
)


@router.get("", response_model=M.AlarmsAnswer)
async def alarm_list(gw: GatewayDep) -> Response:
    """The raised alarms, by alarm and member, as this node has applied them."""
    return await gw.local(None, lambda: Result(C.SUCCESS, body=gw.service.alarm_list()))


@router.post("", response_model=M.AlarmChangedAnswer)
async def raise_alarm(req: M.AlarmRaiseRequest, gw: GatewayDep) -> Response:
    """Raise an alarm for a member (how a follower's NOSPACE check reaches the leader). Leader only."""
    gw.require_started()
    gw.service.require_leader()
    return await gw.call(REQUEST_TYPE, lambda: gw.service.raise_alarm(req.alarm, req.detail, req.memberId))


@router.post("/disarm", response_model=M.AlarmChangedAnswer)
async def disarm(req: M.AlarmDisarmRequest, gw: GatewayDep) -> Response:
    """Disarm an alarm on every member (every alarm without `alarm`): the writes it refused go through again.
    A member whose cause persists raises it again at its next check. Leader only."""
    gw.require_started()
    return await gw.call(REQUEST_TYPE, lambda: gw.service.disarm_alarm(req.alarm or ""))


def forwarder(service: ControllerService, settings: ApiSettings) -> Callable[[str, str, str], Awaitable[Result]]:
    """`service.alarm_forwarder`: POST the alarm to the leader's HTTP address with this node's admin token."""

    async def forward(alarm: str, member: str, detail: str) -> Result:
        leader, address = service.leader()
        if not leader or not address:
            return Result(C.CONTROLLER_NOT_LEADER, "no known leader to raise the alarm on")
        body = {"alarm": alarm, "memberId": member, "detail": detail}
        r = await member_request(settings, "POST", address, "/api/v1/alarms", service.opts.request_timeout_s + 1, body)
        if r.status_code != 200:
            return Result(C.SYSTEM_ERROR, f"the leader at {address} answered HTTP {r.status_code}: {r.text[:200]}")
        env = r.json()
        return Result(env["code"], env.get("remark"), None, env.get("body"))

    return forward

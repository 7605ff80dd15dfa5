"""Admin endpoints /api/v1/admin/... (mqadmin's controller verbs); bearer token when one is configured."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from api.http import models as M
from api.http.auth import require_admin
from api.http.errors import invalid, validation_error
from api.http.routes import PROTECTED_ERRORS
from api.http.routes.common import GatewayDep, rocketmq
from api.service import ControllerService
from api.settings import ApiSettings
from statemachine import codes as C
from statemachine import commands
from statemachine.result import Result

router = APIRouter(prefix="/api/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)],
                   responses=PROTECTED_ERRORS)  # fmt: skip

JAVA_INT_MAX = 2**31 - 1
_INT = re.compile(r"[+-]?[0-9]+")
BLACK_LISTED = Result(C.NO_PERMISSION, "Can not update config in black list.")  # RocketMQ's answer


def _text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def config_view(service: ControllerService, settings: ApiSettings) -> dict[str, str]:
    """GET config: the node-local effective keys, and the replicated keys as the state machine applies them
    (this node's applied state, like RocketMQ's node-local 1010)."""
    out = dict(settings.local_config)
    out.update({k: _text(v) for k, v in service.replicated_config().items()})
    return dict(sorted(out.items()))


def _parse(kind: int, raw: Any) -> Any:
    """A replicated key's value from properties text or the JSON value of its type; None if neither."""
    if kind == commands.BOOL:
        if type(raw) is bool:
            return raw
        if type(raw) is str and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
    elif kind == commands.INT:
        if type(raw) is int:
            return raw
        if type(raw) is str and _INT.fullmatch(raw.strip()):
            return int(raw.strip())
    return None


def plan_config_update(body: Mapping[str, Any], settings: ApiSettings) -> dict[str, Any] | Result:
    """The 1009 changes of a PUT config body, or RocketMQ's 16 answer for a black-listed key. Raises a 422
    naming every key that is unknown, node-local (not changeable at runtime) or has a bad value."""
    if any(k in settings.black_list() for k in body):
        return BLACK_LISTED
    if not body:
        raise invalid("body", "no config key given", type="missing")
    runtime = ", ".join(sorted(commands.CONFIG_KEYS))
    changes: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    for key, raw in body.items():
        kind = commands.CONFIG_KEYS.get(key)
        if kind is None:
            if key in settings.local_config:
                why = f"a node-local key: set it in the node's properties file and restart (only {runtime} change at runtime, through the Raft log)"
            else:
                why = f"not a controller config key that can change at runtime (those are {runtime})"
            errors.append({"field": key, "location": "body", "message": why, "type": "config_key"})
            continue
        value = _parse(kind, raw)
        in_range = value is not None and (kind != commands.INT or 0 <= value <= JAVA_INT_MAX)
        if not in_range or not commands.config_value_ok(key, value):
            want = '"true" or "false"' if kind == commands.BOOL else f"an integer from 0 to {JAVA_INT_MAX}"
            errors.append({"field": key, "location": "body", "message": f"must be {want}, got {raw!r}",
                           "type": "config_value"})  # fmt: skip
            continue
        changes[key] = value
    if errors:
        raise validation_error(errors)
    return changes


@router.post("/sync-state-data", response_model=M.SyncStateDataAnswer,
             openapi_extra=rocketmq(1006, "CONTROLLER_GET_SYNC_STATE_DATA"))  # fmt: skip
async def sync_state_data(req: M.SyncStateDataRequest, gw: GatewayDep) -> Response:
    """1006: masters, epochs and in-sync / not-in-sync replicas of broker sets (a linearizable read)."""
    return await gw.read("CONTROLLER_GET_SYNC_STATE_DATA",
                         lambda now: commands.get_sync_state_data(now, req.brokerNames))  # fmt: skip


@router.get("/broker-sets", response_model=M.SyncStateDataAnswer)
async def broker_sets(
    gw: GatewayDep,
    clusterName: Annotated[M.Text | None, Query(description="only this cluster's broker sets (default: all)")] = None,
) -> Response:
    """Every broker set the controller knows, or those of `clusterName`: 1006's answer (master, epochs, in-sync
    and not-in-sync replicas with liveness) for all of them, a linearizable read. mqadmin's
    `getSyncStateSet -c` resolves a cluster's broker names through the NameServer; this needs none."""
    return await gw.call("CONTROLLER_GET_SYNC_STATE_DATA", lambda: gw.service.broker_sets(clusterName))


@router.post(
    "/elect-master", response_model=M.ElectMasterAnswer, openapi_extra=rocketmq(1002, "CONTROLLER_ELECT_MASTER")
)
async def elect_master(req: M.AdminElectMasterRequest, gw: GatewayDep) -> Response:
    """1002 admin trigger (designateElect=true): make brokerId the master."""
    return await gw.elect(req.clusterName, req.brokerName, req.brokerId, True)


@router.post("/clean-broker-metadata", response_model=M.EmptyAnswer,
             openapi_extra=rocketmq(1011, "CONTROLLER_CLEAN_BROKER_DATA"))  # fmt: skip
async def clean_broker_metadata(req: M.CleanBrokerMetadataRequest, gw: GatewayDep) -> Response:
    """1011: forget a broker set, or some of its ids (brokerControllerIdsToClean "1;2")."""
    return await gw.write("CONTROLLER_CLEAN_BROKER_DATA", lambda now: commands.clean_broker_data(
        now, req.brokerName, cluster_name=req.clusterName, broker_controller_ids_to_clean=req.brokerControllerIdsToClean,
        is_clean_living_broker=req.isCleanLivingBroker))  # fmt: skip


@router.get("/config", response_model=M.ConfigAnswer, openapi_extra=rocketmq(1010, "CONTROLLER_GET_CONTROLLER_CONFIG"))
async def get_config(gw: GatewayDep) -> Response:
    """1010: this node's config as {"key": "value"} text: node-local keys, and the replicated keys as applied."""
    return await gw.local("CONTROLLER_GET_CONTROLLER_CONFIG",
                          lambda: Result(C.SUCCESS, body=config_view(gw.service, gw.settings)))  # fmt: skip


@router.put(
    "/config", response_model=M.EmptyAnswer, openapi_extra=rocketmq(1009, "CONTROLLER_UPDATE_CONTROLLER_CONFIG")
)
async def put_config(req: M.ConfigUpdateRequest, gw: GatewayDep) -> Response:
    """1009: change replicated keys (enableElectUncleanMaster, electMasterMaxRetryCount,
    notifyBrokerRoleChanged) on every node through the Raft log. Black-listed keys answer 16 NO_PERMISSION;
    unknown and node-local keys are a 422."""
    plan = plan_config_update(req.root, gw.settings)
    if isinstance(plan, Result):
        return await gw.local("CONTROLLER_UPDATE_CONTROLLER_CONFIG", lambda: plan)
    return await gw.write("CONTROLLER_UPDATE_CONTROLLER_CONFIG",
                          lambda now: commands.update_controller_config(now, plan))  # fmt: skip

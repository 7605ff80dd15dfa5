"""Admin endpoints /api/v1/admin/... (mqadmin's controller verbs); bearer token when one is configured."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from api.http import models as M
from api.http.auth import require_admin
from api.http.routes import PROTECTED_ERRORS
from api.http.routes.common import GatewayDep, rocketmq
from api.service import requests as Q
from api.service.config_requests import config_view, plan_config_update
from statemachine import codes as C
from statemachine.result import Result

router = APIRouter(
    prefix="/api/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)], responses=PROTECTED_ERRORS
)


@router.post(
    "/sync-state-data",
    response_model=M.SyncStateDataAnswer,
    openapi_extra=rocketmq(1006, "CONTROLLER_GET_SYNC_STATE_DATA"),
)
async def sync_state_data(req: M.SyncStateDataRequest, gw: GatewayDep) -> Response:
    """1006: masters, epochs and in-sync / not-in-sync replicas of broker sets (a linearizable read)."""
    return await gw.submit(Q.of(Q.GetSyncStateData, M.http_values(req)))


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
    return await gw.elect(Q.of(Q.ElectMaster, {**M.http_values(req), "designateElect": True}))


@router.post(
    "/clean-broker-metadata", response_model=M.EmptyAnswer, openapi_extra=rocketmq(1011, "CONTROLLER_CLEAN_BROKER_DATA")
)
async def clean_broker_metadata(req: M.CleanBrokerMetadataRequest, gw: GatewayDep) -> Response:
    """1011: forget a broker set, or some of its ids (brokerControllerIdsToClean "1;2")."""
    return await gw.submit(Q.of(Q.CleanBrokerData, vars(req)))


@router.get("/config", response_model=M.ConfigAnswer, openapi_extra=rocketmq(1010, "CONTROLLER_GET_CONTROLLER_CONFIG"))
async def get_config(gw: GatewayDep) -> Response:
    """1010: this node's config as {"key": "value"} text: node-local keys, and the replicated keys as applied."""
    return await gw.local(
        "CONTROLLER_GET_CONTROLLER_CONFIG", lambda: Result(C.SUCCESS, body=config_view(gw.service, gw.settings))
    )


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
    return await gw.submit(Q.UpdateControllerConfig(changes=plan))

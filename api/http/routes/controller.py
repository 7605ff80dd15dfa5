"""Broker endpoints /api/v1/controller/... (http-api.md): RocketMQ's controller requests over HTTP."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.http import models as M
from api.http.routes import ERRORS
from api.http.routes.common import GatewayDep, rocketmq
from api.service import requests as Q
from statemachine import codes as C
from statemachine.result import Result

router = APIRouter(prefix="/api/v1/controller", tags=["controller"], responses=ERRORS)


@router.post("/heartbeat", response_model=M.HeartbeatAnswer, openapi_extra=rocketmq(904, "CONTROLLER_BROKER_HEARTBEAT"))
async def heartbeat(req: M.HeartbeatRequest, gw: GatewayDep) -> Response:
    """904 BROKER_HEARTBEAT, proposed as 1018 with the leader's receive time as lastUpdateTimestamp."""
    return await gw.submit(Q.of(Q.BrokerHeartbeat, vars(req)))


@router.post(
    "/next-broker-id",
    response_model=M.NextBrokerIdAnswer,
    openapi_extra=rocketmq(1012, "CONTROLLER_GET_NEXT_BROKER_ID"),
)
async def next_broker_id(req: M.NextBrokerIdRequest, gw: GatewayDep) -> Response:
    """1012: the id a new broker should apply for (a linearizable read)."""
    return await gw.submit(Q.of(Q.GetNextBrokerId, vars(req)))


@router.post(
    "/apply-broker-id", response_model=M.ApplyBrokerIdAnswer, openapi_extra=rocketmq(1013, "CONTROLLER_APPLY_BROKER_ID")
)
async def apply_broker_id(req: M.ApplyBrokerIdRequest, gw: GatewayDep) -> Response:
    """1013: claim a broker id with the broker's check code."""
    return await gw.submit(Q.of(Q.ApplyBrokerId, vars(req)))


@router.post(
    "/register-broker",
    response_model=M.RegisterBrokerAnswer,
    openapi_extra=rocketmq(1003, "CONTROLLER_REGISTER_BROKER"),
)
async def register_broker(req: M.RegisterBrokerRequest, gw: GatewayDep) -> Response:
    """1003: register (or re-register) an applied broker id with its address; answers the master if alive."""
    return await gw.submit(Q.of(Q.RegisterBroker, vars(req)))


@router.post(
    "/elect-master", response_model=M.ElectMasterAnswer, openapi_extra=rocketmq(1002, "CONTROLLER_ELECT_MASTER")
)
async def elect_master(req: M.ElectMasterRequest, gw: GatewayDep) -> Response:
    """1002: broker trigger (own brokerId) or controller trigger (no brokerId)."""
    return await gw.elect(Q.of(Q.ElectMaster, M.http_values(req)))


@router.post(
    "/alter-sync-state-set",
    response_model=M.AlterSyncStateSetAnswer,
    openapi_extra=rocketmq(1001, "CONTROLLER_ALTER_SYNC_STATE_SET"),
)
async def alter_sync_state_set(req: M.AlterSyncStateSetRequest, gw: GatewayDep) -> Response:
    """1001: the master reports its new SyncStateSet (fenced by masterEpoch and syncStateSetEpoch)."""
    return await gw.submit(Q.of(Q.AlterSyncStateSet, M.http_values(req)))


@router.post(
    "/replica-info", response_model=M.ReplicaInfoAnswer, openapi_extra=rocketmq(1004, "CONTROLLER_GET_REPLICA_INFO")
)
async def replica_info(req: M.ReplicaInfoRequest, gw: GatewayDep) -> Response:
    """1004: the master and SyncStateSet of a broker set (a linearizable read)."""
    return await gw.submit(Q.of(Q.GetReplicaInfo, vars(req)))


@router.get("/metadata", response_model=M.MetadataAnswer, openapi_extra=rocketmq(1005, "CONTROLLER_GET_METADATA_INFO"))
async def metadata(gw: GatewayDep) -> Response:
    """1005: this node's view of the group and its leader (any node, no consensus)."""
    return await gw.local("CONTROLLER_GET_METADATA_INFO", lambda: Result(C.SUCCESS, header=gw.service.metadata()))

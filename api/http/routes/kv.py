"""KV config endpoints /api/v1/kv/{namespace}/{key}: the replicated namespaced key/value config."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from api.http import models as M
from api.http.routes import ERRORS
from api.http.routes.common import GatewayDep, rocketmq
from statemachine import commands

router = APIRouter(prefix="/api/v1/kv", tags=["kv"], responses=ERRORS)

Namespace = Annotated[M.Text, Path(description="namespace (URL-encoded; no '/')")]
Key = Annotated[M.Text, Path(description="key (URL-encoded; no '/')")]


@router.get("/{namespace}/{key}", response_model=M.KvValueAnswer, openapi_extra=rocketmq(101, "GET_KV_CONFIG"))
async def get_value(namespace: Namespace, key: Key, gw: GatewayDep) -> Response:
    """Read (linearizable). A missing key is code 22 QUERY_NOT_FOUND."""
    return await gw.read("GET_KV_CONFIG", lambda now: commands.kv_get(now, namespace, key))


@router.put("/{namespace}/{key}", response_model=M.KvValueAnswer, openapi_extra=rocketmq(100, "PUT_KV_CONFIG"))
async def put_value(namespace: Namespace, key: Key, req: M.KvPutRequest, gw: GatewayDep) -> Response:
    """Write."""
    return await gw.write("PUT_KV_CONFIG", lambda now: commands.kv_put(now, namespace, key, req.value))


@router.delete("/{namespace}/{key}", response_model=M.KvDeleteAnswer, openapi_extra=rocketmq(102, "DELETE_KV_CONFIG"))
async def delete_value(namespace: Namespace, key: Key, gw: GatewayDep) -> Response:
    """Delete; `deleted` says whether the key existed."""
    return await gw.write("DELETE_KV_CONFIG", lambda now: commands.kv_delete(now, namespace, key))


@router.post("/{namespace}/{key}/cas", response_model=M.KvCasAnswer, openapi_extra=rocketmq(1100, "CAS_KV_CONFIG"))
async def compare_and_set(namespace: Namespace, key: Key, req: M.KvCasRequest, gw: GatewayDep) -> Response:
    """Set `value` only if the current value is `expect` (null: only if absent)."""
    return await gw.write("CAS_KV_CONFIG", lambda now: commands.kv_cas(now, namespace, key, req.expect, req.value))

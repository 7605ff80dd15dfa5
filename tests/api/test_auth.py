"""The admin token guards the admin and raft endpoints (and only those)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from api.http.app import create_app
from api.service.settings import ApiSettings
from tests.api.harness import TOKEN, Node, assert_rejected

pytestmark = pytest.mark.anyio

PROTECTED: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/v1/admin/sync-state-data", {"brokerNames": ["b"]}),
    ("POST", "/api/v1/admin/elect-master", {"clusterName": "c", "brokerName": "b", "brokerId": 1}),
    ("POST", "/api/v1/admin/clean-broker-metadata", {"brokerName": "b"}),
    ("GET", "/api/v1/admin/config", None),
    ("PUT", "/api/v1/admin/config", {"electMasterMaxRetryCount": "3"}),
    ("GET", "/api/v1/raft/status", None),
    ("GET", "/api/v1/raft/peers", None),
    ("POST", "/api/v1/raft/snapshot", None),
    ("GET", "/api/v1/raft/snapshots", None),
    ("POST", "/api/v1/raft/transfer-leader", {}),
    ("POST", "/api/v1/raft/peers", {"id": "{self}"}),  # already a voter: 409, nothing changes
    ("DELETE", "/api/v1/raft/peers/127.0.0.1%3A1", None),  # not a member: 404
]
OPEN: list[tuple[str, str, dict[str, Any] | None]] = [
    (
        "POST",
        "/api/v1/controller/heartbeat",
        {"clusterName": "c", "brokerName": "auth-b", "brokerAddr": "a:1", "brokerId": 1},
    ),
    ("POST", "/api/v1/controller/next-broker-id", {"clusterName": "c", "brokerName": "auth-b"}),
    ("POST", "/api/v1/controller/replica-info", {"brokerName": "auth-b"}),
    ("GET", "/api/v1/controller/metadata", None),
    ("GET", "/api/v1/kv/ns/auth", None),
    ("PUT", "/api/v1/kv/ns/auth", {"value": "v"}),
]


def kw(body: dict[str, Any] | None, node: Node | None = None) -> dict[str, Any]:
    if body is None:
        return {}
    return {"json": {k: node.id if v == "{self}" and node else v for k, v in body.items()}}


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
async def test_protected_endpoints_refuse_a_missing_or_wrong_token(
    node: Node, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = await node.call(method, path, **kw(body))
    assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="controllerd"', r.text
    err = await assert_rejected(node, method, path, 401, token=False, **kw(body))
    assert err["error"] == "UNAUTHORIZED"
    for header in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer", f"Basic {TOKEN}", TOKEN, b"Bearer \xfc"):
        r = await node.call(method, path, headers={"Authorization": header}, **kw(body))
        assert r.status_code == 401, (header, r.text)
        assert r.headers["www-authenticate"].startswith('Bearer realm="controllerd"')
    r = await node.call(method, path, headers={"Authorization": f"Bearer {TOKEN}x"}, **kw(body))
    assert r.headers["www-authenticate"] == 'Bearer realm="controllerd", error="invalid_token"'


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
async def test_protected_endpoints_accept_the_token(
    node: Node, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = await node.call(method, path, token=True, **kw(body, node))
    assert r.status_code in (200, 409, 404), r.text
    r = await node.call(method, path, headers={"Authorization": f"bearer   {TOKEN}"}, **kw(body, node))
    assert r.status_code in (200, 409, 404), r.text


@pytest.mark.parametrize(("method", "path", "body"), OPEN)
async def test_broker_and_kv_endpoints_need_no_token(
    node: Node, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = await node.call(method, path, **kw(body))
    assert r.status_code == 200 and r.json()["code"] != 2007, r.text


async def test_an_unauthenticated_caller_gets_401_before_validation(node: Node) -> None:
    err = await assert_rejected(
        node,
        "POST",
        "/api/v1/admin/elect-master",
        401,
        token=False,
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert err["error"] == "UNAUTHORIZED"
    err = await assert_rejected(node, "POST", "/api/v1/raft/transfer-leader", 401, token=False, json={"unknown": 1})
    assert err["error"] == "UNAUTHORIZED"
    # With the token, the same request is the 422.
    await assert_rejected(node, "POST", "/api/v1/raft/transfer-leader", 422, json={"unknown": 1})


async def test_no_token_configured_means_no_check(node: Node) -> None:
    app = create_app(node.service, ApiSettings())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            r = await client.get("/api/v1/raft/status")
            assert r.status_code == 200 and r.json()["body"]["nodeId"] == node.id
            r = await client.get("/api/v1/admin/config", headers={"Authorization": "Bearer anything"})
            assert r.status_code == 200
    finally:
        node.service.listeners.remove(app.state.gateway.metrics.on_result)


def test_settings_refuse_an_empty_token() -> None:
    with pytest.raises(ValueError, match="admin_token"):
        ApiSettings(admin_token="")


async def test_openapi_documents_the_bearer_scheme_on_protected_routes(node: Node) -> None:
    spec = (await node.call("GET", "/openapi.json")).json()
    assert spec["components"]["securitySchemes"]["adminToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "controllerAdminToken",
    }
    for path, ops in spec["paths"].items():
        for op in ops.values():
            secured = op.get("security") == [{"adminToken": []}]
            assert secured == path.startswith(("/api/v1/admin", "/api/v1/raft", "/api/v1/alarms")), (
                path,
                op.get("security"),
            )

"""Malformed input is a 422 naming the field (413 for a body over the limit), never a 500, and it never
reaches the Raft log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.http.errors import argument_error
from api.service import CommandArgumentError, checked
from statemachine import commands
from tests.api.harness import SETTINGS, Node, assert_rejected

pytestmark = pytest.mark.anyio
CTL = "/api/v1/controller"
HB = {"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1", "brokerId": 1}
ALTER = {
    "brokerName": "b",
    "masterBrokerId": 1,
    "masterEpoch": 1,
    "syncStateSet": {"syncStateSet": [1], "syncStateSetEpoch": 1},
}


def raw(body: Any) -> dict[str, Any]:
    """Send `body` as JSON text exactly (json.dumps escapes lone surrogates, which httpx would refuse)."""
    return {"content": json.dumps(body).encode(), "headers": {"content-type": "application/json"}}


CASES: list[tuple[str, str, dict[str, Any], str, str]] = [
    # (method, path, request kwargs, field named, pydantic error type)
    ("POST", f"{CTL}/heartbeat", raw({**HB, "extra": 1}), "extra", "extra_forbidden"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerId": "1"}), "brokerId", "int_type"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerId": True}), "brokerId", "int_type"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerId": 1.0}), "brokerId", "int_type"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerId": 2**63}), "brokerId", "less_than_equal"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "heartbeatTimeoutMills": "10"}), "heartbeatTimeoutMills", "int_type"),
    ("POST", f"{CTL}/heartbeat", raw({k: v for k, v in HB.items() if k != "brokerName"}), "brokerName", "missing"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerName": None}), "brokerName", "string_type"),
    ("POST", f"{CTL}/heartbeat", raw({**HB, "brokerName": "\ud800"}), "brokerName", "value_error"),
    ("POST", f"{CTL}/heartbeat", raw([HB]), "body", "model_attributes_type"),
    (
        "POST",
        f"{CTL}/heartbeat",
        {"content": b'{"clusterName": "c",', "headers": {"content-type": "application/json"}},
        "body",
        "json_invalid",
    ),
    ("POST", f"{CTL}/heartbeat", {"content": b"", "headers": {"content-type": "application/json"}}, "body", "missing"),
    (
        "POST",
        f"{CTL}/heartbeat",
        {"content": json.dumps(HB).encode(), "headers": {"content-type": "text/plain"}},
        "body",
        "model_attributes_type",
    ),
    ("POST", f"{CTL}/elect-master", raw({"brokerName": "b", "designateElect": "true"}), "designateElect", "bool_type"),
    (
        "POST",
        f"{CTL}/alter-sync-state-set",
        raw({**ALTER, "syncStateSet": {"syncStateSet": ["1"], "syncStateSetEpoch": 1}}),
        "syncStateSet.syncStateSet.0",
        "int_type",
    ),
    (
        "POST",
        f"{CTL}/alter-sync-state-set",
        raw({**ALTER, "syncStateSet": {"syncStateSet": [1]}}),
        "syncStateSet.syncStateSetEpoch",
        "missing",
    ),
    (
        "POST",
        f"{CTL}/alter-sync-state-set",
        raw({**ALTER, "syncStateSet": [1]}),
        "syncStateSet",
        "model_attributes_type",
    ),
    (
        "POST",
        f"{CTL}/apply-broker-id",
        raw({"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1}),
        "registerCheckCode",
        "missing",
    ),
    (
        "POST",
        f"{CTL}/register-broker",
        raw({"clusterName": "c", "brokerName": "b", "brokerId": 1, "brokerAddress": 7}),
        "brokerAddress",
        "string_type",
    ),
    ("POST", f"{CTL}/replica-info", raw({"brokerName": "b", "brokerNames": ["b"]}), "brokerNames", "extra_forbidden"),
    ("POST", f"{CTL}/next-broker-id", raw({"clusterName": "c"}), "brokerName", "missing"),
    ("POST", "/api/v1/admin/sync-state-data", raw({"brokerNames": []}), "brokerNames", "too_short"),
    ("POST", "/api/v1/admin/sync-state-data", raw({"brokerNames": "b"}), "brokerNames", "list_type"),
    ("POST", "/api/v1/admin/elect-master", raw({"clusterName": "c", "brokerName": "b"}), "brokerId", "missing"),
    (
        "POST",
        "/api/v1/admin/clean-broker-metadata",
        raw({"brokerName": "b", "isCleanLivingBroker": 1}),
        "isCleanLivingBroker",
        "bool_type",
    ),
    ("PUT", "/api/v1/admin/config", raw(["enableElectUncleanMaster"]), "body", "dict_type"),
    ("PUT", "/api/v1/kv/ns/k", raw({"value": 1}), "value", "string_type"),
    ("PUT", "/api/v1/kv/ns/k", raw({}), "value", "missing"),
    ("POST", "/api/v1/kv/ns/k/cas", raw({"value": "v"}), "expect", "missing"),
    ("POST", "/api/v1/raft/transfer-leader", raw({"maxLagEntries": -1}), "maxLagEntries", "greater_than_equal"),
    ("POST", "/api/v1/raft/transfer-leader", raw({"to": 5}), "to", "string_type"),
    ("POST", "/api/v1/raft/peers", raw({"id": "no-port"}), "id", "value_error"),
    ("POST", "/api/v1/raft/peers", raw({"id": "h:1", "raftAddress": "h:99999"}), "raftAddress", "value_error"),
    ("POST", "/api/v1/raft/peers", raw({"raftAddress": "h:1"}), "id", "missing"),
]


@pytest.mark.parametrize(("method", "path", "kw", "field", "kind"), CASES)
async def test_malformed_input_is_422_naming_the_field(
    node: Node, method: str, path: str, kw: dict[str, Any], field: str, kind: str
) -> None:
    err = await assert_rejected(node, method, path, 422, **kw)
    assert err["error"] == "VALIDATION_ERROR"
    assert [(e["field"], e["type"]) for e in err["errors"]][:1] == [(field, kind)], err
    assert err["message"].startswith(f"{field}: ")


async def test_unknown_route_and_method_are_json_errors(node: Node) -> None:
    err = await assert_rejected(node, "GET", "/api/v1/nope", 404)
    assert err["error"] == "NOT_FOUND"
    err = await assert_rejected(node, "GET", f"{CTL}/heartbeat", 405)
    assert err["error"] == "METHOD_NOT_ALLOWED"


async def test_body_over_the_limit_by_content_length_is_413(node: Node) -> None:
    limit = SETTINGS.max_body_bytes
    value = "x" * (limit - len('{"value": ""}'))
    assert len(json.dumps({"value": value})) == limit
    await node.ok("PUT", "/api/v1/kv/big/fits", **raw({"value": value}))
    err = await assert_rejected(node, "PUT", "/api/v1/kv/big/too", 413, **raw({"value": value + "x"}))
    assert err["error"] == "BODY_TOO_LARGE" and err["limit"] == limit and str(limit) in err["message"]


def asgi_request(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("controller.test", 80),
        "client": ("127.0.0.1", 1),
    }


@pytest.mark.parametrize("chunks", [20, 2000])
async def test_streamed_body_over_the_limit_is_413_before_the_app_reads_it(node: Node, chunks: int) -> None:
    """No Content-Length (chunked): the limit is enforced while counting chunks. What follows is read and
    dropped up to 1 MiB (so the client sees the 413 instead of a reset), and no further."""
    chunk, read, sent = b"x" * 1024, 0, []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": read < chunks}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    before = node.last_index()
    await node.app(asgi_request("/api/v1/kv/ns/streamed", [(b"content-type", b"application/json")]), receive, send)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"] == "BODY_TOO_LARGE"
    limit_chunks = SETTINGS.max_body_bytes // len(chunk) + 1  # the chunk that crosses the limit
    assert read == min(chunks, limit_chunks + 1024), read
    assert node.last_index() == before


def test_command_constructor_refusals_become_422_naming_the_field() -> None:
    """The last line of defence behind the models: a constructor's TypeError/ValueError is a 422 naming the
    field the CommandError carries, in the request body's spelling."""
    with pytest.raises(CommandArgumentError) as e:
        checked(lambda now: commands.kv_put(now, "ns", "k", 1))(0)  # type: ignore[arg-type]
    err = argument_error(e.value)
    assert err.status == 422 and err.errors and err.errors[0]["field"] == "value"
    with pytest.raises(CommandArgumentError) as e:
        checked(lambda now: commands.heartbeat(now, "c", "b", "a", 1, heartbeat_timeout_millis="x"))(0)  # type: ignore[arg-type]
    assert e.value.field == "heartbeatTimeoutMillis"
    assert argument_error(e.value).errors == [
        {
            "field": "heartbeatTimeoutMills",
            "location": "body",
            "type": "value_error",
            "message": argument_error(e.value).message.split(": ", 1)[1],
        }
    ]
    with pytest.raises(CommandArgumentError) as e:
        checked(lambda now: commands.update_controller_config(now, {"nope": 1}))(0)
    assert e.value.field is None and argument_error(e.value).errors[0]["field"] == "body"  # type: ignore[index]

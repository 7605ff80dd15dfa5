"""Every operation of /openapi.json fuzzed with hypothesis, requests drawn from the schema itself:

* schema-valid requests never get a 5xx, and any answer but a 200 leaves the Raft log where it was;
* requests broken on purpose (an unknown field, a missing required field, a wrong JSON type, a non-object
  body, malformed JSON) are a 422 naming a field, and leave the Raft log where it was.

Derandomized and bounded, so the file runs in seconds and the same way every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from api.http.app import create_app
from tests.api.harness import AUTH, SETTINGS, Node

pytestmark = pytest.mark.anyio

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# A schema-valid POST /raft/peers adds a (never answering) server to the group: fuzzed with broken bodies only.
BROKEN_ONLY = {("POST", "/api/v1/raft/peers")}
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    path_params: tuple[str, ...]
    body: dict[str, Any] | None  # the request body's JSON schema (refs resolved lazily)

    def __repr__(self) -> str:
        return f"{self.method} {self.path}"


def operations(spec: dict[str, Any]) -> list[Operation]:
    out = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            params = tuple(p["name"] for p in op.get("parameters", []) if p["in"] == "path")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            out.append(Operation(method.upper(), path, params, body))
    return out


class Schemas:
    """JSON schema (the subset FastAPI/pydantic emit) -> hypothesis strategy of valid instances."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.components = spec["components"]["schemas"]

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.components[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def valid(self, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        s = self.resolve(schema)
        if "anyOf" in s:
            return st.one_of([self.valid(x) for x in s["anyOf"]])
        kind = s.get("type")
        if kind == "object":
            props = s.get("properties", {})
            if not props:
                return st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=3)
            required = set(s.get("required", ()))
            return st.fixed_dictionaries(
                {k: self.valid(v) for k, v in props.items() if k in required},
                optional={k: self.valid(v) for k, v in props.items() if k not in required},
            )
        if kind == "string":
            return st.text(max_size=12)
        if kind == "integer":
            return st.integers(min_value=s.get("minimum"), max_value=s.get("maximum"))
        if kind == "boolean":
            return st.booleans()
        if kind == "array":
            return st.lists(self.valid(s.get("items", {})), min_size=s.get("minItems", 0), max_size=4)
        if kind == "null":
            return st.none()
        return JSON_VALUES

    def wrong_type(self, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        """A JSON value of none of the schema's types (a string "1" for an integer, 1 for a boolean, ...)."""
        s = self.resolve(schema)
        kinds = {self.resolve(x).get("type") for x in s["anyOf"]} if "anyOf" in s else {s.get("type")}
        pool = {
            "string": st.text(max_size=5),
            "integer": st.integers(),
            "boolean": st.booleans(),
            "null": st.none(),
            "number": st.floats(allow_nan=False),
            "array": st.lists(st.integers(), max_size=2),
            "object": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        }
        if "integer" in kinds:
            kinds.add("number")  # 1.5 is not an integer, but 1.0 is "integer" to JSON schema: use floats anyway
            pool["number"] = st.floats(allow_nan=False).filter(lambda f: not f.is_integer())
        return st.one_of([v for k, v in pool.items() if k not in kinds])


def path_segment() -> st.SearchStrategy[str]:
    return st.text(min_size=1, max_size=12).filter(lambda t: "/" not in t and t not in (".", ".."))


def parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def encode(body: Any) -> dict[str, Any]:
    return {"content": json.dumps(body).encode(), "headers": {"content-type": "application/json", **AUTH}}


def url(op: Operation, values: dict[str, str]) -> str:
    path = op.path
    for name in op.path_params:
        path = path.replace("{" + name + "}", quote(values[name], safe=""))
    return path


def served_schema() -> dict[str, Any]:
    """The schema create_app serves (it does not depend on the service; a test checks it equals a node's)."""
    stub = SimpleNamespace(id="stub:1", opts=SimpleNamespace(group_id="g"), listeners=[])
    return dict(create_app(stub, SETTINGS).openapi())  # type: ignore[arg-type]


SPEC = served_schema()
SCHEMAS = Schemas(SPEC)
OPERATIONS = operations(SPEC)


@st.composite
def valid_requests(draw: st.DrawFn) -> tuple[Operation, str, dict[str, Any]]:
    op = draw(st.sampled_from([o for o in OPERATIONS if (o.method, o.path) not in BROKEN_ONLY]))
    params = {p: draw(path_segment(), label=p) for p in op.path_params}
    kw: dict[str, Any] = {"headers": dict(AUTH)}
    if op.body is not None:
        kw = encode(draw(SCHEMAS.valid(op.body), label="body"))
    return op, url(op, params), kw


@st.composite
def broken_requests(draw: st.DrawFn) -> tuple[Operation, str, dict[str, Any], str]:
    op = draw(st.sampled_from([o for o in OPERATIONS if o.body is not None]))
    params = {p: draw(path_segment(), label=p) for p in op.path_params}
    schema = SCHEMAS.resolve(op.body or {})
    props, required = schema.get("properties", {}), sorted(schema.get("required", ()))
    mutations = ["not_an_object", "malformed_json"]
    if props:
        mutations += ["unknown_field", "wrong_type"] + (["missing_field"] if required else [])
    mutation = draw(st.sampled_from(mutations), label="mutation")
    body = draw(SCHEMAS.valid(op.body or {}), label="valid body")
    if mutation == "unknown_field":
        body["zzUnknownField"] = draw(JSON_VALUES)
        kw = encode(body)
    elif mutation == "missing_field":
        del body[draw(st.sampled_from(required))]
        kw = encode(body)
    elif mutation == "wrong_type":
        field = draw(st.sampled_from(sorted(props)))
        body[field] = draw(SCHEMAS.wrong_type(props[field]), label=f"wrong {field}")
        kw = encode(body)
    elif mutation == "not_an_object":
        kw = encode(draw(st.lists(JSON_SCALARS, max_size=2) | JSON_SCALARS))
    else:
        text = json.dumps(body)
        cut = draw(st.integers(0, len(text) - 1))
        broken = text[:cut] + draw(st.sampled_from(["", "}", ",", "{", "\x00", "'", "]"]))
        assume(not parses(broken))
        kw = {"content": broken.encode(), "headers": {"content-type": "application/json", **AUTH}}
    return op, url(op, params), kw, mutation


async def send(node: Node, op: Operation, path: str, kw: dict[str, Any]) -> tuple[int, Any, bool]:
    before = node.last_index()
    r = await node.client.request(op.method, path, **kw)
    assert r.status_code < 500, (op, path, kw, r.text)
    moved = node.last_index() != before
    data = r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
    return r.status_code, data, moved


CONTRACT = {  # http-api.md: every path and method is served
    ("POST", "/api/v1/controller/heartbeat"),
    ("POST", "/api/v1/controller/next-broker-id"),
    ("POST", "/api/v1/controller/apply-broker-id"),
    ("POST", "/api/v1/controller/register-broker"),
    ("POST", "/api/v1/controller/elect-master"),
    ("POST", "/api/v1/controller/alter-sync-state-set"),
    ("POST", "/api/v1/controller/replica-info"),
    ("GET", "/api/v1/controller/metadata"),
    ("POST", "/api/v1/admin/sync-state-data"),
    ("POST", "/api/v1/admin/elect-master"),
    ("POST", "/api/v1/admin/clean-broker-metadata"),
    ("GET", "/api/v1/admin/config"),
    ("PUT", "/api/v1/admin/config"),
    ("GET", "/api/v1/kv/{namespace}/{key}"),
    ("PUT", "/api/v1/kv/{namespace}/{key}"),
    ("DELETE", "/api/v1/kv/{namespace}/{key}"),
    ("POST", "/api/v1/kv/{namespace}/{key}/cas"),
    ("GET", "/api/v1/raft/status"),
    ("GET", "/api/v1/raft/peers"),
    ("POST", "/api/v1/raft/snapshot"),
    ("GET", "/api/v1/raft/snapshots"),
    ("POST", "/api/v1/raft/transfer-leader"),
    ("POST", "/api/v1/raft/peers"),
    ("DELETE", "/api/v1/raft/peers/{peer_id}"),
    ("GET", "/livez"),
    ("GET", "/readyz"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
}


async def test_the_fuzzed_schema_is_the_served_one(node: Node) -> None:
    assert (await node.call("GET", "/openapi.json")).json() == json.loads(json.dumps(SPEC))
    assert CONTRACT <= {(o.method, o.path) for o in OPERATIONS}
    docs = await node.call("GET", "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    tags = {t for o in SPEC["paths"].values() for op in o.values() for t in op.get("tags", ())}
    assert tags == {"controller", "admin", "kv", "raft", "alarms", "health", "metrics"}


@FUZZ
@given(case=valid_requests())
async def test_schema_valid_requests_never_fail_the_server(
    node: Node, case: tuple[Operation, str, dict[str, Any]]
) -> None:
    op, path, kw = case
    status, answer, moved = await send(node, op, path, kw)
    event(f"{op!r} -> {status}")
    if status != 200:
        assert not moved, (op, status, answer)
        assert isinstance(answer, dict) and {"error", "message"} <= set(answer), (op, answer)
    elif op.path.startswith("/api/v1"):
        assert set(answer) == {"code", "codeName", "remark", "header", "body"}, (op, answer)


@FUZZ
@given(case=broken_requests())
async def test_broken_requests_are_422_and_never_reach_the_log(
    node: Node, case: tuple[Operation, str, dict[str, Any], str]
) -> None:
    op, path, kw, mutation = case
    status, answer, moved = await send(node, op, path, kw)
    event(mutation)
    assert status == 422, (op, mutation, kw, answer)
    assert not moved, (op, mutation, kw)
    assert answer["error"] == "VALIDATION_ERROR" and answer["errors"] and all(e["field"] for e in answer["errors"])

"""The heartbeat's lean path (api/http/hotpath.py) answers exactly what the FastAPI route answers.

The same request goes to the daemon's ASGI app (HeartbeatPath in front of FastAPI) and to the bare FastAPI
app of the same node; hypothesis draws valid heartbeats and malformed ones (wrong types, unknown and missing
fields, out-of-range longs, broken JSON, lone surrogates, invalid UTF-8, other content types). Each pair of
answers must be byte-identical (status, headers, body), propose the same command bytes (the node's clock
is fixed), and count the same metrics; and the lean path must really answer the plain valid case itself.
"""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from api.http import hotpath
from api.http.hotpath import HeartbeatPath
from api.server import GC_THRESHOLDS, settle_gc
from tests.api.harness import FakeClock, Node, solo

pytestmark = pytest.mark.anyio

PATH = hotpath.PATH
CASES = settings(
    max_examples=25,  # per mutation
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
LONG = 2**63
REQUIRED = {"clusterName": "DefaultCluster", "brokerName": "hp-broker", "brokerAddr": "10.0.0.1:10911", "brokerId": 0}
OPTIONAL = ("epoch", "maxOffset", "confirmOffset", "heartbeatTimeoutMills", "electionPriority")
TEXTS = st.text(max_size=12)
LONGS = st.integers(-LONG, LONG - 1) | st.sampled_from([-LONG, LONG - 1, 0, -1])
WRONG = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.sampled_from([LONG, -LONG - 1, 10**30, 1.0, "1", [], {}, [1]])
    | TEXTS
)
JSON_TYPES = [
    "application/json",
    "Application/JSON",
    "application/json; charset=utf-8",
    "application/json;charset=UTF-8",
]
OTHER_TYPES = ["application/vnd.rocketmq+json", "text/plain", "application/x-www-form-urlencoded", None]


class Pair:
    """One node, answered through the lean path (`lean`) and through FastAPI alone (`plain`)."""

    def __init__(self, node: Node, clock: FakeClock) -> None:
        self.node = node
        self.clock = clock
        self.path = HeartbeatPath(node.app)
        self.fell_through = 0
        inner = self.path.app

        async def counting(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == PATH:
                self.fell_through += 1
            await inner(scope, receive, send)

        self.path.app = counting
        self.lean = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.path), base_url="http://c.test")
        # Starlette re-raises a bug's exception after its 500 is sent (for the server to log): answers only here.
        plain = httpx.ASGITransport(app=node.app, raise_app_exceptions=False)
        self.plain = httpx.AsyncClient(transport=plain, base_url="http://c.test")
        self.proposed: list[bytes] = []
        apply = node.service.node.apply

        def recording(data: bytes) -> Any:
            self.proposed.append(data)
            return apply(data)

        node.service.node.apply = recording  # type: ignore[method-assign]

    def metrics(self) -> dict[str, Any]:
        m = self.node.app.state.gateway.metrics
        return {"requests": dict(m.requests), "rejections": dict(m.rejections)}

    async def send(
        self, client: httpx.AsyncClient, body: bytes, content_type: str | None
    ) -> tuple[httpx.Response, list[bytes], dict[str, Any]]:
        before_m, before_p = self.metrics(), len(self.proposed)
        headers = {} if content_type is None else {"content-type": content_type}
        r = await client.post(PATH, content=body, headers=headers)
        after = self.metrics()
        delta = {
            kind: {k: v - before_m[kind].get(k, 0) for k, v in after[kind].items() if v != before_m[kind].get(k, 0)}
            for kind in after
        }
        return r, self.proposed[before_p:], delta

    async def compare(self, body: bytes, content_type: str | None) -> tuple[httpx.Response, bool]:
        """Both answers (they must be identical); whether the lean path answered by itself."""
        through = self.fell_through
        lean, lean_cmds, lean_m = await self.send(self.lean, body, content_type)
        took = self.fell_through == through
        plain, plain_cmds, plain_m = await self.send(self.plain, body, content_type)
        assert lean.status_code == plain.status_code, (body, lean.text, plain.text)
        assert lean.content == plain.content, (body, lean.text, plain.text)
        assert lean.headers.multi_items() == plain.headers.multi_items(), body
        assert lean_cmds == plain_cmds, body
        assert lean_m == plain_m, (body, lean_m, plain_m)
        return plain, took

    async def aclose(self) -> None:
        await self.lean.aclose()
        await self.plain.aclose()


@pytest.fixture(scope="module")
async def pair(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    clock = FakeClock()
    async with solo(Path(tmp_path_factory.mktemp("hotpath")), clock=clock) as node:
        p = Pair(node, clock)
        yield p
        await p.aclose()


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Any:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@st.composite
def heartbeats(draw: Callable[..., Any]) -> dict[str, Any]:
    hb: dict[str, Any] = {k: draw(TEXTS) if isinstance(v, str) else draw(LONGS) for k, v in REQUIRED.items()}
    for k in OPTIONAL:
        choice = draw(st.sampled_from(["absent", "null", "value"]))
        if choice != "absent":
            hb[k] = None if choice == "null" else draw(LONGS)
    return hb


MUTATIONS = ["none", "wrong type", "unknown field", "missing field", "not an object", "truncated", "lone surrogate"]
MUTATIONS += ["invalid utf-8", "nan", "duplicate key", "utf-16", "bom", "empty", "deep"]


@st.composite
def extras(draw: Callable[..., Any]) -> dict[str, Any]:
    """What a mutation may use: a field to break, a wrong value, an unknown key, a cut point, an encoding choice."""
    return {
        "field": draw(st.sampled_from([*REQUIRED, *OPTIONAL])),
        "required": draw(st.sampled_from(list(REQUIRED))),
        "wrong": draw(WRONG),
        "key": draw(TEXTS.filter(lambda k: k not in REQUIRED and k not in OPTIONAL)),
        "cut": draw(st.floats(0, 1, exclude_max=True)),
        "ascii": draw(st.booleans()),
        "spaces": draw(st.integers(0, 2)),
        "top": draw(st.sampled_from(["list", "x", 1, None, True])),
    }


def body(hb: dict[str, Any], mutation: str, x: dict[str, Any]) -> bytes:
    """A heartbeat's body, valid ("none") or broken on purpose by `mutation`."""
    if mutation == "wrong type":
        hb[x["field"]] = x["wrong"]
    elif mutation == "unknown field":
        hb[x["key"]] = x["wrong"]
    elif mutation == "missing field":
        hb.pop(x["required"])
    elif mutation == "not an object":
        return json.dumps([hb] if x["top"] == "list" else x["top"]).encode()
    text = json.dumps(hb, ensure_ascii=x["ascii"])
    edits: dict[str, Callable[[], bytes]] = {
        "truncated": lambda: text[: int(x["cut"] * len(text))].encode(),
        "lone surrogate": lambda: text.replace('"brokerName": "', '"brokerName": "\\ud800', 1).encode(),
        "invalid utf-8": lambda: text.encode().replace(b'"brokerAddr": "', b'"brokerAddr": "\xff\xed\xa0\x80', 1),
        "nan": lambda: text.replace('"brokerId": ', '"brokerId": NaN, "x": ', 1).encode(),
        "duplicate key": lambda: text.replace("{", '{"brokerId": "dup", ', 1).encode(),
        "utf-16": lambda: text.encode("utf-16"),
        "bom": lambda: b"\xef\xbb\xbf" + text.encode(),
        "empty": lambda: b" " * x["spaces"],
        "deep": lambda: ("[" * 3000 + "]" * 3000).encode(),
    }
    return edits[mutation]() if mutation in edits else text.encode()


@pytest.mark.parametrize("mutation", MUTATIONS)
@CASES
@given(hb=heartbeats(), x=extras(), content_type=st.sampled_from(JSON_TYPES + OTHER_TYPES))
async def test_lean_and_fastapi_answers_are_identical(
    pair: Pair, mutation: str, hb: dict[str, Any], x: dict[str, Any], content_type: str | None
) -> None:
    await same_answer(pair, body(hb, mutation, x), mutation, content_type)


async def same_answer(pair: Pair, body: bytes, mutation: str, content_type: str | None) -> None:
    answer, took = await pair.compare(body, content_type)
    event(f"{mutation}: {answer.status_code}{' (lean)' if took else ''}")
    if took:
        assert answer.status_code == 200 and answer.json()["code"] == 0, answer.text
    elif content_type in JSON_TYPES and answer.status_code == 200:
        pytest.fail(f"a heartbeat FastAPI accepts went past the lean path: {body!r}")


async def test_the_plain_heartbeat_is_answered_by_the_lean_path(pair: Pair) -> None:
    body = json.dumps({**REQUIRED, "epoch": 3}).encode()
    answer, took = await pair.compare(body, "application/json")
    assert took and answer.json() == {
        "code": 0,
        "codeName": "SUCCESS",
        "remark": "Heart beat success",
        "header": None,
        "body": None,
    }
    # What FastAPI refuses, the lean path hands to it: the 422 names the field.
    answer, took = await pair.compare(json.dumps({**REQUIRED, "brokerId": "0"}).encode(), "application/json")
    assert not took and answer.status_code == 422 and answer.json()["errors"][0]["field"] == "brokerId"


async def test_service_errors_after_the_parse_are_answered_alike(pair: Pair) -> None:
    body = json.dumps(REQUIRED).encode()
    service = pair.node.service
    with patched(service, "stopping", True):  # 503 UNAVAILABLE, nothing proposed
        answer, took = await pair.compare(body, "application/json")
    assert took and answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
    with patched(pair.clock, "now", LONG):  # a clock outside Java's long: the command constructor refuses (422)
        answer, took = await pair.compare(body, "application/json")
    assert took and answer.status_code == 422 and answer.json()["error"] == "VALIDATION_ERROR", answer.text

    def broken(*args: Any) -> Any:
        raise KeyError("bug")

    with patched(hotpath.Q.BrokerHeartbeat, "command", broken):  # a bug: 500 INTERNAL, logged
        answer, took = await pair.compare(body, "application/json")
    assert took and answer.status_code == 500 and answer.json()["error"] == "INTERNAL", answer.text


async def test_other_requests_go_to_fastapi(pair: Pair) -> None:
    """Other methods, a body over the limit and a streamed body are FastAPI's (405, 413, its own parse)."""
    before = pair.fell_through
    r = await pair.lean.get(PATH)
    assert r.status_code == 405 and r.json()["error"] == "METHOD_NOT_ALLOWED"
    limit = pair.node.app.state.gateway.settings.max_body_bytes
    big = json.dumps({**REQUIRED, "brokerName": "x" * limit}).encode()
    r = await pair.lean.post(PATH, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "BODY_TOO_LARGE"

    async def chunks() -> AsyncIterator[bytes]:
        yield json.dumps(REQUIRED).encode()

    r = await pair.lean.post(PATH, content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["code"] == 0, r.text
    assert pair.fell_through == before + 3
    spec = (await pair.lean.get("/openapi.json")).json()
    route = spec["paths"][PATH]["post"]  # the route is still documented, serving the request type counted here
    assert route["x-request-type"] == hotpath.REQUEST_TYPE


def test_settle_gc_freezes_the_start_up_objects_and_raises_the_thresholds() -> None:
    class Cycle:
        pass

    old = gc.get_threshold()
    gc.unfreeze()
    try:
        garbage = Cycle()
        garbage.me = garbage  # type: ignore[attr-defined]
        gone = weakref.ref(garbage)
        del garbage
        settle_gc()
        assert gc.get_freeze_count() > 1000  # the modules, the app, every object alive now
        # Collected first: a cycle that was garbage is freed, not frozen for the life of the process. (Not
        # `gc.get_count()[0] == 0`: another thread of the worker may allocate between the freeze and that read.)
        assert gone() is None
        assert gc.get_threshold() == GC_THRESHOLDS and GC_THRESHOLDS[0] > old[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*old)

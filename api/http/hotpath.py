"""The lean path of the one hot route: POST /api/v1/controller/heartbeat (904), every broker's every few seconds.

`HeartbeatPath(app)` is an ASGI layer in front of the FastAPI application (`api.server` serves it). It
answers a heartbeat itself when the request is the plain well-formed case: POST on exactly that path,
`Content-Type: application/json`, a Content-Length within the body limit, and a body that is a JSON
object passing the route's own model (`HeartbeatRequest`, parsed as FastAPI parses it: `json.loads`, then
the model's validator). Then it does what the route does (`Gateway.submit`, the same metrics) and sends the
same answer, skipping Starlette's middleware stack, routing, dependency solving and the Request object,
which held most of a busy leader's CPU (docs/performance.md, "Where the time goes").

Anything else goes to the FastAPI application unchanged: other paths and methods, other content types,
chunked or oversized bodies, and every body the lean parse refuses (the body read so far is replayed), so
that every error answer (422 naming the field, 413, 405, 400) comes from the one place that makes them.
Answers the service gives after the parse (2007, 503, a command constructor's 422, 500) are built by the
same functions the FastAPI exception handlers use. The route stays in the FastAPI app, so /openapi.json
documents it; tests/api/test_hotpath.py holds the two paths' answers equal on valid and malformed bodies.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.errors import argument_answer, internal_error, replaying, unavailable_answer
from api.http.models import HeartbeatRequest
from api.http.routes.common import Gateway
from api.service import CommandArgumentError, UnavailableError
from api.service import requests as Q
from statemachine.values import JSONObject

PATH = "/api/v1/controller/heartbeat"
REQUEST_TYPE = Q.BrokerHeartbeat.REQUEST_TYPE
# Content-Type values FastAPI parses as JSON that the lean path takes as they are (lower-cased); any other
# value, JSON or not, goes to FastAPI, whose media-type parsing decides.
JSON_TYPES = frozenset((b"application/json", b"application/json; charset=utf-8", b"application/json;charset=utf-8"))
_validate = HeartbeatRequest.__pydantic_validator__.validate_python


def parse(body: bytes) -> JSONObject | None:
    """The heartbeat's fields (the model's, defaults included) when FastAPI would accept `body` for the
    route, else None (FastAPI then answers: the 422 naming the field, or 400 for undecodable bytes)."""
    try:
        obj = json.loads(body)
        if type(obj) is not dict:
            return None
        return vars(_validate(obj))
    except (ValueError, ValidationError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


async def respond(send: Send, response: JSONResponse) -> None:
    """Send `response`: its start, then its whole body."""
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


class LeanHeartbeat(ABC):
    """ASGI: a POST /api/v1/controller/heartbeat that parses is answered by `answer`; everything else goes to
    `app`. HeartbeatPath answers through consensus; tools/bench/bare_app.py answers a constant (the
    benchmark's "bare lean" peer)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body = max_body_bytes

    @abstractmethod
    async def answer(self, scope: Scope, fields: JSONObject) -> JSONResponse:
        """The answer to a heartbeat whose body parsed into `fields`."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        length = -1
        json_type = False
        seen_type = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                if length == -1 and value.isdigit():
                    length = int(value)
            elif name == b"content-type" and not seen_type:  # the first one, as Starlette's Headers.get reads
                seen_type = True
                json_type = value.lower() in JSON_TYPES
        if not json_type or not 0 < length <= self.max_body:
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:  # uvicorn hands the whole body over in one message once it has arrived
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: nobody to answer (FastAPI would not answer either)
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > length:  # more than Content-Length said: FastAPI's to judge
                break
        fields = None if more else parse(body)
        if fields is None:
            await self.app(scope, replaying({"type": "http.request", "body": body, "more_body": more}, receive), send)
            return
        response = await self.answer(scope, fields)
        await respond(send, response)


class HeartbeatPath(LeanHeartbeat):
    """The daemon's: heartbeats through `Gateway.submit`, as the FastAPI route sends them."""

    def __init__(self, app: FastAPI) -> None:
        self.gateway: Gateway = app.state.gateway
        super().__init__(app, self.gateway.settings.max_body_bytes)

    async def answer(self, scope: Scope, fields: JSONObject) -> JSONResponse:
        """What the route and the exception handlers answer for these fields."""
        gw = self.gateway
        try:
            return await gw.submit(Q.of(Q.BrokerHeartbeat, fields))
        except UnavailableError as e:
            return unavailable_answer(e)
        except CommandArgumentError as e:
            return argument_answer(gw, REQUEST_TYPE, e)
        except Exception as e:  # noqa: BLE001 - a bug: logged, answered 500 as the app's handler does
            return internal_error(scope["method"], scope["path"], e)

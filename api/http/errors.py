"""Errors at the HTTP boundary: JSON error answers, the exception handlers, and the request body limit.

* 422 VALIDATION_ERROR: malformed input (bad JSON, wrong type, missing or unknown field, a value a command
  constructor refuses), naming every offending field. Nothing is proposed.
* 413 BODY_TOO_LARGE: refused before the body is parsed (BodyLimitMiddleware).
* 401 UNAUTHORIZED (auth.py), 404, 405, 409 (refused raft operations: RefusedError, MemberNotFoundError):
  the same JSON shape.
* 503 UNAVAILABLE: UnavailableError; the outcome of a proposal is then unknown, like a RocketMQ timeout.
* NotLeaderError is not an error here: HTTP 200 with the 2007 envelope naming the leader.
Anything else is a bug: logged with its traceback, answered 500 INTERNAL. The service's errors
(api/service/errors.py: ApiError, invalid and validation_error are defined there, beside the others, so that
api/service/config_requests.py and the remoting front end raise them without importing this module) are what this maps;
Raft errors never reach here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.service import (
    ApiError,
    CommandArgumentError,
    MemberNotFoundError,
    NotLeaderError,
    RefusedError,
    UnavailableError,
    invalid,
    not_leader_result,
    validation_error,
)
from statemachine.values import JSON, JSONObject

if TYPE_CHECKING:
    from api.http.routes.common import Gateway  # it imports this module

log = logging.getLogger("controllerd.api")

_LOCATIONS = ("body", "path", "query", "header", "cookie")
_STATUS_ERRORS = {
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "BODY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def api_error_response(e: ApiError) -> JSONResponse:
    """An ApiError's answer: HTTP `status` with {"error", "message", "errors"?}."""
    return error_response(e.status, e.error, e.message, errors=e.errors, headers=e.headers)


def error_response(
    status: int,
    error: str,
    message: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: JSON,
) -> JSONResponse:
    content: JSONObject = {"error": error, "message": message}
    if errors is not None:
        content["errors"] = errors
    content.update(extra)
    return JSONResponse(content, status_code=status, headers=dict(headers or {}))


def not_leader_envelope(e: NotLeaderError) -> JSONObject:
    """2007 as RocketMQ answers it (api.service.not_leader_result), naming the leader's HTTP address."""
    return not_leader_result(e, e.leader_address).to_envelope()


# Command field names (commands.FIELDS) that differ from the request body's (RocketMQ's heartbeat spelling).
_BODY_NAMES = {"heartbeatTimeoutMillis": "heartbeatTimeoutMills", "syncStateSetEpoch": "syncStateSet.syncStateSetEpoch"}


def argument_error(e: CommandArgumentError) -> ApiError:
    """A command constructor's refusal as a 422 naming the request body's field (the whole body when the
    refusal names none)."""
    field = _BODY_NAMES.get(e.field, e.field) if e.field else "body"
    return invalid(field, e.message)


def refused(e: RefusedError) -> ApiError:
    """A refused admin operation: 404 when the peer is no member, else 409 with its reason."""
    return ApiError(404 if isinstance(e, MemberNotFoundError) else 409, e.error, e.message)


# ---------------------------------------------------------------------------------------- 422 from pydantic


def field_errors(errors: Iterable[Mapping[str, JSON]], content_type: str = "") -> list[dict[str, str]]:
    out = []
    for e in errors:
        loc = tuple(e.get("loc", ()))
        location = loc[0] if loc and loc[0] in _LOCATIONS else "body"
        rest = loc[1:] if loc and loc[0] in _LOCATIONS else loc
        kind = str(e.get("type", "value_error"))
        message = str(e.get("msg", "invalid"))
        if kind == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "")
            pos = f" at position {rest[0]}" if rest else ""
            out.append(
                {
                    "field": "body",
                    "location": "body",
                    "type": kind,
                    "message": f"invalid JSON{pos}" + (f": {reason}" if reason else ""),
                }
            )
            continue
        field = ".".join(str(x) for x in rest) or location
        if field == "body" and kind in ("model_attributes_type", "dict_type") and "json" not in content_type:
            message = "the body must be a JSON object sent with Content-Type: application/json"
        elif field == "body" and kind == "missing":
            message = "a JSON body is required"
        out.append({"field": field, "location": location, "message": message, "type": kind})
    return out


# ----------------------------------------------------------------------------------------------- handlers


def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


def request_type_of(request: Request) -> str | None:
    """The RocketMQ request type the matched route serves (its OpenAPI `x-request-type`)."""
    route = request.scope.get("route")
    extra = getattr(route, "openapi_extra", None) or {}
    return extra.get("x-request-type")


def api_error_answer(gw: Gateway, request_type: str | None, exc: ApiError) -> JSONResponse:
    """An ApiError's answer, counted: a 401 or 422 as a rejection, and `request_type` (when the route serves
    one) as failed."""
    if exc.status in (401, 422):
        gw.metrics.rejected("unauthorized" if exc.status == 401 else "validation")
    if request_type:
        gw.metrics.observe_request(request_type, "failed")
    return api_error_response(exc)


def argument_answer(gw: Gateway, request_type: str | None, exc: CommandArgumentError) -> JSONResponse:
    """A command constructor's refusal: the 422 naming the request body's field."""
    return api_error_answer(gw, request_type, argument_error(exc))


def unavailable_answer(exc: Exception) -> JSONResponse:
    """503 UNAVAILABLE: not served in time or the node cannot serve (a proposal's outcome is unknown)."""
    return error_response(503, "UNAVAILABLE", str(exc), headers={"Retry-After": "1"})


def internal_error(method: str, path: str, exc: BaseException) -> JSONResponse:
    """A bug: logged with its traceback, answered 500 INTERNAL."""
    log.error("unhandled error answering %s %s", method, path, exc_info=exc)
    return error_response(500, "INTERNAL", f"internal error: {type(exc).__name__}")


def install_handlers(app: FastAPI) -> None:
    from api.http import auth  # auth imports this module

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        gw = _gateway(request)
        denied = auth.denied(request)  # an unauthenticated caller learns nothing about the schema
        if denied is not None:
            gw.metrics.rejected("unauthorized")
            return api_error_response(denied)
        gw.metrics.rejected("validation")
        rt = request_type_of(request)
        if rt:
            gw.metrics.observe_request(rt, "failed")
        return api_error_response(validation_error(field_errors(exc.errors(), request.headers.get("content-type", ""))))

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return api_error_answer(_gateway(request), request_type_of(request), exc)

    async def on_not_leader(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, NotLeaderError)
        return JSONResponse(not_leader_envelope(exc))

    async def on_unavailable(request: Request, exc: Exception) -> JSONResponse:
        return unavailable_answer(exc)

    async def on_refused(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RefusedError)
        return await on_api_error(request, refused(exc))

    async def on_bad_argument(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CommandArgumentError)
        return argument_answer(_gateway(request), request_type_of(request), exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        error = _STATUS_ERRORS.get(exc.status_code, f"HTTP_{exc.status_code}")
        return error_response(exc.status_code, error, str(exc.detail), headers=exc.headers)

    async def on_bug(request: Request, exc: Exception) -> JSONResponse:
        return internal_error(request.method, request.url.path, exc)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(NotLeaderError, on_not_leader)
    app.add_exception_handler(UnavailableError, on_unavailable)
    app.add_exception_handler(RefusedError, on_refused)
    app.add_exception_handler(CommandArgumentError, on_bad_argument)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_bug)


# --------------------------------------------------------------------------------------------- body limit


class BodyLimitMiddleware:
    """Refuse request bodies over `max_bytes` with 413 before anything parses them: at once when
    Content-Length says so, else while counting the streamed chunks. The body (at most `max_bytes`) is
    buffered and replayed to the application, so the 413 can be sent before the application starts.

    Before answering 413, up to `drain_bytes` more of the body are read and dropped: a server that closes
    with unread request bytes makes the client's TCP stack reset the connection, and the client may then
    never see the 413. A body larger than that is not read: the answer is sent and the connection closed."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        on_reject: Callable[[], None] | None = None,
        drain_bytes: int = 1024 * 1024,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.on_reject = on_reject
        self.drain_bytes = drain_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None and length > self.max_bytes:
            if length <= self.max_bytes + self.drain_bytes:
                await self._drain(receive, length)
            await self._refuse(scope, receive, send, f"Content-Length {length}")
            return
        if length is not None:
            # The HTTP parser delivers exactly Content-Length bytes, which is within the limit: nothing to
            # count or replay (the common case, and the broker heartbeat's hot path).
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                if message.get("more_body", False):
                    await self._drain(receive, self.drain_bytes)
                await self._refuse(scope, receive, send, f"more than {self.max_bytes} bytes streamed")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(
            scope, replaying({"type": "http.request", "body": b"".join(chunks), "more_body": False}, receive), send
        )

    @staticmethod
    async def _drain(receive: Receive, budget: int) -> None:
        read = 0
        while read < budget:
            message = await receive()
            if message["type"] != "http.request":
                return
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str) -> None:
        if self.on_reject is not None:
            self.on_reject()
        message = f"request body too large ({what}); the limit is {self.max_bytes} bytes"
        response = error_response(413, "BODY_TOO_LARGE", message, headers={"Connection": "close"}, limit=self.max_bytes)
        await response(scope, receive, send)


def replaying(first: Message, receive: Receive) -> Receive:
    """`receive` that answers `first` (a message already taken from `receive`) once, then reads on."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return first
        return await receive()

    return replay


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None

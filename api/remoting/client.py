"""A small RocketMQ remoting client (what a broker's controller client does on the wire): many requests in
flight on one connection, matched by opaque. Used by the tests and the simulated brokers (tools/brokersim),
with the mapping between a broker request of the HTTP API and its RemotingCommand (`broker_request`,
`envelope`)."""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
from collections.abc import Mapping

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.codec import FrameDecoder, RemotingCommand
from statemachine import codes as C
from statemachine.values import JSON, JSONObject

# The broker requests of the HTTP API (/api/v1/controller/<route>) and their request codes.
ROUTES = {
    "heartbeat": H.BROKER_HEARTBEAT,
    "next-broker-id": C.GET_NEXT_BROKER_ID,
    "apply-broker-id": C.APPLY_BROKER_ID,
    "register-broker": C.REGISTER_BROKER,
    "elect-master": C.ELECT_MASTER,
    "alter-sync-state-set": C.ALTER_SYNC_STATE_SET,
    "replica-info": C.GET_REPLICA_INFO,
    "metadata": H.GET_METADATA_INFO,
}


def broker_request(route: str, fields: Mapping[str, JSON]) -> tuple[int, JSONObject, bytes | None]:
    """(code, extFields, body) of the HTTP broker request `route` with JSON `fields`, as a Java broker sends it:
    the fields as extFields, 1001's SyncStateSet as the body, and 1002's fields the Java header leaves at their
    initial values (clusterName "", brokerId -1, designateElect false) filled in."""
    code = ROUTES[route]
    ext = dict(fields)
    body = None
    if code == C.ALTER_SYNC_STATE_SET:
        body = json.dumps(ext.pop("syncStateSet")).encode()
    elif code == C.ELECT_MASTER:
        ext = {"clusterName": "", "brokerId": -1, "designateElect": False} | ext
    return code, ext, body


def envelope(code: int, resp: RemotingCommand) -> JSONObject:
    """A remoting answer to request `code` as the HTTP API's envelope: the header typed by the Java response
    header class (2007's fields when it is one), its null fields (left out on the wire) back as null, the body
    as JSON (1010's properties text as it is)."""
    schema = H.NOT_LEADER if resp.code == C.CONTROLLER_NOT_LEADER else H.RESPONSE.get(code, ())
    header = H.typed(schema, resp.ext_fields)
    if header or (schema and resp.code == C.SUCCESS):
        header = {name: header.get(name) for name, _, _ in schema} | header
    body: JSON = None
    if resp.body:
        body = resp.body.decode() if code == H.GET_CONTROLLER_CONFIG else json.loads(resp.body)
    return {
        "code": resp.code,
        "codeName": C.code_name(resp.code),
        "remark": resp.remark,
        "header": header or None,
        "body": body,
    }


class RemotingClient(asyncio.Protocol):
    def __init__(self, serialize_type: int = codec.ROCKETMQ) -> None:
        self.serialize_type = serialize_type
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.opaques = itertools.count(1)
        self.closed = asyncio.get_running_loop().create_future()
        self.unmatched: list[RemotingCommand] = []  # frames answering no pending request (e.g. a oneway one)

    @classmethod
    async def connect(
        cls, host: str, port: int, serialize_type: int = codec.ROCKETMQ, tls: ssl.SSLContext | None = None
    ) -> RemotingClient:
        """Connected to host:port, over TLS with `tls` (the server's name checked as `host` if it checks names)."""
        _, proto = await asyncio.get_running_loop().create_connection(
            lambda: cls(serialize_type), host, port, ssl=tls, server_hostname=host if tls is not None else None
        )
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            cmd = codec.decode(frame)
            fut = self.pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            else:
                self.unmatched.append(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("remoting connection closed"))
        self.pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    def send_raw(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def request_nowait(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes | None = None, oneway: bool = False
    ) -> asyncio.Future[RemotingCommand]:
        opaque = next(self.opaques)
        fields = {
            k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in (ext or {}).items()
            if v is not None
        }
        cmd = RemotingCommand(
            code, opaque, codec.ONEWAY_FLAG if oneway else 0, None, fields, body, serialize_type=self.serialize_type
        )
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        if not oneway:
            self.pending[opaque] = fut
        self.send_raw(codec.encode(cmd))
        return fut

    async def request(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes | None = None, timeout: float = 10.0
    ) -> RemotingCommand:
        return await asyncio.wait_for(self.request_nowait(code, ext, body), timeout)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

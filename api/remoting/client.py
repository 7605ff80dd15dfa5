"""A small RocketMQ remoting client (what a broker's controller client does on the wire): many requests in
flight on one connection, matched by opaque. Used by the tests, the benchmark and simulated brokers."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from api.remoting import codec
from api.remoting.codec import FrameDecoder, RemotingCommand


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
    async def connect(cls, host: str, port: int, serialize_type: int = codec.ROCKETMQ) -> RemotingClient:
        _, proto = await asyncio.get_running_loop().create_connection(lambda: cls(serialize_type), host, port)
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
        self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None, oneway: bool = False
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
        self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None, timeout: float = 10.0
    ) -> RemotingCommand:
        return await asyncio.wait_for(self.request_nowait(code, ext, body), timeout)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

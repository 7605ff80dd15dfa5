"""The remoting listener writes the answers of one loop turn together (api/remoting/server.py, _Connection.flush):
pipelined requests answered in the same turn leave in one write, in request order, and answers queued before a
close still leave. Against the real listener and Dispatcher (the bare echo service behind them), on a socket."""

from __future__ import annotations

import asyncio
from typing import Any

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.codec import RemotingCommand
from api.remoting.server import RemotingServer, _Connection
from tools.bench import bare_remoting

HEARTBEAT = {"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1", "brokerId": "1", "epoch": "0"}


class Recording:
    """The connection's transport, with every write kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _connected(
    server: RemotingServer,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, _Connection, Recording]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(codec.encode(RemotingCommand(H.BROKER_HEARTBEAT, opaque=99, ext_fields=HEARTBEAT)))
    (first,) = await _read_answers(reader, 1)  # answered: the listener has the connection
    assert first.opaque == 99
    (conn,) = server.connections
    rec = Recording(conn.transport)
    conn.transport = rec  # type: ignore[assignment]  # records, then delegates
    return reader, writer, conn, rec


async def _read_answers(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    decoder, out = codec.FrameDecoder(), []
    for _ in range(n):
        prefix = await asyncio.wait_for(reader.readexactly(4), 10)
        (frame,) = decoder.feed(prefix + await reader.readexactly(int.from_bytes(prefix, "big")))
        out.append(codec.decode(frame))
    return out


async def _pipelined(n: int) -> tuple[list[RemotingCommand], list[bytes]]:
    server = await bare_remoting.start(0, lean=False)
    try:
        reader, writer, _, rec = await _connected(server)
        frames = [codec.encode(RemotingCommand(H.BROKER_HEARTBEAT, opaque=k, ext_fields=HEARTBEAT)) for k in range(n)]
        writer.write(b"".join(frames))  # one segment: the listener reads them in one data_received
        answers = await _read_answers(reader, n)
        writer.close()
        return answers, rec.writes
    finally:
        await server.stop()


def test_answers_of_one_turn_leave_in_one_write_in_request_order() -> None:
    answers, writes = asyncio.run(_pipelined(5))
    assert [a.opaque for a in answers] == [0, 1, 2, 3, 4]
    assert all(a.is_response and a.remark == "Heart beat success" for a in answers)
    assert len(writes) == 1, [len(w) for w in writes]
    assert writes[0] == b"".join(codec.encode(a) for a in answers)


async def _close_after_send() -> list[RemotingCommand]:
    server = await bare_remoting.start(0, lean=False)
    try:
        reader, writer, conn, rec = await _connected(server)
        conn.send(RemotingCommand(H.BROKER_HEARTBEAT, opaque=7).response(0, "queued"))
        conn.close()  # in the same turn as the send: the queued answer still goes before the close
        answers = await _read_answers(reader, 1)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # then the close
        assert len(rec.writes) == 1
        writer.close()
        return answers
    finally:
        await server.stop()


def test_an_answer_queued_before_a_close_is_still_written() -> None:
    (answer,) = asyncio.run(_close_after_send())
    assert (answer.opaque, answer.remark) == (7, "queued")

"""raft/leaf/admission.py, the one admission of the TLS listeners (remoting, HTTPS, raft peers), on its own: real
loopback sockets and real certificates (tools/pki.py), on the stock loop and on uvloop (what controllerd runs).
A plain connection on an enforcing listener is refused, on a permissive one served; a connection past the cap
drops the oldest still admitting; a handshake past its deadline is refused with that reason; the context is
asked per TLS connection."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
import uvloop

from raft.leaf.admission import TlsAdmission, peer_address
from tests.raft.helpers import eventually
from tools.pki import CA

Runner = Callable[[Coroutine[Any, Any, None]], None]
TRUNCATED_CLIENT_HELLO = b"\x16\x03\x01\x00\xc8\x01\x00"  # a ClientHello's first 7 bytes, then nothing
DEADLINE = 10.0


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    def runner(coro: Coroutine[Any, Any, None]) -> None:
        bounded = asyncio.wait_for(coro, DEADLINE)
        uvloop.run(bounded) if request.param == "uvloop" else asyncio.run(bounded)

    return runner


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return CA(tmp_path_factory.mktemp("pki"))


class Echo(asyncio.Protocol):
    """An admitted connection: echoes what it reads, remembers the client certificate's CN (None: plain)."""

    def __init__(self, admitted: list[Echo]) -> None:
        self.admitted, self.tls = admitted, False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.admitted.append(self)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


class Listener:
    def __init__(self, ca: CA, mode: str, handshakes_max: int, timeout_s: float) -> None:
        pair = ca.issue("server")
        self.server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_ctx.load_cert_chain(pair.cert, pair.key)
        self.client_ctx = ca.client_context()
        self.contexts = 0  # how often the admission asked for the current context
        self.refused: list[tuple[str, str, str]] = []
        self.admitted: list[Echo] = []
        self.admission = TlsAdmission(
            self.context,
            lambda: Echo(self.admitted),
            lambda peer, reason, text: self.refused.append((peer, reason, text)),
            lambda e: False,
            handshakes_max=handshakes_max,
            handshake_timeout_s=timeout_s,
            mode=mode,
        )

    def context(self) -> ssl.SSLContext:
        self.contexts += 1
        return self.server_ctx

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.refused]


@contextlib.asynccontextmanager
async def listening(
    ca: CA, mode: str = "enforcing", handshakes_max: int = 8, timeout_s: float = DEADLINE
) -> AsyncIterator[tuple[Listener, tuple[str, int]]]:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    listener = Listener(ca, mode, handshakes_max, timeout_s)
    task = asyncio.get_running_loop().create_task(listener.admission.accept(sock))
    try:
        yield listener, sock.getsockname()[:2]
    finally:
        tasks = [task, *listener.admission.admitting]
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=1.0)
        for echo in listener.admitted:
            echo.transport.close()
        sock.close()


async def echoed(address: tuple[str, int], ctx: ssl.SSLContext | None) -> bytes:
    reader, writer = await asyncio.open_connection(*address, ssl=ctx, server_hostname="127.0.0.1" if ctx else None)
    try:
        writer.write(b"ping")
        return await reader.readexactly(4)
    finally:
        writer.close()


async def half_open(address: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """A connection that starts a TLS handshake and never finishes it; with our host:port as the server sees it."""
    reader, writer = await asyncio.open_connection(*address)
    writer.write(TRUNCATED_CLIENT_HELLO)
    return reader, writer, peer_address(writer.get_extra_info("sockname"))


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await reader.read() == b""
    except ConnectionResetError:  # closed with the peeked bytes unread: a reset
        return True


def test_enforcing_refuses_plain_and_admits_tls_with_the_context_of_the_moment(run: Runner, ca: CA) -> None:
    async def main() -> None:
        async with listening(ca, "enforcing") as (listener, address):
            assert await echoed(address, listener.client_ctx) == b"ping"
            assert [e.tls for e in listener.admitted] == [True] and listener.contexts == 1
            reader, writer = await asyncio.open_connection(*address)
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
            me = peer_address(writer.get_extra_info("sockname"))
            assert await closed_by_server(reader)
            writer.close()
            await eventually(lambda: len(listener.refused) == 1)
            assert listener.refused == [(me, "plain_on_enforcing", "a plain connection on a TLS-only port")]
            assert len(listener.admitted) == 1 and listener.contexts == 1  # refused before any context
            assert await echoed(address, listener.client_ctx) == b"ping"
            assert listener.contexts == 2  # asked again for the next connection (a reloaded one applies)
            await eventually(lambda: not listener.admission.admitting)

    run(main())


def test_permissive_serves_plain_and_tls_on_one_port(run: Runner, ca: CA) -> None:
    async def main() -> None:
        async with listening(ca, "permissive") as (listener, address):
            assert await echoed(address, None) == b"ping"
            assert await echoed(address, listener.client_ctx) == b"ping"
            assert [e.tls for e in listener.admitted] == [False, True]
            assert listener.refused == [] and listener.contexts == 1

    run(main())


def test_one_past_the_cap_drops_the_oldest_still_admitting(run: Runner, ca: CA) -> None:
    async def main() -> None:
        async with listening(ca, handshakes_max=2) as (listener, address):
            held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, str]] = []
            for _ in range(3):
                held.append(await half_open(address))
                await eventually(lambda: len(listener.refused) + len(listener.admission.admitting) == len(held))
            oldest, *newer = (me for _, _, me in held)
            assert listener.refused == [
                (oldest, "too_many_handshakes", "dropped: the oldest of 2 connections still in their TLS handshake")
            ]
            assert list(listener.admission.admitting.values()) == newer
            assert await closed_by_server(held[0][0])
            assert await echoed(address, listener.client_ctx) == b"ping"  # drops the next oldest, gets through
            assert listener.reasons() == ["too_many_handshakes"] * 2 and listener.refused[1][0] == newer[0]
            for _, writer, _ in held:
                writer.close()

    run(main())


def test_a_handshake_past_its_deadline_is_refused_with_that_reason(run: Runner, ca: CA) -> None:
    async def main() -> None:
        async with listening(ca, timeout_s=0.2) as (listener, address):
            reader, writer, me = await half_open(address)
            await eventually(lambda: len(listener.refused) == 1)
            assert listener.refused == [(me, "handshake_timeout", "TLS handshake not finished within 0.2 s")]
            assert await closed_by_server(reader)
            assert not listener.admission.admitting
            writer.close()
            # no first byte at all counts against the same deadline
            reader, writer = await asyncio.open_connection(*address)
            await eventually(lambda: len(listener.refused) == 2)
            assert listener.reasons()[1] == "handshake_timeout"
            writer.close()

    run(main())


def test_a_plain_listener_mode_is_not_an_admission(ca: CA) -> None:
    with pytest.raises(ValueError, match="must be one of permissive, enforcing"):
        TlsAdmission(
            ssl.create_default_context,
            asyncio.Protocol,
            print,
            bool,
            handshakes_max=1,
            handshake_timeout_s=1,
            mode="disabled",
        )

"""The admission of a TLS listener's connections, between accept and a finished handshake: the one accept loop
of the remoting port (api/remoting/server.py), the HTTPS port (api/service/tls.py, TlsAcceptor) and the raft
peers' port (raft/transport/tcp.py). A leaf module (raft/leaf/__init__.py): standard library only.

Each accepted connection's first byte is peeked (`peek_first_byte`): 0x16 starts a TLS handshake, made with the
context current at that moment (`context()`, asked per connection: a reloaded certificate, key or CA bundle
applies to the next one); plain bytes are refused on an enforcing listener and served plain on a permissive one
(RocketMQ's TlsModeHandler). The first byte and the handshake together have `handshake_timeout_s`; at most
`handshakes_max` connections wait for theirs, and one more drops the oldest of them (half-open handshakes hold a
bounded amount of memory, and a client that handshakes at once always gets through). Every refusal is one call
`on_refused(peer, reason, text)` (the listener logs and counts it); an admitted connection goes to a protocol of
`factory`, as `loop.connect_accepted_socket` hands it over.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable

from raft.leaf.peercert import HANDSHAKE_BACKSTOP_S, HANDSHAKE_RECORD, peek_first_byte, refusal_reason

MODES = ("permissive", "enforcing")  # plain bytes served, or refused (a TLS listener is never "disabled")
ACCEPT_RETRY_S = 1.0  # after a failed accept (EMFILE, ...): Netty's ServerBootstrapAcceptor also pauses 1 s


def peer_address(addr: tuple[object, ...]) -> str:
    """An accepted socket's peer as host:port, an IPv6 host in brackets."""
    host, port = str(addr[0]), addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class TlsAdmission:
    """The accept loop of one TLS listener (`await accept(sock)`, cancelled to stop) and the connections it is
    admitting: `admitting` maps each one's task, oldest first, to its peer address. `handshakes_max` and
    `handshake_timeout_s` apply to the next connection (tests lower them).

    `on_refused(peer, reason, text)`: a connection refused, `reason` a counter label (`plain_on_enforcing`,
    `too_many_handshakes` or one of peercert.refusal_reason's), `text` the log line's end. `on_accept_failed(e)`
    logs a failed accept and says whether to go on (after ACCEPT_RETRY_S). `waiting_for` and `plain_refused`
    name, in the texts, what a dropped connection was waiting for and why a plain one is refused."""

    def __init__(
        self,
        context: Callable[[], ssl.SSLContext],
        factory: Callable[[], asyncio.Protocol],
        on_refused: Callable[[str, str, str], None],
        on_accept_failed: Callable[[OSError], bool],
        *,
        handshakes_max: int,
        handshake_timeout_s: float,
        mode: str = "enforcing",
        plain_refused: str = "a plain connection on a TLS-only port",
        waiting_for: str = "TLS handshake",
        peer_name: Callable[[tuple[object, ...]], str] = peer_address,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"TLS admission mode {mode!r}: must be one of {', '.join(MODES)}")
        self._context, self._factory = context, factory
        self._on_refused, self._on_accept_failed = on_refused, on_accept_failed
        self.handshakes_max = handshakes_max
        self.handshake_timeout_s = handshake_timeout_s
        self.mode, self.plain_refused, self.waiting_for, self.peer_name = mode, plain_refused, waiting_for, peer_name
        self.admitting: dict[asyncio.Task[None], str] = {}  # (oldest first) -> peer: first byte or handshake awaited

    async def accept(self, sock: socket.socket) -> None:
        """Accept on non-blocking `sock` until cancelled (or `on_accept_failed` says stop)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, addr = await loop.sock_accept(sock)
            except OSError as e:  # out of file descriptors, say
                if not self._on_accept_failed(e):
                    return
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            peer = self.peer_name(addr)
            if len(self.admitting) >= self.handshakes_max:
                oldest = next(iter(self.admitting))
                self._on_refused(
                    self.admitting.pop(oldest),
                    "too_many_handshakes",
                    f"dropped: the oldest of {self.handshakes_max} connections still in their {self.waiting_for}",
                )
                oldest.cancel()
            task = loop.create_task(self._admit(conn, peer))
            self.admitting[task] = peer

    async def _admit(self, conn: socket.socket, peer: str) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        deadline = loop.time() + self.handshake_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                first = await peek_first_byte(loop, conn)
                if first == b"":
                    conn.close()  # closed before a byte: nothing to serve, nothing to refuse
                    return
                if first[0] != HANDSHAKE_RECORD:
                    if self.mode == "enforcing":
                        conn.close()
                        self._on_refused(peer, "plain_on_enforcing", self.plain_refused)
                        return
                    await loop.connect_accepted_socket(self._factory, conn)
                    return
                await loop.connect_accepted_socket(
                    self._factory,
                    conn,
                    ssl=self._context(),
                    ssl_handshake_timeout=max(deadline - loop.time(), 0.0) + HANDSHAKE_BACKSTOP_S,
                )
        except asyncio.CancelledError:  # dropped as the oldest, or the listener stops
            conn.close()
            raise
        except (OSError, TimeoutError) as e:  # ssl.SSLError is an OSError
            conn.close()
            self._on_refused(peer, *refusal_reason(e, self.handshake_timeout_s))
        finally:
            task = asyncio.current_task()
            if task is not None:
                self.admitting.pop(task, None)

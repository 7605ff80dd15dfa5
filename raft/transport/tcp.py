"""TcpTransport: Raft messages between nodes over TCP, batched per event-loop turn and authenticated per frame.

Each node listens for inbound connections and opens one outbound connection per peer, so a TCP connection
carries traffic in one direction only (the receiver never writes on it; that direction is kept free for a
future request/response kind such as snapshot chunks). Frame layout: docs/wire-format.md.

Delivery is best effort, as Raft assumes: while a peer is unreachable its messages are dropped and counted,
never queued without bound, and Raft's own retransmission repairs the gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Mapping

from raft.core.messages import Message
from raft.leaf.admission import ACCEPT_RETRY_S, TlsAdmission
from raft.leaf.peercert import HANDSHAKE_BACKSTOP_S, common_name, refusal_reason
from raft.options import PeerTls, TransportOptions
from raft.transport.codec import (
    KIND_SNAPSHOT,
    MAX_FRAME_BYTES,
    CodecError,
    FrameReader,
    batch_overhead,
    decode_batch,
    decode_snapshot_payload,
    encode_batch,
    encode_message,
    encode_snapshot_payload,
    frame_header,
    frame_key,
    frame_kind,
    header_bytes,
    sender_bytes,
)

logger = logging.getLogger(__name__)

Address = tuple[str, int]
OnMessages = Callable[[list[Message]], None]
OnSnapshotFrame = Callable[[str, tuple[object, ...]], None]

COUNTERS = (
    "frames_sent",
    "frames_received",  # authenticated frames only
    "messages_sent",  # handed to the kernel; what happens on the wire after that is TCP's business
    "messages_received",  # delivered to on_messages
    "bytes_sent",
    "bytes_received",  # every inbound byte, authenticated or not
    "auth_failures",  # a header or payload tag that did not verify (the connection is closed)
    "decode_failures",  # oversized frames, and authenticated frames we cannot decode
    "dropped",  # outbound: unknown or unreachable peer, full buffer, oversized message, closed transport
    "spoofed",  # inbound: message whose frm is not the frame's authenticated sender
    "misdirected",  # inbound: message whose to is not this node
    "connects",  # outbound connections established
    "refused",  # inbound: closed at once, max_unauthenticated_connections already waiting to authenticate
    "unauthenticated_closed",  # inbound: no authenticated header within auth_timeout_s
    "idle_closed",  # inbound: nothing received for idle_timeout_s
    "identity_mismatch",  # peer TLS: the certificate names another node than the one at the other end
    "tls_refused",  # peer TLS: handshakes refused, either direction (by reason: stats()'s tls_refused_<reason>)
)
TLS_REFUSED = (
    "tls_refused_"  # stats() keys tls_refused_<reason>: /metrics' controllerd_tls_refused_total{listener="raft"}
)


def certificate_name(transport: asyncio.BaseTransport) -> str | None:
    """The subject CN of the verified certificate at the other end of a TLS connection (None: plain, or none)."""
    return common_name(transport.get_extra_info("peercert"))


def format_address(addr: Address) -> str:
    """(host, port) as host:port, an IPv6 host in brackets."""
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(text: str) -> Address:
    """host:port (an IPv6 host in brackets) as (host, port); ValueError naming the text otherwise."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {text!r}")
    return host, int(port)


class TcpTransport:
    def __init__(
        self,
        node_id: str,
        listen: Address,
        peers: Mapping[str, Address],
        secret: bytes,
        on_messages: OnMessages,
        options: TransportOptions | None = None,
        tls: PeerTls | None = None,
    ) -> None:
        self.node_id = node_id
        self.tls = tls
        self.options = options or TransportOptions()
        self._listen = listen
        self._key = frame_key(secret)
        self._sender = sender_bytes(node_id)  # ValueError for an id a frame header cannot hold
        self._header_bytes = header_bytes(node_id)
        self._on_messages = on_messages
        self.on_snapshot_frame: OnSnapshotFrame | None = None  # InstallSnapshot chunk traffic (raft.node.install)
        # Called with a peer's id when an inbound connection on which that peer authenticated is closed by
        # the other end (its process died, say): the node uses it to detect a dead leader early.
        self.on_peer_lost: Callable[[str], None] | None = None
        self._peers: dict[str, _Peer] = {}
        # Room for packed messages in one frame; a single message bigger than this can never be sent.
        self._frame_room = self.options.max_frame_bytes - self._header_bytes - batch_overhead(node_id)
        if not 0 < self._frame_room <= MAX_FRAME_BYTES:
            raise ValueError(f"max_frame_bytes={self.options.max_frame_bytes} leaves no room or exceeds 2**32-1")
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None  # peer TLS: our own listening socket (see start)
        self._accepting: asyncio.Task[None] | None = None  # peer TLS: the accept loop
        self._admission: TlsAdmission | None = None  # peer TLS: the connections in their handshake (see start)
        self.tls_refusals: dict[str, int] = {}  # peer TLS: reason -> handshakes refused
        self._address: Address | None = None
        self._inbound: set[_Inbound] = set()
        self._unauthenticated: set[_Inbound] = set()  # inbound connections whose first header has not verified
        self._dirty: set[_Peer] = set()  # peers with messages to flush this turn
        self._flush_handle: asyncio.Handle | None = None
        self._closed = False
        self.update_peers(peers)

    # --- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        host, port = self._listen
        if self.tls is None:
            self._server = await self._loop.create_server(lambda: _Inbound(self), host, port)
            self._address = self._server.sockets[0].getsockname()[:2]
            return
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=128)
        self._sock.setblocking(False)
        self._address = self._sock.getsockname()[:2]
        # Our own accept loop, so that each handshake uses the context current at that moment
        # (`tls.server_context()`, a changed CA bundle included) and every refused handshake is seen here: one
        # warning naming the address and the reason, one count (`refused_handshake`). The first byte must start
        # a TLS handshake; at most max_unauthenticated_connections handshakes wait at once (one more drops the
        # oldest), each for at most auth_timeout_s (raft.leaf.admission).
        self._admission = TlsAdmission(
            self.tls.server_context,
            lambda: _Inbound(self),
            lambda peer, reason, text: self.refused_handshake("inbound", peer, reason, text),
            self._accept_failed,
            handshakes_max=self.options.max_unauthenticated_connections,
            handshake_timeout_s=self.options.auth_timeout_s,
            plain_refused="a plain connection, TLS required",
        )
        self._accepting = self._loop.create_task(self._admission.accept(self._sock), name=f"raft-accept-{self.node_id}")

    def _accept_failed(self, e: OSError) -> bool:
        if self._closed:
            return False
        logger.error("%s: raft accept failed: %s; retrying in %.1f s", self.node_id, e, ACCEPT_RETRY_S)
        return True

    def refused_handshake(self, direction: str, peer: str, reason: str, text: str) -> None:
        """A TLS handshake refused: one warning naming the remote address and the reason, one count."""
        self._counters["tls_refused"] += 1
        self.tls_refusals[reason] = self.tls_refusals.get(reason, 0) + 1
        logger.warning(
            "%s: raft %s TLS connection %s %s refused: %s",
            self.node_id,
            direction,
            "from" if direction == "inbound" else "to",
            peer,
            text,
        )

    @property
    def address(self) -> Address:
        """The bound (host, port); with port 0 in `listen`, the port the OS picked."""
        if self._address is None:
            raise RuntimeError("TcpTransport.start() has not run")
        return self._address

    async def close(self) -> None:
        """Hand buffered messages to the kernel, then close every connection and the listener."""
        if self._closed:
            return
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        if self._loop is not None:
            self._flush()
        self._closed = True
        waits: list[asyncio.Future[None]] = []
        for peer in list(self._peers.values()):
            waits += self._disconnect(peer)
        for conn in list(self._inbound):
            conn.close()
            waits.append(conn.lost)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in [self._accepting, *(self._admission.admitting if self._admission is not None else ())]:
            if task is not None:  # peer TLS: the accept loop and the handshakes in progress
                task.cancel()
                waits.append(task)
        if waits:  # wait for connection_lost so that nothing outlives us; bounded in case a peer stalls
            await asyncio.wait(waits, timeout=1.0)
        if self._sock is not None:
            self._sock.close()  # after the accept loop has stopped polling it

    def update_peers(self, peers: Mapping[str, Address]) -> None:
        """Replace the peer set. A removed peer, or one whose address changed, loses its connection and its
        buffered messages; a new one is connected lazily on its first message."""
        wanted = {pid: (str(addr[0]), int(addr[1])) for pid, addr in peers.items()}
        for pid, peer in list(self._peers.items()):
            if wanted.get(pid) != peer.address:
                del self._peers[pid]
                self._disconnect(peer)
        for pid, addr in wanted.items():
            if pid not in self._peers:
                self._peers[pid] = _Peer(pid, addr, self.options.backoff_min)

    def stats(self) -> dict[str, int]:
        pending = sum(p.pending_bytes + p.frame_bytes for p in self._peers.values())
        by_reason = {TLS_REFUSED + reason: n for reason, n in self.tls_refusals.items()}
        return {**self._counters, **by_reason, "pending_bytes": pending}

    # --- outbound ---------------------------------------------------------------------------------------

    def send(self, msgs: list[Message]) -> None:
        """Queue messages for their `to` peers; they leave in one frame per peer at the end of this loop turn
        (or at flush()).

        Never blocks and never raises for an unreachable peer: such messages are dropped and counted.
        Raises CodecError only for a message that cannot be encoded at all (a bug in the caller).
        """
        if self._loop is None:
            raise RuntimeError("TcpTransport.send() before start()")
        peers, counters, room, cap = self._peers, self._counters, self._frame_room, self.options.max_pending_bytes
        for m in msgs:
            peer = peers.get(m.to)
            if peer is None or self._closed or (peer.conn is None and peer.connecting is None and not self._dial(peer)):
                counters["dropped"] += 1
                continue
            data = encode_message(m)  # packed now: fixes the size for the cap and snapshots a mutable Message
            if len(data) > room or peer.pending_bytes + len(data) > cap:
                counters["dropped"] += 1
                if len(data) > room:
                    logger.warning(
                        "%s: dropped a %d-byte %r to %s: larger than a frame", self.node_id, len(data), m.type, m.to
                    )
                continue
            if not peer.pending:
                self._schedule_flush(peer)
            peer.pending.append(data)
            peer.pending_bytes += len(data)

    def prepare_snapshot_frame(self, body: tuple[object, ...]) -> tuple[bytes, bytes]:
        """(payload, header) of a snapshot frame, for send_snapshot_frame(prepared=...). Thread-safe: the
        leader encodes and tags (BLAKE2b, which releases the GIL) its 1 MiB chunk answers off the event loop."""
        payload = encode_snapshot_payload(self.node_id, body)
        return payload, frame_header(self._sender, payload, self._key)

    def send_snapshot_frame(
        self, to: str, body: tuple[object, ...], prepared: tuple[bytes, bytes] | None = None
    ) -> bool:
        """Queue one InstallSnapshot request or response for `to`, in its own frame after the messages of
        this turn (`prepared`: that frame already encoded by prepare_snapshot_frame(body)). Best effort like
        send(): False (and counted as dropped) if the peer is unknown, unreachable or backed up beyond
        max_pending_bytes; the requester's timeout repairs it."""
        if self._loop is None:
            raise RuntimeError("TcpTransport.send_snapshot_frame() before start()")
        peer = self._peers.get(to)
        if peer is None or self._closed or (peer.conn is None and peer.connecting is None and not self._dial(peer)):
            self._counters["dropped"] += 1
            return False
        payload, header = prepared if prepared is not None else (encode_snapshot_payload(self.node_id, body), None)
        if self._header_bytes + len(payload) > self.options.max_frame_bytes or (
            peer.pending_bytes + peer.frame_bytes + len(payload) > self.options.max_pending_bytes
        ):
            self._counters["dropped"] += 1
            return False
        self._schedule_flush(peer)
        peer.frames.append((header, payload))
        peer.frame_bytes += len(payload)
        return True

    def _dial(self, peer: _Peer) -> bool:
        """A peer with no connection: start connecting, unless we are backing off after a failure (then it
        counts as unreachable and its traffic is dropped)."""
        assert self._loop is not None
        if self._loop.time() < peer.retry_at:
            return False
        self._connect(peer)
        return True

    def _schedule_flush(self, peer: _Peer) -> None:
        """Flush this peer at the end of the loop turn (once connected; _open flushes what piled up)."""
        if peer.conn is not None:
            self._dirty.add(peer)
            if self._flush_handle is None:
                assert self._loop is not None
                self._flush_handle = self._loop.call_soon(self._flush)

    def flush(self) -> None:
        """Write what send() queued now instead of at the end of the loop turn: the node calls it once it has
        queued all of a round's messages (the end of its processing, and its acknowledgements after an fsync),
        so that they do not wait for the rest of the turn's callbacks. Same frames, same order."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()

    def _flush(self) -> None:
        self._flush_handle = None
        dirty, self._dirty = self._dirty, set()
        for peer in dirty:
            self._flush_peer(peer)

    def _flush_peer(self, peer: _Peer) -> None:
        """Write the peer's pending messages as few frames as the frame limit allows, until the socket
        buffer is above its high-water mark; the rest waits for resume_writing (or the pending cap)."""
        conn, pending = peer.conn, peer.pending
        if conn is None or conn.paused:
            return
        if not pending:
            self._flush_frames(peer, conn)
            return
        room, sent, left = self._frame_room, 0, peer.pending_bytes
        while sent < len(pending) and not (conn.paused or conn.closed or conn.transport.is_closing()):
            if left <= room:  # the common case: everything fits in one frame
                take, size = len(pending) - sent, left
            else:
                take, size = 0, 0
                while size + len(pending[sent + take]) <= room:
                    size += len(pending[sent + take])
                    take += 1
            self._write_frame(conn, pending[sent : sent + take])
            sent, left = sent + take, left - size
        del pending[:sent]
        peer.pending_bytes = left
        if not pending:
            self._flush_frames(peer, conn)

    def _flush_frames(self, peer: _Peer, conn: _Outbound) -> None:
        """Snapshot frames go after the messages, and only while the socket is not backed up."""
        frames = peer.frames
        n = 0
        while n < len(frames) and not (conn.paused or conn.closed or conn.transport.is_closing()):
            header, payload = frames[n]
            conn.transport.writelines((header or frame_header(self._sender, payload, self._key), payload))
            conn.last_write = self._loop_time()
            self._counters["frames_sent"] += 1
            self._counters["bytes_sent"] += self._header_bytes + len(payload)
            peer.frame_bytes -= len(payload)
            n += 1
        del frames[:n]

    def _write_frame(self, conn: _Outbound, packed: list[bytes]) -> None:
        payload = encode_batch(self.node_id, packed)
        conn.transport.writelines((frame_header(self._sender, payload, self._key), payload))
        conn.last_write = self._loop_time()
        counters = self._counters
        counters["frames_sent"] += 1
        counters["messages_sent"] += len(packed)
        counters["bytes_sent"] += self._header_bytes + len(payload)

    def _loop_time(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    def _connect(self, peer: _Peer) -> None:
        assert self._loop is not None
        peer.connecting = self._loop.create_task(self._open(peer), name=f"raft-connect-{self.node_id}-{peer.id}")

    async def _open(self, peer: _Peer) -> None:
        assert self._loop is not None
        host, port = peer.address
        try:
            async with asyncio.timeout(self.options.connect_timeout):
                if self.tls is None:
                    _, conn = await self._loop.create_connection(lambda: _Outbound(self, peer), host, port)
                else:
                    sock = await _connected_socket(self._loop, host, port)
        except (OSError, TimeoutError) as e:
            peer.connecting = None
            self._backoff(peer, f"connect failed: {e!r}")
            return
        if self.tls is not None:
            # TCP is up: what fails from here is the TLS handshake, refused with a warning and a count
            timeout = self.options.connect_timeout
            try:
                async with asyncio.timeout(timeout):
                    _, conn = await self._loop.create_connection(
                        lambda: _Outbound(self, peer),
                        sock=sock,
                        ssl=self.tls.client_context(),
                        server_hostname=host,
                        ssl_handshake_timeout=timeout + HANDSHAKE_BACKSTOP_S,
                    )
            except (OSError, TimeoutError) as e:
                sock.close()
                peer.connecting = None
                reason, text = refusal_reason(e, timeout, their="server")
                self.refused_handshake("outbound", f"{peer.id} at {format_address(peer.address)}", reason, text)
                self._backoff(peer, f"TLS handshake failed: {text}")
                return
        peer.connecting = None
        named = certificate_name(conn.transport) if self.tls is not None else peer.id
        if named != peer.id:
            conn.close()
            self._counters["identity_mismatch"] += 1
            self._backoff(peer, f"refused: its TLS certificate names {named!r}, not {peer.id!r}")
            return
        if self._closed or self._peers.get(peer.id) is not peer:  # closed or removed while connecting
            conn.close()
        elif conn.closed:  # lost before we got here
            self._backoff(peer, "connection lost right after connect")
        else:
            peer.conn = conn
            self._counters["connects"] += 1
            self._flush_peer(peer)  # what piled up while connecting

    def _outbound_lost(self, peer: _Peer, conn: _Outbound, exc: Exception | None) -> None:
        if peer.conn is not conn:  # a connection we already replaced or abandoned
            return
        peer.conn = None
        self._dirty.discard(peer)
        assert self._loop is not None
        now = self._loop.time()
        if (
            exc is None
            and not peer.pending
            and not peer.frames
            and now - conn.last_write >= self.options.idle_timeout_s / 2
        ):
            # The peer closed a connection we had left idle (idle_timeout_s): no failure, reconnect on demand.
            peer.backoff, peer.retry_at = self.options.backoff_min, 0.0
            return
        if isinstance(exc, ssl.SSLError):  # TLS 1.3: the server refuses our certificate after our side finished
            reason, text = refusal_reason(exc, self.options.connect_timeout, their="server")
            self.refused_handshake("outbound", f"{peer.id} at {format_address(peer.address)}", reason, text)
        if now - conn.since >= self.options.backoff_max:
            peer.backoff = self.options.backoff_min  # it was healthy for a while: retry soon
        self._backoff(peer, f"connection lost: {exc!r}")

    def _backoff(self, peer: _Peer, why: str) -> None:
        """The peer is unreachable: drop what was waiting for it and hold off new connects for a while.
        The delay doubles per consecutive failure, so a peer that accepts and then closes (wrong secret,
        say) cannot make us spin."""
        assert self._loop is not None
        logger.debug("%s -> %s %s: retry in %.3fs", self.node_id, peer.id, why, peer.backoff)
        self._drop_pending(peer)
        peer.retry_at = self._loop.time() + peer.backoff
        peer.backoff = min(peer.backoff * 2, self.options.backoff_max)

    def _disconnect(self, peer: _Peer) -> list[asyncio.Future[None]]:
        """Abandon a peer (removed, or the transport is closing); returns what to await for a clean close."""
        self._dirty.discard(peer)
        self._drop_pending(peer)
        if peer.connecting is not None:
            peer.connecting.cancel()
            return [peer.connecting]
        if peer.conn is not None:
            conn, peer.conn = peer.conn, None
            conn.close()
            return [conn.lost]
        return []

    def _drop_pending(self, peer: _Peer) -> None:
        self._counters["dropped"] += len(peer.pending) + len(peer.frames)
        peer.pending.clear()
        peer.frames.clear()
        peer.pending_bytes = peer.frame_bytes = 0

    # --- inbound ----------------------------------------------------------------------------------------

    def _on_frame(self, head_sender: str, payload: bytes) -> None:
        """Decode and deliver one authenticated inbound frame (FrameReader checked both tags)."""
        counters = self._counters
        counters["frames_received"] += 1
        if self._closed:
            return
        if frame_kind(payload) == KIND_SNAPSHOT:
            self._on_snapshot_payload(payload)
            return
        try:
            sender, msgs = decode_batch(payload)
        except CodecError as e:  # an authenticated peer on another version, or a bug: skip just this frame
            counters["decode_failures"] += 1
            logger.warning("%s: undecodable frame from %s dropped: %s", self.node_id, head_sender, e)
            return
        if sender != head_sender:
            counters["spoofed"] += len(msgs)
            logger.warning(
                "%s: dropped a frame whose header names %r and payload %r", self.node_id, head_sender, sender
            )
            return
        me = self.node_id
        for m in msgs:
            if m.frm != sender or m.to != me:
                msgs = self._screen(sender, msgs)
                break
        if msgs:
            counters["messages_received"] += len(msgs)
            try:
                self._on_messages(msgs)
            except Exception:  # the node's bug; the stream itself is fine, so keep reading
                logger.exception("%s: on_messages raised", self.node_id)

    def _on_snapshot_payload(self, payload: bytes) -> None:
        try:
            sender, body = decode_snapshot_payload(payload)
        except CodecError as e:
            self._counters["decode_failures"] += 1
            logger.warning("%s: undecodable snapshot frame dropped: %s", self.node_id, e)
            return
        if sender not in self._peers:
            self._counters["spoofed"] += 1
            return
        handler = self.on_snapshot_frame
        if handler is not None:
            try:
                handler(sender, body)
            except Exception:  # the node's bug; keep reading
                logger.exception("%s: on_snapshot_frame raised", self.node_id)

    def _screen(self, sender: str, msgs: list[Message]) -> list[Message]:
        """Drop messages forging another sender (the cluster secret authenticates membership, the sender id
        in the frame says who) or meant for another node: a vote replayed to a node it was not cast for must
        never be counted."""
        kept = []
        for m in msgs:
            if m.frm != sender:
                self._counters["spoofed"] += 1
                logger.warning("%s: dropped %r claiming frm=%r in a frame from %r", self.node_id, m.type, m.frm, sender)
            elif m.to != self.node_id:
                self._counters["misdirected"] += 1
                logger.warning("%s: dropped %r from %r addressed to %r", self.node_id, m.type, sender, m.to)
            else:
                kept.append(m)
        return kept


async def _connected_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A TCP connection to host:port (each address of the name in turn), before any TLS."""
    error: OSError | None = None
    for family, kind, proto, _, address in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            return sock
        except OSError as e:
            sock.close()
            error = e
        except BaseException:
            sock.close()
            raise
    raise error or OSError(f"no address for {host}")


class _Peer:
    """Outbound state for one peer."""

    __slots__ = (
        "address",
        "backoff",
        "conn",
        "connecting",
        "frame_bytes",
        "frames",
        "id",
        "pending",
        "pending_bytes",
        "retry_at",
    )

    def __init__(self, peer_id: str, address: Address, backoff: float) -> None:
        self.id = peer_id
        self.address = address
        self.pending: list[bytes] = []  # packed messages not yet written
        self.frames: list[tuple[bytes | None, bytes]] = []  # snapshot frames not yet written: (header or None, payload)
        self.pending_bytes = 0
        self.frame_bytes = 0
        self.conn: _Outbound | None = None
        self.connecting: asyncio.Task[None] | None = None
        self.retry_at = 0.0  # loop time before which the peer counts as unreachable
        self.backoff = backoff  # the delay to apply after the next failure


def _set_nodelay(transport: asyncio.BaseTransport) -> None:
    # asyncio and uvloop already do this for TCP, but latency depends on it, so do not rely on a default.
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Outbound(asyncio.Protocol):
    """Our connection to a peer: we only write."""

    def __init__(self, owner: TcpTransport, peer: _Peer) -> None:
        loop = asyncio.get_running_loop()
        self._owner, self._peer = owner, peer
        self.transport: asyncio.WriteTransport = None  # type: ignore[assignment]  # set by connection_made
        self.paused = False
        self.closed = False
        self.since = loop.time()
        self.last_write = self.since
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=self._owner.options.write_buffer_high_bytes)
        _set_nodelay(transport)

    def data_received(self, data: bytes) -> None:
        pass  # peers do not write on our outbound connections (yet; see the module docstring)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._owner._flush_peer(self._peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._owner._outbound_lost(self._peer, self, exc)
        self.lost.set_result(None)

    def close(self) -> None:
        self.transport.close()


class _Inbound(asyncio.Protocol):
    """A connection from a peer: read frames, hand each to the owner.

    Until its first header authenticates, a connection is one of at most max_unauthenticated_connections and
    holds at most one header's bytes; it must authenticate within auth_timeout_s. After that it is closed
    when it has sent nothing for idle_timeout_s. One timer per connection does both."""

    def __init__(self, owner: TcpTransport) -> None:
        self._owner = owner
        self._reader = FrameReader(owner.options.max_frame_bytes, owner._key)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set by connection_made
        self._loop = asyncio.get_running_loop()
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self._closing = False
        self._last_data = self._loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self.sender = ""  # the peer whose authenticated frames arrive here ("" until the first one)
        self.cert_name: str | None = None  # peer TLS: the node id its certificate names

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        owner = self._owner
        self.cert_name = certificate_name(transport)
        owner._inbound.add(self)
        if len(owner._unauthenticated) >= owner.options.max_unauthenticated_connections:
            owner._counters["refused"] += 1
            logger.warning(
                "%s: %d connections are waiting to authenticate; refusing one from %s",
                owner.node_id,
                len(owner._unauthenticated),
                self._peer_name(),
            )
            self.close()
            return
        _set_nodelay(transport)
        owner._unauthenticated.add(self)
        self._timer = self._loop.call_later(owner.options.auth_timeout_s, self._check_time)

    def data_received(self, data: bytes) -> None:
        if self._closing:  # the rest of a stream we have given up on
            return
        owner = self._owner
        owner._counters["bytes_received"] += len(data)
        self._last_data = self._loop.time()
        reader = self._reader
        for sender, payload in reader.feed(data):
            if owner.tls is not None and sender != self.cert_name:
                owner._counters["identity_mismatch"] += 1
                logger.warning(
                    "%s: frames signed as %s from %s, whose TLS certificate names %r; closing",
                    owner.node_id,
                    sender,
                    self._peer_name(),
                    self.cert_name,
                )
                self.close()
                return
            self.sender = sender
            owner._on_frame(sender, payload)
        if reader.authenticated and self in owner._unauthenticated:
            owner._unauthenticated.discard(self)  # from now on the timer watches for idleness
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(self._last_data + owner.options.idle_timeout_s, self._check_time)
        if reader.error is not None:
            owner._counters["auth_failures" if reader.auth_failed else "decode_failures"] += 1
            logger.warning("%s: %s from %s; closing", owner.node_id, reader.error, self._peer_name())
            self.close()

    def _check_time(self) -> None:
        """Close a connection that did not authenticate in time, or that has been idle too long."""
        self._timer = None
        if self._closing:
            return
        owner, now = self._owner, self._loop.time()
        if not self._reader.authenticated:
            owner._counters["unauthenticated_closed"] += 1
            logger.warning(
                "%s: no authenticated frame from %s within %.1fs; closing",
                owner.node_id,
                self._peer_name(),
                owner.options.auth_timeout_s,
            )
            self.close()
            return
        idle = owner.options.idle_timeout_s
        if now - self._last_data >= idle:
            owner._counters["idle_closed"] += 1
            logger.debug("%s: connection from %s idle for %.0fs; closing", owner.node_id, self._peer_name(), idle)
            self.close()
            return
        self._timer = self._loop.call_at(self._last_data + idle, self._check_time)

    def connection_lost(self, exc: Exception | None) -> None:
        owner = self._owner
        owner._inbound.discard(self)
        owner._unauthenticated.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.sender and not self._closing and not owner._closed and owner.on_peer_lost is not None:
            try:
                owner.on_peer_lost(self.sender)
            except Exception:  # the node's bug; the transport goes on
                logger.exception("%s: on_peer_lost raised", owner.node_id)
        if not self.lost.done():
            self.lost.set_result(None)

    def close(self) -> None:
        self._closing = True
        self._owner._unauthenticated.discard(self)
        self.transport.close()

    def _peer_name(self) -> object:
        return self.transport.get_extra_info("peername")

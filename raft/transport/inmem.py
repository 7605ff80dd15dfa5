"""InMemoryTransport: the TcpTransport contract inside one event loop, for tests and chaos runs.

Same semantics as TCP where a node could tell the difference: send() never blocks or raises, messages are
batched per destination and delivered once per event-loop turn, one on_messages call per batch, FIFO per
link, and messages to unreachable nodes are dropped and counted. By default every batch goes through the
real codec, so receivers get copies (no aliasing of mutable Messages between nodes) and the codec is
exercised by every test that uses the hub.

The TransportHub is where tests inject faults: cut and heal links, partition, isolate, or drop single
messages with a predicate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping

from raft.core.messages import Message
from raft.transport.codec import decode_batch, encode_batch, encode_message
from raft.transport.tcp import COUNTERS, OnMessages

logger = logging.getLogger(__name__)


class TransportHub:
    """The network between InMemoryTransports: which directed links are up, and a per-message fault hook."""

    def __init__(self) -> None:
        self._nodes: dict[str, InMemoryTransport] = {}
        self._cut: set[tuple[str, str]] = set()  # directed (frm, to) links that drop everything
        self.drop_if: Callable[[Message], bool] | None = None
        """Called for each message about to be delivered; True drops it (counted by the sender)."""

    def cut(self, a: str, b: str, *, both_ways: bool = True) -> None:
        self._cut.add((a, b))
        if both_ways:
            self._cut.add((b, a))

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """Restore the link a<->b, every link of a, or (no arguments) every link."""
        if a is None:
            self._cut.clear()
        else:
            self._cut = {link for link in self._cut if a not in link or (b is not None and b not in link)}

    def partition(self, *groups: Collection[str]) -> None:
        """Cut every link between nodes of different groups (links inside a group are left as they are)."""
        for i, g in enumerate(groups):
            for h in groups[i + 1 :]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def isolate(self, node_id: str) -> None:
        """Cut node_id off from every node attached now (nodes attached later are not cut)."""
        for other in self._nodes:
            if other != node_id:
                self.cut(node_id, other)

    def link_up(self, frm: str, to: str) -> bool:
        return (frm, to) not in self._cut and to in self._nodes

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self._nodes)

    def _attach(self, t: InMemoryTransport) -> None:
        if self._nodes.get(t.node_id, t) is not t:
            raise ValueError(f"node {t.node_id!r} is already attached to this hub")
        self._nodes[t.node_id] = t

    def _detach(self, t: InMemoryTransport) -> None:
        if self._nodes.get(t.node_id) is t:
            del self._nodes[t.node_id]
            # As TcpTransport when a sender's connection closes: each node it could reach hears it is lost.
            for other in self._nodes.values():
                if other.on_peer_lost is not None and (t.node_id, other.node_id) not in self._cut:
                    asyncio.get_running_loop().call_soon(other._peer_lost, t.node_id)

    def _deliver(self, src: InMemoryTransport, to: str, batch: list[Message] | list[bytes]) -> None:
        dest = self._nodes.get(to)
        if dest is None or (src.node_id, to) in self._cut:
            src._counters["dropped"] += len(batch)
            return
        if src.copy:
            payload = encode_batch(src.node_id, batch)  # type: ignore[arg-type]  # packed in copy mode
            src._counters["bytes_sent"] += len(payload)
            dest._counters["bytes_received"] += len(payload)
            sender, msgs = decode_batch(payload)
        else:
            sender, msgs = src.node_id, list(batch)  # type: ignore[arg-type]  # Messages otherwise
        if self.drop_if is not None:
            kept = [m for m in msgs if not self.drop_if(m)]
            src._counters["dropped"] += len(msgs) - len(kept)
            msgs = kept
        src._counters["frames_sent"] += 1
        src._counters["messages_sent"] += len(msgs)
        dest._receive(sender, msgs)


class InMemoryTransport:
    def __init__(
        self,
        node_id: str,
        hub: TransportHub,
        on_messages: OnMessages,
        *,
        peers: Iterable[str] | None = None,
        copy: bool = True,
    ) -> None:
        """`peers`: ids this node may send to (None: anyone attached to the hub). `copy=False` hands the
        sender's Message objects to the receiver as they are: faster, for simulations that never mutate."""
        self.node_id = node_id
        self.copy = copy
        self._hub = hub
        self._on_messages = on_messages
        self._peers: set[str] | None = None if peers is None else set(peers)
        self._pending: dict[str, list] = {}  # to -> packed bytes, or Messages
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._flush_handle: asyncio.Handle | None = None
        self._started = False
        self._closed = False
        # NodeTransport's callbacks (raft.node sets them): InstallSnapshot frames, a peer's link lost.
        self.on_snapshot_frame: Callable[[str, tuple[object, ...]], None] | None = None
        self.on_peer_lost: Callable[[str], None] | None = None

    async def start(self) -> None:
        self._hub._attach(self)
        self._started = True

    async def close(self) -> None:
        if self._closed:
            return
        self._flush()  # like TCP: what was sent before close still leaves
        self._closed = True
        self._hub._detach(self)

    def _peer_lost(self, peer: str) -> None:
        if not self._closed and self.on_peer_lost is not None:
            self.on_peer_lost(peer)

    def update_peers(self, peers: Mapping[str, object]) -> None:
        """Restrict sending to these ids (the values, addresses for TCP, are ignored)."""
        self._peers = set(peers)
        for to in [to for to in self._pending if to not in self._peers]:
            self._counters["dropped"] += len(self._pending.pop(to))

    def stats(self) -> dict[str, int]:
        return {**self._counters, "pending_bytes": 0}

    def send(self, msgs: list[Message]) -> None:
        if not self._started:
            raise RuntimeError("InMemoryTransport.send() before start()")
        for m in msgs:
            if self._closed or (self._peers is not None and m.to not in self._peers):
                self._counters["dropped"] += 1
                continue
            batch = self._pending.get(m.to)
            if batch is None:
                batch = self._pending[m.to] = []
                if self._flush_handle is None:
                    self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)
            batch.append(encode_message(m) if self.copy else m)

    def flush(self) -> None:
        """Deliver what send() queued now instead of at the end of the loop turn (as TcpTransport.flush)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()

    def prepare_snapshot_frame(self, body: tuple[object, ...]) -> tuple[bytes, bytes]:
        """Nothing to build ahead: the body travels as it is (NodeTransport)."""
        return b"", b""

    def send_snapshot_frame(
        self, to: str, body: tuple[object, ...], prepared: tuple[bytes, bytes] | None = None
    ) -> bool:
        """Deliver one InstallSnapshot frame to `to`'s on_snapshot_frame in a later loop turn; False (counted
        as dropped) when the link is cut or `to` is not attached (NodeTransport)."""
        dest = self._hub._nodes.get(to)
        if (
            not self._started
            or self._closed
            or dest is None
            or (self.node_id, to) in self._hub._cut
            or (self._peers is not None and to not in self._peers)
        ):
            self._counters["dropped"] += 1
            return False
        asyncio.get_running_loop().call_soon(dest._receive_snapshot_frame, self.node_id, body)
        return True

    def _receive_snapshot_frame(self, sender: str, body: tuple[object, ...]) -> None:
        if not self._closed and self.on_snapshot_frame is not None:
            self.on_snapshot_frame(sender, body)

    def _flush(self) -> None:
        self._flush_handle = None
        pending, self._pending = self._pending, {}
        for to, batch in pending.items():
            self._hub._deliver(self, to, batch)

    def _receive(self, sender: str, msgs: list[Message]) -> None:
        if self._closed:
            return
        counters = self._counters
        kept = [m for m in msgs if m.frm == sender and m.to == self.node_id]
        if len(kept) != len(msgs):  # same screening as TCP, so a core bug shows up in tests too
            counters["spoofed"] += sum(m.frm != sender for m in msgs)
            counters["misdirected"] += sum(m.frm == sender and m.to != self.node_id for m in msgs)
        counters["frames_received"] += 1
        if not kept:
            return
        counters["messages_received"] += len(kept)
        try:
            self._on_messages(kept)
        except Exception:  # as in TCP: the receiver's bug must not stop delivery to the others
            logger.exception("%s: on_messages raised", self.node_id)

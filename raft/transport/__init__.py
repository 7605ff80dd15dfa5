"""Moving Raft messages between nodes: the Transport seam, its TCP and in-memory implementations, the codec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from raft.core.messages import Message
from raft.transport.codec import CodecError, decode_messages, encode_messages
from raft.transport.inmem import InMemoryTransport, TransportHub
from raft.transport.tcp import TcpTransport


class Transport(Protocol):
    """Best-effort, batched delivery of Raft messages; the receiving side calls on_messages(list) per batch.

    send() is synchronous and never blocks or raises for an unreachable peer: such messages are dropped and
    counted in stats()["dropped"], and Raft retransmits. Messages queued in one event-loop turn leave
    together, one frame per destination.
    """

    async def start(self) -> None: ...

    def send(self, msgs: list[Message]) -> None: ...

    def update_peers(self, peers: Mapping[str, tuple[str, int]]) -> None: ...

    async def close(self) -> None: ...

    def stats(self) -> dict[str, int]: ...


class NodeTransport(Transport, Protocol):
    """What `raft.node.Node` calls on its transport, beyond the Transport seam: flushing a round's messages
    at once, InstallSnapshot's frames (raft/node/install.py), and the two callbacks it sets."""

    on_snapshot_frame: Callable[[str, tuple[object, ...]], None] | None
    on_peer_lost: Callable[[str], None] | None

    def flush(self) -> None:
        """Write what send() queued in this turn now."""

    def prepare_snapshot_frame(self, body: tuple[object, ...]) -> tuple[bytes, bytes]:
        """(payload, header) of a snapshot frame, built off the event loop (thread-safe)."""

    def send_snapshot_frame(
        self, to: str, body: tuple[object, ...], prepared: tuple[bytes, bytes] | None = None
    ) -> bool:
        """Queue one InstallSnapshot request or response for `to`; False if dropped."""


__all__ = [
    "CodecError",
    "InMemoryTransport",
    "NodeTransport",
    "TcpTransport",
    "Transport",
    "TransportHub",
    "decode_messages",
    "encode_messages",
]

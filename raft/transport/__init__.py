"""Moving Raft messages between nodes: the Transport seam, its TCP and in-memory implementations, the codec."""

from __future__ import annotations

from collections.abc import Mapping
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


__all__ = [
    "CodecError",
    "InMemoryTransport",
    "TcpTransport",
    "Transport",
    "TransportHub",
    "decode_messages",
    "encode_messages",
]

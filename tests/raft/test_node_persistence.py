"""The node driver keeps the persistence rule: nothing acknowledging data (a granted vote, an append
acknowledgement) reaches the transport before that data is fsynced. Here fsync is a recorder, the log
writer is held at a gate, and the transport is a recorder too, so the order of events is exact."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from raft.core import Entry, EntryType, HardState, Message, MsgType
from raft.node import Node
from raft.options import NodeOptions, RaftOptions
from raft.testing.cluster import free_ports
from raft.testing.kvnode import KvStateMachine

QUIET = RaftOptions(election_timeout_ms=60_000)  # b never campaigns during the test


class Gate:
    """Holds the log writer thread before each write until opened; records what became durable."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        self.events = events
        self.open = threading.Event()
        self.entered = threading.Event()

    def wrap(self, write: Any, label: str, what: Any) -> Any:
        def gated(arg: Any) -> None:
            self.entered.set()
            if not self.open.wait(30):
                raise TimeoutError("the test never opened the gate")
            write(arg)  # its fsyncs are recorded inside
            self.events.append((label, what(arg)))

        return gated

    def close(self) -> None:
        self.open.clear()
        self.entered.clear()


def test_acknowledgements_reach_the_transport_only_after_their_fsync(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, Any]] = []  # appended from the loop and from the writer thread
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", fd)))
    monkeypatch.setattr(os, "fdatasync", lambda fd: events.append(("fsync", fd)))

    def sent(kind: MsgType) -> list[int]:
        return [k for k, (op, m) in enumerate(events) if op == "send" and m.type == kind and not m.reject]

    async def main() -> None:
        ports = free_ports(3)
        peers = {i: ("127.0.0.1", p) for i, p in zip("abc", ports, strict=True)}
        node = Node(NodeOptions("b", str(tmp_path / "b"), peers, b"secret", raft=QUIET), KvStateMachine())
        await node.start()
        gate = Gate(events)
        try:
            assert node._log is not None and node._meta is not None and node.transport is not None
            node._log.append = gate.wrap(node._log.append, "log durable to", lambda es: es[-1].index)  # type: ignore[method-assign]
            node._meta.save = gate.wrap(node._meta.save, "hard state durable", lambda hs: hs)  # type: ignore[method-assign]
            monkeypatch.setattr(node.transport, "send", lambda msgs: events.extend(("send", m) for m in msgs))
            loop = asyncio.get_running_loop()

            async def exchange(m: Message, ack: MsgType, durable: tuple[str, Any]) -> None:
                gate.close()
                node._on_messages([m])
                assert await loop.run_in_executor(None, gate.entered.wait, 30)
                # The Ready that submitted the write has been handled in full by now (one loop callback).
                assert sent(ack) == [], f"{ack.name} left before its write was durable"
                gate.open.set()
                await asyncio.wait_for(node._wait_for(lambda: bool(sent(ack))), 30)
                (k,) = sent(ack)
                assert durable in events[:k], f"{ack.name} left before {durable}: {events}"
                assert events[events.index(durable) - 1][0] == "fsync", "the write ends with its fsync"

            await exchange(Message(MsgType.VOTE, "a", "b", term=1), MsgType.VOTE_RESP,
                           ("hard state durable", HardState(1, "a")))  # fmt: skip
            ents = [Entry(1, 1, EntryType.NOOP), Entry(1, 2, data=b"x"), Entry(1, 3, data=b"y")]
            await exchange(Message(MsgType.APP, "a", "b", term=1, entries=ents), MsgType.APP_RESP,
                           ("log durable to", 3))  # fmt: skip
            assert events[sent(MsgType.APP_RESP)[0]][1].index == 3
        finally:
            gate.open.set()  # a failed check must not leave the writer thread waiting
            await node.stop()

    asyncio.run(asyncio.wait_for(main(), 60))

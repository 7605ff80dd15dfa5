"""The node driver keeps the persistence rule: nothing acknowledging data (a granted vote, an append
acknowledgement) reaches the transport before that data is fsynced. Here fsync is a recorder, the log
writer is held at a gate, and the transport is a recorder too, so the order of events is exact."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from raft.core import ConfChange, ConfChangeOp, Entry, EntryType, HardState, Message, MsgType
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


Events = list[tuple[str, Any]]  # appended from the event loop and from the writer thread


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    recorded: Events = []
    monkeypatch.setattr(os, "fsync", lambda fd: recorded.append(("fsync", fd)))  # recorded, not done
    monkeypatch.setattr(os, "fdatasync", lambda fd: recorded.append(("fsync", fd)))
    return recorded


@asynccontextmanager
async def gated_node(
    node_id: str, peers: list[str], root: Any, events: Events, raft: RaftOptions, voters: tuple[str, ...] = ()
) -> AsyncIterator[tuple[Node, Gate]]:
    """A started node whose log and meta writes wait at a gate (closed) and whose transport records sends."""
    addrs = {i: ("127.0.0.1", p) for i, p in zip(peers, free_ports(len(peers)), strict=True)}
    opts = NodeOptions(node_id, str(root / node_id), addrs, b"secret", voters=voters, raft=raft)
    node = Node(opts, KvStateMachine())
    gate = Gate(events)
    await node.start()  # nothing is written before the first Ready
    try:
        assert node.driver.log is not None and node._meta is not None and node.transport is not None
        node.driver.log.append = gate.wrap(node.driver.log.append, "log durable to", lambda es: es[-1].index)  # type: ignore[method-assign]
        node._meta.save = gate.wrap(node._meta.save, "hard state durable", lambda hs: hs)  # type: ignore[method-assign]
        node.transport.send = lambda msgs: events.extend(("send", m) for m in msgs)  # type: ignore[method-assign]
        yield node, gate
    finally:
        gate.open.set()  # a failed check must not leave the writer thread waiting
        await node.stop()


def sent(events: Events, kind: MsgType) -> list[int]:
    return [k for k, (op, m) in enumerate(events) if op == "send" and m.type == kind and not m.reject]


def assert_durable_before(events: Events, durable: tuple[str, Any], k: int) -> None:
    assert durable in events[:k], f"{events[k][1]} left before {durable}: {events}"
    assert events[events.index(durable) - 1][0] == "fsync", "the write ends with its fsync"


def test_acknowledgements_reach_the_transport_only_after_their_fsync(tmp_path: Any, events: Events) -> None:
    async def main() -> None:
        async with gated_node("b", ["a", "b", "c"], tmp_path, events, QUIET) as (node, gate):
            loop = asyncio.get_running_loop()

            async def exchange(m: Message, ack: MsgType, durable: tuple[str, Any]) -> None:
                gate.close()
                node.driver.on_messages([m])
                assert await loop.run_in_executor(None, gate.entered.wait, 30)
                # The Ready that submitted the write has been handled in full by now (one loop callback).
                assert sent(events, ack) == [], f"{ack.name} left before its write was durable"
                gate.open.set()
                await asyncio.wait_for(node._wait_for(lambda: bool(sent(events, ack))), 30)
                (k,) = sent(events, ack)
                assert_durable_before(events, durable, k)

            await exchange(
                Message(MsgType.VOTE, "a", "b", term=1), MsgType.VOTE_RESP, ("hard state durable", HardState(1, "a"))
            )
            ents = [Entry(1, 1, EntryType.NOOP), Entry(1, 2, data=b"x"), Entry(1, 3, data=b"y")]
            await exchange(
                Message(MsgType.APP, "a", "b", term=1, entries=ents), MsgType.APP_RESP, ("log durable to", 3)
            )
            assert events[sent(events, MsgType.APP_RESP)[0]][1].index == 3

    asyncio.run(asyncio.wait_for(main(), 60))


def test_an_answer_with_no_write_of_its_own_waits_for_the_write_in_flight(tmp_path: Any, events: Events) -> None:
    """A repeated request (the leader retries an append, a candidate asks for the vote again) is answered
    from what the core already holds: its Ready writes nothing, yet the answer acknowledges what an earlier
    write, still at the gate, is making durable. It waits for that write."""

    async def main() -> None:
        async with gated_node("b", ["a", "b", "c"], tmp_path, events, QUIET) as (node, gate):
            loop = asyncio.get_running_loop()

            async def handled(m: Message) -> None:
                """Step m and let the node handle its Ready (the loop runs callbacks in the order queued)."""
                node.driver.on_messages([m])
                done = loop.create_future()
                loop.call_soon(done.set_result, None)
                await done

            for m, ack, durable in [
                (Message(MsgType.VOTE, "a", "b", term=1), MsgType.VOTE_RESP, ("hard state durable", HardState(1, "a"))),
                (
                    Message(
                        MsgType.APP, "a", "b", term=1, entries=[Entry(1, 1, EntryType.NOOP), Entry(1, 2, data=b"x")]
                    ),
                    MsgType.APP_RESP,
                    ("log durable to", 2),
                ),
            ]:
                gate.close()
                await handled(m)
                assert await loop.run_in_executor(None, gate.entered.wait, 30)
                submitted = len(node.driver.persist_inflight)
                await handled(m)  # the retry: nothing new to write
                assert len(node.driver.persist_inflight) == submitted, "the retry wrote something: nothing was tested"
                assert sent(events, ack) == [], f"{ack.name} to a retry left before the write it acknowledges"
                gate.open.set()

                def both_acked(ack: MsgType = ack) -> bool:
                    return len(sent(events, ack)) == 2

                await asyncio.wait_for(node._wait_for(both_acked), 30)
                for k in sent(events, ack):
                    assert_durable_before(events, durable, k)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_lone_voter_sends_no_append_before_its_term_is_on_disk(tmp_path: Any, events: Events) -> None:
    """Issue 12, bug 1 at the node: a lone voter becomes leader in one call; its appends to the learner must
    wait for the meta fsync of its new term, or a crash could let it lead that term twice."""

    async def main() -> None:
        fast = RaftOptions(election_timeout_ms=100)
        async with gated_node("a", ["a", "l"], tmp_path, events, fast, voters=("a",)) as (node, gate):
            gate.open.set()  # first run: lead term 1 and add the learner l
            await node.wait_for_leader(30)
            await node._conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, "l"))
        events.clear()
        async with gated_node("a", ["a", "l"], tmp_path, events, fast, voters=("a",)) as (node, gate):
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(None, gate.entered.wait, 30)  # it campaigned; the write waits
            assert node.is_leader() and node.status().learners == ("l",)
            assert sent(events, MsgType.APP) == [], "an append left before the new term was on disk"
            gate.open.set()
            await asyncio.wait_for(node._wait_for(lambda: bool(sent(events, MsgType.APP))), 30)
            assert_durable_before(events, ("hard state durable", HardState(2, "a")), sent(events, MsgType.APP)[0])

    asyncio.run(asyncio.wait_for(main(), 60))

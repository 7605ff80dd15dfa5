"""TcpTransport and InMemoryTransport: delivery, per-turn batching, reconnects, authentication, limits.

Every TCP test runs on both the stock asyncio loop and uvloop. Synchronisation is by awaiting deliveries
(futures) or connection closes; the few facts only visible as counters are awaited with `eventually`,
which re-checks a condition every millisecond under a deadline.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Self

import pytest
import uvloop

from raft.core.messages import Entry, Message, MsgType
from raft.options import TransportOptions
from raft.testing.cluster import free_ports
from raft.transport import InMemoryTransport, TcpTransport, TransportHub
from raft.transport.codec import encode_batch, encode_message, frame_header, frame_key
from tests.raft.helpers import eventually

SECRET = b"test cluster secret"
LOCAL = ("127.0.0.1", 0)
FAST = TransportOptions(backoff_min=0.005, backoff_max=0.05, connect_timeout=1.0)
DEADLINE = 5.0


# --- helpers ------------------------------------------------------------------------------------------------


class Inbox:
    """on_messages callback that records each batch and lets a test await a number of messages."""

    def __init__(self) -> None:
        self.batches: list[list[Message]] = []
        self._changed: asyncio.Event | None = None

    def __call__(self, msgs: list[Message]) -> None:
        self.batches.append(msgs)
        if self._changed is not None:
            self._changed.set()

    @property
    def messages(self) -> list[Message]:
        return [m for b in self.batches for m in b]

    async def wait(self, count: int, timeout: float = DEADLINE) -> list[Message]:
        self._changed = self._changed or asyncio.Event()
        async with asyncio.timeout(timeout):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


def hb(frm: str, to: str, seq: int = 0) -> Message:
    return Message(MsgType.HEARTBEAT, frm, to, term=1, seq=seq)


def app(frm: str, to: str, index: int, size: int = 256, n: int = 1) -> Message:
    ents = [Entry(1, index + 1 + i, 0, bytes([i % 256]) * size) for i in range(n)]
    return Message(MsgType.APP, frm, to, term=1, index=index, entries=ents)


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, None]], None]:
    def runner(coro: Coroutine[Any, Any, None]) -> None:
        async def bounded() -> None:
            await asyncio.wait_for(coro, 30)

        if request.param == "uvloop":
            uvloop.run(bounded())
        else:
            asyncio.run(bounded())

    return runner


class Cluster:
    """TcpTransports for the given ids, all connected to each other, closed on exit."""

    def __init__(self, ids: list[str], options: TransportOptions = FAST) -> None:
        self.inbox = {i: Inbox() for i in ids}
        self.t = {i: TcpTransport(i, LOCAL, {}, SECRET, self.inbox[i], options) for i in ids}

    async def __aenter__(self) -> Self:
        for t in self.t.values():
            await t.start()
        for t in self.t.values():
            t.update_peers({i: o.address for i, o in self.t.items() if i != t.node_id})
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self.t.values():
            await t.close()


async def raw_connection(t: TcpTransport) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*t.address)


def raw_frame(sender: str, msgs: list[Message], secret: bytes = SECRET) -> bytes:
    payload = encode_batch(sender, [encode_message(m) for m in msgs])
    return frame_header(sender.encode(), payload, frame_key(secret)) + payload


async def deliver_eventually(t: TcpTransport, inbox: Inbox, make: Callable[[], Message]) -> None:
    """Send until one message gets through: while backing off (<= backoff_max) the transport drops them."""
    async with asyncio.timeout(DEADLINE):
        while True:
            count = len(inbox.messages)
            t.send([make()])
            try:
                await inbox.wait(count + 1, timeout=0.02)
                return
            except TimeoutError:
                continue


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(DEADLINE):
        return await reader.read() == b""


# --- delivery -----------------------------------------------------------------------------------------------


def test_two_nodes_exchange_messages(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            sent = [app("a", "b", 10, n=3), hb("a", "b", 1)]
            c.t["a"].send(sent)
            c.t["b"].send([Message(MsgType.APP_RESP, "b", "a", term=1, index=13)])
            assert await c.inbox["b"].wait(2) == sent
            assert (await c.inbox["a"].wait(1))[0].index == 13
            assert len(c.inbox["b"].batches) == 1  # one frame, one on_messages call
            sa, sb = c.t["a"].stats(), c.t["b"].stats()
            assert sa["messages_sent"] == 2 and sb["messages_received"] == 2 and sa["connects"] == 1
            assert sb["frames_received"] == 1 and sb["bytes_received"] == sa["bytes_sent"]

    run(main())


def test_three_nodes_all_to_all(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        ids = ["n1", "n2", "n3"]
        async with Cluster(ids) as c:
            for rnd in range(3):
                for i in ids:
                    c.t[i].send([hb(i, j, rnd) for j in ids if j != i])
                for i in ids:
                    await c.inbox[i].wait(2 * (rnd + 1))
            for i in ids:
                got = c.inbox[i].messages
                for j in ids:  # FIFO per link
                    assert [m.seq for m in got if m.frm == j] == ([] if i == j else [0, 1, 2])

    run(main())


def test_sends_in_one_turn_leave_as_one_frame_per_peer(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b", "c"]) as c:
            a = c.t["a"]
            a.send([hb("a", "b"), hb("a", "c")])  # connect first: then batching is about the steady state
            await c.inbox["b"].wait(1)
            await c.inbox["c"].wait(1)
            before = a.stats()["frames_sent"]
            for i in range(1, 201):
                a.send([hb("a", "b", i)])
                a.send([hb("a", "c", i), app("a", "c", i)])
            await c.inbox["b"].wait(201)
            await c.inbox["c"].wait(401)
            assert a.stats()["frames_sent"] - before == 2
            assert [len(b) for b in c.inbox["b"].batches] == [1, 200]
            assert [m.seq for m in c.inbox["b"].batches[1]] == list(range(1, 201))

    run(main())


def test_flush_writes_what_was_queued_now_not_at_the_end_of_the_turn(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            a = c.t["a"]
            a.send([hb("a", "b")])  # connect first
            await c.inbox["b"].wait(1)
            before = a.stats()["frames_sent"]
            a.send([hb("a", "b", 1), hb("a", "b", 2)])
            assert a.stats()["frames_sent"] == before  # queued: it would leave at the end of this turn
            a.flush()
            assert a.stats()["frames_sent"] == before + 1  # written before this coroutine yields
            a.flush()  # nothing queued: nothing written
            a.send([hb("a", "b", 3)])
            assert [m.seq for m in await c.inbox["b"].wait(4)][1:] == [1, 2, 3]  # same order, one frame each
            assert a.stats()["frames_sent"] == before + 2 and [len(b) for b in c.inbox["b"].batches] == [1, 2, 1]

    run(main())


def test_a_big_batch_is_split_at_max_frame_bytes(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"], TransportOptions(max_frame_bytes=8192)) as c:
            msgs = [app("a", "b", i, size=1000) for i in range(20)]
            c.t["a"].send(msgs)
            assert await c.inbox["b"].wait(20) == msgs
            frames = c.t["a"].stats()["frames_sent"]
            assert frames >= 3 and len(c.inbox["b"].batches) == frames
            c.t["a"].send([app("a", "b", 99, size=10_000)])  # can never fit in a frame: dropped at once
            assert c.t["a"].stats()["dropped"] == 1

    run(main())


def test_pending_bytes_are_capped(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"], TransportOptions(max_pending_bytes=4096)) as c:
            c.t["a"].send([app("a", "b", i, size=1000) for i in range(50)])
            got = await c.inbox["b"].wait(1)
            await c.inbox["b"].wait(len(got))
            stats = c.t["a"].stats()
            assert 1 <= stats["messages_sent"] <= 4 and stats["messages_sent"] + stats["dropped"] == 50

    run(main())


def test_writer_backpressure_keeps_memory_bounded(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        with socket.socket() as stalled:  # a peer whose kernel completes the handshake but nobody ever reads
            stalled.bind(LOCAL)
            stalled.listen()
            opts = TransportOptions(write_buffer_high_bytes=64 * 1024, max_pending_bytes=256 * 1024)
            a = TcpTransport("a", LOCAL, {"b": stalled.getsockname()}, SECRET, Inbox(), opts)
            await a.start()
            try:
                big = app("a", "b", 0, size=60_000)
                for _ in range(1000):  # 60 MB offered, one message per loop turn
                    a.send([big])
                    await asyncio.sleep(0)
                stats = a.stats()
                assert stats["dropped"] > 0 and stats["pending_bytes"] <= opts.max_pending_bytes
                assert stats["bytes_sent"] < 30_000_000  # what the kernel and a 64 KiB user buffer can hold
            finally:
                await a.close()


# --- unreachable peers and membership -----------------------------------------------------------------------


def test_down_peer_drops_then_reconnects(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        (port,) = free_ports(1)
        a = TcpTransport("a", LOCAL, {"b": ("127.0.0.1", port)}, SECRET, Inbox(), FAST)
        await a.start()
        try:
            a.send([hb("a", "b", i) for i in range(5)])  # nobody listens: no exception, all dropped
            await eventually(lambda: a.stats()["dropped"] == 5)
            inbox = Inbox()
            for _generation in range(2):  # up, then down (restart) and up again
                b = TcpTransport("b", ("127.0.0.1", port), {}, SECRET, inbox, FAST)
                await b.start()
                await deliver_eventually(a, inbox, lambda: hb("a", "b"))
                await b.close()
            assert a.stats()["connects"] == 2
        finally:
            await a.close()

    run(main())


def test_update_peers_adds_and_removes(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            a, b = c.t["a"], c.t["b"]
            a.update_peers({})
            a.send([hb("a", "b")])
            assert a.stats()["dropped"] == 1  # unknown peer: dropped synchronously
            a.update_peers({"b": b.address})
            a.send([hb("a", "b", 1)])
            assert (await c.inbox["b"].wait(1))[0].seq == 1
            a.update_peers({})  # the connection to b is closed
            await eventually(lambda: not b._inbound)
            a.send([hb("a", "b", 2)])
            assert a.stats()["dropped"] == 2
            a.update_peers({"b": b.address})
            a.send([hb("a", "b", 3)])
            assert [m.seq for m in await c.inbox["b"].wait(2)] == [1, 3]
            assert a.stats()["connects"] == 2

    run(main())


def test_send_after_close_is_dropped(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            a = c.t["a"]
            a.send([hb("a", "b", 1)])
            await c.inbox["b"].wait(1)
            a.send([hb("a", "b", 2)])
            await a.close()  # what was sent to a connected peer before close still leaves
            await c.inbox["b"].wait(2)
            a.send([hb("a", "b", 3)])
            assert a.stats()["dropped"] == 1

    run(main())


# --- authentication and limits ------------------------------------------------------------------------------


def test_wrong_secret_is_rejected(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"]) as c:
            b = c.t["b"]
            a = TcpTransport("a", LOCAL, {"b": b.address}, b"some other secret", Inbox(), FAST)
            await a.start()
            a.send([hb("a", "b")])
            await eventually(lambda: b.stats()["auth_failures"] == 1)
            await a.close()
            assert c.inbox["b"].batches == [] and b.stats()["messages_received"] == 0

    run(main())


def test_bad_tag_closes_the_connection_and_others_still_work(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"]) as c:
            b = c.t["b"]
            reader, writer = await raw_connection(b)
            tampered = bytearray(raw_frame("a", [hb("a", "b")]))
            tampered[-1] ^= 1
            writer.write(bytes(tampered) + raw_frame("a", [hb("a", "b")]))  # the good frame after it is ignored
            assert await closed_by_peer(reader)
            writer.close()
            assert b.stats()["auth_failures"] == 1 and c.inbox["b"].batches == []
            reader, writer = await raw_connection(b)  # a new connection starts clean
            writer.write(raw_frame("a", [hb("a", "b", 7)]))
            assert (await c.inbox["b"].wait(1))[0].seq == 7
            writer.close()

    run(main())


def test_spoofed_and_misdirected_messages_are_dropped(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"]) as c:
            b = c.t["b"]
            _, writer = await raw_connection(b)
            # sender "a" (authenticated by the cluster secret) forges a message from "c", and replays one for "x"
            writer.write(raw_frame("a", [hb("c", "b", 1), hb("a", "b", 2), hb("a", "x", 3), hb("a", "b", 4)]))
            assert [m.seq for m in await c.inbox["b"].wait(2)] == [2, 4]
            stats = b.stats()
            assert stats["spoofed"] == 1 and stats["misdirected"] == 1 and stats["messages_received"] == 2
            writer.close()

    run(main())


def test_oversized_frame_closes_the_connection(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"], TransportOptions(max_frame_bytes=1024)) as c:
            b = c.t["b"]
            reader, writer = await raw_connection(b)
            # An authenticated header saying 1025 bytes is enough to refuse: no payload byte is sent.
            writer.write(frame_header(b"a", bytes(1025), frame_key(SECRET)))
            assert await closed_by_peer(reader)
            writer.close()
            assert b.stats()["decode_failures"] == 1 and b.stats()["auth_failures"] == 0

    run(main())


def test_undecodable_authenticated_frame_is_skipped(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"]) as c:
            b = c.t["b"]
            _, writer = await raw_connection(b)
            junk = b"\x09future frame kind"
            writer.write(frame_header(b"a", junk, frame_key(SECRET)) + junk + raw_frame("a", [hb("a", "b", 5)]))
            assert (await c.inbox["b"].wait(1))[0].seq == 5  # same connection, still in sync
            assert b.stats()["decode_failures"] == 1
            writer.close()

    run(main())


def test_a_huge_length_with_a_bad_header_tag_is_closed_before_any_payload(
    run: Callable[[Awaitable[None]], None],
) -> None:
    """Issue 12, bug 7: the header (sender, length) authenticates before a payload byte is buffered. A forged
    header claiming the largest frame is refused on its own 50 bytes; nothing waits for the 64 MiB."""

    async def main() -> None:
        async with Cluster(["b"], TransportOptions(auth_timeout_s=60)) as c:
            b = c.t["b"]
            reader, writer = await raw_connection(b)
            forged = bytearray(frame_header(b"a", b"", frame_key(b"not the cluster secret")))
            forged[:4] = (64 * 1024 * 1024).to_bytes(4, "big")
            writer.write(bytes(forged))
            assert await closed_by_peer(reader)
            writer.close()
            stats = b.stats()
            assert stats["auth_failures"] == 1 and stats["bytes_received"] == len(forged)
            # A header that authenticates but names another sender than the payload delivers nothing.
            reader, writer = await raw_connection(b)
            payload = encode_batch("c", [encode_message(hb("c", "b", 1))])
            writer.write(frame_header(b"a", payload, frame_key(SECRET)) + payload + raw_frame("a", [hb("a", "b", 2)]))
            assert [m.seq for m in await c.inbox["b"].wait(1)] == [2]
            assert b.stats()["spoofed"] == 1
            writer.close()

    run(main())


def test_connections_that_do_not_authenticate_are_capped_and_timed_out(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        opts = TransportOptions(max_unauthenticated_connections=2, auth_timeout_s=0.3)
        async with Cluster(["b"], opts) as c:
            b = c.t["b"]
            silent = [await raw_connection(b) for _ in range(2)]
            await eventually(lambda: len(b._unauthenticated) == 2)
            reader, writer = await raw_connection(b)  # a third one is refused at once
            assert await closed_by_peer(reader)
            writer.close()
            assert b.stats()["refused"] == 1
            for r, w in silent:  # the two others are closed once auth_timeout_s passes without a header
                assert await closed_by_peer(r)
                w.close()
            assert b.stats()["unauthenticated_closed"] == 2 and not b._unauthenticated
            reader, writer = await raw_connection(b)  # a peer that authenticates is served
            writer.write(raw_frame("a", [hb("a", "b", 3)]))
            assert (await c.inbox["b"].wait(1))[0].seq == 3
            writer.close()

    run(main())


def test_idle_connections_are_closed_and_the_sender_reconnects_without_backoff(
    run: Callable[[Awaitable[None]], None],
) -> None:
    async def main() -> None:
        opts = TransportOptions(idle_timeout_s=0.2, backoff_min=5.0, backoff_max=10.0)  # a backoff would be seen
        async with Cluster(["a", "b"], opts) as c:
            a, b = c.t["a"], c.t["b"]
            a.send([hb("a", "b", 1)])
            await c.inbox["b"].wait(1)
            await eventually(lambda: b.stats()["idle_closed"] == 1 and a._peers["b"].conn is None)
            a.send([hb("a", "b", 2)])  # an idle close is no failure: this goes out at once on a new connection
            assert [m.seq for m in await c.inbox["b"].wait(2)] == [1, 2]
            assert a.stats()["connects"] == 2 and a.stats()["dropped"] == 0

    run(main())


def test_app_with_non_contiguous_entries_is_rejected(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["b"]) as c:
            b = c.t["b"]
            _, writer = await raw_connection(b)
            gap = app("a", "b", 10, n=3)
            gap.entries[2].index = 14  # 11, 12, 14
            writer.write(raw_frame("a", [gap]) + raw_frame("a", [app("a", "b", 10, n=2)]))
            (m,) = await c.inbox["b"].wait(1)  # the damaged frame is skipped, the stream stays in sync
            assert [e.index for e in m.entries] == [11, 12] and b.stats()["decode_failures"] == 1
            writer.close()

    run(main())


# --- in-memory transport ------------------------------------------------------------------------------------


class Net:
    def __init__(self, ids: list[str], *, copy: bool = True) -> None:
        self.hub = TransportHub()
        self.inbox = {i: Inbox() for i in ids}
        self.t = {i: InMemoryTransport(i, self.hub, self.inbox[i], copy=copy) for i in ids}

    async def start(self) -> Net:
        for t in self.t.values():
            await t.start()
        return self


def test_inmem_batches_per_turn_and_copies() -> None:
    async def main() -> None:
        net = await Net(["a", "b"]).start()
        m = app("a", "b", 1)
        net.t["a"].send([m])
        net.t["a"].send([hb("a", "b", i) for i in range(10)])
        m.entries[0].data = b"mutated after send"
        got = await net.inbox["b"].wait(11)
        assert len(net.inbox["b"].batches) == 1 and got[0] is not m
        assert got[0].entries[0].data == bytes(256)
        assert net.t["a"].stats()["frames_sent"] == 1 and net.t["b"].stats()["messages_received"] == 11

    asyncio.run(main())


def test_inmem_partition_heal_and_drop_hook() -> None:
    async def main() -> None:
        net = await Net(["a", "b", "c"], copy=False).start()
        hub, a = net.hub, net.t["a"]
        hub.partition(["a"], ["b", "c"])
        a.send([hb("a", "b"), hb("a", "c")])
        net.t["b"].send([hb("b", "c", 1)])
        assert (await net.inbox["c"].wait(1))[0].frm == "b"  # inside the partition: delivered
        assert a.stats()["dropped"] == 2 and net.inbox["b"].batches == []
        hub.heal("a", "b")
        hub.drop_if = lambda m: m.seq == 13
        a.send([hb("a", "b", 12), hb("a", "b", 13), hb("a", "c", 14)])
        assert [m.seq for m in await net.inbox["b"].wait(1)] == [12]
        assert a.stats()["dropped"] == 4  # 13 by the hook, 14 on the still-cut a->c link
        hub.heal()
        hub.drop_if = None
        hub.isolate("c")
        a.send([hb("a", "c", 15), hb("a", "b", 16)])
        await net.inbox["b"].wait(2)
        assert len(net.inbox["c"].messages) == 1 and a.stats()["dropped"] == 5

    asyncio.run(main())


def test_inmem_screens_senders_and_respects_peers() -> None:
    async def main() -> None:
        net = await Net(["a", "b"]).start()
        a = net.t["a"]
        a.send([hb("x", "b", 1), hb("a", "b", 2)])
        assert [m.seq for m in await net.inbox["b"].wait(1)] == [2]
        assert net.t["b"].stats()["spoofed"] == 1
        a.update_peers({"c": None})
        a.send([hb("a", "b", 3)])
        assert a.stats()["dropped"] == 1
        await a.close()
        a.send([hb("a", "c")])
        assert a.stats()["dropped"] == 2

    asyncio.run(main())


def test_a_snapshot_frame_prepared_on_another_thread_arrives_like_an_ordinary_one(
    run: Callable[[Awaitable[None]], None],
) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            got: list[tuple[str, tuple[object, ...]]] = []
            c.t["b"].on_snapshot_frame = lambda sender, body: got.append((sender, body))
            big = (1, 7, 2, 9, "data", 0, bytes(range(256)) * 4096, 3, 1 << 20)
            prepared = await asyncio.get_running_loop().run_in_executor(None, c.t["a"].prepare_snapshot_frame, big)
            assert c.t["a"].send_snapshot_frame("b", big, prepared=prepared)
            assert c.t["a"].send_snapshot_frame("b", (2, 8))  # an ordinary one after it, in order
            await eventually(lambda: len(got) == 2)
            assert got == [("a", big), ("a", (2, 8))]
            assert c.t["b"].stats()["auth_failures"] == 0

    run(main())


def test_a_peer_whose_connection_closes_under_us_is_reported_lost(run: Callable[[Awaitable[None]], None]) -> None:
    async def main() -> None:
        async with Cluster(["a", "b"]) as c:
            lost: list[str] = []
            c.t["b"].on_peer_lost = lost.append
            c.t["a"].send([hb("a", "b", 1)])
            await c.inbox["b"].wait(1)  # b knows who is on the other end of that connection
            assert lost == []
            await c.t["a"].close()  # a goes away: its connection to b closes
            await eventually(lambda: lost == ["a"])

    run(main())

"""An in-process group of real `Node`s: one event loop, in-memory transport (a TransportHub) and in-memory log
and meta store, snapshot stores in a temporary directory, and (optionally) one controllable clock. Node-level
tests use it where they need no real ports; it is `Node`'s `open_parts` (a `raft.node.factory.PartsFactory`).

Each node's log and meta store outlive a stop, as its disk would: `group.node(options, fsm)` (or
`Node(options, fsm, open_parts=group.parts)`) again (a restart) finds what the previous one persisted.
`group.hub` cuts and heals links.

With `InProcessGroup(clock=ManualClock())` the nodes' ticks (elections, heartbeats, the lease, the snapshot
interval) follow that clock, as `raft/testing/sim.py` does for the pure core: time moves only through
`group.advance(seconds)` or `group.advance_until(cond)`, each tick followed by `settle()` (the loop runs
until the nodes' messages are delivered and their writes are on "disk").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping

from raft.node import Node
from raft.node.factory import NodeParts, OnMessages
from raft.node.statemachine import StateMachine
from raft.options import NodeOptions
from raft.storage.layout import DOWNLOAD_DIR, SNAPSHOT_DIR
from raft.storage.memory import MemoryLogStorage, MemoryMetaStorage
from raft.testing.clock import ManualClock
from raft.transport import InMemoryTransport, NodeTransport, TransportHub
from raft.transport.tcp import Address
from snapshot.storage import FileSnapshotStorage


class InProcessGroup:
    def __init__(self, clock: ManualClock | None = None) -> None:
        self.hub = TransportHub()
        self.clock = clock
        self.logs: dict[str, MemoryLogStorage] = {}
        self.metas: dict[str, MemoryMetaStorage] = {}
        self.nodes: dict[str, Node] = {}  # the newest Node made by node() for each id

    def parts(self, o: NodeOptions, fsm: StateMachine) -> NodeParts:
        """The parts of node `o.node_id`: its log and meta store (kept across restarts), a snapshot store
        under `o.data_dir`, an InMemoryTransport on the hub, the group's clock."""
        lg = self.logs.setdefault(o.node_id, MemoryLogStorage())
        meta = self.metas.setdefault(o.node_id, MemoryMetaStorage())
        known = getattr(fsm, "section_names", None)
        snapshots = FileSnapshotStorage(
            os.path.join(o.data_dir, SNAPSHOT_DIR), o.snapshot.max_reserved, known_types=known
        )

        def transport(on_messages: OnMessages, peers: Mapping[str, Address]) -> NodeTransport:
            return InMemoryTransport(o.node_id, self.hub, on_messages, peers=peers)

        return NodeParts(lg, meta, snapshots, os.path.join(o.data_dir, DOWNLOAD_DIR), transport, clock=self.clock)

    def node(self, o: NodeOptions, fsm: StateMachine) -> Node:
        """A Node on this group's parts (not started)."""
        n = self.nodes[o.node_id] = Node(o, fsm, self.parts)
        return n

    def wipe(self, node_id: str) -> None:
        """Node `node_id` loses its log and meta store, as a wiped disk would (its directory is the caller's)."""
        self.logs.pop(node_id, None)
        self.metas.pop(node_id, None)

    # ------------------------------------------------------------------ the controllable clock

    def _manual(self) -> ManualClock:
        if self.clock is None:
            raise RuntimeError("this group runs on the event loop's clock: InProcessGroup(clock=ManualClock())")
        return self.clock

    def _busy(self) -> bool:
        for n in self.nodes.values():
            d = n.driver
            if d.stopped or d.loop is None:
                continue
            if d.persist_inflight or d._scheduled:
                return True
        return False

    async def settle(self, limit_s: float = 10.0) -> None:
        """Run the event loop (in real time, the clock standing still) until no node has a write in flight or
        a round scheduled and the hub's batches are delivered."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        quiet = 0
        while quiet < 3:  # a few empty turns: a delivery can schedule a round that schedules a send
            await asyncio.sleep(0)
            if self._busy():
                quiet = 0
                if loop.time() > deadline:
                    raise TimeoutError(f"the group did not settle in {limit_s} s")
                await asyncio.sleep(0.0005)  # the LogWriter thread's fsync
            else:
                quiet += 1

    async def advance(self, seconds: float, step: float | None = None) -> None:
        """Move the clock `seconds` forward one `step` (default: the nodes' tick) at a time, settling after each."""
        clock = self._manual()
        step = step or self._tick_s()
        await self.settle()
        left = seconds
        while left > 1e-12:
            dt = min(step, left)
            clock.advance(dt)
            left -= dt
            await self.settle()

    async def advance_until(self, cond: Callable[[], bool], limit_s: float = 10.0) -> float:
        """Advance tick by tick until cond() holds; answers the clock time that took. TimeoutError after
        `limit_s` of the clock's time."""
        clock = self._manual()
        start = clock.time()
        await self.settle()
        while not cond():
            if clock.time() - start > limit_s:
                raise TimeoutError(f"not within {limit_s} s of the group's clock")
            await self.advance(self._tick_s())
        return clock.time() - start

    def _tick_s(self) -> float:
        ticks = [n.opts.raft.tick() for n in self.nodes.values()]
        return min(ticks) / 1000.0 if ticks else 0.01

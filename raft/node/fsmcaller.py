"""FSMCaller: between the node loop and the user's state machine (sofa-jraft's name).

It applies committed entries in log order, resolves the futures of proposals and configuration changes with
the state machine's results, holds linearizable reads until their index is applied, and calls
`on_leader_start` / `on_leader_stop` once per term led. Everything runs on the node's event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from raft.core import Entry, EntryType, RaftCore, Ready, Role
from raft.latency import LatencyHistogram
from raft.leaf import failpoint
from raft.node.statemachine import StateMachine
from raft.status import RaftError, RaftException


class FSMCaller:
    def __init__(self, fsm: StateMachine, clock: Callable[[], float]) -> None:
        self.fsm = fsm
        self._clock = clock  # the event loop's time (s)
        self.applied_index = 0
        self.waiters: dict[int, tuple[int, asyncio.Future[Any]]] = {}  # index -> (term, future)
        self.read_waiters: list[tuple[int, asyncio.Future[int]]] = []  # (index, future) until applied
        self.leader_term = -1  # term for which on_leader_start fired
        self.conf_applied = False  # a membership entry was applied since the node loop last looked
        self._proposed: deque[tuple[int, float]] = deque()  # (last index, loop time) of each proposed batch
        self.commit_latency = LatencyHistogram()  # proposal batch -> applied here (leader only)

    def track(self, first: int, term: int, futures: list[asyncio.Future[Any]]) -> None:
        """A batch was proposed at `first`.. in `term`: each future resolves when its entry is applied."""
        for k, fut in enumerate(futures):
            self.waiters[first + k] = (term, fut)
        self._proposed.append((first + len(futures) - 1, self._clock()))

    def wait_entry(self, index: int, term: int, fut: asyncio.Future[Any]) -> None:
        """`fut` resolves when the entry (index, term) is applied (a configuration change)."""
        self.waiters[index] = (term, fut)

    def apply(self, core: RaftCore, committed: list[Entry]) -> list[Entry]:
        """Apply `committed`; returns its NORMAL entries (what the snapshot triggers count)."""
        normal = [e for e in committed if e.type == EntryType.NORMAL]
        results = self.fsm.on_apply(normal) if normal else []
        if len(results) != len(normal):
            raise RuntimeError(f"on_apply returned {len(results)} results for {len(normal)} entries")
        waiters = self.waiters
        r = 0
        for e in committed:
            result = None
            if e.type == EntryType.NORMAL:
                result = results[r]
                r += 1
            elif e.type == EntryType.CONF:
                failpoint.hit("membership.apply")
                self.conf_applied = True
            elif e.type == EntryType.NOOP and e.term == core.term and core.role == Role.LEADER:
                if self.leader_term != e.term:
                    self.leader_term = e.term
                    self.fsm.on_leader_start(e.term)
            w = waiters.pop(e.index, None)
            if w is not None and not w[1].done():
                if w[0] == e.term:
                    w[1].set_result(result)
                else:
                    w[1].set_exception(RaftException(RaftError.ELEADERCHANGED, "entry was overwritten", core.leader))
        self.applied_index = committed[-1].index
        if self._proposed:
            now = self._clock()
            while self._proposed and self._proposed[0][0] <= self.applied_index:
                self.commit_latency.observe(now - self._proposed.popleft()[1])
        if self.read_waiters:
            self.settle_reads()
        return normal

    def on_reads(self, core: RaftCore, rd: Ready) -> None:
        """The read states and dropped reads of a Ready: answer those already applied, hold the others."""
        for rs in rd.read_states:
            fut = rs.ctx
            assert isinstance(fut, asyncio.Future)
            if rs.index <= self.applied_index:
                if not fut.done():
                    fut.set_result(rs.index)
            else:
                self.read_waiters.append((rs.index, fut))
        for ctx, code in rd.dropped_reads:
            assert isinstance(ctx, asyncio.Future)
            if not ctx.done():
                ctx.set_exception(RaftException(code, "read index dropped", core.leader))

    def installed(self, index: int) -> None:
        """The state machine became a snapshot at `index`."""
        self.applied_index = index
        if self.read_waiters:
            self.settle_reads()

    def settle_reads(self) -> None:
        done = [w for w in self.read_waiters if w[0] <= self.applied_index]
        self.read_waiters = [w for w in self.read_waiters if w[0] > self.applied_index]
        for idx, fut in done:
            if not fut.done():
                fut.set_result(idx)

    def leadership_lost(self, leader: str) -> None:
        """Pending proposals may still commit under the next leader: their outcome is unknown."""
        err = RaftException(RaftError.ELEADERCHANGED, "leadership lost; outcome unknown", leader)
        fail([f for _, f in self.waiters.values()], err)
        self.waiters.clear()
        self._proposed.clear()
        fail([f for _, f in self.read_waiters], err)
        self.read_waiters = []
        if self.leader_term >= 0:
            self.fsm.on_leader_stop(self.leader_term)
            self.leader_term = -1

    def fail_all(self, err: RaftException) -> None:
        fail([f for _, f in self.waiters.values()], err)
        fail([f for _, f in self.read_waiters], err)
        self.read_waiters = []
        self.waiters.clear()


def fail(futures: list[Any], err: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(err)

"""Node: the asyncio driver around the pure core, with a JRaft-shaped API.

One event loop owns the core. Work flows as in the architecture notes:

    apply() -> proposal buffer --(once per loop turn)--> core.propose(batch)
    core Ready --> messages: transport (now)        entries + hard state: LogWriter thread (group commit)
                   persisted messages: after fsync  committed: StateMachine.on_apply -> futures

The leader sends AppendEntries before its own fsync finishes (Raft thesis §10.2.1); everything that
promises durability (votes, append acknowledgements) leaves only after the write is on disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections import deque
from typing import Any

from raft.core import (
    LEADER,
    ConfChange,
    ConfChangeOp,
    ConfState,
    CoreConfig,
    Entry,
    EntryType,
    Message,
    RaftCore,
    Ready,
)
from raft.node.statemachine import StateMachine
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.storage import FileMetaStorage, LogWriter, SegmentLog
from raft.transport import TcpTransport

log = logging.getLogger("raft.node")


def core_config(opts: NodeOptions) -> CoreConfig:
    r = opts.raft
    tick = r.tick()
    return CoreConfig(
        id=opts.node_id,
        election_tick=max(2, r.election_timeout_ms // tick),
        heartbeat_tick=max(1, r.heartbeat() // tick),
        pre_vote=r.pre_vote,
        check_quorum=r.check_quorum,
        lease_ratio=r.lease_ratio,
        lease_read=r.lease_read,
        max_inflight=r.max_inflight,
        max_entries_per_msg=r.max_entries_per_msg,
        max_bytes_per_msg=r.max_bytes_per_msg,
        max_uncommitted=r.max_uncommitted,
    )


class Node:
    def __init__(self, options: NodeOptions, fsm: StateMachine) -> None:
        self.opts = options
        self.id = options.node_id
        self.fsm = fsm
        self.core: RaftCore | None = None
        self.transport: TcpTransport | None = None
        self.writer: LogWriter | None = None
        self._log: SegmentLog | None = None
        self._meta: FileMetaStorage | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proposals: list[tuple[bytes, asyncio.Future[Any]]] = []
        self._waiters: dict[int, tuple[int, asyncio.Future[Any]]] = {}  # index -> (term, future)
        self._reads: list[asyncio.Future[int]] = []
        self._read_waiters: list[tuple[int, asyncio.Future[int]]] = []  # (index, future) until applied
        self._persist_inflight: deque[tuple[list[Message], tuple[int, int] | None]] = deque()
        self._scheduled = False
        self._tick_handle: asyncio.TimerHandle | None = None
        self._leader_term = -1  # term for which on_leader_start fired
        self._was_leader = False
        self._error: BaseException | None = None
        self._stopped = False
        self._role_waiters: list[asyncio.Future[None]] = []
        self.applied_index = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        o = self.opts
        os.makedirs(o.data_dir, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        self._log = SegmentLog(os.path.join(o.data_dir, "log"), o.log)
        self._meta = FileMetaStorage(os.path.join(o.data_dir, "meta"))
        hs = self._meta.load()
        lg = self._log
        entries = lg.entries(lg.first_index(), lg.last_index() + 1) if lg.last_index() >= lg.first_index() else []
        if entries and entries[0].index != 1:
            raise RuntimeError(
                f"{o.data_dir}: the log starts at index {entries[0].index} and there is no snapshot to rebuild "
                "the state before it; refusing to start"
            )
        voters = o.voters or tuple(sorted(o.peers))
        self.core = RaftCore(core_config(o), ConfState(tuple(sorted(voters))), hs, None, entries, random.Random())
        self.applied_index = self.core.log.applied
        self.writer = LogWriter(self._log, self._meta, name=f"raft-log-{self.id}")
        self.transport = TcpTransport(self.id, o.peers[self.id], o.peers, o.secret, self._on_messages, o.transport)
        await self.transport.start()
        self._tick_s = o.raft.tick() / 1000.0
        self._next_tick = self._loop.time() + self._tick_s
        self._tick_handle = self._loop.call_at(self._next_tick, self._tick)
        log.info("node %s started: term %d, log %d..%d", self.id, hs.term, lg.first_index(), lg.last_index())

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        self._fail_all(RaftException(RaftError.ECANCELED, "node stopped"))
        if self.transport is not None:
            await self.transport.close()
        if self.writer is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.writer.close)
        if self._log is not None:
            self._log.close()

    # ------------------------------------------------------------------ public API

    def apply(self, data: bytes) -> asyncio.Future[Any]:
        """Propose a command; the future resolves with the state machine's result for it."""
        fut: asyncio.Future[Any] = self._loop_or_raise().create_future()
        self._check_usable()
        self._proposals.append((data, fut))
        self._kick()
        return fut

    async def read_index(self) -> int:
        """A linearizable read barrier: returns once this (leader) node has applied everything committed
        before the call. Raises RaftException(EPERM) on a follower."""
        fut: asyncio.Future[int] = self._loop_or_raise().create_future()
        self._check_usable()
        self._reads.append(fut)
        self._kick()
        return await fut

    async def transfer_leadership(self, peer: str, timeout: float | None = None) -> None:
        core = self._core()
        core.transfer_leader(peer)
        self._kick()
        limit = timeout or 2 * self.opts.raft.election_timeout_ms / 1000
        await asyncio.wait_for(self._wait_for(lambda: core.leader == peer and core.role != LEADER), limit)

    async def wait_for_leader(self, timeout: float) -> str:
        """Wait until this node knows a leader whose term has a committed entry here; returns its id."""
        core = self._core()

        def known() -> bool:
            return core.leader != "" and core.log.term(core.log.committed) == core.term

        await asyncio.wait_for(self._wait_for(known), timeout)
        return core.leader

    async def wait_applied(self, index: int, timeout: float) -> int:
        """Wait until this node has applied `index`; returns the applied index."""
        await asyncio.wait_for(self._wait_for(lambda: self.applied_index >= index), timeout)
        return self.applied_index

    async def add_peer(self, peer: str, address: tuple[str, int], timeout: float = 30.0) -> None:
        """Add a server: first as a learner, promoted to voter once it is within catchup_margin."""
        core = self._core()
        self._require_leader()
        peers = dict(self.transport_peers())
        peers[peer] = address
        assert self.transport is not None
        self.transport.update_peers(peers)
        await self._conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, peer))
        margin = self.opts.raft.catchup_margin

        def caught_up() -> bool:
            pr = core.prs.get(peer)
            return pr is not None and core.log.last_index() - pr.match <= margin

        await asyncio.wait_for(self._wait_for(caught_up), timeout)
        await self._conf_change(ConfChange(ConfChangeOp.ADD_VOTER, peer))

    async def remove_peer(self, peer: str) -> None:
        await self._conf_change(ConfChange(ConfChangeOp.REMOVE, peer))

    def status(self) -> dict[str, Any]:
        core = self._core()
        st = core.status()
        out: dict[str, Any] = {
            "id": st.id,
            "role": st.role,
            "term": st.term,
            "leader": st.leader,
            "commit": st.commit,
            "applied": self.applied_index,
            "first_index": st.first_index,
            "last_index": st.last_index,
            "voters": list(st.conf.voters),
            "learners": list(st.conf.learners),
            "peers": st.progress,
        }
        if self.writer is not None:
            ws = self.writer.stats()
            out["log_writer"] = {
                "fsyncs": ws.fsyncs,
                "batches": ws.batches,
                "entries": ws.entries,
                "mean_batch": round(ws.mean_batch_size, 2),
            }
        if self.transport is not None:
            out["transport"] = self.transport.stats()
        if self._error is not None:
            out["error"] = repr(self._error)
        return out

    def is_leader(self) -> bool:
        return self.core is not None and self.core.role == LEADER

    def leader_id(self) -> str:
        return self.core.leader if self.core is not None else ""

    def transport_peers(self) -> dict[str, tuple[str, int]]:
        return dict(self.opts.peers)

    # ------------------------------------------------------------------ the loop

    def _on_messages(self, msgs: list[Message]) -> None:
        if self._stopped or self._error is not None:
            return
        step = self._core().step
        for m in msgs:
            step(m)
        self._kick()

    def _tick(self) -> None:
        if self._stopped:
            return
        loop = self._loop
        assert loop is not None
        self._core().tick()
        self._process()
        # Schedule against the ideal grid so ticks do not drift under load.
        self._next_tick += self._tick_s
        now = loop.time()
        if self._next_tick < now:
            self._next_tick = now + self._tick_s
        self._tick_handle = loop.call_at(self._next_tick, self._tick)

    def _kick(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop_or_raise().call_soon(self._process)

    def _process(self) -> None:
        self._scheduled = False
        if self._stopped or self._error is not None:
            return
        core = self._core()
        try:
            if self._proposals:
                self._propose_batch(core)
            if self._reads:
                reads, self._reads = self._reads, []
                for fut in reads:
                    core.read_index(fut)
            while core.has_ready():
                rd = core.ready()
                self._handle_ready(core, rd)
                core.advance(rd)
            self._check_role(core)
        except Exception as exc:  # noqa: BLE001 - any failure here is fatal for the node
            self._fatal(exc)

    def _propose_batch(self, core: RaftCore) -> None:
        batch, self._proposals = self._proposals, []
        try:
            first, term = core.propose([d for d, _ in batch])
        except RaftException as exc:
            exc.leader = core.leader
            _fail([f for _, f in batch], exc)
            return
        waiters = self._waiters
        for k, (_, fut) in enumerate(batch):
            waiters[first + k] = (term, fut)

    def _handle_ready(self, core: RaftCore, rd: Ready) -> None:
        if rd.messages:
            self._transport().send(rd.messages)
        if rd.snapshot is not None:
            raise RaftException(RaftError.EIO, "InstallSnapshot received but this node has no snapshot storage")
        if rd.must_persist():
            last = (rd.entries[-1].index, rd.entries[-1].term) if rd.entries else None
            self._persist_inflight.append((rd.persisted_messages, last))
            loop = self._loop_or_raise()
            writer = self.writer
            assert writer is not None
            writer.submit(rd.hard_state, rd.entries, lambda err: loop.call_soon_threadsafe(self._persisted, err))
        elif rd.persisted_messages:
            if self._persist_inflight:
                # Ordering: these may acknowledge entries whose write is still in flight.
                self._persist_inflight[-1][0].extend(rd.persisted_messages)
            else:
                self._transport().send(rd.persisted_messages)
        if rd.committed:
            self._apply(core, rd.committed)
        for rs in rd.read_states:
            fut = rs.ctx
            assert isinstance(fut, asyncio.Future)
            if rs.index <= self.applied_index:
                if not fut.done():
                    fut.set_result(rs.index)
            else:
                self._read_waiters.append((rs.index, fut))
        for ctx, code in rd.dropped_reads:
            assert isinstance(ctx, asyncio.Future)
            if not ctx.done():
                ctx.set_exception(RaftException(code, "read index dropped", core.leader))

    def _persisted(self, err: BaseException | None) -> None:
        if self._stopped:
            return
        msgs, last = self._persist_inflight.popleft()
        if err is not None:
            self._fatal(err)
            return
        if msgs:
            self._transport().send(msgs)
        if last is not None:
            self._core().on_persisted(*last)
        self._kick()

    def _apply(self, core: RaftCore, committed: list[Entry]) -> None:
        normal = [e for e in committed if e.type == EntryType.NORMAL]
        results = self.fsm.on_apply(normal) if normal else []
        if len(results) != len(normal):
            raise RuntimeError(f"on_apply returned {len(results)} results for {len(normal)} entries")
        waiters = self._waiters
        r = 0
        for e in committed:
            result = None
            if e.type == EntryType.NORMAL:
                result = results[r]
                r += 1
            elif e.type == EntryType.NOOP and e.term == core.term and core.role == LEADER:
                if self._leader_term != e.term:
                    self._leader_term = e.term
                    self.fsm.on_leader_start(e.term)
            w = waiters.pop(e.index, None)
            if w is not None and not w[1].done():
                if w[0] == e.term:
                    w[1].set_result(result)
                else:
                    w[1].set_exception(RaftException(RaftError.ELEADERCHANGED, "entry was overwritten", core.leader))
        self.applied_index = committed[-1].index
        if self._read_waiters:
            done = [w for w in self._read_waiters if w[0] <= self.applied_index]
            self._read_waiters = [w for w in self._read_waiters if w[0] > self.applied_index]
            for idx, fut in done:
                if not fut.done():
                    fut.set_result(idx)

    def _check_role(self, core: RaftCore) -> None:
        is_leader = core.role == LEADER
        if self._was_leader and not is_leader:
            # Pending proposals may still commit under the next leader: their outcome is unknown.
            err = RaftException(RaftError.ELEADERCHANGED, "leadership lost; outcome unknown", core.leader)
            _fail([f for _, f in self._waiters.values()], err)
            self._waiters.clear()
            _fail([f for _, f in self._read_waiters], err)
            self._read_waiters = []
            if self._leader_term >= 0:
                self.fsm.on_leader_stop(self._leader_term)
                self._leader_term = -1
        self._was_leader = is_leader
        if self._role_waiters:
            waiters, self._role_waiters = self._role_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    # ------------------------------------------------------------------ helpers

    async def _conf_change(self, change: ConfChange) -> None:
        core = self._core()
        index, term = core.propose_conf_change(change)
        fut: asyncio.Future[Any] = self._loop_or_raise().create_future()
        self._waiters[index] = (term, fut)
        self._kick()
        await fut

    async def _wait_for(self, cond: Any) -> None:
        """Wait until cond() holds, re-checking after each processing round (no polling sleeps)."""
        while not cond():
            fut: asyncio.Future[None] = self._loop_or_raise().create_future()
            self._role_waiters.append(fut)
            await fut

    def _fatal(self, exc: BaseException) -> None:
        if self._error is not None:
            return
        self._error = exc
        log.error("node %s stopped by a fatal error: %r", self.id, exc)
        self._fail_all(RaftException(RaftError.EIO, f"node failed: {exc!r}"))
        try:
            self.fsm.on_error(exc)
        finally:
            if self._tick_handle is not None:
                self._tick_handle.cancel()

    def _fail_all(self, err: RaftException) -> None:
        _fail([f for _, f in self._proposals], err)
        _fail([f for _, f in self._waiters.values()], err)
        _fail(self._reads, err)
        _fail([f for _, f in self._read_waiters], err)
        self._proposals, self._reads, self._read_waiters = [], [], []
        self._waiters.clear()

    def _check_usable(self) -> None:
        if self._error is not None:
            raise RaftException(RaftError.EIO, f"node failed: {self._error!r}")
        if self._stopped:
            raise RaftException(RaftError.ECANCELED, "node stopped")

    def _require_leader(self) -> None:
        if not self.is_leader():
            raise RaftException(RaftError.EPERM, "not leader", self.leader_id())

    def _core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("node not started")
        return self.core

    def _transport(self) -> TcpTransport:
        assert self.transport is not None
        return self.transport

    def _loop_or_raise(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("node not started")
        return self._loop


def _fail(futures: list[Any], err: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(err)

"""NodeLoop: the Ready loop around the pure core. One event loop owns the core; work flows as in the
architecture notes:

    apply() -> proposal buffer --(once per loop turn; while an entry is uncommitted, at most once per
               RaftOptions.propose_hold_ms)--> core.propose(batch)
    core Ready --> messages: transport (now)        entries + hard state: LogWriter thread (group commit)
                   persisted messages: after fsync  committed: FSMCaller.apply -> state machine, futures

The leader sends AppendEntries before its own fsync finishes (Raft thesis §10.2.1) once its term and vote
are on disk; everything that promises durability (votes, append acknowledgements) leaves only after the
write is on disk. The core sorts messages into the two lists (docs/raft.md, "The persistence rule").
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Any

from raft.core import HardState, Message, MsgType, RaftCore, Ready, Role
from raft.node.clock import Clock, Timer
from raft.node.diskguard import DiskGuard
from raft.node.fsmcaller import FSMCaller, fail
from raft.node.members import Members
from raft.node.snapshots import SnapshotExecutor
from raft.node.statemachine import StateMachine
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.storage import LogWriter
from raft.storage.protocols import NodeLog
from raft.transport import NodeTransport

log = logging.getLogger("raft.node")


class NodeLoop:
    """Ready in, persist, send, advance; ticks; fatal errors. The parts it drives are set by `Node.start`."""

    def __init__(self, options: NodeOptions, fsm: StateMachine, change_listeners: list[Callable[[], None]]) -> None:
        self.opts = options
        self.id = options.node_id
        self.fsm = FSMCaller(fsm, self._time)
        self.members = Members(options)
        self.disk = DiskGuard(options.data_dir, options.log.min_free_bytes, self._time)
        self.change_listeners = change_listeners
        self.core: RaftCore | None = None
        self.transport: NodeTransport | None = None
        self.writer: LogWriter | None = None
        self.log: NodeLog | None = None
        self.snapshots: SnapshotExecutor | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.clock: Clock | None = None  # set by Node.start: the parts' clock, else the loop's
        self.proposals: list[tuple[bytes, asyncio.Future[Any]]] = []
        self.reads: list[asyncio.Future[int]] = []
        # per write in flight: messages waiting for it, its last (index, term), its hard state
        self.persist_inflight: deque[tuple[list[Message], tuple[int, int] | None, HardState | None]] = deque()
        self._scheduled = False
        self._hold_s = options.raft.propose_hold_ms / 1000.0
        self._last_batch = -math.inf
        self._hold_timer: Timer | None = None
        self._tick_handle: Timer | None = None
        self._tick_s = options.raft.tick() / 1000.0
        self._next_tick = 0.0
        self._ticks = 0  # timer ticks so far (the clock of the unsafe_tick_lease fault injection)
        self._lost_reported: tuple[int, int] | None = None  # the last loss _report_lost logged
        self._was_leader = False
        self._known_leader = ""  # the leader last logged: one log line per change, not per round
        self.error: BaseException | None = None
        self.stopped = False
        self.failed: asyncio.Future[BaseException] | None = None
        self._role_waiters: list[asyncio.Future[None]] = []

    # ------------------------------------------------------------------ what the parts call

    def aio(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            raise RuntimeError("node not started")
        return self.loop

    def _time(self) -> float:
        if self.clock is None:
            raise RuntimeError("node not started")
        return self.clock.time()

    def now(self) -> float:
        """The node's clock (monotonic seconds)."""
        return self._time()

    def core_(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("node not started")
        return self.core

    def _transport(self) -> NodeTransport:
        assert self.transport is not None
        return self.transport

    def live(self) -> bool:
        return not self.stopped and self.error is None

    def kick(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.aio().call_soon(self.process)

    async def wait_for(self, cond: Callable[[], bool]) -> None:
        """Wait until cond() holds, re-checking after each processing round (no polling sleeps)."""
        while not cond():
            fut: asyncio.Future[None] = self.aio().create_future()
            self._role_waiters.append(fut)
            await fut

    def truncate_log_prefix(self, keep_from: int) -> None:
        """Drop the log below `keep_from` on the writer's thread, in order with the writes before it."""
        lg, writer, loop = self.log, self.writer, self.aio()
        assert lg is not None and writer is not None

        def done(err: BaseException | None) -> None:
            if err is not None:
                loop.call_soon_threadsafe(self.fatal, err)

        writer.submit(None, [], done, before=functools.partial(lg.truncate_prefix, keep_from))

    def fatal(self, exc: BaseException) -> None:
        if self.error is not None:
            return
        self.error = exc
        log.error("node %s stopped by a fatal error: %r", self.id, exc)
        if self.failed is not None and not self.failed.done():
            self.failed.set_result(exc)
        self.fail_all(RaftException(RaftError.EIO, f"node failed: {exc!r}"))
        try:
            self.fsm.fsm.on_error(exc)
        finally:
            self.stop_ticking()

    def fail_all(self, err: RaftException) -> None:
        fail([f for _, f in self.proposals], err)
        fail(self.reads, err)
        self.proposals, self.reads = [], []
        self.fsm.fail_all(err)

    # ------------------------------------------------------------------ inputs

    def on_messages(self, msgs: list[Message]) -> None:
        if not self.live():
            return
        core = self.core_()
        step = core.step
        snapshots = self.snapshots
        assert snapshots is not None
        for m in msgs:
            if self.disk.refuse(m):
                continue
            if m.type == MsgType.SNAP and snapshots.intercept(core, m):
                continue
            step(m)
        if core.lost_acknowledged is not None:
            self._report_lost(core)
        self.kick()

    def on_peer_lost(self, peer: str) -> None:
        """A peer's connection closed under us: if it was our leader, campaign soon (RaftCore.peer_lost)."""
        if not self.live() or self.core is None:
            return
        self.core.peer_lost(peer)
        self.kick()

    def _report_lost(self, core: RaftCore) -> None:
        """The leader's heartbeat shows our log lacks entries we acknowledged (a WAL truncated or replaced
        behind our back: a crash cannot do that, every acknowledged entry was fsynced). It is repaired from
        the leader; say so, once per loss."""
        last, commit = core.lost_acknowledged or (0, 0)
        core.lost_acknowledged = None
        if (last, commit) != self._lost_reported:
            self._lost_reported = (last, commit)
            what = f"ends at index {last}" if commit > last else f"holds another entry at index {commit}"
            log.warning(
                "lost acknowledged entries: the log under %s %s, but this node had acknowledged up to %d "
                "to leader %s; they are restored from the leader. The WAL was truncated, damaged or "
                "replaced by an older copy",
                self.opts.data_dir,
                what,
                commit,
                core.leader,
            )

    # ------------------------------------------------------------------ the clock

    def start_ticking(self) -> None:
        assert self.clock is not None
        self._next_tick = self.clock.time() + self._tick_s
        self._tick_handle = self.clock.call_at(self._next_tick, self._tick)

    def stop_ticking(self) -> None:
        """The tick timer, and a pending proposal hold's, cancelled (on stop and on a fatal error)."""
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None

    def _tick(self) -> None:
        if self.stopped:
            return
        clock = self.clock
        assert clock is not None
        self._ticks += 1
        self.core_().tick(self.clock_ms())
        self.process()
        if self.live():
            try:
                assert self.snapshots is not None
                self.snapshots.housekeeping(self.core_(), clock.time())
            except Exception as exc:  # noqa: BLE001 - fatal, like any failure in the loop
                self.fatal(exc)
        # Schedule against the ideal grid so ticks do not drift under load.
        self._next_tick += self._tick_s
        now = clock.time()
        if self._next_tick < now:
            self._next_tick = now + self._tick_s
        self._tick_handle = clock.call_at(self._next_tick, self._tick)

    def clock_ms(self) -> float:
        """The monotonic clock the core measures the leader lease on (ms). Under the fault-injection switch
        `unsafe_tick_lease`, the old tick count instead: a paused process drops the ticks it missed."""
        if self.opts.raft.unsafe_tick_lease:
            return self._ticks * self.opts.raft.tick()
        return self._time() * 1000.0

    # ------------------------------------------------------------------ the loop

    def process(self) -> None:
        self._scheduled = False
        if not self.live():
            return
        core = self.core_()
        try:
            if self.proposals and not self._hold(core):
                self._propose_batch(core)
            if self.reads:
                reads, self.reads = self.reads, []
                now = self.clock_ms()
                for fut in reads:
                    core.read_index(fut, now)
            while core.has_ready():
                rd = core.ready()
                self._handle_ready(core, rd)
                core.advance(rd)
            self._check_role(core)
            self._transport().flush()  # this round's messages leave now, not after the turn's other callbacks
        except Exception as exc:  # noqa: BLE001 - any failure here is fatal for the node
            self.fatal(exc)

    def _hold(self, core: RaftCore) -> bool:
        """Whether waiting proposals wait (RaftOptions.propose_hold_ms): only while an entry is uncommitted, and
        until the hold since the last batch is over, when a timer on the node's clock turns the loop again."""
        now = self._time()
        when = self._last_batch + self._hold_s
        lg = core.log
        if now >= when or lg.committed >= lg.last_index():
            self._last_batch = now
            return False
        if self._hold_timer is None:
            assert self.clock is not None
            self._hold_timer = self.clock.call_at(when, self._hold_over)
        return True

    def _hold_over(self) -> None:
        self._hold_timer = None
        self.kick()

    def _propose_batch(self, core: RaftCore) -> None:
        batch, self.proposals = self.proposals, []
        try:
            first, term = core.propose([d for d, _ in batch])
        except RaftException as exc:
            exc.leader = core.leader
            fail([f for _, f in batch], exc)
            return
        self.fsm.track(first, term, [f for _, f in batch])

    def _handle_ready(self, core: RaftCore, rd: Ready) -> None:
        # Point the transport at the members of the latest configuration before sending anything: the core
        # may just have appended (or received, truncated or installed) one naming a new member.
        if self.members.follow(core.conf):
            self._transport().update_peers(self.members.transport_peers())
        snapshots = self.snapshots
        assert snapshots is not None
        if rd.messages:
            self._transport().send(rd.messages)
            snapshots.offer(core, rd.messages)
        before = None
        if rd.snapshot is not None:
            snapshots.install(rd.snapshot)
            assert self.log is not None
            before = functools.partial(self.log.reset, rd.snapshot.index + 1)
        if rd.must_persist():
            last = (rd.entries[-1].index, rd.entries[-1].term) if rd.entries else None
            self.persist_inflight.append((rd.persisted_messages, last, rd.hard_state))
            loop = self.aio()
            writer = self.writer
            assert writer is not None
            writer.submit(
                rd.hard_state, rd.entries, lambda err: loop.call_soon_threadsafe(self._persisted, err), before=before
            )
        elif rd.persisted_messages:
            if self.persist_inflight:
                # Ordering: these may acknowledge entries whose write is still in flight.
                self.persist_inflight[-1][0].extend(rd.persisted_messages)
            else:
                self._transport().send(rd.persisted_messages)
        if rd.committed:
            normal = self.fsm.apply(core, rd.committed)
            if normal:
                snapshots.on_applied(len(normal), sum(len(e.data) for e in normal), self._time())
        self.fsm.on_reads(core, rd)

    def _persisted(self, err: BaseException | None) -> None:
        if self.stopped:
            return
        msgs, last, hs = self.persist_inflight.popleft()
        if err is not None:
            self.fatal(err)
            return
        if msgs:  # acknowledgements of what is now durable: on every commit's path, so sent at once
            self._transport().send(msgs)
            self._transport().flush()
        core = self.core_()
        if hs is not None:
            core.on_hard_state_persisted(hs)
        if last is not None:
            core.on_persisted(*last)
        self.kick()

    def _check_role(self, core: RaftCore) -> None:
        is_leader = core.role == Role.LEADER
        changed, self.fsm.conf_applied = self.fsm.conf_applied, False
        if core.leader != self._known_leader:
            self._known_leader = core.leader
            changed = True
            log.info("node %s: leader %s (term %d, %s)", self.id, core.leader or "unknown", core.term, core.role)
        if self._was_leader and not is_leader:
            assert self.snapshots is not None
            self.snapshots.leadership_lost()
            self.fsm.leadership_lost(core.leader)
        self._was_leader = is_leader
        if changed:
            for listener in self.change_listeners:
                listener()
        if self._role_waiters:
            waiters, self._role_waiters = self._role_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

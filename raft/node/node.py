"""Node: the asyncio driver around the pure core, with a JRaft-shaped API.

`Node` is the public face: start and stop, propose, read, membership, snapshots on demand, status. The
parts it wires together each have a file (docs/raft.md, "The node"):

* `NodeLoop` (loop.py): Ready in, persist, send, advance; ticks; fatal errors.
* `FSMCaller` (fsmcaller.py): apply, the futures of proposals, read waiters, leader start/stop callbacks.
* `SnapshotExecutor` (snapshots.py): triggers, save, compact, load, install, serve, download.
* `Members` (members.py): the members' addresses and the transport's peer map; `DiskGuard` (diskguard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from raft.core import ConfChange, ConfChangeOp, ConfState, RaftCore, Role, SnapshotMeta
from raft.latency import LatencyHistogram
from raft.leaf import failpoint
from raft.node.autopilot import Autopilot
from raft.node.clock import LoopClock
from raft.node.factory import PartsFactory, core_config, open_data_dir
from raft.node.loop import NodeLoop
from raft.node.members import member_context
from raft.node.snapshots import SnapshotExecutor
from raft.node.statemachine import StateMachine
from raft.node.status import MemberAddresses, NodeStatus
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.storage import LogWriter
from raft.storage.protocols import MetaStorage, NodeLog
from raft.transport import NodeTransport
from raft.transport.tcp import Address, format_address

log = logging.getLogger("raft.node")


class Node:
    def __init__(self, options: NodeOptions, fsm: StateMachine, open_parts: PartsFactory = open_data_dir) -> None:
        self.opts = options
        self.id = options.node_id
        self.fsm = fsm
        # Called (no arguments, on the loop) after a round in which the known leader changed or a membership
        # entry was applied: a cheap hook for whoever records such changes (the service's event history).
        self.change_listeners: list[Callable[[], None]] = []
        self.driver = NodeLoop(options, fsm, self.change_listeners)
        self._open_parts = open_parts
        self._meta: MetaStorage | None = None
        self._release: Callable[[], None] = lambda: None  # the data directory's lock, once started
        self.autopilot = Autopilot(self, options.autopilot)

    # the driver's parts, for status readers and tests
    @property
    def core(self) -> RaftCore | None:
        return self.driver.core

    @property
    def transport(self) -> NodeTransport | None:
        return self.driver.transport

    @property
    def writer(self) -> LogWriter | None:
        return self.driver.writer

    @property
    def applied_index(self) -> int:
        return self.driver.fsm.applied_index

    @property
    def commit_latency(self) -> LatencyHistogram:
        return self.driver.fsm.commit_latency

    @property
    def installs(self) -> int:
        return self.driver.snapshots.installs if self.driver.snapshots is not None else 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        o, d = self.opts, self.driver
        parts = self._open_parts(o, self.fsm)  # takes the data directory (lock, IDENTITY) for the real parts
        self._release, self._meta, d.log = parts.release, parts.meta, parts.log
        d.loop = loop = asyncio.get_running_loop()
        d.failed = loop.create_future()
        d.clock = parts.clock or LoopClock(loop)
        d.snapshots = snaps = SnapshotExecutor(d, parts.snapshots, o.snapshot, parts.download_dir)
        lg = parts.log
        hs = parts.meta.load()
        snap = snaps.load(lg, o.data_dir)
        lo = max(lg.first_index(), snap.index + 1 if snap else 1)
        entries = lg.entries(lo, lg.last_index() + 1) if lg.last_index() >= lo else []
        voters = o.voters or tuple(sorted(o.peers))
        d.core = core = RaftCore(core_config(o), ConfState(tuple(sorted(voters))), hs, snap, entries, random.Random())
        d.fsm.applied_index = core.log.applied
        d.writer = LogWriter(lg, parts.meta, name=f"raft-log-{self.id}")
        d.members.conf = core.conf
        d.transport = transport = parts.transport(d.on_messages, d.members.transport_peers())
        transport.on_snapshot_frame = snaps.on_frame
        transport.on_peer_lost = d.on_peer_lost
        snaps.connect(transport)
        await transport.start()
        snaps.manager.start_clock(d.now())
        d.start_ticking()
        self.autopilot.start()
        if core.campaign_if_sole_voter():
            d.process()
        if lg.skipped is not None:
            loop.run_in_executor(None, self._check_skipped, lg)
        log.info(
            "node %s started: term %d, snapshot %d, log %d..%d",
            self.id,
            hs.term,
            snap.index if snap else 0,
            lg.first_index(),
            lg.last_index(),
        )

    def _check_skipped(self, lg: NodeLog) -> None:
        """Recovery started at the first live entry (wal_meta's hint) without reading the compacted records
        before it: check them now, off the loop. Damage there costs no data, but it is damage on the disk."""
        damage = lg.check_skipped()
        if damage is not None:
            log.error(
                "node %s: %s (compacted records below the first index %d, never read again: the log is intact; "
                "the disk under %s may be failing)",
                self.id,
                damage,
                lg.first_index(),
                self.opts.data_dir,
            )

    async def stop(self) -> None:
        d = self.driver
        if d.stopped:
            return
        d.stopped = True
        d.stop_ticking()
        self.autopilot.stop()
        d.fail_all(RaftException(RaftError.ECANCELED, "node stopped"))
        loop = asyncio.get_running_loop()
        if d.snapshots is not None:
            await d.snapshots.close_downloader()
        if d.transport is not None:
            await d.transport.close()
        if d.snapshots is not None:
            await d.snapshots.close()  # the server, then the manager
        if d.writer is not None:
            await loop.run_in_executor(None, d.writer.close)
        if d.log is not None:
            d.log.close()
        self._release()

    # ------------------------------------------------------------------ public API

    def apply(self, data: bytes) -> asyncio.Future[Any]:
        """Propose a command; the future resolves with the state machine's result for it."""
        d = self.driver
        fut: asyncio.Future[Any] = d.aio().create_future()
        self._check_usable()
        d.disk.check()
        d.proposals.append((data, fut))
        d.kick()
        return fut

    async def read_index(self) -> int:
        """A linearizable read barrier: returns once this (leader) node has applied everything committed
        before the call. Raises RaftException(EPERM) on a follower."""
        fut: asyncio.Future[int] = self.driver.aio().create_future()
        self._check_usable()
        self.driver.reads.append(fut)
        self.driver.kick()
        return await fut

    async def transfer_leadership(self, peer: str, timeout: float | None = None) -> None:
        core = self.driver.core_()
        core.transfer_leader(peer)
        self.driver.kick()
        limit = timeout or 2 * self.opts.raft.election_timeout_ms / 1000
        await asyncio.wait_for(self._wait_for(lambda: core.leader == peer and core.role != Role.LEADER), limit)

    async def wait_for_leader(self, timeout: float) -> str:
        """Wait until this node knows a leader whose term has a committed entry here; returns its id."""
        core = self.driver.core_()

        def known() -> bool:
            return core.leader != "" and core.log.term(core.log.committed) == core.term

        await asyncio.wait_for(self._wait_for(known), timeout)
        return core.leader

    async def wait_failed(self) -> BaseException:
        """Resolves with the fatal error that stopped this node (storage failure, state machine exception)."""
        assert self.driver.failed is not None, "node not started"
        return await asyncio.shield(self.driver.failed)

    async def wait_applied(self, index: int, timeout: float) -> int:
        """Wait until this node has applied `index`; returns the applied index."""
        await asyncio.wait_for(self._wait_for(lambda: self.applied_index >= index), timeout)
        return self.applied_index

    async def snapshot(self) -> SnapshotMeta | None:
        """Take a snapshot now (on demand) and return its committed meta. If one is being saved, waits for
        that one instead; if nothing was applied since the latest snapshot, returns None."""
        return await self._snapshots().snapshot()

    def snapshots(self) -> list[SnapshotMeta]:
        """The committed snapshots on disk, newest first."""
        return self._snapshots().snapshots()

    async def add_peer(
        self,
        peer: str,
        address: tuple[str, int],
        timeout: float = 30.0,
        http_address: str = "",
        remoting_address: str = "",
    ) -> None:
        """Add a server: first as a learner, promoted to voter once it is within catchup_margin. Its raft, HTTP
        and remoting addresses go into the CONF entry, so every member learns them from the log."""
        core = self.driver.core_()
        if not self.is_leader():
            raise RaftException(RaftError.EPERM, "not leader", self.leader_id())
        await self._conf_change(
            ConfChange(
                ConfChangeOp.ADD_LEARNER, peer, format_address(address), member_context(http_address, remoting_address)
            )
        )
        margin = self.opts.raft.catchup_margin

        def caught_up() -> bool:
            # match > 0: the learner has answered. Without it a short log would promote a peer that never
            # answered, and a voter that cannot vote can cost the group its quorum.
            pr = core.prs.get(peer)
            return pr is not None and pr.match > 0 and core.log.last_index() - pr.match <= margin

        await asyncio.wait_for(self._wait_for(caught_up), timeout)
        await self._conf_change(ConfChange(ConfChangeOp.ADD_VOTER, peer))

    async def remove_peer(self, peer: str) -> None:
        await self._conf_change(ConfChange(ConfChangeOp.REMOVE, peer))

    async def add_learner(self, peer: str) -> None:
        """Add a configured peer (its addresses from this node's options) as a learner, not promoted (autopilot)."""
        o = self.opts
        await self._conf_change(
            ConfChange(
                ConfChangeOp.ADD_LEARNER,
                peer,
                format_address(o.peers[peer]),
                member_context(o.http_addresses.get(peer, ""), o.remoting_addresses.get(peer, "")),
            )
        )

    def suspend_candidacy(self, suspended: bool) -> None:
        """Never campaign (nor take leadership by a transfer) while `suspended`: the node can never be elected,
        and still votes and replicates. A leader that suspends itself keeps leading until it hands over."""
        self.driver.core_().suspended = suspended

    async def promote(self, peer: str) -> None:
        """Make a learner a voter now (autopilot judged it caught up)."""
        await self._conf_change(ConfChange(ConfChangeOp.ADD_VOTER, peer))

    async def _conf_change(self, change: ConfChange) -> None:
        d = self.driver
        core = d.core_()
        if core.role == Role.LEADER and d.fsm.leader_term != core.term:
            # Elected a moment ago: until the leader's first entry is applied the core refuses a configuration
            # change (EBUSY; the configuration may still change under it, as JRaft's confCtx is busy then).
            # That is no change in flight, so wait for the entry, up to an election timeout, rather than refuse
            # an operator's add/remove made just after a failover; without it, the proposal still refuses.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wait_for(lambda: d.fsm.leader_term == core.term or core.role != Role.LEADER),
                    self.opts.raft.election_timeout_ms / 1000,
                )
            core = d.core_()
        # Record the configured addresses of members the log has none for (the bootstrap members), so that a
        # node configured with fewer peers, or a new one, reaches them too.
        failpoint.hit("membership.propose")
        index, term = core.propose_conf_change(replace(change, known=d.members.known()))
        fut: asyncio.Future[Any] = d.aio().create_future()
        d.fsm.wait_entry(index, term, fut)
        d.kick()
        await fut

    def member_addresses(self) -> dict[str, tuple[str, str | None, str | None]]:
        """id -> (raft address, HTTP address or None, remoting address or None) of every member of the latest
        configuration and every configured peer: the log's addresses first, then this node's configuration."""
        return self.driver.members.member_addresses(self.driver.core_().conf)

    def http_address(self, peer: str) -> str | None:
        """The HTTP address of `peer` (for 2007 answers), from the log or this node's configuration."""
        return self.driver.members.http_address(self._conf(), peer)

    def remoting_address(self, peer: str) -> str | None:
        """The RocketMQ remoting address of `peer` (for 1005 and 2007 over remoting), from the log or this node's
        configuration."""
        return self.driver.members.remoting_address(self._conf(), peer)

    def transport_peers(self) -> dict[str, Address]:
        """Where the transport reaches each node: the configured peers and the log's addresses."""
        return self.driver.members.transport_peers()

    def status(self) -> NodeStatus:
        d = self.driver
        core, writer = d.core_(), d.writer
        return NodeStatus.of(
            core.status(),
            applied=self.applied_index,
            addresses={p: MemberAddresses(r, h, m) for p, (r, h, m) in sorted(self.member_addresses().items())},
            snapshot=self._snapshots().status(core),
            fsync_latency=writer.fsync_latency.snapshot() if writer else None,
            commit_latency=self.commit_latency.snapshot() if writer else None,
            log_writer=writer.stats() if writer else None,
            transport=d.transport.stats() if d.transport is not None else None,
            error=repr(d.error) if d.error is not None else None,
        )

    def is_leader(self) -> bool:
        core = self.driver.core
        return core is not None and core.role == Role.LEADER

    def leader_id(self) -> str:
        core = self.driver.core
        return core.leader if core is not None else ""

    async def _wait_for(self, cond: Callable[[], bool]) -> None:
        """Wait until cond() holds, re-checking after each processing round (no polling sleeps)."""
        await self.driver.wait_for(cond)

    # ------------------------------------------------------------------ helpers

    def _check_usable(self) -> None:
        if self.driver.error is not None:
            raise RaftException(RaftError.EIO, f"node failed: {self.driver.error!r}")
        if self.driver.stopped:
            raise RaftException(RaftError.ECANCELED, "node stopped")

    def _conf(self) -> ConfState | None:
        core = self.driver.core
        return core.conf if core is not None else None

    def _snapshots(self) -> SnapshotExecutor:
        if self.driver.snapshots is None:
            raise RuntimeError("node not started")
        return self.driver.snapshots

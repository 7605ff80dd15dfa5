"""Node: the asyncio driver around the pure core, with a JRaft-shaped API.

One event loop owns the core. Work flows as in the architecture notes:

    apply() -> proposal buffer --(once per loop turn)--> core.propose(batch)
    core Ready --> messages: transport (now)        entries + hard state: LogWriter thread (group commit)
                   persisted messages: after fsync  committed: StateMachine.on_apply -> futures

The leader sends AppendEntries before its own fsync finishes (Raft thesis §10.2.1) once its term and vote
are on disk; everything that promises durability (votes, append acknowledgements) leaves only after the
write is on disk. The core sorts messages into the two lists (docs/raft.md, "The persistence rule").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from raft.core import (
    ConfChange,
    ConfChangeOp,
    ConfState,
    CoreConfig,
    Entry,
    EntryType,
    HardState,
    Message,
    MsgType,
    RaftCore,
    Ready,
    Role,
    SnapshotMeta,
)
from raft.core.progress import ProgressState
from raft.latency import LatencyHistogram
from raft.leaf import failpoint
from raft.node.install import GET, SnapshotDownloader, SnapshotServer
from raft.node.statemachine import BaseStateMachine, StateMachine
from raft.node.status import MemberAddresses, NodeStatus, SnapshotDownloads, SnapshotSending, SnapshotStatus
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.storage import FileMetaStorage, LogWriter, SegmentLog
from raft.storage.dirlock import DataDirLock
from raft.storage.identity import claim_identity
from raft.storage.layout import DOWNLOAD_DIR, LOG_DIR, META_DIR, SNAPSHOT_DIR
from raft.transport import TcpTransport
from raft.transport.tcp import Address, format_address, parse_address
from snapshot import format as snapshot_format
from snapshot.manager import SnapshotBusyError, SnapshotManager, SnapshotTriggers
from snapshot.storage import SnapshotStorage

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
        tick_ms=float(tick),
        max_clock_drift=r.max_clock_drift,
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
        self._space_free, self._space_checked_at = 0, float("-inf")  # _check_space's cached statvfs
        self._lost_reported: tuple[int, int] | None = None  # the last loss _report_lost logged
        self._space_paused = False  # entries from the leader refused for want of disk space (_refuse_for_space)
        self._waiters: dict[int, tuple[int, asyncio.Future[Any]]] = {}  # index -> (term, future)
        self._reads: list[asyncio.Future[int]] = []
        self._read_waiters: list[tuple[int, asyncio.Future[int]]] = []  # (index, future) until applied
        # per write in flight: messages waiting for it, its last (index, term), its hard state
        self._persist_inflight: deque[tuple[list[Message], tuple[int, int] | None, HardState | None]] = deque()
        self._scheduled = False
        self._tick_handle: asyncio.TimerHandle | None = None
        self._ticks = 0  # timer ticks so far (the clock of the unsafe_tick_lease fault injection)
        self._leader_term = -1  # term for which on_leader_start fired
        self._was_leader = False
        self._known_leader = ""  # the leader last logged: one log line per change, not per round
        self._conf_applied = False  # a membership entry was applied in this round
        # Called (no arguments, on the loop) after a round in which the known leader changed or a membership
        # entry was applied: a cheap hook for whoever records such changes (the service's event history).
        self.change_listeners: list[Callable[[], None]] = []
        self._error: BaseException | None = None
        self._stopped = False
        self._role_waiters: list[asyncio.Future[None]] = []
        self._peers_conf: ConfState | None = None  # the configuration the transport's peer map follows
        self.applied_index = 0
        self._storage: SnapshotStorage | None = None
        self._snapshots: SnapshotManager | None = None
        self._server: SnapshotServer | None = None
        self._downloader: SnapshotDownloader | None = None
        self._save_future: asyncio.Future[snapshot_format.SnapshotMeta] | None = None
        self.installs = 0  # snapshots installed from a leader
        self._lock: DataDirLock | None = None
        self._proposed: deque[tuple[int, float]] = deque()  # (last index, loop time) of each proposed batch
        self.commit_latency = LatencyHistogram()  # proposal batch -> applied here (leader only)
        self._failed: asyncio.Future[BaseException] | None = None
        # A state machine keeping BaseStateMachine's snapshot methods is rebuilt from the whole log.
        self._can_snapshot = getattr(type(fsm), "on_snapshot_save", None) is not BaseStateMachine.on_snapshot_save

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        o = self.opts
        self._lock = DataDirLock(o.data_dir)  # DataDirLockedError while another process uses the directory
        try:  # IdentityError if the directory holds another node's or group's data
            if claim_identity(o.data_dir, o.group_id, o.node_id):
                log.info("%s: wrote IDENTITY (node %s, group %s)", o.data_dir, o.node_id, o.group_id)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise
        self._loop = asyncio.get_running_loop()
        self._failed = self._loop.create_future()
        so = o.snapshot
        self._storage = SnapshotStorage(
            os.path.join(o.data_dir, SNAPSHOT_DIR),
            so.max_reserved,
            known_types=getattr(self.fsm, "section_names", None),
        )
        triggers = SnapshotTriggers(so.threshold_entries, so.threshold_log_bytes, so.interval_s)
        self._snapshots = SnapshotManager(self._storage, triggers, name=f"snapshot-save-{self.id}")
        self._log = SegmentLog(os.path.join(o.data_dir, LOG_DIR), o.log)
        self._meta = FileMetaStorage(os.path.join(o.data_dir, META_DIR))
        hs = self._meta.load()
        snap = self._load_snapshot()
        lg = self._log
        lo = max(lg.first_index(), snap.index + 1 if snap else 1)
        entries = lg.entries(lo, lg.last_index() + 1) if lg.last_index() >= lo else []
        voters = o.voters or tuple(sorted(o.peers))
        self.core = RaftCore(core_config(o), ConfState(tuple(sorted(voters))), hs, snap, entries, random.Random())
        self.applied_index = self.core.log.applied
        self.writer = LogWriter(self._log, self._meta, name=f"raft-log-{self.id}")
        self._peers_conf = self.core.conf
        self.transport = TcpTransport(
            self.id, o.peers[self.id], self.transport_peers(), o.secret, self._on_messages, o.transport
        )
        self.transport.on_snapshot_frame = self._on_snapshot_frame
        self.transport.on_peer_lost = self._on_peer_lost
        self._server = SnapshotServer(
            self._storage,
            self.transport.send_snapshot_frame,
            so,
            self.transport.prepare_snapshot_frame,
            self.transport.send_snapshot_frame,
        )
        self._downloader = SnapshotDownloader(
            os.path.join(o.data_dir, DOWNLOAD_DIR), self._storage, self.transport.send_snapshot_frame, so
        )
        await self.transport.start()
        self._tick_s = o.raft.tick() / 1000.0
        self._next_tick = self._loop.time() + self._tick_s
        self._snapshots.start_clock(self._loop.time())
        self._tick_handle = self._loop.call_at(self._next_tick, self._tick)
        if self.core.campaign_if_sole_voter():
            self._process()
        if lg.skipped is not None:
            self._loop.run_in_executor(None, self._check_skipped, lg)
        log.info(
            "node %s started: term %d, snapshot %d, log %d..%d",
            self.id,
            hs.term,
            snap.index if snap else 0,
            lg.first_index(),
            lg.last_index(),
        )

    def _check_skipped(self, lg: SegmentLog) -> None:
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

    def _load_snapshot(self) -> SnapshotMeta | None:
        """RIP-59 start: load the newest snapshot that verifies and that the log continues from (quarantining
        damaged ones, falling back to older ones), or refuse to start if the state cannot be rebuilt."""
        lg, storage = self._log, self._storage
        assert lg is not None and storage is not None
        has_log = lg.last_index() >= lg.first_index()

        def usable(meta: snapshot_format.SnapshotMeta) -> str | None:
            s = meta.last_included_index
            if has_log and lg.first_index() > s + 1:
                return f"the log starts at index {lg.first_index()}, so entries {s + 1}..{lg.first_index() - 1} are missing"
            return None

        if not self._can_snapshot:
            loaded = None
        else:
            loaded = self._snapshots_mgr().load(self.fsm.on_snapshot_load, usable=usable)
        if loaded is None or loaded.snapshot is None:
            if has_log and lg.first_index() > 1:
                why = [f"snapshot {i} quarantined: {r}" for i, r in (loaded.quarantined if loaded else ())]
                why += [f"snapshot {i} skipped: {r}" for i, r in (loaded.skipped if loaded else ())]
                raise RuntimeError(
                    f"{self.opts.data_dir}: no snapshot loads and the log starts at index {lg.first_index()}, so the "
                    f"state before it cannot be rebuilt; refusing to start"
                    + (" (" + "; ".join(why) + ")" if why else " (there is no snapshot at all)")
                )
            return None
        m = loaded.meta
        assert m is not None
        loaded.snapshot.close()
        s, t = m.last_included_index, m.last_included_term
        for i, reason in loaded.quarantined:
            log.error("node %s: snapshot %d was quarantined, fell back to snapshot %d: %s", self.id, i, s, reason)
        if lg.last_index() < s or (lg.first_index() <= s and lg.term(s) != t):
            # The log ends before the snapshot, or holds another (never committed) branch at its index.
            lg.reset(s + 1)
        return SnapshotMeta(s, t, ConfState(tuple(m.voters), tuple(m.learners), m.addresses))

    def _snapshots_mgr(self) -> SnapshotManager:
        assert self._snapshots is not None
        return self._snapshots

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        self._fail_all(RaftException(RaftError.ECANCELED, "node stopped"))
        loop = asyncio.get_running_loop()
        if self._downloader is not None:
            await self._downloader.close()
        if self.transport is not None:
            await self.transport.close()
        if self._server is not None:
            await loop.run_in_executor(None, self._server.close)
        if self._snapshots is not None:
            await loop.run_in_executor(None, self._snapshots.close)
        if self.writer is not None:
            await loop.run_in_executor(None, self.writer.close)
        if self._log is not None:
            self._log.close()
        if self._lock is not None:
            self._lock.release()

    # ------------------------------------------------------------------ public API

    def apply(self, data: bytes) -> asyncio.Future[Any]:
        """Propose a command; the future resolves with the state machine's result for it."""
        fut: asyncio.Future[Any] = self._loop_or_raise().create_future()
        self._check_usable()
        self._check_space()
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
        await asyncio.wait_for(self._wait_for(lambda: core.leader == peer and core.role != Role.LEADER), limit)

    async def wait_for_leader(self, timeout: float) -> str:
        """Wait until this node knows a leader whose term has a committed entry here; returns its id."""
        core = self._core()

        def known() -> bool:
            return core.leader != "" and core.log.term(core.log.committed) == core.term

        await asyncio.wait_for(self._wait_for(known), timeout)
        return core.leader

    async def wait_failed(self) -> BaseException:
        """Resolves with the fatal error that stopped this node (storage failure, state machine exception)."""
        assert self._failed is not None, "node not started"
        return await asyncio.shield(self._failed)

    async def wait_applied(self, index: int, timeout: float) -> int:
        """Wait until this node has applied `index`; returns the applied index."""
        await asyncio.wait_for(self._wait_for(lambda: self.applied_index >= index), timeout)
        return self.applied_index

    async def snapshot(self) -> snapshot_format.SnapshotMeta | None:
        """Take a snapshot now (on demand) and return its committed meta. If one is being saved, waits for
        that one instead; if nothing was applied since the latest snapshot, returns None."""
        if self._save_future is not None and not self._save_future.done():
            return await asyncio.shield(self._save_future)
        fut = self._save("on demand")
        if fut is None:
            return None
        return await asyncio.shield(fut)

    def snapshots(self) -> list[snapshot_format.SnapshotMeta]:
        """The committed snapshots on disk, newest first."""
        assert self._storage is not None
        out = []
        for i in self._storage.list():
            try:
                out.append(self._storage.read_meta(i))
            except Exception:  # noqa: BLE001 - reaped or damaged meanwhile: not listed
                continue
        return out

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
        core = self._core()
        self._require_leader()
        await self._conf_change(
            ConfChange(ConfChangeOp.ADD_LEARNER, peer, format_address(address), http_address, remoting_address)
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

    def member_addresses(self) -> dict[str, tuple[str, str | None, str | None]]:
        """id -> (raft address, HTTP address or None, remoting address or None) of every member of the latest
        configuration and every configured peer: the log's addresses first, then this node's configuration."""
        conf = self._core().conf
        o = self.opts
        out: dict[str, tuple[str, str | None, str | None]] = {
            pid: (format_address(addr), o.http_addresses.get(pid), o.remoting_addresses.get(pid))
            for pid, addr in o.peers.items()
        }
        for pid in conf.members():
            out.setdefault(pid, (pid, None, None))  # unknown: RocketMQ's ids are raft addresses
        for pid, raft, http, remoting in conf.addresses:
            out[pid] = (raft, http or out[pid][1], remoting or out[pid][2])
        return out

    def http_address(self, peer: str) -> str | None:
        """The HTTP address of `peer` (for 2007 answers), from the log or this node's configuration."""
        return self._address_of(peer, 2) or self.opts.http_addresses.get(peer)

    def remoting_address(self, peer: str) -> str | None:
        """The RocketMQ remoting address of `peer` (for 1005 and 2007 over remoting), from the log or this node's
        configuration."""
        return self._address_of(peer, 3) or self.opts.remoting_addresses.get(peer)

    def _address_of(self, peer: str, field: int) -> str:
        core = self.core
        found = core.conf.address(peer) if core is not None else None
        return found[field] if found is not None else ""

    def status(self) -> NodeStatus:
        mgr, server, downloader = self._snapshots, self._server, self._downloader
        snap = self._core().snapshot
        snapshot = SnapshotStatus(
            index=snap.index,
            term=snap.term,
            saving=bool(mgr and mgr.saving),
            saves=mgr.stats.saves if mgr else 0,
            bytes=mgr.stats.last_bytes if mgr else 0,
            last_save_s=round(mgr.stats.last_duration_s, 4) if mgr else 0.0,
            last_stall_ms=round(mgr.stats.last_stall_s * 1000, 3) if mgr else 0.0,
            last_saved_at=mgr.stats.last_saved_at if mgr else 0.0,
            installs=self.installs,
            sending={p: SnapshotSending(t.index, t.bytes_sent) for p, t in server.transfers.items()} if server else {},
            downloading=downloader.active.index if downloader and downloader.active else None,
            download=SnapshotDownloads(
                downloader.bytes_received, downloader.resumed_bytes, downloader.completed, downloader.failed
            )
            if downloader
            else None,
        )
        writer = self.writer
        return NodeStatus.of(
            self._core().status(),
            applied=self.applied_index,
            addresses={p: MemberAddresses(r, h, m) for p, (r, h, m) in sorted(self.member_addresses().items())},
            snapshot=snapshot,
            fsync_latency=writer.fsync_latency.snapshot() if writer else None,
            commit_latency=self.commit_latency.snapshot() if writer else None,
            log_writer=writer.stats() if writer else None,
            transport=self.transport.stats() if self.transport is not None else None,
            error=repr(self._error) if self._error is not None else None,
        )

    def is_leader(self) -> bool:
        return self.core is not None and self.core.role == Role.LEADER

    def leader_id(self) -> str:
        return self.core.leader if self.core is not None else ""

    def transport_peers(self) -> dict[str, Address]:
        """Where the transport reaches each node: the configured peers, overridden and extended by the
        addresses the latest configuration in the log carries (so it follows every appended, truncated or
        installed configuration)."""
        peers = dict(self.opts.peers)
        conf = self._peers_conf
        for pid, raft, *_ in conf.addresses if conf is not None else ():
            if pid == self.id:
                continue  # we listen where our own configuration says
            try:
                peers[pid] = parse_address(raft)
            except ValueError:
                log.error(
                    "node %s: the log's address %r for %s is unusable; keeping the configured one", self.id, raft, pid
                )
        return peers

    def _follow_conf(self, core: RaftCore) -> None:
        """Point the transport at the members of the latest configuration before sending anything: the
        core may just have appended (or received, truncated or installed) one naming a new member."""
        conf = core.conf
        if conf is not self._peers_conf:
            addresses_changed = self._peers_conf is None or conf.addresses != self._peers_conf.addresses
            self._peers_conf = conf
            if addresses_changed:
                self._transport().update_peers(self.transport_peers())

    # ------------------------------------------------------------------ the loop

    def _on_messages(self, msgs: list[Message]) -> None:
        if self._stopped or self._error is not None:
            return
        core = self._core()
        step = core.step
        for m in msgs:
            if self._refuse_for_space(m):
                continue
            if m.type == MsgType.SNAP and self._wants_download(core, m):
                assert self._downloader is not None
                self._downloader.offer(m, self._downloaded)
                continue
            step(m)
        if core.lost_acknowledged is not None:
            self._report_lost(core)
        self._kick()

    def _on_peer_lost(self, peer: str) -> None:
        """A peer's connection closed under us: if it was our leader, campaign soon (RaftCore.peer_lost)."""
        if self._stopped or self._error is not None or self.core is None:
            return
        self.core.peer_lost(peer)
        self._kick()

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

    def _wants_download(self, core: RaftCore, m: Message) -> bool:
        """A SNAP the core would install: fetch the files first, step the message once they are here.
        Stale ones (old term, or a snapshot we already cover) go straight to the core, which answers them."""
        snap = m.snapshot
        assert snap is not None
        return (
            m.term >= core.term and snap.index > core.log.committed and not core.log.match_term(snap.index, snap.term)
        )

    def _downloaded(self, m: Message, path: os.PathLike[str] | str) -> None:
        """The snapshot of SNAP `m` is committed in our storage: now let the core install it."""
        if self._stopped or self._error is not None:
            return
        try:
            self._core().step(m)
        except Exception as exc:  # noqa: BLE001 - fatal, like any failure in the loop
            self._fatal(exc)
            return
        self._kick()

    def _on_snapshot_frame(self, sender: str, body: tuple[object, ...]) -> None:
        if self._stopped or self._error is not None or not body:
            return
        if body[0] == GET:
            assert self._server is not None
            self._server.handle_get(sender, body, self._loop_or_raise())
        else:
            assert self._downloader is not None
            self._downloader.on_response(sender, body)

    def _tick(self) -> None:
        if self._stopped:
            return
        loop = self._loop
        assert loop is not None
        self._ticks += 1
        self._core().tick(self._clock_ms())
        self._process()
        if not self._stopped and self._error is None:
            try:
                self._housekeeping(loop.time())
            except Exception as exc:  # noqa: BLE001 - fatal, like any failure in the loop
                self._fatal(exc)
        # Schedule against the ideal grid so ticks do not drift under load.
        self._next_tick += self._tick_s
        now = loop.time()
        if self._next_tick < now:
            self._next_tick = now + self._tick_s
        self._tick_handle = loop.call_at(self._next_tick, self._tick)

    def _housekeeping(self, now: float) -> None:
        """Timers that are not the core's: snapshot triggers by time, and InstallSnapshot transfers that
        ended (pin released) or went idle (reported failed, so the core probes and offers again)."""
        mgr = self._snapshots
        if mgr is not None and self._can_snapshot:
            reason = mgr.due(now)
            if reason is not None:
                self._save(reason)
        server = self._server
        if server is not None and server.transfers:
            core = self._core()
            for peer in list(server.transfers):
                pr = core.prs.get(peer) if core.role == Role.LEADER else None
                if pr is None or pr.state is not ProgressState.SNAPSHOT:
                    server.end(peer)
            for peer in server.idle(now):
                log.warning("node %s: snapshot transfer to %s idle; will offer again", self.id, peer)
                server.end(peer)
                core.report_snapshot(peer, False)
                self._kick()

    def _clock_ms(self) -> float:
        """The monotonic clock the core measures the leader lease on (ms). Under the fault-injection switch
        `unsafe_tick_lease`, the old tick count instead: a paused process drops the ticks it missed."""
        if self.opts.raft.unsafe_tick_lease:
            return self._ticks * self.opts.raft.tick()
        return self._loop_or_raise().time() * 1000.0

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
                now = self._clock_ms()
                for fut in reads:
                    core.read_index(fut, now)
            while core.has_ready():
                rd = core.ready()
                self._handle_ready(core, rd)
                core.advance(rd)
            self._check_role(core)
            self._transport().flush()  # this round's messages leave now, not after the turn's other callbacks
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
        self._proposed.append((first + len(batch) - 1, self._loop_or_raise().time()))

    def _handle_ready(self, core: RaftCore, rd: Ready) -> None:
        self._follow_conf(core)
        if rd.messages:
            self._transport().send(rd.messages)
            for m in rd.messages:
                if m.type == MsgType.SNAP:
                    self._offer_snapshot(core, m)
        before = None
        if rd.snapshot is not None:
            self._install(rd.snapshot)
            lg = self._log
            assert lg is not None
            before = functools.partial(lg.reset, rd.snapshot.index + 1)
        if rd.must_persist():
            last = (rd.entries[-1].index, rd.entries[-1].term) if rd.entries else None
            self._persist_inflight.append((rd.persisted_messages, last, rd.hard_state))
            loop = self._loop_or_raise()
            writer = self.writer
            assert writer is not None
            writer.submit(
                rd.hard_state, rd.entries, lambda err: loop.call_soon_threadsafe(self._persisted, err), before=before
            )
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

    def _offer_snapshot(self, core: RaftCore, m: Message) -> None:
        assert m.snapshot is not None and self._server is not None
        if not self._server.begin(m.to, m.snapshot.index, self._loop_or_raise().time()):
            log.error("node %s: snapshot %d to send to %s is gone", self.id, m.snapshot.index, m.to)
            self._loop_or_raise().call_soon(core.report_snapshot, m.to, False)

    def _install(self, snap: SnapshotMeta) -> None:
        """The core installed a downloaded snapshot: the state machine becomes that snapshot."""
        assert self._storage is not None
        try:
            stored = self._storage.open(snap.index, verify=False)  # verified when it was adopted
        except Exception as e:
            raise RaftException(RaftError.EIO, f"installed snapshot {snap.index} cannot be opened: {e}") from e
        with stored:
            self.fsm.on_snapshot_load(stored)
        self.applied_index = snap.index
        self._snapshots_mgr().reset_base(snap.index)
        self.installs += 1
        log.info("node %s: installed snapshot %d (term %d) from the leader", self.id, snap.index, snap.term)
        if self._read_waiters:
            self._settle_reads()

    def _save(self, reason: str) -> asyncio.Future[snapshot_format.SnapshotMeta] | None:
        """Snapshot the applied state: encode now (this thread), write on the manager's thread, then
        truncate the log prefix. None if nothing was applied since the latest snapshot."""
        core = self._core()
        mgr = self._snapshots_mgr()
        if not self._can_snapshot:
            raise RaftException(RaftError.EINVAL, f"{type(self.fsm).__name__} keeps no snapshots")
        index = self.applied_index
        if index <= max(mgr.base_index, core.snapshot.index):
            return None
        term = core.log.term(index)
        assert term is not None
        conf = core.log.conf_at(index)
        loop = self._loop_or_raise()
        try:
            cfut = mgr.save(
                index,
                term,
                conf.voters,
                conf.learners,
                self.fsm.on_snapshot_save,
                now=loop.time(),
                created_at=time.time(),
                addresses=conf.addresses,
            )
        except SnapshotBusyError:
            return self._save_future
        log.info("node %s: saving snapshot %d (%s)", self.id, index, reason)
        fut = asyncio.wrap_future(cfut, loop=loop)
        fut.add_done_callback(functools.partial(self._saved, SnapshotMeta(index, term, conf)))
        self._save_future = fut
        return fut

    def _saved(self, meta: SnapshotMeta, fut: asyncio.Future[snapshot_format.SnapshotMeta]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.error("node %s: snapshot %d failed: %r", self.id, meta.index, exc)
            return
        if self._stopped or self._error is not None:
            return
        # Keep `log_margin` entries below the snapshot for lagging followers, and always everything after
        # the previous snapshot, so a damaged newest snapshot can be replaced by the previous one + replay.
        assert self._storage is not None
        older = [i for i in self._storage.list() if i < meta.index]
        keep_from = max(1, min(meta.index + 1 - self.opts.snapshot.log_margin, (older[0] if older else 0) + 1))
        core = self._core()
        core.compact(meta, keep_from)
        lg, writer, loop = self._log, self.writer, self._loop_or_raise()
        assert lg is not None and writer is not None

        def done(err: BaseException | None) -> None:
            if err is not None:
                loop.call_soon_threadsafe(self._fatal, err)

        writer.submit(None, [], done, before=functools.partial(lg.truncate_prefix, keep_from))
        log.info("node %s: snapshot %d committed; log kept from %d", self.id, meta.index, keep_from)

    def _persisted(self, err: BaseException | None) -> None:
        if self._stopped:
            return
        msgs, last, hs = self._persist_inflight.popleft()
        if err is not None:
            self._fatal(err)
            return
        if msgs:  # acknowledgements of what is now durable: on every commit's path, so sent at once
            self._transport().send(msgs)
            self._transport().flush()
        core = self._core()
        if hs is not None:
            core.on_hard_state_persisted(hs)
        if last is not None:
            core.on_persisted(*last)
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
            elif e.type == EntryType.CONF:
                failpoint.hit("membership.apply")
                self._conf_applied = True
            elif e.type == EntryType.NOOP and e.term == core.term and core.role == Role.LEADER:
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
        if self._proposed:
            now = self._loop_or_raise().time()
            while self._proposed and self._proposed[0][0] <= self.applied_index:
                self.commit_latency.observe(now - self._proposed.popleft()[1])
        if self._read_waiters:
            self._settle_reads()
        mgr = self._snapshots
        if mgr is not None and normal:
            mgr.on_applied(len(normal), sum(len(e.data) for e in normal))
            if self._can_snapshot and mgr.due(self._loop_or_raise().time()) is not None:
                self._save("threshold")

    def _settle_reads(self) -> None:
        done = [w for w in self._read_waiters if w[0] <= self.applied_index]
        self._read_waiters = [w for w in self._read_waiters if w[0] > self.applied_index]
        for idx, fut in done:
            if not fut.done():
                fut.set_result(idx)

    def _check_role(self, core: RaftCore) -> None:
        is_leader = core.role == Role.LEADER
        changed, self._conf_applied = self._conf_applied, False
        if core.leader != self._known_leader:
            self._known_leader = core.leader
            changed = True
            log.info("node %s: leader %s (term %d, %s)", self.id, core.leader or "unknown", core.term, core.role)
        if self._was_leader and not is_leader:
            # Pending proposals may still commit under the next leader: their outcome is unknown.
            err = RaftException(RaftError.ELEADERCHANGED, "leadership lost; outcome unknown", core.leader)
            _fail([f for _, f in self._waiters.values()], err)
            self._waiters.clear()
            self._proposed.clear()
            _fail([f for _, f in self._read_waiters], err)
            self._read_waiters = []
            if self._server is not None:
                self._server.end_all()
            if self._leader_term >= 0:
                self.fsm.on_leader_stop(self._leader_term)
                self._leader_term = -1
        self._was_leader = is_leader
        if changed:
            for listener in self.change_listeners:
                listener()
        if self._role_waiters:
            waiters, self._role_waiters = self._role_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    # ------------------------------------------------------------------ helpers

    async def _conf_change(self, change: ConfChange) -> None:
        core = self._core()
        if core.role == Role.LEADER and self._leader_term != core.term:
            # Elected a moment ago: until the leader's first entry is applied the core refuses a configuration
            # change (EBUSY; the configuration may still change under it, as JRaft's confCtx is busy then).
            # That is no change in flight, so wait for the entry, up to an election timeout, rather than refuse
            # an operator's add/remove made just after a failover; without it, the proposal still refuses.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wait_for(lambda: self._leader_term == core.term or core.role != Role.LEADER),
                    self.opts.raft.election_timeout_ms / 1000,
                )
            core = self._core()
        # Record the configured addresses of members the log has none for (the bootstrap members), so that a
        # node configured with fewer peers, or a new one, reaches them too.
        o = self.opts
        known = tuple(
            (p, format_address(a), o.http_addresses.get(p, ""), o.remoting_addresses.get(p, ""))
            for p, a in sorted(o.peers.items())
        )
        failpoint.hit("membership.propose")
        index, term = core.propose_conf_change(replace(change, known=known))
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
        if self._failed is not None and not self._failed.done():
            self._failed.set_result(exc)
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

    def _space_short(self) -> str | None:
        """Why the log's file system is too full to write (LogStorageOptions.min_free_bytes), or None;
        statvfs at most every 100 ms."""
        need = self.opts.log.min_free_bytes
        if not need:
            return None
        now = self._loop_or_raise().time()
        if now >= self._space_checked_at + 0.1:
            st = os.statvfs(self.opts.data_dir)
            self._space_free, self._space_checked_at = st.f_bavail * st.f_frsize, now
        if self._space_free < need:
            return f"disk nearly full: {self._space_free} bytes free under {self.opts.data_dir}, writes need {need}"
        return None

    def _check_space(self) -> None:
        """Refuse a proposal while the disk is nearly full."""
        short = self._space_short()
        if short is not None:
            raise RaftException(RaftError.EBUSY, f"{short}; free space and writes resume by themselves")

    def _refuse_for_space(self, m: Message) -> bool:
        """While the disk is nearly full, entries and snapshots from a leader are not taken: the message is
        dropped as if the network had lost it, so the node stays alive, keeps its term and leader from
        heartbeats (no election), answers reads, and the leader resends at heartbeat pace; once space is
        back the next append goes through (or is rejected with a hint and backed up) and it catches up.
        While the reserve exceeds what a batch writes, the WAL never meets ENOSPC, an I/O error that would
        stop the node."""
        if not (m.type == MsgType.SNAP or (m.type == MsgType.APP and m.entries)):
            return False
        short = self._space_short()
        if (short is not None) != self._space_paused:
            self._space_paused = short is not None
            if short is not None:
                log.warning("%s: not taking entries from leader %s until space is freed", short, m.frm)
            else:
                log.info("disk space is back under %s: taking entries from the leader again", self.opts.data_dir)
        return short is not None

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

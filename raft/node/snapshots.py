"""SnapshotExecutor: everything the node does with snapshots (sofa-jraft's name).

Triggers (entries, bytes, interval) and saves (encode on the loop, write on the manager's thread), the log
compaction after a save, loading the newest usable snapshot at start (RIP-59), installing a snapshot the
core adopted, and InstallSnapshot both ways: serving chunks as a leader (`SnapshotServer`), downloading as a
follower (`SnapshotDownloader`) before the core sees the SNAP.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from typing import TYPE_CHECKING

from raft.core import Message, MsgType, RaftCore, Role, SnapshotMeta
from raft.core.progress import ProgressState
from raft.node.download import SnapshotDownloader
from raft.node.install import GET, SnapshotServer
from raft.node.statemachine import BaseStateMachine
from raft.node.status import SnapshotDownloads, SnapshotSending, SnapshotStatus
from raft.options import SnapshotOptions
from raft.status import RaftBaseError, RaftError, RaftException
from snapshot.manager import SnapshotBusyError, SnapshotManager

if TYPE_CHECKING:
    from raft.node.loop import NodeLoop
    from raft.storage.protocols import NodeLog
    from raft.transport import NodeTransport
    from snapshot.protocols import SnapshotStorage

log = logging.getLogger("raft.node")


class StoreNotRebuildableError(RaftBaseError, RuntimeError):  # RuntimeError: what it was raised as before
    """A node's store cannot give back its state: no snapshot loads (each damaged one was quarantined, or there is
    none) and its log starts after index 1. The node refuses to start; controllerd prints how to rebuild it."""


class SnapshotExecutor:
    def __init__(self, driver: NodeLoop, storage: SnapshotStorage, options: SnapshotOptions, download_dir: str) -> None:
        self._d = driver
        self.id = driver.id
        self.storage = storage
        self.options = options
        self._download_dir = download_dir
        fsm = driver.fsm.fsm
        # A state machine keeping BaseStateMachine's snapshot methods is rebuilt from the whole log.
        self.can_snapshot = getattr(type(fsm), "on_snapshot_save", None) is not BaseStateMachine.on_snapshot_save
        self.manager = SnapshotManager(storage, options, name=f"snapshot-save-{self.id}")
        self.server: SnapshotServer | None = None
        self.downloader: SnapshotDownloader | None = None
        self.save_future: asyncio.Future[SnapshotMeta] | None = None
        self.installs = 0  # snapshots installed from a leader

    def connect(self, transport: NodeTransport) -> None:
        """Serve and download through `transport`'s snapshot frames."""
        so = self.options
        send = transport.send_snapshot_frame
        self.server = SnapshotServer(self.storage, send, so, transport.prepare_snapshot_frame, send)
        self.downloader = SnapshotDownloader(self._download_dir, self.storage, send, so)

    async def close_downloader(self) -> None:
        if self.downloader is not None:
            await self.downloader.close()

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self.server is not None:
            await loop.run_in_executor(None, self.server.close)
        await loop.run_in_executor(None, self.manager.close)

    # ------------------------------------------------------------------ start

    def load(self, lg: NodeLog, data_dir: str) -> SnapshotMeta | None:
        """RIP-59 start: load the newest snapshot that verifies and that the log continues from (quarantining
        damaged ones, falling back to older ones), or refuse to start if the state cannot be rebuilt."""
        has_log = lg.last_index() >= lg.first_index()

        def usable(meta: SnapshotMeta) -> str | None:
            s = meta.last_included_index
            if has_log and lg.first_index() > s + 1:
                return f"the log starts at index {lg.first_index()}, so entries {s + 1}..{lg.first_index() - 1} are missing"
            return None

        loaded = self.manager.load(self._d.fsm.fsm.on_snapshot_load, usable=usable) if self.can_snapshot else None
        if loaded is None or loaded.snapshot is None:
            if has_log and lg.first_index() > 1:
                why = [f"snapshot {i} quarantined: {r}" for i, r in (loaded.quarantined if loaded else ())]
                why += [f"snapshot {i} skipped: {r}" for i, r in (loaded.skipped if loaded else ())]
                raise StoreNotRebuildableError(
                    f"{data_dir}: no snapshot loads and the log starts at index {lg.first_index()}, so the "
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
        return m

    # ------------------------------------------------------------------ save and compact

    def on_applied(self, normal: int, nbytes: int, now: float) -> None:
        self.manager.on_applied(normal, nbytes)
        if self.can_snapshot and self.manager.due(now) is not None:
            self.save("threshold")

    async def snapshot(self) -> SnapshotMeta | None:
        if self.save_future is not None and not self.save_future.done():
            return await asyncio.shield(self.save_future)
        fut = self.save("on demand")
        if fut is None:
            return None
        return await asyncio.shield(fut)

    def save(self, reason: str) -> asyncio.Future[SnapshotMeta] | None:
        """Snapshot the applied state: encode now (this thread), write on the manager's thread, then
        truncate the log prefix. None if nothing was applied since the latest snapshot."""
        core = self._d.core_()
        mgr = self.manager
        fsm = self._d.fsm.fsm
        if not self.can_snapshot:
            raise RaftException(RaftError.EINVAL, f"{type(fsm).__name__} keeps no snapshots")
        index = self._d.fsm.applied_index
        if index <= max(mgr.base_index, core.snapshot.index):
            return None
        term = core.log.term(index)
        assert term is not None
        conf = core.log.conf_at(index)
        loop = self._d.aio()
        try:
            cfut = mgr.save(
                index,
                term,
                conf.voters,
                conf.learners,
                fsm.on_snapshot_save,
                now=self._d.now(),
                created_at=time.time(),
                addresses=conf.addresses,
            )
        except SnapshotBusyError:
            return self.save_future
        log.info("node %s: saving snapshot %d (%s)", self.id, index, reason)
        fut = asyncio.wrap_future(cfut, loop=loop)
        fut.add_done_callback(functools.partial(self._saved, SnapshotMeta(index, term, conf)))
        self.save_future = fut
        return fut

    def _saved(self, meta: SnapshotMeta, fut: asyncio.Future[SnapshotMeta]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.error("node %s: snapshot %d failed: %r", self.id, meta.index, exc)
            return
        if not self._d.live():
            return
        # Keep `log_margin` entries below the snapshot for lagging followers, and always everything after
        # the previous snapshot, so a damaged newest snapshot can be replaced by the previous one + replay.
        older = [i for i in self.storage.list() if i < meta.index]
        keep_from = max(1, min(meta.index + 1 - self.options.log_margin, (older[0] if older else 0) + 1))
        self._d.core_().compact(meta, keep_from)
        self._d.truncate_log_prefix(keep_from)
        log.info("node %s: snapshot %d committed; log kept from %d", self.id, meta.index, keep_from)

    def snapshots(self) -> list[SnapshotMeta]:
        """The committed snapshots on disk, newest first."""
        out = []
        for i in self.storage.list():
            try:
                out.append(self.storage.read_meta(i))
            except Exception:  # noqa: BLE001 - reaped or damaged meanwhile: not listed
                continue
        return out

    # ------------------------------------------------------------------ install (follower)

    def install(self, snap: SnapshotMeta) -> None:
        """The core installed a downloaded snapshot: the state machine becomes that snapshot."""
        try:
            stored = self.storage.open(snap.index, verify=False)  # verified when it was adopted
        except Exception as e:
            raise RaftException(RaftError.EIO, f"installed snapshot {snap.index} cannot be opened: {e}") from e
        with stored:
            self._d.fsm.fsm.on_snapshot_load(stored)
        self.manager.reset_base(snap.index)
        self.installs += 1
        log.info("node %s: installed snapshot %d (term %d) from the leader", self.id, snap.index, snap.term)
        self._d.fsm.installed(snap.index)

    def intercept(self, core: RaftCore, m: Message) -> bool:
        """A SNAP the core would install: fetch the files first, step the message once they are here (True).
        Stale ones (old term, or a snapshot we already cover) go straight to the core, which answers them."""
        snap = m.snapshot
        assert snap is not None
        if m.term >= core.term and snap.index > core.log.committed and not core.log.match_term(snap.index, snap.term):
            assert self.downloader is not None
            self.downloader.offer(m, self._downloaded)
            return True
        return False

    def _downloaded(self, m: Message, path: os.PathLike[str] | str) -> None:
        """The snapshot of SNAP `m` is committed in our storage: now let the core install it."""
        if not self._d.live():
            return
        try:
            self._d.core_().step(m)
        except Exception as exc:  # noqa: BLE001 - fatal, like any failure in the loop
            self._d.fatal(exc)
            return
        self._d.kick()

    def on_frame(self, sender: str, body: tuple[object, ...]) -> None:
        if not self._d.live() or not body:
            return
        if body[0] == GET:
            assert self.server is not None
            self.server.handle_get(sender, body, self._d.aio(), self._d.now())
        else:
            assert self.downloader is not None
            self.downloader.on_response(sender, body)

    # ------------------------------------------------------------------ serve (leader)

    def offer(self, core: RaftCore, msgs: list[Message]) -> None:
        """The core sent these messages: pin the snapshot of each SNAP among them for its transfer."""
        for m in msgs:
            if m.type != MsgType.SNAP:
                continue
            assert m.snapshot is not None and self.server is not None
            loop = self._d.aio()
            if not self.server.begin(m.to, m.snapshot.index, self._d.now()):
                log.error("node %s: snapshot %d to send to %s is gone", self.id, m.snapshot.index, m.to)
                loop.call_soon(core.report_snapshot, m.to, False)

    def leadership_lost(self) -> None:
        if self.server is not None:
            self.server.end_all()

    def housekeeping(self, core: RaftCore, now: float) -> None:
        """Timers that are not the core's: snapshot triggers by time, and InstallSnapshot transfers that
        ended (pin released) or went idle (reported failed, so the core probes and offers again)."""
        if self.can_snapshot:
            reason = self.manager.due(now)
            if reason is not None:
                self.save(reason)
        server = self.server
        if server is not None and server.transfers:
            for peer in list(server.transfers):
                pr = core.prs.get(peer) if core.role == Role.LEADER else None
                if pr is None or pr.state is not ProgressState.SNAPSHOT:
                    server.end(peer)
            for peer in server.idle(now):
                log.warning("node %s: snapshot transfer to %s idle; will offer again", self.id, peer)
                server.end(peer)
                core.report_snapshot(peer, False)
                self._d.kick()

    def status(self, core: RaftCore) -> SnapshotStatus:
        mgr, server, downloader = self.manager, self.server, self.downloader
        snap = core.snapshot
        return SnapshotStatus(
            index=snap.index,
            term=snap.term,
            saving=mgr.saving,
            saves=mgr.stats.saves,
            bytes=mgr.stats.last_bytes,
            last_save_s=round(mgr.stats.last_duration_s, 4),
            last_stall_ms=round(mgr.stats.last_stall_s * 1000, 3),
            last_saved_at=mgr.stats.last_saved_at,
            installs=self.installs,
            sending={p: SnapshotSending(t.index, t.bytes_sent) for p, t in server.transfers.items()} if server else {},
            downloading=downloader.active.index if downloader and downloader.active else None,
            download=SnapshotDownloads(
                downloader.bytes_received, downloader.resumed_bytes, downloader.completed, downloader.failed
            )
            if downloader
            else None,
        )

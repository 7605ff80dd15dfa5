"""What a Node runs on, and the factory that builds the real parts from its options.

`Node(options, fsm, open_parts)` calls `open_parts(options, fsm)` when it starts and receives a `NodeParts`:
its log, meta store, snapshot store (Protocols declaring everything the node calls) and a transport
constructor. `open_data_dir` is the real factory: the data directory's lock and IDENTITY, the segment log,
the meta file, the snapshot storage and the TCP transport. A test harness passes in-memory ones.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from raft.core import CoreConfig, Message
from raft.node.clock import Clock
from raft.node.statemachine import StateMachine
from raft.options import NodeOptions
from raft.storage import FileMetaStorage, SegmentLog
from raft.storage.dirlock import DataDirLock
from raft.storage.identity import claim_identity
from raft.storage.layout import DOWNLOAD_DIR, LOG_DIR, META_DIR, SNAPSHOT_DIR
from raft.storage.protocols import MetaStorage, NodeLog
from raft.transport import NodeTransport, TcpTransport
from raft.transport.tcp import Address
from snapshot.protocols import SnapshotStorage
from snapshot.storage import FileSnapshotStorage

OnMessages = Callable[[list[Message]], None]
# (on_messages, where each peer listens) -> a transport, not yet started
TransportFactory = Callable[[OnMessages, Mapping[str, Address]], NodeTransport]


@dataclass(slots=True)
class NodeParts:
    log: NodeLog
    meta: MetaStorage
    snapshots: SnapshotStorage
    download_dir: str  # where InstallSnapshot downloads land before the snapshot store adopts them
    transport: TransportFactory
    release: Callable[[], None] = lambda: None  # called last when the node stops (the directory lock)
    clock: Clock | None = None  # ticks and timestamps; None: the event loop's (raft/node/clock.py)


log = logging.getLogger("raft.node")

PartsFactory = Callable[[NodeOptions, StateMachine], NodeParts]


def open_data_dir(o: NodeOptions, fsm: StateMachine) -> NodeParts:
    """The real parts, under `o.data_dir` (docs/layout.md): DataDirLockedError while another process uses the
    directory, IdentityError if it holds another node's or group's data."""
    lock = DataDirLock(o.data_dir)
    try:
        if claim_identity(o.data_dir, o.group_id, o.node_id):
            log.info("%s: wrote IDENTITY (node %s, group %s)", o.data_dir, o.node_id, o.group_id)
        known = getattr(fsm, "section_names", None)
        snapshots = FileSnapshotStorage(
            os.path.join(o.data_dir, SNAPSHOT_DIR), o.snapshot.max_reserved, known_types=known
        )
        lg = SegmentLog(os.path.join(o.data_dir, LOG_DIR), o.log)
        meta = FileMetaStorage(os.path.join(o.data_dir, META_DIR))
    except BaseException:
        lock.release()
        raise

    def transport(on_messages: OnMessages, peers: Mapping[str, Address]) -> NodeTransport:
        return TcpTransport(o.node_id, o.peers[o.node_id], dict(peers), o.secret, on_messages, o.transport, o.tls)

    return NodeParts(lg, meta, snapshots, os.path.join(o.data_dir, DOWNLOAD_DIR), transport, lock.release)


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

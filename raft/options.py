"""Options dataclasses, one per component, each default documented where it is defined."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LogStorageOptions:
    """Options of the segment WAL (raft.storage.wal.SegmentLog). Sizes in bytes."""

    segment_bytes: int = 64 * 1024 * 1024
    """A segment is sealed once it holds at least this many bytes; the next append starts a new file. A batch
    never spans two segments, so a segment can exceed this by up to one batch."""
    preallocate: bool = True
    """Extend a new segment to `segment_bytes` with zeros (a sparse `ftruncate`) as soon as its header is durable,
    so that each append overwrites bytes inside the file instead of growing it: its `fdatasync` then has no file
    size to persist (on ext4 here, 62 against 92 us for a 300-byte append; etcd preallocates its WAL files the
    same way). Recovery reads the zero tail as unused space (docs/log-format.md)."""
    verify_reads: bool = True
    """CRC-check every record read back from disk (cheap next to the pread): corruption raises instead of
    returning bad data."""
    fsync_sidecar: bool = False
    """For fault injection (the Jepsen crash nemesis): after every fsynced append, overwrite `FSYNCED` in the log
    directory with `<segment file name> <durable byte offset>` (docs/log-format.md). Off in production."""
    min_free_bytes: int = 16 * 1024 * 1024
    """A leader refuses new proposals (retryable, HTTP 503) while the log's file system has less free space than
    this, and accepts them again by itself once there is (etcd's NOSPACE alarm, without the manual disarm):
    running out of space in the middle of a WAL write would stop the node (fsyncgate). 0 disables the check."""

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")
        if self.min_free_bytes < 0:
            raise ValueError(f"min_free_bytes must be >= 0, got {self.min_free_bytes}")


@dataclass(frozen=True, slots=True)
class TransportOptions:
    """Tuning of raft.transport (TcpTransport and InMemoryTransport). Sizes in bytes, times in seconds."""

    max_frame_bytes: int = 64 * 1024 * 1024
    """Largest frame accepted or sent. A bigger inbound frame closes the connection (decode failure); a single
    message that cannot fit is dropped by the sender. Must be the same on every node."""
    max_pending_bytes: int = 64 * 1024 * 1024
    """Cap on encoded messages waiting for one peer (connecting, or its socket is backed up). Messages beyond
    it are dropped and counted: Raft retransmits by itself, an unbounded queue would only hide a dead peer."""
    write_buffer_high_bytes: int = 4 * 1024 * 1024
    """Socket write buffer level above which we stop handing frames to the kernel for that peer (asyncio
    pause_writing); flushing resumes below a quarter of it. Keeps memory and latency bounded under a slow peer."""
    connect_timeout: float = 1.0
    """Give up a TCP connect after this long and back off."""
    backoff_min: float = 0.05
    """First reconnect delay after a failed connect or a lost connection; doubled per failure..."""
    backoff_max: float = 1.0
    """...up to this. While backing off, messages for the peer are dropped (counted)."""
    max_unauthenticated_connections: int = 32
    """Inbound connections that have not yet sent a frame header that authenticates. One more is closed at
    once (counted `refused`). A peer authenticates with its first frame, within a round trip, so this only
    bites a flood of connections from something that does not know the cluster secret."""
    auth_timeout_s: float = 5.0
    """An inbound connection whose first header has not authenticated within this long is closed."""
    idle_timeout_s: float = 120.0
    """An inbound connection that sent nothing for this long is closed. Its sender reconnects, without
    backoff, when it next has something to send. Should be the same on every node."""

    def __post_init__(self) -> None:
        if self.max_unauthenticated_connections < 1:
            raise ValueError(
                f"max_unauthenticated_connections must be >= 1, got {self.max_unauthenticated_connections}"
            )
        if self.auth_timeout_s <= 0 or self.idle_timeout_s <= 0:
            raise ValueError("auth_timeout_s and idle_timeout_s must be positive")


@dataclass(frozen=True, slots=True)
class RaftOptions:
    """Consensus timing and flow control (JRaft NodeOptions/RaftOptions names in brackets). Times in ms."""

    election_timeout_ms: int = 1000
    """[electionTimeoutMs] A follower that hears nothing for a random time in [T, 2T) campaigns. RocketMQ's
    jRaftElectionTimeoutMs defaults to 1000."""
    heartbeat_ms: int = 0
    """Leader heartbeat period; 0 means max(electionTimeoutMs / electionHeartbeatFactor(10), 10) = 100 ms."""
    tick_ms: int = 0
    """Resolution of the core's logical clock; 0 means min(50, heartbeat / 2)."""
    pre_vote: bool = True
    """PreVote: a partitioned node cannot disrupt the cluster by inflating its term."""
    check_quorum: bool = True
    """A leader that has not heard from a quorum within an election timeout steps down; followers ignore
    (pre)votes while they hear from a leader. Required for lease reads."""
    lease_read: bool = False
    """[ReadOnlyLeaseBased] answer ReadIndex from the leader lease instead of a heartbeat round. The lease is
    measured on the monotonic clock from the send time of the last quorum-confirmed heartbeat round and lasts
    lease_ratio x election timeout x (1 - max_clock_drift) / (1 + max_clock_drift) (docs/raft.md, "Reads").
    Needs check_quorum. Off by default: ReadIndex with a quorum round [ReadOnlySafe] needs no clock at all."""
    lease_ratio: float = 0.9
    """[leaderLeaseTimeRatio = 90] the lease's share of the election timeout, before the drift bound; capped at
    1 - 1/election ticks (a follower's lockout is at least one tick shorter than its election timeout)."""
    max_clock_drift: float = 0.01
    """Bound on how far any node's clock rate strays from real time (0.01: within 1 %). Lease reads are safe
    only while every node's monotonic clock keeps it; a leader whose clock jumps back drops its lease."""
    unsafe_tick_lease: bool = False
    """Fault injection only (the Jepsen negative control; controllerd sets it from the environment variable
    CONTROLLERD_UNSAFE_TICK_LEASE=1, never from a config key): measure the lease in timer ticks, which a paused
    process drops, instead of on the monotonic clock. Stale lease reads follow."""
    max_inflight: int = 256
    """[maxReplicatorInflightMsgs] AppendEntries in flight per follower (pipelining)."""
    max_entries_per_msg: int = 1024
    """[maxEntriesSize] entries per AppendEntries."""
    max_bytes_per_msg: int = 512 * 1024
    """[maxBodySize] bytes of entry data per AppendEntries."""
    max_uncommitted: int = 100_000
    """Backpressure: proposals beyond this many uncommitted entries fail with EBUSY."""
    catchup_margin: int = 1000
    """[catchupMargin] a learner within this many entries of the leader is promoted by add_peer."""

    def heartbeat(self) -> int:
        return self.heartbeat_ms or max(self.election_timeout_ms // 10, 10)

    def tick(self) -> int:
        return self.tick_ms or max(1, min(50, self.heartbeat() // 2))

    def __post_init__(self) -> None:
        if self.election_timeout_ms < 10:
            raise ValueError(f"election_timeout_ms must be >= 10, got {self.election_timeout_ms}")
        if self.heartbeat() >= self.election_timeout_ms:
            raise ValueError("heartbeat_ms must be below election_timeout_ms")
        if self.lease_read and not self.check_quorum:
            raise ValueError(
                "lease_read needs check_quorum: without it a follower votes for a new leader while the old one "
                "still serves reads from its lease"
            )
        if not 0 < self.lease_ratio < 1:
            raise ValueError(f"lease_ratio must be in (0, 1), got {self.lease_ratio}")
        if not 0 <= self.max_clock_drift < 1:
            raise ValueError(f"max_clock_drift must be in [0, 1), got {self.max_clock_drift}")


@dataclass(frozen=True, slots=True)
class SnapshotOptions:
    """Snapshots and InstallSnapshot (RocketMQ controller.conf / JRaft names in brackets)."""

    threshold_entries: int = 10_000
    """[statemachineSnapshotThreshold] take a snapshot once this many entries were applied since the last one.
    RIP-59 suggests 1000; at the heartbeat load of a fleet (hundreds of commands/s) that is a snapshot every
    few seconds, so the default is 10,000. 0 disables the trigger."""
    threshold_log_bytes: int = 64 * 1024 * 1024
    """Take a snapshot once this many bytes of commands were applied since the last one. 0 disables it."""
    interval_s: float = 3600.0
    """[jRaftSnapshotIntervalSecs] take a snapshot this often if anything was applied. The first firing is
    jittered uniformly in [interval/2, interval) so that replicas started together do not save together.
    0 disables it."""
    max_reserved: int = 3
    """[maxSnapshotReservedNum] snapshots kept on disk (plus any being sent to a follower)."""
    log_margin: int = 1000
    """[jRaftSnapshotTrailingLogs] entries kept below a new snapshot when the log prefix is truncated, so slightly lagging followers
    catch up from the log instead of by InstallSnapshot. The log also always reaches back to the previous
    retained snapshot, so that a corrupt newest snapshot can be replaced by the previous one plus replay."""
    chunk_bytes: int = 1024 * 1024
    """InstallSnapshot: bytes per chunk request."""
    window: int = 4
    """InstallSnapshot: chunk requests a follower keeps in flight."""
    throttle_bytes_per_s: int = 0
    """[snapshotThrottle] cap on the bytes/s a leader serves to all downloading followers; 0 = unlimited."""
    request_timeout_s: float = 5.0
    """InstallSnapshot: a follower gives up a download when a chunk is not answered within this time..."""
    idle_timeout_s: float = 15.0
    """...and a leader gives up a transfer (and retries later) when the follower asked nothing for this long."""
    sync_every_bytes: int = 16 * 1024 * 1024
    """InstallSnapshot: the follower fsyncs and checkpoints its download this often, so that a restart
    resumes from the last checkpoint instead of from zero."""

    def __post_init__(self) -> None:
        for name in ("threshold_entries", "threshold_log_bytes", "log_margin", "throttle_bytes_per_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.interval_s < 0:
            raise ValueError(f"interval_s must be >= 0, got {self.interval_s}")
        if self.max_reserved < 1:
            raise ValueError(f"max_reserved must be >= 1, got {self.max_reserved}")
        if self.chunk_bytes < 1024 or self.window < 1 or self.sync_every_bytes < 1:
            raise ValueError("chunk_bytes must be >= 1024, window and sync_every_bytes >= 1")
        if self.request_timeout_s <= 0 or self.idle_timeout_s <= 0:
            raise ValueError("request_timeout_s and idle_timeout_s must be positive")


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """One Raft node: identity, peers, storage location and the component options."""

    node_id: str
    data_dir: str
    peers: dict[str, tuple[str, int]]
    """The raft address (host, port) of every node this node is configured with, itself included: RocketMQ's
    jRaftInitConf. It seeds the first start; members added later carry their addresses in the log, and a
    member's address in the log wins over this (docs/raft.md, "Membership addresses")."""
    secret: bytes
    """The cluster secret authenticating every raft frame."""
    group_id: str = "jRaft-Controller"
    """The raft group (jRaftGroupId). With node_id it is written into the data directory's IDENTITY file at
    the first start and checked at every later one (raft/storage/identity.py)."""
    voters: tuple[str, ...] = ()
    """Bootstrap configuration; empty means every peer. A node joining an existing cluster lists the
    current voters (not itself) and is added by add_peer."""
    http_addresses: Mapping[str, str] = field(default_factory=dict)
    """id -> HTTP address host:port of the configured peers (controllerHttpAddr), recorded in the log
    alongside raft addresses by membership changes this node proposes."""
    remoting_addresses: Mapping[str, str] = field(default_factory=dict)
    """id -> RocketMQ remoting address host:port of the configured peers (jRaftControllerRPCAddr), recorded in
    the log the same way."""
    raft: RaftOptions = RaftOptions()
    log: LogStorageOptions = LogStorageOptions()
    transport: TransportOptions = TransportOptions()
    snapshot: SnapshotOptions = SnapshotOptions()

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise ValueError(f"node_id {self.node_id!r} is not among the peers {sorted(self.peers)}")
        if not self.secret:
            raise ValueError("secret must not be empty")

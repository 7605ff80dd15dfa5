"""Options dataclasses, one per component, each default documented where it is defined."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogStorageOptions:
    """Options of the segment WAL (raft.storage.wal.SegmentLog). Sizes in bytes."""

    segment_bytes: int = 64 * 1024 * 1024
    """A segment is sealed once it holds at least this many bytes; the next append starts a new file. A batch
    never spans two segments, so a segment can exceed this by up to one batch."""
    verify_reads: bool = True
    """CRC-check every record read back from disk (cheap next to the pread): corruption raises instead of
    returning bad data."""

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")


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
    """[ReadOnlyLeaseBased] answer ReadIndex from the leader lease (0.9 x election timeout, JRaft's
    leaderLeaseTimeRatio=90) instead of a heartbeat round. Relies on bounded clock drift."""
    lease_ratio: float = 0.9
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


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """One Raft node: identity, peers, storage location and the component options."""

    node_id: str
    data_dir: str
    peers: dict[str, tuple[str, int]]
    """Every node's raft address, this node included (host, port)."""
    secret: bytes
    """The cluster secret authenticating every raft frame."""
    voters: tuple[str, ...] = ()
    """Bootstrap configuration; empty means every peer. A node joining an existing cluster lists the
    current voters (not itself) and is added by add_peer."""
    raft: RaftOptions = RaftOptions()
    log: LogStorageOptions = LogStorageOptions()
    transport: TransportOptions = TransportOptions()

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise ValueError(f"node_id {self.node_id!r} is not among the peers {sorted(self.peers)}")
        if not self.secret:
            raise ValueError("secret must not be empty")

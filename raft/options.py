"""Options dataclasses, one per component, each default documented where it is defined.

A field that a RocketMQ `controller.conf` key sets carries that key's declaration (`Setting`: RocketMQ name,
kind, default, scope, doc) as its field metadata (`setting(...)`), so the key and its default are written
once: `cli/config.py` derives the parser, `controllerd -p`, `check-config`, the key table of docs/config.md
and the controller.conf writer from these declarations (and from its own, for keys no layer below reads).
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NODE_LOCAL = "node-local"
REPLICATED = "replicated"
SETTING = "rocketmq.setting"
"""The field-metadata key under which a field's `Setting` is stored."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One controller.conf key, declared once (docs/config.md's key table is generated from these)."""

    key: str
    """The RocketMQ name, case-sensitive."""
    kind: str
    """int | bool | str | addr | addrs | path | keys | secret"""
    default: str | None
    """The default as the file would spell it; None means unset."""
    minimum: int | None = None
    maximum: int | None = None
    """Largest value of an int; None: a Java int's."""
    scope: str = NODE_LOCAL
    """NODE_LOCAL, or REPLICATED: the key changes what applying a command decides (statemachine/config.py)."""
    doc: str = ""
    """Its meaning (the table's "meaning" column)."""
    type_doc: str = ""
    """The table's "type" column when the kind and bounds do not say it well; "" derives it."""
    default_doc: str = ""
    """The table's "default" column when the default alone does not say it; "" derives it."""

    @property
    def replicated(self) -> bool:
        return self.scope == REPLICATED


def file_text(value: Any) -> str:
    """A typed default as a controller.conf spells it (3600.0 -> 3600, True -> true, a tuple ;-joined)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple):
        return ";".join(value)
    return str(value)


def setting(key: str, kind: str, default: Any = dataclasses.MISSING, **decl: Any) -> Any:
    """A dataclass field declaring controller.conf key `key`. With `default` (the typed value) the field
    has that default and the declaration its file spelling; without it the field is required and
    `text_default=` gives the file's default (None: unset)."""
    text = decl.pop("text_default", None) if default is dataclasses.MISSING else file_text(default)
    meta = {SETTING: Setting(key, kind, text, **decl)}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, (dict, list, set)):
        raise TypeError("a mutable default needs default_factory")
    return field(default=default, metadata=meta)


def setting_of(cls: type, attr: str) -> Setting:
    """The declaration on field `attr` of options dataclass `cls` (KeyError when it declares none)."""
    for f in dataclasses.fields(cls):
        if f.name == attr:
            decl: Setting = f.metadata[SETTING]
            return decl
    raise KeyError(f"{cls.__name__} has no field {attr}")


def same_setting(cls: type, attr: str) -> Any:
    """A field of a higher layer's dataclass that the declaration on `cls.attr` also sets (no default of
    its own: the declaration's default is the one)."""
    return field(metadata={SETTING: setting_of(cls, attr)})


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

    election_timeout_ms: int = setting(
        "jRaftElectionTimeoutMs",
        "int",
        1000,
        minimum=20,
        doc="Election timeout. The heartbeat is a tenth of it, 10 ms at least.",
    )
    """[electionTimeoutMs] A follower that hears nothing for a random time in [T, 2T) campaigns. RocketMQ's
    jRaftElectionTimeoutMs defaults to 1000."""
    heartbeat_ms: int = 0
    """Leader heartbeat period; 0 means max(electionTimeoutMs / electionHeartbeatFactor(10), 10) = 100 ms."""
    tick_ms: int = 0
    """Resolution of the core's logical clock; 0 means min(50, heartbeat / 2)."""
    pre_vote: bool = True
    """PreVote: a partitioned node cannot disrupt the cluster by inflating its term."""
    check_quorum: bool = setting(
        "jRaftCheckQuorum",
        "bool",
        True,
        doc="A leader that has not heard from a quorum for an election timeout steps down, and a follower that "
        "heard from a leader within one ignores (pre)votes. `false` with `ReadOnlyLeaseBased` is refused. Ours.",
    )
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
    propose_hold_ms: float = 4.0
    """Ours: while an entry the leader appended is not yet committed, it proposes the waiting proposals as a batch
    at most once per this many ms, so that a busy leader makes fewer, larger batches (fewer AppendEntries frames
    and fsyncs on every node). A proposal when everything is committed is appended at once. 0: every loop turn."""
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

    threshold_entries: int = setting(
        "statemachineSnapshotThreshold",
        "int",
        10_000,
        minimum=0,
        default_doc="**10000**",
        doc="Entries applied since the last snapshot that trigger one. 0 disables it. RIP-59 suggests 1000. A "
        "fleet's broker heartbeats are hundreds of commands per second, so 1000 would mean a snapshot every few "
        "seconds. 10000 keeps the snapshot cost small next to the apply work while bounding replay time.",
    )
    """[statemachineSnapshotThreshold] take a snapshot once this many entries were applied since the last one.
    RIP-59 suggests 1000; at the heartbeat load of a fleet (hundreds of commands/s) that is a snapshot every
    few seconds, so the default is 10,000. 0 disables the trigger."""
    threshold_log_bytes: int = setting(
        "statemachineSnapshotLogBytes",
        "long",
        64 * 1024 * 1024,
        minimum=0,
        default_doc="`67108864` (64 MiB)",
        doc="Bytes of commands applied since the last snapshot that trigger one, whatever their count: a log of "
        "large entries is truncated before it fills the store (with `controllerStoreQuotaBytes`, etcd's "
        "quota). 0 disables it. Ours.",
    )
    """[statemachineSnapshotLogBytes] take a snapshot once this many bytes of commands were applied since the last
    one. 0 disables it."""
    interval_s: float = setting(
        "jRaftSnapshotIntervalSecs", "int", 3600.0, minimum=0, doc="Time-based snapshot trigger. 0 disables it."
    )
    """[jRaftSnapshotIntervalSecs] take a snapshot this often if anything was applied. The first firing is
    jittered uniformly in [interval/2, interval) so that replicas started together do not save together.
    0 disables it."""
    max_reserved: int = setting("maxSnapshotReservedNum", "int", 3, minimum=1, doc="Snapshots kept on disk.")
    """[maxSnapshotReservedNum] snapshots kept on disk (plus any being sent to a follower)."""
    log_margin: int = setting(
        "jRaftSnapshotTrailingLogs",
        "int",
        1000,
        minimum=0,
        doc="Entries kept in the log below a new snapshot, so that a follower that lags by fewer catches up from "
        "the log rather than by InstallSnapshot (hashicorp/raft's `TrailingLogs`, etcd's `SnapshotCatchUpEntries`). "
        "The log also always reaches back to the previous retained snapshot. Ours: RocketMQ has no such key.",
    )
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


class PeerTls:
    """Mutual TLS between peers (ours; docs/security.md, "Peers"): `server_context()` for the listener (it
    requires and verifies a client certificate), `client_context()` for each outbound connection (it verifies the
    peer's certificate and presents ours). On top of the frame MAC, a connection's certificate must name the node
    at its other end: subject CN == that node's id (jRaftServerId); a connection whose frames come from another
    id, or whose server is not the peer dialled, is closed. This base serves fixed contexts; the daemon's
    (cli/config.py) rebuilds them when their files change."""

    def __init__(self, server: ssl.SSLContext, client: ssl.SSLContext) -> None:
        self._server, self._client = server, client

    def server_context(self) -> ssl.SSLContext:
        """The context of the next inbound handshake (asked per connection, so a reloaded one applies at once)."""
        return self._server

    def client_context(self) -> ssl.SSLContext:
        """The context of the next outbound connection."""
        return self._client


@dataclass(frozen=True, slots=True)
class AutopilotOptions:
    """Consul-style self-healing membership, run by the leader (raft/node/autopilot.py; docs/raft.md "Autopilot")."""

    enabled: bool = setting(
        "jRaftAutopilot",
        "bool",
        False,
        doc="The leader adds configured peers that are no members as learners, promotes a learner once it has been "
        "healthy and caught up for `jRaftAutopilotStabilizationSecs`, and removes a voter silent for "
        "`jRaftAutopilotDeadServerSecs` while at least `jRaftAutopilotMinQuorum` voters remain (docs/raft.md, "
        '"Autopilot"). `rmqctl raft autopilot` shows and changes it at run time. Ours.',
    )
    stabilization_s: float = setting(
        "jRaftAutopilotStabilizationSecs",
        "int",
        10.0,
        minimum=0,
        doc="How long a learner must stay healthy and caught up before autopilot promotes it. Ours.",
    )
    dead_server_s: float = setting(
        "jRaftAutopilotDeadServerSecs",
        "int",
        60.0,
        minimum=1,
        doc="How long a voter must stay silent (no answer to the leader) before autopilot removes it. Ours.",
    )
    min_quorum: int = setting(
        "jRaftAutopilotMinQuorum",
        "int",
        3,
        minimum=1,
        doc="Autopilot never removes a voter when fewer voters than this would remain. Ours.",
    )
    period_s: float = 1.0
    """How often the leader looks (its clock)."""

    def __post_init__(self) -> None:
        if self.stabilization_s < 0 or self.dead_server_s <= 0 or self.period_s <= 0:
            raise ValueError("stabilization_s must be >= 0, dead_server_s and period_s > 0")
        if self.min_quorum < 1:
            raise ValueError(f"min_quorum must be >= 1, got {self.min_quorum}")


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
    group_id: str = setting(
        "jRaftGroupId", "str", "jRaft-Controller", type_doc="string, no whitespace", doc="Raft group name."
    )
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
    tls: PeerTls | None = field(default=None, compare=False)
    """Mutual TLS between peers; None: plain TCP (frames still carry the MAC)."""
    autopilot: AutopilotOptions = AutopilotOptions()

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise ValueError(f"node_id {self.node_id!r} is not among the peers {sorted(self.peers)}")
        if not self.secret:
            raise ValueError("secret must not be empty")

"""NodeStatus: what `Node.status()` answers. The core's status (role, term, leader, indexes, configuration,
the leader's progress per member) plus what only the driver knows: the applied index, the members'
addresses, snapshots, the log writer and the transport.

Frozen and typed: readers take attributes. Front ends turn it into their own documents (the HTTP JSON of
/api/v1/raft/* is built in one place, api/http/documents.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from raft.core import CoreStatus
from raft.storage.wal import LogWriterStats


@dataclass(frozen=True, slots=True)
class MemberAddresses:
    """Where a member listens: its raft address (host:port), its HTTP address and its RocketMQ remoting address
    (None when unknown)."""

    raft: str
    http: str | None
    remoting: str | None


@dataclass(frozen=True, slots=True)
class SnapshotSending:
    """A snapshot this leader is sending to a follower."""

    index: int
    bytes: int  # sent so far


@dataclass(frozen=True, slots=True)
class SnapshotDownloads:
    """This follower's snapshot downloads since it started."""

    received: int  # bytes of chunks received
    resumed: int  # bytes skipped because a download resumed
    completed: int
    failed: int


@dataclass(frozen=True, slots=True)
class SnapshotStatus:
    index: int  # the latest snapshot the core knows (0: none)
    term: int
    saving: bool
    saves: int  # saves by this node
    bytes: int  # size of the latest save
    last_save_s: float
    last_stall_ms: float  # the latest save's share on the apply thread
    last_saved_at: float  # the node's monotonic clock
    installs: int  # snapshots installed from a leader
    sending: Mapping[str, SnapshotSending]  # by follower id
    downloading: int | None  # index of the snapshot being downloaded
    download: SnapshotDownloads | None  # None before the downloader exists


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStatus(CoreStatus):
    """The core's status with `applied` the index the state machine applied, plus the node's own state."""

    addresses: Mapping[str, MemberAddresses]  # every member's, by id, ascending
    snapshot: SnapshotStatus
    fsync_latency: Mapping[str, Any] | None = None  # LatencyHistogram.snapshot() of log writes
    commit_latency: Mapping[str, Any] | None = None  # of proposals, propose to applied on this leader
    log_writer: LogWriterStats | None = None
    transport: Mapping[str, int] | None = None  # the transport's counters, by name
    error: str | None = None  # the error that stopped the node

    @classmethod
    def of(cls, core: CoreStatus, *, applied: int, **node: Any) -> NodeStatus:
        """The node's status from the core's, the index the state machine applied and the node's fields."""
        base: dict[str, Any] = {f.name: getattr(core, f.name) for f in fields(CoreStatus)}
        return cls(**base | {"applied": applied}, **node)

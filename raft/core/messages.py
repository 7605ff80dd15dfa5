"""The vocabulary of the core: entries, messages, hard state; the configuration and the snapshot metadata
(`ConfState`, `SnapshotMeta`) live in raft/leaf/snapmeta.py, shared with the snapshot store.

One tagged `Message` type (as in etcd's raftpb) instead of a class hierarchy. Everything here is plain
data with `__slots__`, cheap to build, and encodable by the transport codec without reflection.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from raft.leaf.snapmeta import NO_CONTEXT, ConfState, Context, Member, SnapshotMeta, context_of, member, member_fields

__all__ = [
    "NO_CONTEXT",
    "ConfState",
    "Context",
    "Entry",
    "EntryType",
    "HardState",
    "Member",
    "Message",
    "MsgType",
    "SnapshotMeta",
    "context_of",
    "member",
    "member_fields",
]


class EntryType(enum.IntEnum):
    NORMAL = 0  # application command (opaque bytes)
    NOOP = 1  # the leader's first entry of its term
    CONF = 2  # membership change; data is an encoded ConfState (see confchange.py)


@dataclass(slots=True)
class Entry:
    term: int
    index: int
    type: int = EntryType.NORMAL
    data: bytes = b""


@dataclass(slots=True, frozen=True)
class HardState:
    """What must be durable before the node answers anyone: the current term and its vote."""

    term: int = 0
    vote: str = ""  # "" means no vote in this term


class MsgType(enum.IntEnum):
    APP = 1  # AppendEntries
    APP_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    PRE_VOTE = 5
    PRE_VOTE_RESP = 6
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAP = 9  # InstallSnapshot: carries SnapshotMeta; the bytes travel out of band (node layer)
    TIMEOUT_NOW = 10  # leadership transfer: campaign now, skipping PreVote and the lease check


@dataclass(slots=True)
class Message:
    type: int
    frm: str
    to: str
    term: int = 0
    log_term: int = 0  # APP: term of entry `index`; VOTE: candidate's last log term; HEARTBEAT: term at `commit`
    index: int = 0  # APP: index preceding entries; VOTE: candidate's last index; *_RESP: match/hint
    entries: list[Entry] = field(default_factory=list)
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0  # APP_RESP reject: follower's last index, for fast backup
    hint_term: int = 0  # APP_RESP reject: term of the follower's entry at reject_hint
    seq: int = 0  # HEARTBEAT(_RESP): read-index round number
    snapshot: SnapshotMeta | None = None
    force: bool = False  # VOTE from a TimeoutNow transfer: ignore the voter's leader lease

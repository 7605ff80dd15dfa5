"""The vocabulary of the core: entries, messages, hard state and snapshot metadata.

One tagged `Message` type (as in etcd's raftpb) instead of a class hierarchy. Everything here is plain
data with `__slots__`, cheap to build, and encodable by the transport codec without reflection.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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


Member = tuple[str, str, str, str]
"""(node id, raft address "host:port", HTTP address, RocketMQ remoting address); "" for an unknown address."""


def member(fields: tuple[str, ...] | list[str]) -> Member:
    """A member from its stored form: [id, raft, http] (written before remoting addresses were carried) or
    [id, raft, http, remoting]. ValueError for anything else."""
    if len(fields) not in (3, 4) or not all(type(x) is str for x in fields):
        raise ValueError(f"a member must be [id, raft, http(, remoting)] strings, got {fields!r:.100}")
    return (fields[0], fields[1], fields[2], fields[3] if len(fields) == 4 else "")


def member_fields(m: Member) -> list[str]:
    """The stored form of a member: its remoting address only when known, so that a member without one is
    written exactly as before (older readers take [id, raft, http])."""
    return list(m) if m[3] else list(m[:3])


@dataclass(slots=True, frozen=True)
class ConfState:
    """A cluster configuration: voters and non-voting learners, node ids as strings, and the addresses of the
    members the log has them for (ascending by id). A member without one is reached at the address the
    node's own configuration gives it (the bootstrap members: jRaftInitConf)."""

    voters: tuple[str, ...] = ()
    learners: tuple[str, ...] = ()
    addresses: tuple[Member, ...] = ()

    def __post_init__(self) -> None:
        if set(self.voters) & set(self.learners):
            raise ValueError(f"a node is both voter and learner: {set(self.voters) & set(self.learners)}")
        if self.addresses:
            ids = [a[0] for a in self.addresses]
            if ids != sorted(set(ids)):
                raise ValueError(f"member addresses must be ascending by id without repeats, got {ids}")
            strangers = set(ids) - set(self.voters) - set(self.learners)
            if strangers:
                raise ValueError(f"addresses of nodes that are not members: {sorted(strangers)}")

    def members(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.voters) | set(self.learners)))

    def address(self, node: str) -> Member | None:
        """`node`'s (id, raft, HTTP, remoting) addresses as the log has them, or None."""
        for a in self.addresses:
            if a[0] == node:
                return a
        return None


@dataclass(slots=True, frozen=True)
class HardState:
    """What must be durable before the node answers anyone: the current term and its vote."""

    term: int = 0
    vote: str = ""  # "" means no vote in this term


@dataclass(slots=True, frozen=True)
class SnapshotMeta:
    index: int = 0
    term: int = 0
    conf: ConfState = field(default_factory=ConfState)


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

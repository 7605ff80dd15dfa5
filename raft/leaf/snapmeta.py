"""A snapshot's metadata and the configuration it covers: one `SnapshotMeta` for the pure core (which
installs and sends it), the node and the snapshot store (whose `__raft_snapshot_meta` file encodes it,
snapshot/format.py). Standard library only, so that `raft/core/` and `snapshot/` can both import it
(docs/layout.md, "The leaf")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Context = tuple[str, str]
"""A member's context: two strings the core stores with the member and returns, never reads (as etcd's
`ConfChange.Context`); "" for an empty slot. The node layer gives them their meaning (raft/node/members.py:
the HTTP and RocketMQ remoting addresses). Slot 1 came with CONF version 3 (docs/log-format.md)."""

Member = tuple[str, str, str, str]
"""(node id, raft address "host:port" or "", context slot 0, context slot 1): a member's record, the id and raft
address followed by its `Context`."""

NO_CONTEXT: Context = ("", "")


def member(fields: tuple[str, ...] | list[str]) -> Member:
    """A member from its stored form: [id, raft, ctx0] (written before the context had a second slot) or
    [id, raft, ctx0, ctx1]. ValueError for anything else."""
    if len(fields) not in (3, 4) or not all(type(x) is str for x in fields):
        raise ValueError(f"a member must be [id, raft, ctx0(, ctx1)] strings, got {fields!r:.100}")
    return (fields[0], fields[1], fields[2], fields[3] if len(fields) == 4 else "")


def member_fields(m: Member) -> list[str]:
    """The stored form of a member: its context's second slot only when not empty, so that a member without
    one is written exactly as before (older readers take [id, raft, ctx0])."""
    return list(m) if m[3] else list(m[:3])


def context_of(m: Member) -> Context:
    """The context of a member record."""
    return (m[2], m[3])


@dataclass(slots=True, frozen=True)
class ConfState:
    """A cluster configuration: voters and non-voting learners, node ids as strings, and the records (raft
    address and opaque context, `Member`) of the members the log has them for, ascending by id. A member
    without one is reached at the address the node's own configuration gives it (the bootstrap members:
    jRaftInitConf)."""

    voters: tuple[str, ...] = ()
    learners: tuple[str, ...] = ()
    addresses: tuple[Member, ...] = ()

    def __post_init__(self) -> None:
        if set(self.voters) & set(self.learners):
            raise ValueError(f"a node is both voter and learner: {set(self.voters) & set(self.learners)}")
        if self.addresses:
            ids = [a[0] for a in self.addresses]
            if ids != sorted(set(ids)):
                raise ValueError(f"member records must be ascending by id without repeats, got {ids}")
            strangers = set(ids) - set(self.voters) - set(self.learners)
            if strangers:
                raise ValueError(f"records of nodes that are not members: {sorted(strangers)}")

    def members(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.voters) | set(self.learners)))

    def address(self, node: str) -> Member | None:
        """`node`'s record (id, raft address, context) as the log has it, or None."""
        for a in self.addresses:
            if a[0] == node:
                return a
        return None

    def context(self, node: str) -> Context | None:
        """`node`'s context as the log has it (opaque here), or None."""
        a = self.address(node)
        return None if a is None else context_of(a)


@dataclass(frozen=True, slots=True)
class FileMeta:
    """A file of a snapshot directory, as the meta records it."""

    name: str
    size: int
    crc32c: int  # CRC32C of the whole file


@dataclass(slots=True, frozen=True)
class SnapshotMeta:
    """The Raft position and configuration a snapshot covers; for a snapshot on disk also a size and CRC per
    file, when it was made (`created_at`: whatever clock the caller used, never read here) and the state
    machine's `user_meta`. A SNAP message carries only `index`, `term` and `conf` (the files travel out of
    band); the meta file has them all (docs/snapshot-format.md)."""

    index: int = 0
    term: int = 0
    conf: ConfState = field(default_factory=ConfState)
    files: tuple[FileMeta, ...] = ()
    created_at: float = 0.0
    user_meta: Mapping[str, Any] = field(default_factory=dict, hash=False)

    # The meta file's names (docs/snapshot-format.md) for the same fields.
    @property
    def last_included_index(self) -> int:
        return self.index

    @property
    def last_included_term(self) -> int:
        return self.term

    @property
    def voters(self) -> tuple[str, ...]:
        return self.conf.voters

    @property
    def learners(self) -> tuple[str, ...]:
        return self.conf.learners

    @property
    def addresses(self) -> tuple[Member, ...]:
        """The member records (id, raft address, context) the configuration carried at that index."""
        return self.conf.addresses

    def file(self, name: str) -> FileMeta:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(f"snapshot {self.index} has no file {name!r}")

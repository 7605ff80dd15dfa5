"""Single-server membership changes (Raft thesis §4.1), with learners for catch-up.

A change is proposed as a CONF entry holding the whole next ConfState, takes effect when applied, and
only one may be pending at a time. A new server joins as a learner, is promoted once caught up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgpack

from raft.core.messages import NO_CONTEXT, ConfState, Context, Member, member
from raft.status import RaftBaseError


class ConfChangeOp(enum.IntEnum):
    ADD_LEARNER = 1
    ADD_VOTER = 2  # add a new voter, or promote a learner
    REMOVE = 3


@dataclass(frozen=True, slots=True)
class ConfChange:
    op: ConfChangeOp
    node: str
    raft_address: str = ""
    """The node's raft address host:port (an add), stored in the CONF entry so that every member learns it
    from the log; "" keeps what the configuration has."""
    context: Context = NO_CONTEXT
    """The node's context (an add), stored alongside its raft address and returned as it came: opaque to the
    core (etcd's `ConfChange.Context`; the node layer keeps the HTTP and remoting addresses there)."""
    known: tuple[Member, ...] = ()
    """Records (raft address and context) the proposer knows (its own configuration) for members the
    configuration has none for; the change records them too, so that nodes configured with fewer peers learn
    them."""


class ConfChangeError(RaftBaseError, ValueError):
    pass


def apply_change(conf: ConfState, change: ConfChange) -> ConfState:
    voters, learners = set(conf.voters), set(conf.learners)
    node = change.node
    if change.op is ConfChangeOp.ADD_LEARNER:
        if node in voters:
            raise ConfChangeError(f"{node} is already a voter")
        learners.add(node)
    elif change.op is ConfChangeOp.ADD_VOTER:
        if node in voters:
            raise ConfChangeError(f"{node} is already a voter")
        learners.discard(node)
        voters.add(node)
    elif change.op is ConfChangeOp.REMOVE:
        if node not in voters and node not in learners:
            raise ConfChangeError(f"{node} is not a member")
        voters.discard(node)
        learners.discard(node)
        if not voters:
            raise ConfChangeError("cannot remove the last voter")
    members = voters | learners
    records = {a[0]: a for a in conf.addresses if a[0] in members}
    if change.op is not ConfChangeOp.REMOVE and change.raft_address:
        records[node] = (node, change.raft_address, *change.context)
    for a in change.known:
        have = records.get(a[0])
        if a[0] not in members or not a[1]:
            continue
        if have is None:
            records[a[0]] = a
        elif not have[3] and a[3] and have[1] == a[1]:
            # Slot 1 of the context came with CONF version 3: a record without it (as a version 2 entry wrote
            # every one) takes the proposer's, if both agree on the raft address. Slot 0 is never overridden.
            records[a[0]] = (*have[:3], a[3])
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners)), tuple(records[i] for i in sorted(records)))


# CONF entry data (docs/log-format.md): version 1 [1, voters, learners]; version 2 adds the member records,
# [2, voters, learners, [[id, raft, ctx0], ...]]; version 3 adds the context's second slot,
# [3, voters, learners, [[id, raft, ctx0, ctx1], ...]]. The oldest version that holds the configuration is
# written, so that a log without the newer information stays readable by older nodes. The context slots are
# opaque here (the node layer writes the HTTP and remoting addresses there).


def encode_conf(conf: ConfState) -> bytes:
    if not conf.addresses:
        return msgpack.packb([1, list(conf.voters), list(conf.learners)])
    if not any(a[3] for a in conf.addresses):
        return msgpack.packb([2, list(conf.voters), list(conf.learners), [list(a[:3]) for a in conf.addresses]])
    return msgpack.packb([3, list(conf.voters), list(conf.learners), [list(a) for a in conf.addresses]])


_MEMBER_LEN = {2: 3, 3: 4}  # CONF version -> items per member


def decode_conf(data: bytes) -> ConfState:
    doc = msgpack.unpackb(data)
    if type(doc) is not list or not doc or doc[0] not in (1, 2, 3) or type(doc[0]) is not int:
        raise ValueError(f"unknown conf entry version {doc[0] if type(doc) is list and doc else doc!r:.50}")
    version = doc[0]
    if len(doc) != (3 if version == 1 else 4):
        raise ValueError(f"conf entry version {version} has {len(doc)} items, expected {3 if version == 1 else 4}")
    voters, learners = doc[1], doc[2]
    records = doc[3] if version > 1 else []
    for ids in (voters, learners):
        if type(ids) is not list or not all(type(x) is str for x in ids):
            raise ValueError(f"conf entry voters and learners must be arrays of strings, got {ids!r:.100}")
    width = _MEMBER_LEN.get(version, 0)
    if type(records) is not list or not all(type(a) is list and len(a) == width for a in records):
        names = "[id, raft, ctx0]" if width == 3 else "[id, raft, ctx0, ctx1]"
        raise ValueError(f"conf entry version {version} members must be {names} strings, got {records!r:.100}")
    try:
        members = tuple(member(a) for a in records)
    except ValueError as e:
        raise ValueError(f"conf entry version {version}: {e}") from None
    return ConfState(tuple(voters), tuple(learners), members)

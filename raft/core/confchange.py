"""Single-server membership changes (Raft thesis §4.1), with learners for catch-up.

A change is proposed as a CONF entry holding the whole next ConfState, takes effect when applied, and
only one may be pending at a time. A new server joins as a learner, is promoted once caught up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgpack

from raft.core.messages import ConfState, Member
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
    http_address: str = ""
    """The node's HTTP address host:port, stored alongside (for 2007 redirects and the metadata answer)."""
    known: tuple[Member, ...] = ()
    """Addresses the proposer knows (its own configuration) for members the configuration has none for; the
    change records them too, so that nodes configured with fewer peers learn them."""


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
    addresses = {a[0]: a for a in conf.addresses if a[0] in members}
    if change.op is not ConfChangeOp.REMOVE and change.raft_address:
        addresses[node] = (node, change.raft_address, change.http_address)
    for a in change.known:
        if a[0] in members and a[0] not in addresses and a[1]:
            addresses[a[0]] = a
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners)), tuple(addresses[i] for i in sorted(addresses)))


# CONF entry data (docs/log-format.md): version 1 [1, voters, learners]; version 2 adds the member
# addresses, [2, voters, learners, [[id, raft, http], ...]]. Version 1 is still written when there are no
# addresses, so that a log without address-carrying changes stays readable by older nodes.


def encode_conf(conf: ConfState) -> bytes:
    if not conf.addresses:
        return msgpack.packb([1, list(conf.voters), list(conf.learners)])
    return msgpack.packb([2, list(conf.voters), list(conf.learners), [list(a) for a in conf.addresses]])


def decode_conf(data: bytes) -> ConfState:
    doc = msgpack.unpackb(data)
    if type(doc) is not list or not doc or doc[0] not in (1, 2) or type(doc[0]) is not int:
        raise ValueError(f"unknown conf entry version {doc[0] if type(doc) is list and doc else doc!r:.50}")
    if len(doc) != doc[0] + 2:
        raise ValueError(f"conf entry version {doc[0]} has {len(doc)} items, expected {doc[0] + 2}")
    voters, learners = doc[1], doc[2]
    addresses = doc[3] if doc[0] == 2 else []
    for ids in (voters, learners):
        if type(ids) is not list or not all(type(x) is str for x in ids):
            raise ValueError(f"conf entry voters and learners must be arrays of strings, got {ids!r:.100}")
    if type(addresses) is not list or not all(_is_member(a) for a in addresses):
        raise ValueError(f"conf entry addresses must be [id, raft, http] string triples, got {addresses!r:.100}")
    return ConfState(tuple(voters), tuple(learners), tuple(tuple(a) for a in addresses))


def _is_member(a: object) -> bool:
    return (type(a) is list or type(a) is tuple) and len(a) == 3 and all(type(x) is str for x in a)

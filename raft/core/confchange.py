"""Single-server membership changes (Raft thesis §4.1), with learners for catch-up.

A change is proposed as a CONF entry holding the whole next ConfState, takes effect when applied, and
only one may be pending at a time. A new server joins as a learner, is promoted once caught up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgpack

from raft.core.messages import ConfState, Member, member
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
    remoting_address: str = ""
    """The node's RocketMQ remoting address host:port (its jRaftControllerRPCAddr entry), stored alongside (for
    1005 and the 2007 answers brokers read)."""
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
        addresses[node] = (node, change.raft_address, change.http_address, change.remoting_address)
    for a in change.known:
        have = addresses.get(a[0])
        if a[0] not in members or not a[1]:
            continue
        if have is None:
            addresses[a[0]] = a
        elif not have[3] and a[3] and have[1] == a[1]:  # a log written before remoting addresses were carried
            addresses[a[0]] = (*have[:3], a[3])
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners)), tuple(addresses[i] for i in sorted(addresses)))


# CONF entry data (docs/log-format.md): version 1 [1, voters, learners]; version 2 adds the member
# addresses, [2, voters, learners, [[id, raft, http], ...]]; version 3 adds each member's remoting address,
# [3, voters, learners, [[id, raft, http, remoting], ...]]. The oldest version that holds the configuration is
# written, so that a log without the newer information stays readable by older nodes.


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
    addresses = doc[3] if version > 1 else []
    for ids in (voters, learners):
        if type(ids) is not list or not all(type(x) is str for x in ids):
            raise ValueError(f"conf entry voters and learners must be arrays of strings, got {ids!r:.100}")
    width = _MEMBER_LEN.get(version, 0)
    if type(addresses) is not list or not all(type(a) is list and len(a) == width for a in addresses):
        names = "[id, raft, http]" if width == 3 else "[id, raft, http, remoting]"
        raise ValueError(f"conf entry version {version} addresses must be {names} strings, got {addresses!r:.100}")
    try:
        members = tuple(member(a) for a in addresses)
    except ValueError as e:
        raise ValueError(f"conf entry version {version}: {e}") from None
    return ConfState(tuple(voters), tuple(learners), members)

"""Single-server membership changes (Raft thesis §4.1), with learners for catch-up.

A change is proposed as a CONF entry holding the whole next ConfState, takes effect when applied, and
only one may be pending at a time. A new server joins as a learner, is promoted once caught up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgpack

from raft.core.messages import ConfState


class ConfChangeOp(enum.IntEnum):
    ADD_LEARNER = 1
    ADD_VOTER = 2  # add a new voter, or promote a learner
    REMOVE = 3


@dataclass(frozen=True, slots=True)
class ConfChange:
    op: ConfChangeOp
    node: str


class ConfChangeError(ValueError):
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
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners)))


def encode_conf(conf: ConfState) -> bytes:
    return msgpack.packb([1, list(conf.voters), list(conf.learners)])


def decode_conf(data: bytes) -> ConfState:
    version, voters, learners = msgpack.unpackb(data)
    if version != 1:
        raise ValueError(f"unknown conf entry version {version}")
    return ConfState(tuple(voters), tuple(learners))

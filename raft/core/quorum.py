"""Majority arithmetic. Pure functions over a set of voters and a value per voter."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping


class VoteResult(enum.Enum):
    """The outcome of a vote tally so far."""

    WON = "won"
    LOST = "lost"
    PENDING = "pending"


def majority(n: int) -> int:
    return n // 2 + 1


def committed_index(voters: Iterable[str], match: Mapping[str, int]) -> int:
    """The largest index that a majority of voters hold (their match index is at least it)."""
    values = sorted((match.get(v, 0) for v in voters), reverse=True)
    if not values:
        return 0
    return values[majority(len(values)) - 1]


def vote_result(voters: Iterable[str], votes: Mapping[str, bool]) -> VoteResult:
    """WON, LOST or PENDING for a tally of granted (True) and rejected (False) votes."""
    voters = list(voters)
    need = majority(len(voters))
    granted = sum(1 for v in voters if votes.get(v) is True)
    rejected = sum(1 for v in voters if votes.get(v) is False)
    if granted >= need:
        return VoteResult.WON
    if len(voters) - rejected < need:
        return VoteResult.LOST
    return VoteResult.PENDING

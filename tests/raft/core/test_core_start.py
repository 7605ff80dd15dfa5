"""A node that is the only voter of its configuration campaigns when it starts (JRaft's rule), instead of
waiting out an election timeout; nobody else does, and with lease reads not even a sole voter does."""

from __future__ import annotations

import pytest

from raft.core import ConfState, CoreConfig, Entry, HardState, MsgType, RaftCore, Role
from raft.core.messages import EntryType


def test_a_sole_voter_leads_at_start_without_a_tick_and_its_term_goes_to_disk_first() -> None:
    a = RaftCore(CoreConfig(id="a", pre_vote=True), ConfState(("a",), ("l",)), HardState(4, "a"))
    assert a.campaign_if_sole_voter()
    assert a.role == Role.LEADER and a.term == 5 and a.now == 0
    rd = a.ready()
    assert rd.hard_state == HardState(5, "a")
    assert [m.type for m in rd.messages if m.type == MsgType.APP] == []  # to the learner only once durable
    assert [e.type for e in rd.entries] == [EntryType.NOOP]  # the term's first entry


@pytest.mark.parametrize(
    "conf, cfg",
    [
        (ConfState(("a", "b", "c")), {}),  # needs votes: waits its randomized timeout
        (ConfState(("b",), ("a",)), {}),  # a learner never campaigns
        (ConfState(("a",)), {"lease_read": True, "check_quorum": True}),  # boot lockout: waits one timeout
    ],
    ids=["one of three voters", "learner", "sole voter with lease reads"],
)
def test_nobody_else_campaigns_at_start(conf: ConfState, cfg: dict[str, bool]) -> None:
    a = RaftCore(CoreConfig(id="a", **cfg), conf)
    assert not a.campaign_if_sole_voter()
    assert a.role == Role.FOLLOWER and a.term == 0 and not a.has_ready()


def test_a_sole_voter_restarted_on_a_log_of_older_terms_commits_it_at_once() -> None:
    log = [Entry(1, 1), Entry(1, 2, data=b"x"), Entry(2, 3, data=b"y")]
    a = RaftCore(CoreConfig(id="a"), ConfState(("a",)), HardState(2, "a"), entries=log)
    assert a.campaign_if_sole_voter() and a.role == Role.LEADER
    rd = a.ready()
    a.advance(rd)
    a.on_hard_state_persisted(HardState(3, "a"))
    a.on_persisted(4, 3)
    rd = a.ready()
    assert [e.index for e in rd.committed] == [1, 2, 3, 4]

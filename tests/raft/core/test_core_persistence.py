"""The persistence rule (issue 12, bug 1; etcd's rule): no message stamped with a term, and no answer to a
vote, leaves a node before that term and vote are durable. Entries a message acknowledges are durable
before it leaves too (test_core_paper covers APP_RESP and VOTE_RESP)."""

from __future__ import annotations

from raft.core import ConfState, CoreConfig, Entry, HardState, Message, MsgType, RaftCore, Ready, Role
from raft.testing.network import Network

TERM_STAMPED = {MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP, MsgType.TIMEOUT_NOW}


def stamped(msgs: list[Message]) -> list[Message]:
    return [m for m in msgs if m.type in TERM_STAMPED]


def test_no_append_or_heartbeat_leaves_before_the_term_is_reported_durable() -> None:
    a = RaftCore(CoreConfig(id="a", heartbeat_tick=1), ConfState(("a",), ("l",)))
    a.campaign()  # a lone voter: candidate and leader in one call
    assert a.role == Role.LEADER
    rd = a.ready()
    assert rd.hard_state == HardState(1, "a")
    assert stamped(rd.messages) == [] and [m.type for m in rd.persisted_messages] == [MsgType.APP]
    a.advance(rd)  # handed to the writer, not yet written
    a.propose([b"x"])
    a.tick()
    rd2 = a.ready()
    assert rd2.hard_state is None, "the hard state was handed out already"
    assert stamped(rd2.messages) == [], "an earlier hard state is not yet durable"
    assert MsgType.HEARTBEAT in {m.type for m in rd2.persisted_messages}
    a.advance(rd2)
    a.on_hard_state_persisted(HardState(1, "a"))
    a.tick()
    rd3 = a.ready()
    assert MsgType.HEARTBEAT in {m.type for m in rd3.messages}, "once durable, the leader sends at once again"


def test_a_leader_stepping_down_holds_its_messages_until_the_new_term_is_durable() -> None:
    net = Network(["a", "b", "c"])
    a = net.elect("a")
    a.propose([b"x"])  # an APP queued at the durable term 1
    a.step(Message(MsgType.APP, "b", "a", term=5, log_term=0, index=0))  # a newer leader speaks
    rd: Ready = a.ready()
    assert rd.hard_state == HardState(5, "")
    assert rd.messages == [] and {m.type for m in rd.persisted_messages} == {MsgType.APP, MsgType.APP_RESP}


def test_lone_voter_cannot_lead_twice_in_one_term() -> None:
    """Issue 12, bug 1: the lone voter a wins term 1 and sends its entries to the learner l before term 1 is
    on disk; it crashes before the meta fsync, restarts at term 0, wins term 1 again and writes a different
    entry at the same index. l compares terms only, keeps the first entry, and applies it."""
    net = Network(["a", "l"], voters=["a"])
    net.defer_writes("a")
    a = net.cores["a"]
    a.campaign()
    net.deliver()
    a.propose([b"first"])
    net.deliver()
    net.crash("a")  # before any fsync: term 1 and "first" are gone from a
    assert net.durable["a"][0] == HardState()
    del net.unsynced["a"]
    net.start("a")
    a = net.elect("a")
    assert a.term == 1, "a wins the same term again"
    net.propose("a", b"second")
    net.tick_all(3)
    assert net.normal_applied("a") == [b"second"]
    assert net.normal_applied("l") == [b"second"]


def test_a_heartbeat_is_answered_before_a_slow_append_is_durable() -> None:
    """A follower's fsync slower than the election timeout must not cost the leader its leadership: the answer
    to a heartbeat acknowledges no entry and leaves at once, while the answer to the append still waits."""
    net = Network(["a", "b", "c"])
    a = net.elect("a")
    b = net.cores["b"]
    last = b.log.last_index()
    new, term_at_last = Entry(a.term, last + 1, data=b"slow"), b.log.term(last)
    assert term_at_last is not None
    b.step(Message(MsgType.APP, "a", "b", term=a.term, log_term=term_at_last, index=last, entries=[new]))
    b.step(Message(MsgType.HEARTBEAT, "a", "b", term=a.term, commit=b.log.committed, seq=7))
    rd = b.ready()
    assert rd.hard_state is None and rd.entries == [new], "the append is handed to the writer, not yet durable"
    assert [(m.type, m.seq) for m in rd.messages] == [(MsgType.HEARTBEAT_RESP, 7)]
    assert [m.type for m in rd.persisted_messages] == [MsgType.APP_RESP]


def test_a_heartbeat_answer_waits_for_a_term_it_raised_and_a_reject_for_the_disk() -> None:
    b = RaftCore(CoreConfig(id="b"), ConfState(("a", "b", "c"), ()))
    b.step(Message(MsgType.HEARTBEAT, "a", "b", term=3, commit=0, seq=1))  # term 0 -> 3, not yet durable
    rd = b.ready()
    assert rd.hard_state == HardState(3, "") and rd.messages == []
    assert [m.type for m in rd.persisted_messages] == [MsgType.HEARTBEAT_RESP]
    b.advance(rd)
    b.on_hard_state_persisted(HardState(3, ""))
    b.step(Message(MsgType.HEARTBEAT, "a", "b", term=3, commit=5, log_term=3, seq=2))  # we lack entry 5
    rd = b.ready()
    assert rd.messages == [] and [(m.type, m.reject) for m in rd.persisted_messages] == [(MsgType.HEARTBEAT_RESP, True)]

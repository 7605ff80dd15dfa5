"""One test per rule of the Raft paper (and of the extensions: PreVote, CheckQuorum, ReadIndex, lease,
TimeoutNow, membership, snapshots), on the pure core with the synchronous Network harness."""

from __future__ import annotations

import pytest

from raft.core import (
    ConfChange,
    ConfChangeOp,
    ConfState,
    CoreConfig,
    Entry,
    EntryType,
    HardState,
    Message,
    MsgType,
    RaftCore,
    Role,
    SnapshotMeta,
)
from raft.status import RaftError, RaftException
from raft.testing.network import Network

IDS = ["a", "b", "c"]


def core(i: str = "a", ids: list[str] = IDS, **kw: object) -> RaftCore:
    return RaftCore(CoreConfig(id=i, **kw), ConfState(tuple(ids)))  # type: ignore[arg-type]


# ---------------------------------------------------------------- §5.2 leader election


def test_follower_times_out_and_becomes_candidate_with_next_term() -> None:
    c = core(pre_vote=False, election_tick=10)
    for _ in range(2 * 10):
        c.tick()
    assert c.role == Role.CANDIDATE
    assert c.term == 1 and c.vote == "a"
    rd = c.ready()
    votes = [m for m in rd.persisted_messages if m.type == MsgType.VOTE]
    assert {m.to for m in votes} == {"b", "c"}
    assert rd.hard_state == HardState(1, "a")
    assert not [m for m in rd.messages if m.type == MsgType.VOTE], "vote requests wait for the vote to be durable"


def test_election_timeout_is_randomized_in_t_to_2t() -> None:
    timeouts = {core(i, election_tick=10).randomized_timeout for i in ["a"]}
    for seed in range(50):
        import random

        c = RaftCore(CoreConfig(id="a", election_tick=10), ConfState(tuple(IDS)), rng=random.Random(seed))
        timeouts.add(c.randomized_timeout)
    assert min(timeouts) >= 10 and max(timeouts) < 20 and len(timeouts) > 3


def test_candidate_with_majority_becomes_leader_and_appends_noop() -> None:
    net = Network(IDS, pre_vote=False)
    a = net.elect("a")
    assert a.role == Role.LEADER and a.term == 1
    assert a.log.entries[-1].type == EntryType.NOOP and a.log.entries[-1].term == 1
    assert net.cores["b"].leader == "a" and net.cores["c"].leader == "a"
    assert a.log.committed == 1  # the no-op commits


def test_each_server_votes_for_at_most_one_candidate_per_term() -> None:
    b = core("b", pre_vote=False)
    b.step(Message(MsgType.VOTE, "a", "b", term=1))
    b.step(Message(MsgType.VOTE, "c", "b", term=1))
    resps = [m for m in b.ready().persisted_messages if m.type == MsgType.VOTE_RESP]
    assert [(m.to, m.reject) for m in resps] == [("a", False), ("c", True)]
    assert b.vote == "a"


def test_vote_is_durable_before_it_is_answered() -> None:
    b = core("b", pre_vote=False)
    b.step(Message(MsgType.VOTE, "a", "b", term=1))
    rd = b.ready()
    assert rd.hard_state == HardState(1, "a")
    assert [m.type for m in rd.messages] == []
    assert [m.type for m in rd.persisted_messages] == [MsgType.VOTE_RESP]


def test_vote_refused_to_candidate_with_less_up_to_date_log() -> None:
    """§5.4.1: last term first, then length."""
    b = RaftCore(
        CoreConfig(id="b", pre_vote=False),
        ConfState(tuple(IDS)),
        HardState(2, ""),
        entries=[Entry(1, 1), Entry(2, 2)],
    )
    b.step(Message(MsgType.VOTE, "a", "b", term=3, log_term=1, index=5))  # longer but older term
    b.step(Message(MsgType.VOTE, "c", "b", term=3, log_term=2, index=1))  # same term, shorter
    resps = [m for m in b.ready().persisted_messages if m.type == MsgType.VOTE_RESP]
    assert [m.reject for m in resps] == [True, True]
    b.step(Message(MsgType.VOTE, "c", "b", term=3, log_term=2, index=2))
    assert b.vote == "c"


def test_higher_term_turns_any_role_into_follower() -> None:
    net = Network(IDS, pre_vote=False)
    a = net.elect("a")
    a.step(Message(MsgType.APP_RESP, "b", "a", term=5))
    assert a.role == Role.FOLLOWER and a.term == 5 and a.vote == ""


def test_stale_term_append_is_answered_with_current_term() -> None:
    b = RaftCore(CoreConfig(id="b"), ConfState(tuple(IDS)), HardState(3, ""))
    b.step(Message(MsgType.APP, "a", "b", term=2, index=0, log_term=0, entries=[Entry(2, 1)]))
    assert b.log.last_index() == 0
    resp = b.ready().persisted_messages
    assert [(m.type, m.term) for m in resp] == [(MsgType.APP_RESP, 3)]


def test_heartbeats_keep_followers_from_starting_elections() -> None:
    net = Network(IDS, election_tick=10, heartbeat_tick=1)
    net.elect("a")
    net.tick_all(100)
    assert net.cores["a"].role == Role.LEADER and net.cores["a"].term == 1
    assert all(net.cores[i].role == Role.FOLLOWER for i in "bc")


def test_candidate_steps_down_on_append_from_leader_of_same_term() -> None:
    c = core("c", pre_vote=False)
    c.campaign()
    assert c.role == Role.CANDIDATE and c.term == 1
    c.step(Message(MsgType.APP, "a", "c", term=1, index=0, log_term=0))
    assert c.role == Role.FOLLOWER and c.leader == "a"  # type: ignore[comparison-overlap]


def test_split_vote_leads_to_a_new_election_in_a_later_term() -> None:
    net = Network(IDS, pre_vote=False, election_tick=10)
    net.cores["a"].campaign()
    net.cores["b"].campaign()
    net.cut.add(frozenset(("a", "c")))
    net.cut.add(frozenset(("b", "c")))
    net.deliver()
    assert net.cores["a"].role == Role.CANDIDATE and net.cores["b"].role == Role.CANDIDATE
    net.heal()
    for _ in range(40):
        net.tick_all()
        if any(c.role == Role.LEADER for c in net.cores.values()):
            break
    leaders = [c for c in net.cores.values() if c.role == Role.LEADER]
    assert len(leaders) == 1 and leaders[0].term >= 2


# ---------------------------------------------------------------- §5.3 log replication


def test_leader_replicates_and_commits_on_majority_then_followers_apply() -> None:
    net = Network(IDS)
    net.elect("a")
    net.propose("a", b"x", b"y")
    assert net.normal_applied("a") == [b"x", b"y"]
    # The leader sends no append for the commit index alone: the followers learn it from the next heartbeat.
    assert net.normal_applied("b") == net.normal_applied("c") == []
    net.heartbeat("a")
    for i in IDS:
        assert net.normal_applied(i) == [b"x", b"y"]


def test_entry_is_not_committed_without_a_majority() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.isolate("a")
    idx = net.propose("a", b"x")
    assert a.log.committed < idx
    net.heal()
    net.tick_all(3)
    assert a.log.committed >= idx


def test_each_append_carries_the_commit_index_of_the_proposals_before_it() -> None:
    """Under load the commit index rides on the next proposal's append, so the leader sends nothing extra for
    it: every append after the first carries the commit of the one before, and there is no empty append."""
    net = Network(IDS)
    a = net.elect("a")
    apps: list[Message] = []
    net.filter = lambda m: not (m.type == MsgType.APP and apps.append(m))  # type: ignore[func-returns-value]
    for k in range(4):
        net.propose("a", f"{k}".encode())
    net.filter = None
    assert apps and all(m.entries for m in apps), "an append carried no entry"
    to_b = [m for m in apps if m.to == "b"]
    assert [m.entries[0].index for m in to_b] == [a.log.committed - 3 + k for k in range(4)]
    assert [m.commit for m in to_b[1:]] == [m.entries[-1].index for m in to_b[:-1]]
    b = net.cores["b"]
    assert b.log.committed == a.log.committed - 1  # the last commit is still on its way


def test_an_idle_follower_learns_the_commit_within_one_heartbeat_interval() -> None:
    """The bound on a follower's commit lag when no proposal follows: at most heartbeat_tick ticks."""
    for seed_ticks in range(5):  # wherever the leader's heartbeat timer stands when the commit happens
        net = Network(IDS, heartbeat_tick=3, election_tick=30)
        a = net.elect("a")
        net.tick("a", seed_ticks)
        net.deliver()
        idx = net.propose("a", b"x")
        assert a.log.committed == idx and net.cores["b"].log.committed < idx
        for _ in range(a.cfg.heartbeat_tick):
            net.tick("a")
            net.deliver()
            if all(net.cores[i].log.committed == idx for i in IDS):
                break
        else:
            raise AssertionError(f"followers did not learn commit {idx} within {a.cfg.heartbeat_tick} ticks")
        assert net.normal_applied("b")[-1] == net.normal_applied("c")[-1] == b"x"


def test_leader_commit_waits_for_its_own_durability() -> None:
    a = core("a", ids=["a"])
    a.campaign()
    rd = a.ready()
    a.advance(rd)
    assert a.role == Role.LEADER and a.log.committed == 0  # no-op not yet durable
    a.on_persisted(rd.entries[-1].index, rd.entries[-1].term)
    assert a.log.committed == 1


def test_follower_rejects_append_whose_previous_entry_does_not_match() -> None:
    b = RaftCore(CoreConfig(id="b"), ConfState(tuple(IDS)), HardState(2, ""), entries=[Entry(1, 1), Entry(1, 2)])
    b.step(Message(MsgType.APP, "a", "b", term=2, index=2, log_term=2, entries=[Entry(2, 3)]))
    (resp,) = b.ready().persisted_messages
    assert resp.reject and resp.index == 2
    assert resp.reject_hint == 2 and resp.hint_term == 1  # fast backup: skip the whole of term 1 at once
    assert b.log.last_index() == 2


def test_conflicting_follower_suffix_is_overwritten_by_the_leader() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.isolate("a")
    a.propose([b"lost1", b"lost2"])  # never reaches anyone
    net.deliver()
    net.heal()
    net.crash("a")
    for _ in range(400):  # enough for split votes (1 run in 80 split the first round: 60 ticks were too few)
        net.tick_all()
        if net.cores["b"].role == Role.LEADER or net.cores["c"].role == Role.LEADER:
            break
    new = "b" if net.cores["b"].role == Role.LEADER else "c"
    net.propose(new, b"kept")
    net.start("a")
    net.tick_all(30)
    assert net.cores["a"].log.entries == net.cores[new].log.entries
    assert b"lost1" not in [e.data for e in net.cores["a"].log.entries]


def test_follower_commits_up_to_the_last_new_entry_never_its_stale_tail() -> None:
    """Raft Figure 2, AppendEntries rule 5: commit = min(leaderCommit, index of the last new entry). The
    follower's entries past what the leader just sent are a stale, uncommitted tail of an old term: the
    leader's commit index says nothing about them, so they must not commit (or be applied)."""
    stale = [Entry(1, 1), Entry(1, 2), Entry(1, 3, data=b"stale"), Entry(1, 4, data=b"stale")]
    b = RaftCore(CoreConfig(id="b"), ConfState(tuple(IDS)), HardState(1, ""), entries=stale)
    # The term-2 leader's log is 1@1 2@1 3@2 4@2, committed to 4; it probes b at index 2, then sends entry 3.
    b.step(Message(MsgType.APP, "a", "b", term=2, index=2, log_term=1, entries=[], commit=4))
    assert b.log.committed == 2, "no new entries: commit stops at the matched prefix, not at b's last index"
    b.step(Message(MsgType.APP, "a", "b", term=2, index=1, log_term=1, entries=[Entry(1, 2)], commit=4))
    assert b.log.committed == 2 and b.log.last_index() == 4, "a matching entry does not cut the tail"
    rd = b.ready()
    assert [e.index for e in rd.committed] == [1, 2]
    b.advance(rd)
    b.step(Message(MsgType.APP, "a", "b", term=2, index=2, log_term=1, entries=[Entry(2, 3)], commit=4))
    assert b.log.committed == 3 and b.log.last_index() == 3 and b.log.term(3) == 2


def test_leader_never_overwrites_or_deletes_its_own_entries() -> None:
    net = Network(IDS)
    a = net.elect("a")
    before = list(a.log.entries)
    a.step(Message(MsgType.APP_RESP, "b", "a", term=1, index=0, reject=True, reject_hint=0))
    net.deliver()
    assert a.log.entries[: len(before)] == before


def test_figure_8_old_term_entries_are_not_committed_by_counting_replicas() -> None:
    """Raft §5.4.2, Figure 8: an entry of an earlier term on a majority is not committed by counting;
    it commits only once an entry of the leader's own term does."""
    ids = ("s1", "s2", "s3", "s4", "s5")
    s1 = RaftCore(
        CoreConfig(id="s1", pre_vote=False), ConfState(ids), HardState(2, ""), entries=[Entry(1, 1), Entry(2, 2)]
    )
    s1.campaign()
    for v in ("s2", "s3"):
        s1.step(Message(MsgType.VOTE_RESP, v, "s1", term=3))
    assert s1.role == Role.LEADER and s1.term == 3
    rd = s1.ready()
    s1.advance(rd)
    s1.on_persisted(3, 3)  # the leader's no-op of term 3 is durable locally
    for v in ("s2", "s3"):
        s1.step(Message(MsgType.APP_RESP, v, "s1", term=3, index=2))
    assert s1.log.committed == 0, "index 2 (term 2) is on s1, s2, s3 but must not count as committed"
    s1.step(Message(MsgType.APP_RESP, "s2", "s1", term=3, index=3))
    assert s1.log.committed == 0  # s1 and s2 hold index 3: not yet a majority of five
    s1.step(Message(MsgType.APP_RESP, "s3", "s1", term=3, index=3))
    assert s1.log.committed == 3  # the term-3 entry commits, and index 2 with it


def test_followers_learn_commit_and_apply_in_order() -> None:
    net = Network(IDS)
    net.elect("a")
    for k in range(5):
        net.propose("a", f"{k}".encode())
    net.tick_all(2)
    for i in IDS:
        idx = [e.index for e in net.applied[i]]
        assert idx == sorted(idx) == list(range(1, len(idx) + 1))
        assert net.normal_applied(i) == [b"0", b"1", b"2", b"3", b"4"]


def test_proposal_on_follower_is_refused_with_leader_hint() -> None:
    net = Network(IDS)
    net.elect("a")
    with pytest.raises(RaftException) as exc:
        net.cores["b"].propose([b"x"])
    assert exc.value.code == RaftError.EPERM and "a" in str(exc.value)


# ---------------------------------------------------------------- PreVote and CheckQuorum


def test_prevote_partitioned_node_does_not_inflate_its_term() -> None:
    net = Network(IDS, election_tick=10)
    net.elect("a")
    net.isolate("c")
    net.tick_all(100)
    c = net.cores["c"]
    assert c.term == 1 and c.role == Role.PRE_CANDIDATE
    net.heal()
    net.tick_all(5)
    assert net.cores["a"].role == Role.LEADER and net.cores["a"].term == 1


def test_votes_ignored_while_leader_lease_holds() -> None:
    net = Network(IDS)
    net.elect("a")
    b = net.cores["b"]
    b.step(Message(MsgType.VOTE, "c", "b", term=5, log_term=9, index=9))
    assert b.term == 1 and b.vote == "a"


def test_check_quorum_leader_steps_down_without_majority() -> None:
    net = Network(IDS, election_tick=10)
    a = net.elect("a")
    net.isolate("a")
    for _ in range(25):
        a.tick()
        net.deliver()
    assert a.role == Role.FOLLOWER


def test_stale_leader_steps_down_on_healing() -> None:
    net = Network(IDS, election_tick=10, check_quorum=False)
    a = net.elect("a")
    net.isolate("a")
    net.tick_all(60)
    assert any(net.cores[i].role == Role.LEADER for i in "bc")
    net.heal()
    net.tick_all(3)
    assert a.role == Role.FOLLOWER and a.term > 1


# ---------------------------------------------------------------- reads


def test_read_index_waits_for_quorum_heartbeat_round() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.propose("a", b"x")
    net.isolate("a")
    a.read_index("r1")
    net.deliver()
    assert net.read_states["a"] == []
    net.heal()
    net.deliver()
    net.tick_all(2)
    assert net.read_states["a"] == [("r1", a.log.committed)]


def test_read_index_waits_for_first_commit_in_term() -> None:
    net = Network(IDS, pre_vote=False)
    net.filter = lambda m: m.type != MsgType.APP  # votes pass, the new leader's no-op does not
    a = net.elect("a")
    a.read_index("r")
    net.deliver()
    net.tick_all(4)
    assert a.log.committed < a.log.last_index() and net.read_states["a"] == []
    net.filter = None
    net.tick_all(4)
    assert net.read_states["a"] == [("r", a.log.last_index())]


def test_read_index_on_follower_is_dropped_as_not_leader() -> None:
    net = Network(IDS)
    net.elect("a")
    net.cores["b"].read_index("r")
    net.deliver()
    assert net.dropped_reads["b"] == ["r"]


def test_lease_read_answers_without_a_round_while_lease_valid() -> None:
    net = Network(IDS, lease_read=True, election_tick=10, heartbeat_tick=1)
    net.started_long_ago()
    a = net.elect("a")
    net.tick_all(2)  # one heartbeat round confirms the lease
    assert a.lease_valid(net.clock)
    net.isolate("a")
    a.read_index("fast", net.clock)
    net.process("a")
    assert [c for c, _ in net.read_states["a"]] == ["fast"]
    net.tick("a", 10)  # 0.9 x election timeout later (less the drift bound) the lease has lapsed
    assert not a.lease_valid(net.clock)
    a.read_index("slow", net.clock)
    net.process("a")
    assert [c for c, _ in net.read_states["a"]] == ["fast"]  # now it needs a quorum round, which cannot finish


def test_leader_removing_itself_does_not_serve_reads_alone() -> None:
    """Issue 12, bug 2: once `a` appends "remove a" to voters {a, b}, its configuration is {b}: one voter,
    but not `a`. The single-voter shortcut must not answer from `a` alone, since `b` may already lead."""
    net = Network(["a", "b"])
    a = net.elect("a")
    net.filter = lambda m: not (m.frm == "b" and m.to == "a")  # b -> a is cut
    a.propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "a"))
    assert a.conf.voters == ("b",) and a.role == Role.LEADER
    a.read_index("r")
    net.deliver()
    net.tick_all(3 * a.cfg.heartbeat_tick)
    assert a.role == Role.LEADER and net.read_states["a"] == []


# ---------------------------------------------------------------- leadership transfer


def test_transfer_leadership_with_timeout_now() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.propose("a", b"x")
    a.transfer_leader("b")
    with pytest.raises(RaftException):
        a.propose([b"refused during transfer"])
    net.deliver()
    assert net.cores["b"].role == Role.LEADER and a.role == Role.FOLLOWER
    assert net.cores["b"].term == 2


def test_transfer_to_lagging_follower_first_catches_it_up() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.isolate("c")
    net.propose("a", b"x", b"y")
    net.heal()
    a.transfer_leader("c")
    net.deliver()
    assert net.cores["c"].role == Role.LEADER
    assert net.cores["c"].log.last_index() >= 3


# ---------------------------------------------------------------- membership


def test_learner_receives_log_but_does_not_vote_or_count() -> None:
    net = Network(["a", "b", "c", "d"], voters=["a", "b", "c"])
    a = net.elect("a")
    net.propose("a", b"x")
    net.heartbeat("a")
    assert net.normal_applied("d") == [b"x"]
    net.cores["d"].tick()
    for _ in range(100):
        net.cores["d"].tick()
    assert net.cores["d"].role == Role.FOLLOWER
    assert a.status().progress["d"].learner


def test_add_learner_then_promote_then_remove() -> None:
    net = Network(["a", "b", "c", "d"], voters=["a", "b", "c"])
    net.conf = ConfState(("a", "b", "c"), ())  # d is not a member yet
    for i in "abcd":
        net.start(i)
    a = net.elect("a")
    a.propose_conf_change(ConfChange(ConfChangeOp.ADD_LEARNER, "d"))
    with pytest.raises(RaftException) as exc:
        a.propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "d"))
    assert exc.value.code == RaftError.EBUSY  # one change at a time
    net.deliver()
    assert net.cores["d"].conf.learners == ("d",)
    a.propose_conf_change(ConfChange(ConfChangeOp.ADD_VOTER, "d"))
    net.deliver()
    assert a.conf.voters == ("a", "b", "c", "d")
    net.crash("b")
    net.crash("c")
    idx = net.propose("a", b"needs 3 of 4")
    assert a.log.committed < idx
    net.start("b")
    net.tick_all(3)
    assert a.log.committed >= idx
    a.propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "a"))
    net.deliver()
    net.tick_all(1)
    assert a.role == Role.FOLLOWER and "a" not in net.cores["b"].conf.voters


def test_restarted_node_uses_latest_configuration_in_its_log() -> None:
    """A conf entry counts once in the log, committed or not, also after a restart."""
    conf_entry = Entry(
        1, 2, EntryType.CONF, __import__("raft.core.confchange", fromlist=["x"]).encode_conf(ConfState(("a", "b"), ()))
    )
    c = RaftCore(CoreConfig(id="c"), ConfState(("a", "b", "c")), HardState(1, ""), entries=[Entry(1, 1), conf_entry])
    assert c.conf.voters == ("a", "b")
    for _ in range(100):
        c.tick()
    # It may campaign (it does not know whether its removal committed), but only under {a, b}: it asks a and
    # b and never counts its own vote, so alone it never wins.
    assert c.role != Role.LEADER
    rd = c.ready()
    asked = {m.to for m in rd.messages + rd.persisted_messages if m.type in (MsgType.PRE_VOTE, MsgType.VOTE)}
    assert asked == {"a", "b"}


# ---------------------------------------------------------------- compaction and InstallSnapshot


def test_lagging_follower_gets_snapshot_when_leader_compacted() -> None:
    net = Network(IDS)
    a = net.elect("a")
    net.crash("c")
    for k in range(5):
        net.propose("a", f"{k}".encode())
    meta = SnapshotMeta(a.log.applied, a.log.term(a.log.applied) or 0, a.log.conf_at(a.log.applied))
    a.compact(meta, a.log.applied + 1)
    assert a.log.first_index() == meta.index + 1
    net.start("c")
    c = net.cores["c"]
    c.step(Message(MsgType.HEARTBEAT, "a", "c", term=1))  # c becomes active again
    net.tick_all(2)
    snaps = [m for m in net.send_pending() if m.type == MsgType.SNAP]
    assert snaps == [] or snaps[0].snapshot == meta
    net.tick_all(3)
    assert net.durable["c"][2] == meta
    a.report_snapshot("c", True)
    net.propose("a", b"after")
    net.tick_all(2)
    assert c.log.committed == a.log.committed and c.log.offset == meta.index


def test_snapshot_older_than_commit_is_ignored() -> None:
    b = RaftCore(CoreConfig(id="b"), ConfState(tuple(IDS)), HardState(1, ""), entries=[Entry(1, 1), Entry(1, 2)])
    b.step(Message(MsgType.HEARTBEAT, "a", "b", term=1, commit=2))
    b.step(Message(MsgType.SNAP, "a", "b", term=1, snapshot=SnapshotMeta(1, 1, ConfState(tuple(IDS)))))
    assert b.log.last_index() == 2 and b.ready().snapshot is None


def test_restart_from_snapshot_and_log() -> None:
    snap = SnapshotMeta(10, 2, ConfState(tuple(IDS)))
    c = RaftCore(
        CoreConfig(id="a"), ConfState(()), HardState(3, "b"), snap, entries=[Entry(2, 9), Entry(2, 10), Entry(3, 11)]
    )
    assert (c.log.offset, c.log.last_index(), c.term, c.vote) == (10, 11, 3, "b")
    assert c.conf.voters == tuple(IDS)
    with pytest.raises(ValueError, match="missing"):
        RaftCore(CoreConfig(id="a"), ConfState(()), HardState(3, ""), snap, entries=[Entry(3, 12)])


def test_follower_that_lost_acknowledged_entries_is_probed_again() -> None:
    """Found by the real-process InstallSnapshot test: a follower whose disk was wiped after it had
    acknowledged entries answers heartbeats whose commit it cannot reach. Without a reject the leader keeps
    its old match forever and never sends the follower anything; with it, the leader probes from where the
    follower's log ends (here: a snapshot, since the log is compacted)."""
    net = Network(IDS, check_quorum=False)
    a = net.elect("a")
    for k in range(5):
        net.propose("a", f"{k}".encode())
    assert a.prs["c"].match == a.log.last_index()
    meta = SnapshotMeta(a.log.applied, a.log.term(a.log.applied) or 0, a.log.conf_at(a.log.applied))
    a.compact(meta, a.log.applied + 1)
    net.durable["c"] = (HardState(), [], None)  # c's disk is replaced
    net.start("c")
    rejects: list[Message] = []
    net.filter = lambda m: not (m.type == MsgType.HEARTBEAT_RESP and m.reject and rejects.append(m))  # type: ignore[func-returns-value]
    net.tick_all(a.cfg.heartbeat_tick)  # one heartbeat round
    net.filter = None
    assert [(m.frm, m.reject_hint) for m in rejects] == [("c", 0)]
    c = net.cores["c"]  # the node layer logs it (the corruption sweep counts it as detected)
    assert c.lost_acknowledged == (0, a.log.committed)
    assert all(net.cores[x].lost_acknowledged is None for x in ("a", "b"))
    for m in rejects:  # now let the leader see it: it backs off to the end of c's (empty) log
        a.step(m)
    assert a.prs["c"].match == 0
    net.tick_all(3)
    assert net.durable["c"][2] == meta  # so c gets the snapshot
    a.report_snapshot("c", True)
    net.propose("a", b"after")
    net.heartbeat("a")
    assert net.cores["c"].log.committed == a.log.committed


def test_a_follower_that_only_lags_reports_no_lost_entries() -> None:
    """The loss signal is for entries a follower acknowledged, not for entries it never received: the
    leader's heartbeat carries min(commit, match), so a follower that was cut off is only behind."""
    net = Network(IDS, check_quorum=False)
    a = net.elect("a")
    net.isolate("c")
    for k in range(5):
        net.propose("a", f"{k}".encode())
    net.heal()
    net.tick_all(a.cfg.heartbeat_tick)
    c = net.cores["c"]
    assert c.log.committed == a.log.committed and c.lost_acknowledged is None


def test_a_leader_whose_own_removal_did_not_commit_can_lead_again() -> None:
    """Found by the simulation (profile remove-leader): a, leading {a, b}, appended its own removal (config {b})
    and more entries that never reached b, then lost leadership. b cannot win (a's log is newer, a refuses
    its vote) and a, outside its latest configuration, never campaigned: no leader ever again. A server still
    in the committed configuration campaigns (thesis §4.2.2: it counts the votes of the new configuration,
    not its own) and steps down once its removal commits."""
    net = Network(["a", "b"])
    a = net.elect("a")
    net.isolate("a")
    a.propose_conf_change(ConfChange(ConfChangeOp.REMOVE, "a"))
    net.propose("a", b"only on a")
    net.tick("a", 50)  # check quorum: a steps down
    net.deliver()
    assert a.role == Role.FOLLOWER and a.conf.voters == ("b",)
    net.heal()
    for _ in range(200):
        net.tick_all()
        if net.cores["b"].role == Role.LEADER:
            break
    b = net.cores["b"]
    assert b.role == Role.LEADER and b.conf.voters == ("b",)
    assert b.log.committed >= a.log.last_index() - 1 and a.role == Role.FOLLOWER
    assert b"only on a" in net.normal_applied("b")


def test_reseeded_follower_never_commits_entries_that_did_not_match() -> None:
    """Issue 12, bug 4: c's disk is replaced by a stale copy holding an uncommitted entry of an old leader.
    A heartbeat reject says where c's log ends, not that it matches ours: the leader must not raise match to
    it, or the next heartbeat's commit makes c commit (and apply) the old leader's entry."""
    net = Network(IDS, check_quorum=False)
    a = net.elect("a")
    net.isolate("a")
    a.propose([b"x"])  # never committed: only a has it
    net.deliver()
    stale = net.durable["a"]
    assert [e.data for e in stale[1]] == [b"", b"x"]
    net.crash("a")
    b = net.elect("b")
    net.propose("b", b"y", b"z")
    assert b.prs["c"].match == b.log.last_index() == b.log.committed == 4
    net.durable["c"] = stale  # c's disk is replaced by a copy of a's
    net.applied["c"] = []
    net.start("c")
    net.filter = lambda m: m.type != MsgType.APP  # only heartbeats reach c for a while
    net.tick_all(3 * b.cfg.heartbeat_tick)
    assert b.prs["c"].match == 0
    for e in net.applied["c"]:
        assert (e.term, e.data) == (b.log.term(e.index), b.log.slice(e.index, e.index + 1, 1, 0)[0].data), e
    net.filter = None
    net.tick_all(3 * b.cfg.heartbeat_tick)
    assert net.normal_applied("c") == [b"y", b"z"] and b.prs["c"].match == 4


def test_a_heartbeat_reject_moves_next_back_and_never_sets_match() -> None:
    """Issue 12, bug 4 at the leader (etcd's MaybeDecrTo): a heartbeat reject says where the follower's log ends,
    not that it agrees with ours up to there. Match is forgotten and only next moves, so the leader's next
    heartbeat to it carries no commit the follower could reach with entries that never matched."""
    net = Network(IDS, check_quorum=False)
    a = net.elect("a")
    net.propose("a", b"x", b"y", b"z")
    pr = a.prs["c"]
    assert pr.match == a.log.last_index() == a.log.committed == 4
    a.step(Message(MsgType.HEARTBEAT_RESP, "c", "a", term=a.term, reject=True, reject_hint=2))
    assert (pr.match, pr.next) == (0, 3) and a.log.committed == 4
    to_c: list[Message] = []
    net.filter = lambda m: not (m.to == "c" and (to_c.append(m) or True))  # type: ignore[func-returns-value]  # c hears nothing; record what a sends
    net.tick("a", a.cfg.heartbeat_tick)
    net.deliver()
    beats = [m for m in to_c if m.type == MsgType.HEARTBEAT]
    assert beats and all(m.commit == 0 for m in beats), to_c


def test_reseeded_follower_with_a_long_stale_log_never_commits_it() -> None:
    """Found by the simulation (profile churn, disk rollbacks): like the test above, but the stale copy is as
    long as the leader's commit, so no heartbeat is rejected for being beyond c's log. A heartbeat carries the
    term of the entry at its commit index; c commits only if its own entry there has that term, and otherwise
    rejects, so that the leader probes where c's log really agrees."""
    net = Network(IDS, check_quorum=False)
    a = net.elect("a")
    net.isolate("a")
    a.propose([b"x1", b"x2", b"x3"])  # never committed: only a has them
    net.deliver()
    stale = net.durable["a"]
    assert [e.data for e in stale[1]] == [b"", b"x1", b"x2", b"x3"]
    net.crash("a")
    b = net.elect("b")
    net.propose("b", b"y", b"z")
    assert b.prs["c"].match == b.log.last_index() == b.log.committed == 4
    net.durable["c"] = stale  # c's disk is replaced by a copy of a's, as long as b's commit
    net.applied["c"] = []
    net.start("c")
    net.filter = lambda m: m.type != MsgType.APP  # only heartbeats reach c for a while
    net.tick_all(3 * b.cfg.heartbeat_tick)
    assert [e.data for e in net.applied["c"] if e.type == EntryType.NORMAL] == []
    assert net.cores["c"].log.committed == 0 and b.prs["c"].match == 0
    net.filter = None
    net.tick_all(3 * b.cfg.heartbeat_tick)
    assert net.normal_applied("c") == [b"y", b"z"] and b.prs["c"].match == 4

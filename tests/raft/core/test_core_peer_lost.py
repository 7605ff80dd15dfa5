"""RaftCore.peer_lost: a follower whose connection from its leader closed (the leader's process died)
campaigns after a short rank-staggered delay instead of a full election timeout; a false alarm costs at most
a refused pre-vote; it never applies with lease reads. On the pure core with the synchronous Network."""

from __future__ import annotations

from raft.core import Role
from raft.testing.network import Network

IDS = ["a", "b", "c"]


def test_followers_that_lose_the_dead_leader_elect_one_new_leader_within_a_few_ticks() -> None:
    net = Network(IDS, election_tick=20, heartbeat_tick=2)
    net.elect("a")
    net.tick_all(5)  # b and c hear heartbeats from a
    net.crash("a")
    for i in ("b", "c"):
        net.cores[i].peer_lost("a")
    # rank 0 (b) campaigns after 1-2 ticks; c would only after 4-5 (stride heartbeat_tick + 1): no split vote
    net.tick_all(3)
    b, c = net.cores["b"], net.cores["c"]
    assert b.role == Role.LEADER and b.term == 2 and c.role == Role.FOLLOWER and c.leader == "b" and c.term == 2
    net.propose("b", b"x")
    net.heartbeat("b")
    assert net.normal_applied("c")[-1] == b"x"


def test_without_the_signal_the_survivors_wait_out_the_election_timeout() -> None:
    net = Network(IDS, election_tick=20, heartbeat_tick=2)
    net.elect("a")
    net.tick_all(5)
    net.crash("a")
    net.tick_all(15)
    assert all(net.cores[i].role == Role.FOLLOWER and net.cores[i].term == 1 for i in ("b", "c"))


def test_a_false_alarm_does_not_depose_a_live_leader_and_restores_the_normal_timeout() -> None:
    net = Network(IDS, election_tick=20, heartbeat_tick=2)
    a = net.elect("a")
    net.tick_all(5)
    b = net.cores["b"]
    b.peer_lost("a")  # only b saw a connection close; a and c are fine
    assert b.leader == "" and b.randomized_timeout <= b.election_elapsed + 2
    net.tick_all(30)
    assert a.role == Role.LEADER and a.term == 1  # c refused b's pre-vote: it still hears from a
    assert b.role == Role.FOLLOWER and b.leader == "a" and b.term == 1
    assert b.randomized_timeout >= 20  # back to [T, 2T) once a was heard again


def test_losing_a_connection_from_a_peer_that_is_not_the_leader_changes_nothing() -> None:
    net = Network(IDS, election_tick=20, heartbeat_tick=2)
    net.elect("a")
    net.tick_all(3)
    b = net.cores["b"]
    before = b.randomized_timeout
    b.peer_lost("c")
    assert b.leader == "a" and b.randomized_timeout == before


def test_with_lease_reads_a_follower_keeps_its_full_lockout() -> None:
    net = Network(IDS, election_tick=20, heartbeat_tick=2, lease_read=True)
    net.started_long_ago()
    net.elect("a")
    net.tick_all(3)
    b = net.cores["b"]
    before = b.randomized_timeout
    b.peer_lost("a")
    assert b.leader == "a" and b.randomized_timeout == before

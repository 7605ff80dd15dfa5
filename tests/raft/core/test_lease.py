"""The leader lease (lease_read): measured on the driver's monotonic clock, never on counted ticks; bounded by
the clock-drift bound; void after a backward clock jump; never renewed by a leadership transfer, abandoned
or not; refused without check_quorum; and a freshly started node keeps the lockout a lease relies on."""

from __future__ import annotations

import pytest

from raft.core import ConfState, CoreConfig, Message, MsgType, RaftCore, Role
from raft.options import RaftOptions
from raft.testing.network import Network

IDS = ["a", "b", "c"]
E = 10  # election ticks
TICK = 50.0  # ms per tick


def leased() -> tuple[Network, RaftCore]:
    """a leads with a confirmed lease; the clock is net.clock."""
    net = Network(IDS, lease_read=True, election_tick=E, heartbeat_tick=1, tick_ms=TICK)
    net.started_long_ago()
    a = net.elect("a")
    net.tick_all(2)
    assert a.lease_valid(net.clock)
    return net, a


def served(net: Network, i: str) -> list[object]:
    net.process(i)
    return [c for c, _ in net.read_states[i]]


def test_a_paused_leader_does_not_serve_from_its_stale_lease() -> None:
    """The bug: the lease counted ticks, and a SIGSTOPped process drops the ticks it missed, so after a pause
    of any length the lease still looked valid. On resume the first thing the leader sees is a read, with the
    clock 3 election timeouts later and not one tick in between."""
    net, a = leased()
    net.isolate("a")  # meanwhile b and c elect a new leader and commit writes a cannot know about
    resumed = net.clock + 3 * E * TICK
    a.read_index("after-pause", resumed)
    assert served(net, "a") == []
    assert not a.lease_valid(resumed)


def test_lease_lasts_ratio_times_election_timeout_less_the_drift_bound() -> None:
    cfg = CoreConfig(id="a", election_tick=20, heartbeat_tick=2, lease_read=True, tick_ms=50, max_clock_drift=0.05)
    assert cfg.lease_ms() == pytest.approx(1000 * 0.9 * 0.95 / 1.05)
    # The ratio is capped one tick short of the election timeout: that is the shortest lockout a follower keeps.
    short = CoreConfig(id="a", election_tick=4, heartbeat_tick=1, lease_read=True, tick_ms=50, max_clock_drift=0)
    assert short.lease_ms() == pytest.approx(150)


def test_the_lease_runs_from_the_send_time_of_the_confirmed_round() -> None:
    net, a = leased()
    held: list[Message] = []
    net.filter = lambda m: not (m.type == MsgType.HEARTBEAT and held.append(m) is None)  # type: ignore[func-returns-value]
    net.tick("a")  # a round leaves now...
    sent = net.clock
    net.deliver()
    net.filter = None
    assert len(held) == 2
    a.observe_clock(sent + 5 * TICK)  # ...and arrives 5 ticks later
    for m in held:
        net.cores[m.to].step(m)
    net.deliver()
    assert a.lease_until == pytest.approx(sent + a.cfg.lease_ms())


def test_a_clock_that_jumps_back_voids_the_lease() -> None:
    net, a = leased()
    net.isolate("a")
    back = net.clock - 5_000  # e.g. a clock-skew reset: a valid-looking lease would last 5 s longer
    a.read_index("r", back)
    assert served(net, "a") == []
    assert a.lease_until is None


def test_an_abandoned_transfer_never_renews_the_lease() -> None:
    """The target may already have won with forced votes that ignore the voters' lockout: no heartbeat round
    sent before the transfer ended may count, even when its answers arrive after the transfer was abandoned."""
    net, a = leased()
    held: list[Message] = []
    net.filter = lambda m: m.type != MsgType.TIMEOUT_NOW and not (
        m.type == MsgType.HEARTBEAT_RESP and held.append(m) is None  # type: ignore[func-returns-value]
    )
    a.transfer_leader("b")  # b never gets the TimeoutNow: the transfer times out
    assert not a.lease_valid(net.clock)
    for _ in range(E):
        net.tick("a")
        net.deliver()
    assert not a.lead_transferee and a.role == Role.LEADER  # abandoned at the last tick, which sent one more round
    net.filter = None
    during = [m for m in held if m.seq < a.read_seq]
    after = [m for m in held if m.seq == a.read_seq]
    assert during and after
    for m in during:  # answers to rounds sent during the transfer arrive after it was abandoned
        a.step(m)
    a.read_index("r", net.clock)
    assert served(net, "a") == [] and not a.lease_valid(net.clock)
    for m in after:  # a round sent after the transfer ended leases again
        a.step(m)
    assert a.lease_valid(net.clock)


def test_lease_read_needs_check_quorum() -> None:
    with pytest.raises(ValueError, match="lease_read needs check_quorum"):
        CoreConfig(id="a", lease_read=True, check_quorum=False)
    with pytest.raises(ValueError, match="lease_read needs check_quorum"):
        RaftOptions(lease_read=True, check_quorum=False)
    assert not RaftOptions().lease_read  # ReadIndex with a quorum round stays the default


def test_without_a_clock_there_is_no_lease() -> None:
    """A driver that passes no time gets quorum rounds, never a lease counted in ticks."""
    net, a = leased()
    c = RaftCore(CoreConfig(id="x", lease_read=True), ConfState(("x", "y", "z")))
    for _ in range(100):
        c.tick()
    assert c.clock is None and not c.lease_valid()
    a.read_index("no-clock")
    net.isolate("a")
    assert served(net, "a") == []


def test_a_restarted_follower_keeps_the_lockout_the_lease_relies_on() -> None:
    """b acknowledged a's lease round, then crashed and restarted at once. Without the boot lockout it would
    vote for c (c never heard from a) within a's lease, and c would commit while a still serves reads."""
    net, a = leased()
    net.crash("b")
    b = net.start("b")
    assert b.leader == "" and b.boot_lockout
    c = net.cores["c"]
    b.step(Message(MsgType.PRE_VOTE, "c", "b", c.term + 1, c.log.last_term(), c.log.last_index()))
    b.step(Message(MsgType.VOTE, "c", "b", c.term + 1, c.log.last_term(), c.log.last_index()))
    net.process("b")
    assert b.vote == "a" and b.term == a.term and net.queue == []  # neither vote counted, term unchanged
    for _ in range(E):
        b.tick(net.clock)
    assert not b.boot_lockout
    b.step(Message(MsgType.VOTE, "c", "b", c.term + 1, c.log.last_term(), c.log.last_index()))
    assert b.vote == "c"  # an election timeout later it votes again

"""Deterministic simulation: seeded schedules of loss, delay, duplication, reordering, partitions,
crashes (with and without losing unsynced writes, between any two persistence steps), pauses, clocks at
different rates, snapshots, transfers, membership plans and the Raft paper's Figure 8.

`make test` runs 150 seeds; set RAFT_SIM_SEEDS=N for more (or `make sim SEEDS=N`, 5,000 by default). A failing
seed is printed; `python -m raft.testing.replay SEED` replays it with its event transcript. (500 until 2026-11-30,
then 250: on a 2-core machine where `make test` ran past 30 minutes they were 12 % of the offline suite's CPU; on
2026-12-01 a fresh clone took 32:25 in a slow hour, and the 250 seeds' ten chunks 495 s of its workers. Every
profile is still met 13 or 14 times, seed % len(PROFILES).)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

import pytest

from raft.core import Role, quorum
from raft.core.core import RaftCore
from raft.core.ready import ReadState
from raft.testing.profiles import PROFILES, profile_for
from raft.testing.sim import InvariantViolation, SimOptions, Simulation

SEEDS = int(os.environ.get("RAFT_SIM_SEEDS", "150"))
CHUNK = 25


def run(seed: int) -> Simulation:
    name, opts = profile_for(seed)
    sim = Simulation(seed, opts)
    try:
        sim.run()
    except InvariantViolation as exc:
        tail = "\n".join(sim.log_lines[-30:])
        pytest.fail(f"{exc}\nprofile {name}; replay with: python -m raft.testing.replay {seed}\n{tail}")
    return sim


@pytest.mark.slow
@pytest.mark.parametrize("start", range(0, SEEDS, CHUNK))
def test_simulation_seeds(start: int) -> None:
    progressed = 0
    planned: list[bool] = []  # membership plans and scripts carried out to the end
    for seed in range(start, min(start + CHUNK, SEEDS)):
        sim = run(seed)
        progressed += len(sim.acked)
        if sim.opts.plan:
            planned.append(sim.plan_done == list(sim.opts.plan))
        if sim.opts.script:
            planned.append(sim.script_reached == "d")
    assert progressed > 0, "the schedules made no progress at all: the simulation is not exercising anything"
    # Faults may keep a plan from finishing; in 10,000 seeds no chunk carried out fewer than 5 of 11.
    assert sum(planned) * 3 >= len(planned), f"too few membership plans or scripts were carried out: {planned}"


def test_same_seed_replays_identically() -> None:
    a, b = run(7), run(7)
    assert a.log_lines == b.log_lines and a.acked == b.acked and a.step_no == b.step_no


def test_simulation_detects_a_broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker has teeth: granting votes regardless of log freshness must be caught."""
    from raft.core.log import RaftLog

    monkeypatch.setattr(RaftLog, "is_up_to_date", lambda self, i, t: True)
    assert first_caught(PROFILES["churn"], range(40)) is not None


def test_simulation_detects_replies_before_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Acknowledging appends before they are durable loses acknowledged writes in power losses."""
    from raft.core import core as core_mod
    from raft.core.messages import MsgType

    monkeypatch.setattr(core_mod, "_SEND_NOW", core_mod._SEND_NOW | {MsgType.APP_RESP, MsgType.VOTE_RESP})
    assert first_caught(PROFILES["powerloss"], range(150)) is not None  # about 1 schedule in 25 loses a write


@pytest.mark.parametrize("seed", range(12))
def test_wiped_follower_catches_up_by_install_snapshot(seed: int) -> None:
    """After a faulty run converges, the leader compacts its log; a follower loses its disk (log and
    snapshots; term and vote survive) and must be repaired by InstallSnapshot plus replication, with
    every invariant checked on the way and every acknowledged write kept."""
    sim = Simulation(seed, PROFILES["default"])
    for _ in range(sim.opts.steps):
        sim.step()
    sim.settle()
    ld = sim._leader()
    assert ld is not None
    sim.snapshot_node(ld, margin=0)
    assert ld.core.log.first_index() > 1
    victim = next(i for i in sorted(sim.nodes) if i != ld.id)
    sim.wipe(victim)
    assert sim.nodes[victim].core.log.last_index() == 0
    sim.settle()
    v = sim.nodes[victim]
    v.sync()
    assert v.durable.snap.index >= ld.core.snapshot.index > 0  # installed, not replayed from index 1
    assert v.core.log.applied == sim._leader().core.log.committed  # type: ignore[union-attr]
    assert dict(v.app) == dict(sim._leader().app)  # type: ignore[union-attr]


def first_caught(opts: SimOptions, seeds: Iterable[int]) -> int | None:
    """The first seed whose run breaks an invariant, or None."""
    for seed in seeds:
        try:
            Simulation(seed, opts).run()
        except (InvariantViolation, AssertionError):
            return seed
    return None


def test_simulation_detects_a_commit_rule_without_the_current_term_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figure 8: counting replicas of an older term's entry commits it, and the next leader overwrites it."""

    def commit_by_counting(self: RaftCore) -> bool:
        idx = quorum.committed_index(self.conf.voters, {p: pr.match for p, pr in self.prs.items()})
        if idx > self.log.committed:
            self.log.commit_to(idx)
            self._broadcast_commit()
            return True
        return False

    monkeypatch.setattr(RaftCore, "_maybe_commit", commit_by_counting)
    caught = [first_caught(PROFILES["figure8"], [seed]) for seed in range(6)]
    assert sum(c is not None for c in caught) >= 5, caught


def test_simulation_detects_read_index_without_its_heartbeat_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deposed leader that does not know it yet (paused, partitioned) must not answer alone."""
    original = RaftCore._start_read_round

    def answer_at_once(self: RaftCore) -> None:
        if self.role == Role.LEADER and self.log.term(self.log.committed) == self.term:
            self.read_states.extend(ReadState(ctx, self.log.committed) for ctx in self.waiting_reads)
            self.waiting_reads = []
            return
        original(self)

    monkeypatch.setattr(RaftCore, "_start_read_round", answer_at_once)
    assert first_caught(PROFILES["lease"], range(40)) is not None
    assert first_caught(PROFILES["five"], range(40)) is not None


def test_simulation_detects_a_leader_that_removed_itself_answering_reads_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12, bug 2: a leader that appended its own removal from {a, b} sees the one voter b; were that the
    single-voter read shortcut, a cut-off (and paused) a would answer while b leads and commits without it."""
    monkeypatch.setattr(RaftCore, "_sole_voter", lambda self: len(self.conf.voters) == 1)
    assert first_caught(PROFILES["remove-leader"], range(40)) is not None


def test_simulation_detects_the_tick_counted_lease() -> None:
    """The old lease counted ticks, which a paused leader drops: it answered from a stale lease."""
    assert first_caught(dataclasses.replace(PROFILES["lease"], tick_lease=True), range(60)) is not None


def test_clocks_run_at_their_own_rates_and_a_pause_drops_ticks() -> None:
    sim = Simulation(3, dataclasses.replace(PROFILES["lease"], pause=0.0, crash=0.0, steps=400))
    n1 = sim.nodes["n1"]
    n1.paused_until = 200
    for _ in range(400):
        sim.step()
    rates = sorted(n.rate for n in sim.nodes.values())
    assert rates[0] < rates[-1] and 0.95 <= rates[0] and rates[-1] <= 1.05
    others = [n.ticks for n in sim.nodes.values() if n is not n1]
    # 400 steps are 200 ticks at rate 1; n1 slept through half of them and did not catch up.
    assert all(180 < t < 220 for t in others) and 90 < n1.ticks < 115


LONE_VOTER = SimOptions(nodes=1, spare_nodes=2, conf_change=0.02, steps=600)  # grows from one voter


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "sends-before-term-is-durable"])
def test_simulation_detects_messages_sent_before_the_term_is_durable(
    broken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, bug 1: nothing stamped with a term may leave before that term is durable. A lone voter
    wins in one call, so only runs that start from one voter reach the case; they pass with the rule and
    are caught without it."""
    from raft.core.core import RaftCore

    if broken:
        monkeypatch.setattr(RaftCore, "_hold_messages", lambda self: None)
    caught = []
    for seed in range(20):
        try:
            Simulation(seed, LONE_VOTER).run()
        except InvariantViolation as exc:
            caught.append(str(exc))
    if broken:
        assert any("before its term and vote are durable" in c for c in caught), caught
    else:
        assert caught == []

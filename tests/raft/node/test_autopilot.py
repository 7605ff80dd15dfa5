"""Autopilot (raft/node/autopilot.py) on the simulated clock: five in-process nodes whose time moves only when
the test advances it. A member lost for good (node stopped, disk wiped) is removed once silent for the dead
time; a new empty node started with the group's settings joins as a learner and is promoted after the
stabilization time, with no operator command; a second and third loss never take the voters below the
minimum quorum, and the group keeps committing."""

from __future__ import annotations

import shutil
from pathlib import Path

from raft.node import Node
from raft.options import AutopilotOptions, NodeOptions
from raft.testing.clock import ManualClock
from raft.testing.cluster import free_ports
from raft.testing.group import InProcessGroup
from raft.testing.kvnode import KvStateMachine
from tests.raft.helpers import FAST, put, run

AP = AutopilotOptions(enabled=True, stabilization_s=2.0, dead_server_s=5.0, min_quorum=4, period_s=0.25)
IDS = ["n1", "n2", "n3", "n4", "n5"]


def test_a_lost_member_is_replaced_by_a_new_empty_node_and_min_quorum_holds(tmp_path: Path) -> None:
    async def main() -> None:
        group = InProcessGroup(clock=ManualClock())
        peers = {i: ("127.0.0.1", p) for i, p in zip(IDS, free_ports(len(IDS)), strict=True)}

        def make(i: str) -> Node:
            return group.node(
                NodeOptions(i, str(tmp_path / i), peers, b"secret", raft=FAST, autopilot=AP), KvStateMachine()
            )

        nodes = {i: make(i) for i in IDS}
        for n in nodes.values():
            await n.start()
        try:
            await group.advance_until(lambda: sum(n.is_leader() for n in nodes.values()) == 1, 10)
            leader = next(n for n in nodes.values() if n.is_leader())
            for k in range(20):
                await leader.apply(put(f"k{k}", k))

            def voters() -> list[str]:
                return list(leader.status().voters)

            def learners() -> list[str]:
                return list(leader.status().learners)

            # Lost for good: stopped, its log, meta and snapshots gone.
            lost = next(i for i in IDS if i != leader.id)
            await nodes[lost].stop()
            group.wipe(lost)
            shutil.rmtree(tmp_path / lost, ignore_errors=True)
            took = await group.advance_until(lambda: lost not in voters(), 30)
            assert AP.dead_server_s <= took < AP.dead_server_s + 2, took
            # Autopilot takes the configured peer back as a learner, but never promotes it while it is down.
            await group.advance_until(lambda: lost in learners(), 5)
            await group.advance(3 * AP.stabilization_s)
            assert lost in learners() and len(voters()) == 4

            # A new empty node with the same settings: caught up, then promoted after the stabilization time.
            nodes[lost] = make(lost)
            await nodes[lost].start()
            took = await group.advance_until(lambda: lost in voters(), 30)
            assert took >= AP.stabilization_s and sorted(voters()) == IDS and learners() == []
            barrier = await leader.apply(put("healed", 1))
            await group.advance_until(lambda: nodes[lost].applied_index >= barrier, 5)
            fsm = nodes[lost].fsm
            assert isinstance(fsm, KvStateMachine) and fsm.data["k19"] == 19 and fsm.data["healed"] == 1
            assert leader.autopilot.counts == {"join": 1, "promote": 1, "remove": 1, "failed": 0}
            assert [(e.action, e.peer) for e in leader.autopilot.events] == [
                ("remove", lost),
                ("join", lost),
                ("promote", lost),
            ]

            # Two more losses at once: one is removed (5 -> 4 voters), the other never (min quorum 4).
            gone = [i for i in IDS if i not in (leader.id, lost)][:2]
            for i in gone:
                await nodes[i].stop()
            await group.advance(4 * AP.dead_server_s)
            assert len(voters()) == AP.min_quorum and len([i for i in gone if i in voters()]) == 1
            assert leader.autopilot.counts["remove"] == 2
            assert await leader.apply(put("still-writing", 1)) > barrier  # 3 of 4 voters answer
        finally:
            for n in nodes.values():
                await n.stop()

    run(main)


def test_autopilot_off_or_a_follower_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        group = InProcessGroup(clock=ManualClock())
        ids = IDS[:3]
        peers = {i: ("127.0.0.1", p) for i, p in zip(ids, free_ports(3), strict=True)}
        off = AutopilotOptions(enabled=False, dead_server_s=1.0, min_quorum=1, period_s=0.25)
        nodes = {
            i: group.node(NodeOptions(i, str(tmp_path / i), peers, b"s", raft=FAST, autopilot=off), KvStateMachine())
            for i in ids
        }
        for n in nodes.values():
            await n.start()
        try:
            await group.advance_until(lambda: sum(n.is_leader() for n in nodes.values()) == 1, 10)
            leader = next(n for n in nodes.values() if n.is_leader())
            follower = next(n for n in nodes.values() if n is not leader)
            victim = next(n for n in nodes.values() if n not in (leader, follower))
            await victim.stop()
            await group.advance(5)
            assert len(leader.status().voters) == 3 and leader.autopilot.counts["remove"] == 0
            follower.autopilot.configure(enabled=True)
            assert await follower.autopilot.step() is None  # only the leader acts
            leader.autopilot.configure(enabled=True)
            await group.advance_until(lambda: victim.id not in leader.status().voters, 5)
            assert leader.autopilot.counts["remove"] == 1
        finally:
            for n in nodes.values():
                await n.stop()

    run(main)

"""The asyncio Node, three (or four) nodes in one event loop: an in-process group (in-memory transport, log and
meta store, a ManualClock: elections happen when the test advances time) or, where a test builds its own
nodes, real TCP transports and WALs on the event loop's clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from raft.core import Role
from raft.node import MemberAddresses, Node
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.testing.clock import ManualClock
from raft.testing.cluster import free_ports
from raft.testing.group import InProcessGroup
from raft.testing.kvnode import KvStateMachine
from tests.raft.helpers import FAST, put, run


class Recorder(KvStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.leader_terms: list[int] = []
        self.stopped_terms: list[int] = []

    def on_leader_start(self, term: int) -> None:
        self.leader_terms.append(term)

    def on_leader_stop(self, term: int) -> None:
        self.stopped_terms.append(term)


GROUPS: dict[str, InProcessGroup] = {}


def make(root: str, ids: list[str], ports: dict[str, int], voters: tuple[str, ...] = ()) -> dict[str, Node]:
    """Nodes in one in-process group (raft/testing/group.py): in-memory transport, log and meta store, one
    ManualClock. The group of a root is kept, as the disk under it would be: making the nodes again restarts
    them."""
    group = GROUPS.setdefault(root, InProcessGroup(clock=ManualClock()))
    peers = {i: ("127.0.0.1", ports[i]) for i in ports}
    return {
        i: group.node(NodeOptions(i, f"{root}/{i}", peers, b"secret", voters=voters, raft=FAST), Recorder())
        for i in ids
    }


def group_of(nodes: dict[str, Node]) -> InProcessGroup | None:
    n = next(iter(nodes.values()))
    return next((g for g in GROUPS.values() if g.nodes.get(n.id) is n), None)


@asynccontextmanager
async def running(nodes: dict[str, Node]) -> AsyncIterator[dict[str, Node]]:
    for n in nodes.values():
        await n.start()
    try:
        yield nodes
    finally:
        for n in nodes.values():
            await n.stop()


async def leader_of(nodes: dict[str, Node]) -> Node:
    """The one leader all of `nodes` know. In an in-process group, the clock advances a tick at a time until
    they know one (an election takes what the clock says, not what the machine's load makes it)."""
    group = group_of(nodes)
    if group is not None:

        def agreed() -> bool:  # as wait_for_leader: a leader whose term has a committed entry, on every node
            cores = [n.core for n in nodes.values()]
            return all(c is not None and c.leader and c.log.term(c.log.committed) == c.term for c in cores) and (
                len({c.leader for c in cores if c is not None}) == 1
            )

        await group.advance_until(agreed, 10)
    leaders = await asyncio.gather(*(n.wait_for_leader(10) for n in nodes.values()))
    assert len(set(leaders)) == 1, leaders
    return nodes[leaders[0]]


def test_apply_returns_state_machine_result_and_followers_redirect(tmp_path) -> None:
    async def main() -> None:
        ids = ["n1", "n2", "n3"]
        async with running(make(str(tmp_path), ids, dict(zip(ids, free_ports(3), strict=True)))) as nodes:
            ld = await leader_of(nodes)
            index = await ld.apply(put("a", 1))
            assert index == ld.status().commit
            fsm = ld.fsm
            assert isinstance(fsm, Recorder) and fsm.data == {"a": 1} and fsm.leader_terms == [ld.status().term]
            follower = next(n for n in nodes.values() if n is not ld)
            with pytest.raises(RaftException) as exc:
                await follower.apply(put("b", 2))
            assert exc.value.code == RaftError.EPERM and exc.value.leader == ld.id
            with pytest.raises(RaftException):
                await follower.read_index()
            assert await ld.read_index() >= index
            st = ld.status()
            assert st.role is Role.LEADER and set(st.progress) == set(ids)
            # Committed means a majority holds it; the third acknowledgement may still be in flight.
            assert sum(p.match >= index for p in st.progress.values()) >= 2
            assert all(p.lag == st.last_index - p.match for p in st.progress.values())

    run(main)


def test_transfer_leadership_and_restart_from_wal(tmp_path) -> None:
    async def main() -> None:
        ids = ["n1", "n2", "n3"]
        ports = dict(zip(ids, free_ports(3), strict=True))
        async with running(make(str(tmp_path), ids, ports)) as nodes:
            ld = await leader_of(nodes)
            for k in range(20):
                await ld.apply(put(f"k{k}", k))
            target = next(i for i in ids if i != ld.id)
            await ld.transfer_leadership(target)
            new = await leader_of(nodes)
            assert new.id == target
            old_fsm = ld.fsm
            assert isinstance(old_fsm, Recorder) and old_fsm.stopped_terms
            await new.apply(put("after", 1))
        # Restart everyone from disk: the log replays into fresh state machines.
        async with running(make(str(tmp_path), ids, ports)) as nodes:
            ld = await leader_of(nodes)
            await ld.read_index()
            fsm = ld.fsm
            assert isinstance(fsm, Recorder)
            assert fsm.data == {**{f"k{k}": k for k in range(20)}, "after": 1}

    run(main)


def test_add_peer_as_learner_then_voter_and_remove_peer(tmp_path) -> None:
    async def main() -> None:
        ids = ["n1", "n2", "n3", "n4"]
        ports = dict(zip(ids, free_ports(4), strict=True))
        async with running(make(str(tmp_path), ids, ports, voters=("n1", "n2", "n3"))) as nodes:
            ld = await leader_of({i: nodes[i] for i in ("n1", "n2", "n3")})
            for k in range(30):
                await ld.apply(put(f"k{k}", k))
            await ld.add_peer("n4", ("127.0.0.1", ports["n4"]))
            assert list(ld.status().voters) == ids
            await ld.apply(put("with-n4", 1))
            await nodes["n4"].wait_for_leader(10)
            fsm4 = nodes["n4"].fsm
            assert isinstance(fsm4, Recorder)
            await ld.read_index()
            barrier = await ld.apply(put("barrier", 1))
            # n4 applies in order; once it has the barrier it has everything before it. It learns that the
            # barrier is committed from the leader's next heartbeat: the group's clock has to move for that.
            group = group_of(nodes)
            assert group is not None
            took = await group.advance_until(lambda: nodes["n4"].applied_index >= barrier, 10)
            assert took <= (FAST.heartbeat() + FAST.tick()) / 1000.0
            assert fsm4.data["k29"] == 29 and fsm4.data["with-n4"] == 1
            victim = next(i for i in ("n1", "n2", "n3") if i != ld.id)
            await ld.remove_peer(victim)
            assert victim not in ld.status().voters

    run(main)


def test_add_peer_never_promotes_a_learner_that_has_not_answered(tmp_path) -> None:
    """With a short log, `last_index - match <= catchup_margin` holds even for match 0: promoting on that alone
    would make an unreachable peer a voter, and a 1-node group would lose its quorum."""

    async def main() -> None:
        ids = ["n1"]
        ports = dict(zip(["n1", "ghost"], free_ports(2), strict=True))
        async with running(make(str(tmp_path), ids, {"n1": ports["n1"]})) as nodes:
            ld = await leader_of(nodes)
            await ld.apply(put("k", 1))
            with pytest.raises(TimeoutError):
                await ld.add_peer("ghost", ("127.0.0.1", ports["ghost"]), timeout=1.0)
            assert ld.status().voters == ("n1",) and ld.is_leader()
            await ld.apply(put("still-writable", 1))

    run(main)


def test_two_add_peers_back_to_back_and_every_node_learns_the_addresses_from_the_log(tmp_path) -> None:
    """Issue 12, bug 5. n1-n3 are configured with each other only; n4 and n5 each with n1-n3 and themselves.
    Adding n4 then n5 must not cut n4 off (the leader once rebuilt its peer map from its file plus the newest
    member), and a node whose file never named a member reaches it through the address in the CONF entry."""

    async def main() -> None:
        ids = ["n1", "n2", "n3", "n4", "n5"]
        ports = dict(zip(ids, free_ports(5), strict=True))
        addr = {i: ("127.0.0.1", ports[i]) for i in ids}
        boot = ("n1", "n2", "n3")

        def node(i: str, known: tuple[str, ...]) -> Node:
            peers = {p: addr[p] for p in known}
            return Node(NodeOptions(i, f"{tmp_path}/{i}", peers, b"secret", voters=boot, raft=FAST), Recorder())

        nodes = {i: node(i, boot) for i in boot}
        nodes["n4"] = node("n4", (*boot, "n4"))
        nodes["n5"] = node("n5", (*boot, "n5"))
        async with running(nodes):
            ld = await leader_of({i: nodes[i] for i in boot})
            await ld.apply(put("before", 1))
            await ld.add_peer("n4", addr["n4"], http_address="127.0.0.1:14")
            await ld.add_peer("n5", addr["n5"], http_address="127.0.0.1:15", remoting_address="127.0.0.1:25")
            assert list(ld.status().voters) == ids
            barrier = await ld.apply(put("after-both", 1))
            for i in ids:  # both new members are reachable and caught up
                await nodes[i].wait_applied(barrier, 10)
            for i in ids:  # every node knows both addresses, whatever its file says
                st = nodes[i].status().addresses
                assert st["n4"] == MemberAddresses(f"127.0.0.1:{ports['n4']}", "127.0.0.1:14", None), i
                assert st["n5"] == MemberAddresses(f"127.0.0.1:{ports['n5']}", "127.0.0.1:15", "127.0.0.1:25"), i
                assert nodes[i].http_address("n5") == "127.0.0.1:15"
                assert nodes[i].remoting_address("n5") == "127.0.0.1:25" and nodes[i].remoting_address("n4") is None
            # n5 leads; its file never named n4, yet n4 gets its entries.
            await ld.transfer_leadership("n5")
            n5 = nodes["n5"]
            assert n5.is_leader()
            barrier = await n5.apply(put("n5-leads", 1))
            await nodes["n4"].wait_applied(barrier, 10)
            fsm4 = nodes["n4"].fsm
            assert isinstance(fsm4, Recorder) and fsm4.data["n5-leads"] == 1
            # A snapshot keeps the addresses, and a restart from it (no CONF entry left after it) knows them.
            meta = await nodes["n2"].snapshot()
            assert meta is not None and dict((a[0], a[1:]) for a in meta.addresses)["n4"] == (
                f"127.0.0.1:{ports['n4']}",
                "127.0.0.1:14",
                "",
            )
            await nodes["n2"].stop()
            nodes["n2"] = node("n2", boot)
            await nodes["n2"].start()
            assert nodes["n2"].core is not None and nodes["n2"].core.log.confs == []
            assert nodes["n2"].status().addresses["n5"].raft == f"127.0.0.1:{ports['n5']}"
            assert nodes["n2"].remoting_address("n5") == "127.0.0.1:25"
            assert nodes["n2"].transport_peers()["n4"] == addr["n4"]

    run(main)


def test_messages_leave_as_soon_as_a_round_is_processed_not_at_the_end_of_the_loop_turn(tmp_path) -> None:
    """The APPs of a proposal, and a follower's acknowledgement once its fsync is done, are written to the
    socket by the callback that made them (TcpTransport.flush), not left queued for later in the turn: both
    are on every commit's path (docs/performance.md, serial commit)."""

    async def main() -> None:
        ids = ["n1", "n2", "n3"]
        async with running(make(str(tmp_path), ids, dict(zip(ids, free_ports(3), strict=True)))) as nodes:
            ld = await leader_of(nodes)
            await ld.apply(put("warm", 0))  # every connection is up
            left: list[tuple[str, str, int]] = []
            for n in nodes.values():
                for name in ("process", "_persisted"):
                    original = getattr(n.driver, name)

                    def after(*args: object, n: Node = n, name: str = name, original: object = original) -> None:
                        original(*args)  # type: ignore[operator]
                        assert n.transport is not None
                        left.append((n.id, name, n.transport.stats()["pending_bytes"]))

                    setattr(n.driver, name, after)
            for i in range(20):
                await ld.apply(put("k", i))
            assert {(node, name) for node, name, _ in left} >= {(ld.id, "process"), (ld.id, "_persisted")}
            assert any(node != ld.id and name == "_persisted" for node, name, _ in left)
            assert [x for x in left if x[2]] == []

    run(main)


def test_a_configuration_change_just_after_an_election_waits_for_the_leaders_first_entry(tmp_path) -> None:
    """A leader refuses a configuration change until its first entry is applied (EBUSY); an add or remove asked
    in that moment (an operator right after a failover) waits for it instead of failing."""

    async def main() -> None:
        ids = ["n1", "n2"]
        ports = dict(zip(ids, free_ports(2), strict=True))
        nodes = make(str(tmp_path), ids, ports, voters=("n1",))
        await nodes["n2"].start()
        n1 = nodes["n1"]
        await n1.start()  # the only voter: leader at once, its first entry not yet written
        try:
            st = n1.status()
            assert n1.is_leader() and n1.applied_index < st.last_index
            await n1.add_peer("n2", ("127.0.0.1", ports["n2"]))
            assert n1.status().voters == ("n1", "n2")
        finally:
            for n in nodes.values():
                await n.stop()

    run(main)


def test_a_leader_holds_new_proposals_while_an_entry_is_uncommitted_and_never_when_all_is_committed(tmp_path) -> None:
    """RaftOptions.propose_hold_ms on the group's clock: proposals made while everything is committed are appended
    at once (the clock standing still); one made while an entry is uncommitted waits until the hold since the
    last batch is over, then goes, and both commit once the followers are back."""

    async def main() -> None:
        ids = ["n1", "n2", "n3"]
        async with running(make(str(tmp_path), ids, dict(zip(ids, free_ports(3), strict=True)))) as nodes:
            ld = await leader_of(nodes)
            group = group_of(nodes)
            assert group is not None and ld.core is not None
            log = ld.core.log
            hold = FAST.propose_hold_ms / 1000.0
            assert hold > 0
            for k in range(3):  # serial: each is committed before the next is proposed, and none waits
                index = await asyncio.wait_for(ld.apply(put(f"idle{k}", k)), 10)  # a hold would need the clock
                assert index == log.last_index() == log.committed

            group.hub.isolate(ld.id)  # nothing commits now
            last = log.last_index()
            first = asyncio.ensure_future(ld.apply(put("x", 1)))
            await group.settle()
            assert log.last_index() == last + 1  # nothing was uncommitted: appended at once
            second = asyncio.ensure_future(ld.apply(put("y", 2)))
            await group.settle()
            assert log.last_index() == last + 1, "held while x is uncommitted"
            await group.advance(hold * 0.75, step=hold * 0.75)
            assert log.last_index() == last + 1, "still held before the hold is over"
            await group.advance(hold * 0.5, step=hold * 0.5)
            assert log.last_index() == last + 2, "appended once the hold is over"
            group.hub.heal()
            await group.advance_until(lambda: first.done() and second.done())
            assert await first == last + 1 and await second == last + 2

    run(main)

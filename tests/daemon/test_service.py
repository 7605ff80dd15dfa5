"""ControllerService: three nodes in one event loop over real TCP and WALs, with a controlled clock for the
leader's timestamps (the scan decisions depend only on it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from api.http import documents
from api.service import (
    CommitTimeout,
    ControllerService,
    Deadlines,
    NotLeaderError,
    RefusedError,
    ServiceOptions,
    UnavailableError,
)
from api.service.errors import outcome_of
from raft.core.confchange import ConfChangeError
from raft.options import NodeOptions
from raft.status import RaftError, RaftException
from raft.storage.segment import LogCorruptionError
from raft.testing.group import InProcessGroup
from statemachine import codes as C
from statemachine import commands
from tests.raft.helpers import FAST, run


class Clock:
    def __init__(self, t: int = 1_700_000_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def free_ports(n: int) -> list[int]:
    """Port numbers for the members' addresses: nothing listens on them in an in-process group."""
    return [next(PORTS) for _ in range(n)]


PORTS = iter(range(21001, 60000))


def make(root: str, n: int = 3, clock: Clock | None = None, **kw: Any) -> dict[str, ControllerService]:
    """`n` services whose nodes run in one in-process group (raft/testing/group.py): in-memory log, meta store
    and transport, no ports."""
    group = InProcessGroup()
    ids = [f"127.0.0.1:{p}" for p in free_ports(n)]
    http = dict(zip(ids, [f"127.0.0.1:{p}" for p in free_ports(n)], strict=True))
    peers = {i: ("127.0.0.1", int(i.rsplit(":", 1)[1])) for i in ids}
    out = {}
    for k, i in enumerate(ids):
        node = NodeOptions(i, f"{root}/n{k}", peers, b"secret", http_addresses=http, raft=FAST)
        opts = ServiceOptions(node=node, first_scan_delay_ms=3_600_000, request_timeout_s=2, **kw)
        out[i] = ControllerService(opts, clock=clock or Clock(), open_parts=group.parts)
    return out


@asynccontextmanager
async def running(services: dict[str, ControllerService]) -> AsyncIterator[dict[str, ControllerService]]:
    for s in services.values():
        await s.start()
    try:
        yield services
    finally:
        for s in services.values():
            await s.stop(transfer=False)


async def leader_of(services: dict[str, ControllerService]) -> ControllerService:
    ids = await asyncio.gather(*(s.node.wait_for_leader(10) for s in services.values()))
    assert len(set(ids)) == 1, ids
    return services[ids[0]]


def hb(name: str, broker_id: int, timeout_ms: int = 10_000) -> Callable[[int], bytes]:
    return lambda now: commands.heartbeat(
        now, "c1", name, f"10.0.0.{broker_id}:10911", broker_id, heartbeat_timeout_millis=timeout_ms
    )


async def register(leader: ControllerService, name: str, ids: list[int]) -> None:
    for b in ids:
        r = await leader.read(lambda now: commands.get_next_broker_id(now, "c1", name))
        assert r.header is not None and r.header["nextBrokerId"] == b, r

        def apply_id(now: int, b: int = b) -> bytes:
            return commands.apply_broker_id(now, "c1", name, b, f"code-{b}")

        def register_broker(now: int, b: int = b) -> bytes:
            return commands.register_broker(now, "c1", name, b, f"10.0.0.{b}:10911")

        r = await leader.write(apply_id)
        assert r.ok, r
        r = await leader.write(register_broker)
        assert r.ok, r


def test_writes_on_the_leader_and_2007_from_followers_with_the_leader_http_address(tmp_path: Any) -> None:
    async def body() -> None:
        async with running(make(str(tmp_path))) as svcs:
            leader = await leader_of(svcs)
            r = await leader.write(lambda now: commands.kv_put(now, "ns", "k", "v1"))
            assert r.ok
            follower = next(s for s in svcs.values() if s is not leader)
            last = follower.node.status().last_index
            with pytest.raises(NotLeaderError) as e:
                await follower.write(lambda now: commands.kv_put(now, "ns", "k", "v2"))
            assert e.value.leader_id == leader.id
            assert e.value.leader_address == leader.opts.http_addresses[leader.id]
            with pytest.raises(NotLeaderError):
                await follower.read(lambda now: commands.kv_get(now, "ns", "k"))
            assert follower.node.status().last_index == last  # nothing was proposed

    run(body)


def test_reads_see_every_acknowledged_write_and_never_enter_the_log(tmp_path: Any) -> None:
    async def body() -> None:
        async with running(make(str(tmp_path))) as svcs:
            leader = await leader_of(svcs)
            for i in range(5):

                def put(now: int, i: int = i) -> bytes:
                    return commands.kv_put(now, "ns", "k", f"v{i}")

                await leader.write(put)
                last = leader.node.status().last_index
                r = await leader.read(lambda now: commands.kv_get(now, "ns", "k"))
                assert r.body == {"value": f"v{i}"}
                assert leader.node.status().last_index == last
            with pytest.raises(ValueError, match="not a read"):
                await leader.read(lambda now: commands.kv_put(now, "ns", "k", "x"))

    run(body)


def test_unsafe_local_reads_answer_from_any_replica_without_a_barrier(tmp_path: Any) -> None:
    """The Jepsen negative control's switch: a follower answers from its own state instead of a 2007, and a
    node without a quorum answers instead of timing out; so an isolated replica can serve stale values."""

    async def body() -> None:
        async with running(make(str(tmp_path), unsafe_local_reads=True)) as svcs:
            leader = await leader_of(svcs)
            await leader.write(lambda now: commands.kv_put(now, "ns", "k", "v1"))
            follower = next(s for s in svcs.values() if s is not leader)
            await follower.node.wait_applied(leader.node.status().commit, 10)
            last = follower.node.status().last_index
            r = await follower.read(lambda now: commands.kv_get(now, "ns", "k"))
            assert r.body == {"value": "v1"} and follower.node.status().last_index == last
            with pytest.raises(NotLeaderError):  # writes are unchanged
                await follower.write(lambda now: commands.kv_put(now, "ns", "k", "v2"))

        lonely = next(iter(make(str(tmp_path / "alone"), unsafe_local_reads=True).values()))
        async with running({lonely.id: lonely}):
            assert not lonely.node.is_leader()
            r = await lonely.read(lambda now: commands.kv_get(now, "ns", "k"))
            assert r.code == C.QUERY_NOT_FOUND  # its (empty) state, at once: no quorum was asked

    run(body)


def test_scan_waits_for_a_heartbeat_then_expires_with_the_leaders_time(tmp_path: Any) -> None:
    clock = Clock()

    async def body() -> None:
        async with running(make(str(tmp_path), clock=clock, scan_wait_ms=1000)) as svcs:
            leader = await leader_of(svcs)
            await register(leader, "b1", [1, 2])
            await leader.write(hb("b1", 1))
            leader.heartbeat_received()
            await leader.write(hb("b1", 2))
            r = await leader.write(lambda now: commands.elect_master(now, "b1", cluster_name="c1", broker_id=1))
            assert r.ok and r.header is not None and r.header["masterBrokerId"] == 1
            h = r.header
            r = await leader.write(
                lambda now: commands.alter_sync_state_set(
                    now, "b1", 1, h["masterEpoch"], [1, 2], h["syncStateSetEpoch"]
                )
            )
            assert r.ok, r
            # Inside the scan wait: no scan even though broker 1's entry would have expired.
            clock.t += 999
            assert not leader.scan_due(clock.t)
            # Broker 2 keeps heartbeating; broker 1 (the master) stops.
            clock.t += 10_000
            await leader.write(hb("b1", 2))
            clock.t += 2
            assert leader.scan_due(clock.t)
            scan = await leader.scan_once()
            assert scan is not None and scan.ok
            assert scan.body["checkTimeMillis"] == clock.t
            assert scan.body["inactiveBrokers"] == [{"clusterName": "c1", "brokerName": "b1", "brokerId": 1}]
            assert scan.body["newMasters"][0]["masterBrokerId"] == 2
            # Every replica decided the same from the entry: same master everywhere once applied.
            idx = leader.node.status().commit
            for s in svcs.values():
                await s.node.wait_applied(idx, 10)
                assert s.sm.sync.sets["b1"].master_broker_id == 2
            assert await leader.scan_once() is None  # nothing left to do: no entry proposed

    run(body)


def test_a_new_leader_waits_for_a_heartbeat_before_scanning(tmp_path: Any) -> None:
    clock = Clock()

    async def body() -> None:
        async with running(make(str(tmp_path), clock=clock)) as svcs:
            leader = await leader_of(svcs)
            await register(leader, "b1", [1])
            await leader.write(hb("b1", 1, timeout_ms=1000))
            clock.t += 60_000  # everything expired, but this leader has seen no heartbeat request yet
            assert leader.sm.scan_needed(clock.t)
            assert not leader.scan_due(clock.t)
            assert await leader.scan_once() is None

    run(body)


def test_the_file_config_is_replicated_once_leading_and_an_explicit_value_wins(tmp_path: Any) -> None:
    async def body() -> None:
        svcs = make(str(tmp_path), file_config={"enableElectUncleanMaster": True, "electMasterMaxRetryCount": 7})
        async with running(svcs):
            leader = await leader_of(svcs)
            await leader.read(lambda now: commands.kv_get(now, "ns", "k"))  # the term's first entry applied
            for task in list(leader._tasks):  # so the proposal made on leader start exists
                await task
            idx = leader.node.status().commit
            for s in svcs.values():
                await s.node.wait_applied(idx, 10)
            assert all(s.sm.config_values()["electMasterMaxRetryCount"] == 7 for s in svcs.values())
            assert all(s.sm.config_values()["enableElectUncleanMaster"] is True for s in svcs.values())
            r = await leader.write(lambda now: commands.update_controller_config(now, {"electMasterMaxRetryCount": 1}))
            assert r.ok
            # A new leader does not put the file's value back.
            target = next(i for i in svcs if i != leader.id)
            await leader.node.transfer_leadership(target, 5)
            new = await leader_of(svcs)
            await new.read(lambda now: commands.kv_get(now, "ns", "k"))  # a barrier: the new term's entry applied
            for task in list(new._tasks):
                await task
            assert new.sm.config_values()["electMasterMaxRetryCount"] == 1

    run(body)


def test_stop_hands_leadership_over_first(tmp_path: Any) -> None:
    async def body() -> None:
        svcs = make(str(tmp_path))
        async with running(svcs):
            leader = await leader_of(svcs)
            await leader.write(lambda now: commands.kv_put(now, "ns", "k", "v"))
            await leader.stop()
            rest = {i: s for i, s in svcs.items() if s is not leader}
            new = await leader_of(rest)
            assert new is not leader
            r = await new.read(lambda now: commands.kv_get(now, "ns", "k"))
            assert r.body == {"value": "v"}
            with pytest.raises(UnavailableError):
                await leader.write(lambda now: commands.kv_put(now, "ns", "k", "w"))

    run(body)


def test_a_write_without_a_quorum_is_503_with_unknown_outcome(tmp_path: Any) -> None:
    async def body() -> None:
        svcs = make(str(tmp_path))
        async with running(svcs):
            leader = await leader_of(svcs)
            for s in svcs.values():
                if s is not leader:
                    await s.node.stop()
            with pytest.raises((UnavailableError, NotLeaderError)):
                await leader.write(lambda now: commands.kv_put(now, "ns", "k", "v"))

    run(body)


def test_status_documents_use_the_http_api_field_names(tmp_path: Any) -> None:
    async def body() -> None:
        async with running(make(str(tmp_path))) as svcs:
            leader = await leader_of(svcs)
            await leader.write(lambda now: commands.kv_put(now, "ns", "k", "v"))
            st = documents.raft_status(leader)
            for k in (
                "nodeId",
                "role",
                "term",
                "leaderId",
                "commitIndex",
                "appliedIndex",
                "firstLogIndex",
                "lastLogIndex",
                "lastSnapshotIndex",
                "lastSnapshotTerm",
                "peers",
            ):
                assert k in st
            assert st["leaderId"] == leader.id and st["role"] == "leader"
            peers = documents.raft_peers(leader)
            assert peers["leaderId"] == leader.id and peers["lastLogIndex"] == st["lastLogIndex"]
            rows = peers["peers"]
            assert {r["id"] for r in rows} == set(svcs)
            assert [r["role"] for r in rows].count("leader") == 1
            for r in rows:
                assert r["lagEntries"] >= 0 and r["matchIndex"] >= 0
            md = leader.metadata()
            assert md["isLeader"] and md["controllerLeaderId"] == leader.id
            assert md["peers"].count(";") == 3
            assert all(ok for _, ok, _ in leader.readiness())
            assert C.code_name(0) == "SUCCESS"

    run(body)


def test_deadlines_expire_waiting_proposals_in_order_and_leave_answered_ones_alone() -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        d = Deadlines(0.05)
        answered, waiting, late = loop.create_future(), loop.create_future(), loop.create_future()
        d.watch(answered)
        d.watch(waiting)
        answered.set_result("applied")
        with pytest.raises(CommitTimeout):
            await waiting  # resolved by the timer, not by a sleep
        assert answered.result() == "applied" and len(d) == 0 and d._timer is None  # no timer while idle
        d.watch(late)  # a new proposal re-arms the timer
        with pytest.raises(CommitTimeout):
            await late
        d.close()

    run(body)


def _leader_of(hint: str) -> tuple[str, str | None]:
    lid = hint or "n2"
    return lid, f"http-{lid}"


@pytest.mark.parametrize(
    ("error", "kind", "expect"),
    [
        (RaftException(RaftError.EPERM, "not leader", "n3"), {}, ("NotLeaderError", "n3")),
        (RaftException(RaftError.EPERM, "not leader"), {"admin": True}, ("NotLeaderError", "n2")),  # no hint: asked
        (RaftException(RaftError.ELEADERCHANGED, "lost"), {"read": True}, ("NotLeaderError", "n2")),
        (RaftException(RaftError.ELEADERCHANGED, "lost"), {}, ("UnavailableError", None)),  # a write: outcome unknown
        (RaftException(RaftError.EBUSY, "transferring"), {}, ("UnavailableError", None)),  # overload: retry
        (RaftException(RaftError.EBUSY, "conf change"), {"admin": True}, ("RefusedError", "REFUSED")),
        (RaftException(RaftError.EINVAL, "not a voter"), {"admin": True}, ("RefusedError", "REFUSED")),
        (ConfChangeError("cannot remove the last voter"), {"admin": True}, ("RefusedError", "REFUSED")),
        (RaftException(RaftError.EIO, "disk"), {"admin": True}, ("UnavailableError", None)),
        (LogCorruptionError("wal/1.log", 40, "bad crc"), {"admin": True}, ("UnavailableError", None)),  # no code
    ],
)
def test_one_mapping_from_raft_errors_to_service_errors(error: Any, kind: dict[str, bool], expect: Any) -> None:
    out = outcome_of(error, _leader_of, **kind)
    name, detail = expect
    assert type(out).__name__ == name
    if isinstance(out, NotLeaderError):
        assert (out.leader_id, out.leader_address) == (detail, f"http-{detail}")
    elif isinstance(out, RefusedError):
        assert out.error == detail and out.message == str(error)
    else:
        assert str(out) == str(error)


def test_a_new_leader_does_not_expire_a_broker_for_the_failovers_gap(tmp_path: Any) -> None:
    """Issue 24 item 4 (KAFKA-18138). Broker X (b1/1, the master) last beat at t0, to the old leader, which
    then dies; the new leader takes over at t0 + 3000, and X reaches it only at t0 + 6500 (a broker heartbeats
    to the controllers its own scan lists, apache/rocketmq #10812), while W (b2/1) reaches it at once. X's
    heartbeat timeout is 4000: by its last heartbeat X is dead from t0 + 4000 on, but it reached the new
    leader within one timeout of the takeover, so no scan may expire it. Y (b1/2) and V (b2/2, timeout 1000)
    really stopped at t0: each is still expired, one of its timeouts after the takeover."""
    clock = Clock()
    t0 = clock.t

    async def body() -> None:
        svcs = make(str(tmp_path), clock=clock, scan_wait_ms=1000)
        async with running(svcs):
            old = await leader_of(svcs)
            await register(old, "b1", [1, 2])
            await register(old, "b2", [1, 2])
            for name, b, timeout in (("b1", 1, 4000), ("b1", 2, 4000), ("b2", 1, 4000), ("b2", 2, 1000)):
                assert (await old.write(hb(name, b, timeout_ms=timeout))).ok
            old.heartbeat_received()
            r = await old.write(lambda now: commands.elect_master(now, "b1", cluster_name="c1", broker_id=1))
            assert r.header is not None, r
            h = r.header
            r = await old.write(
                lambda now: commands.alter_sync_state_set(
                    now, "b1", 1, h["masterEpoch"], [1, 2], h["syncStateSetEpoch"]
                )
            )
            assert r.ok, r
            assert (await old.write(lambda now: commands.elect_master(now, "b2", cluster_name="c1", broker_id=1))).ok
            epochs = (old.sm.sync.sets["b1"].master_epoch, old.sm.sync.sets["b1"].sync_state_set_epoch)

            clock.t = t0 + 3_000  # the old leader dies; the election and the takeover happen at t0 + 3000
            await old.stop(transfer=False)
            rest = {i: s for i, s in svcs.items() if s is not old}
            new = await leader_of(rest)
            await new.read(lambda now: commands.kv_get(now, "ns", "k"))  # a barrier: the term's first entry applied
            assert new.leader_since_ms == t0 + 3_000
            assert (await new.write(hb("b2", 1, timeout_ms=4000))).ok  # W reaches the new leader at once
            new.heartbeat_received()

            clock.t = t0 + 4_000  # V is past its timeout by its last heartbeat, not by the takeover
            assert (await new.write(hb("b2", 1, timeout_ms=4000))).ok
            assert new.sm.scan_needed(clock.t)  # judged on heartbeats alone, V would be expired now
            assert not new.scan_due(clock.t)
            assert await new.scan_once() is None  # nothing proposed

            clock.t = t0 + 5_000  # X and Y are past their timeout by their last heartbeat; V by the takeover too
            assert (await new.write(hb("b2", 1, timeout_ms=4000))).ok
            assert new.scan_due(clock.t)
            scan = await new.scan_once()  # the new leader's first scan: V only
            assert scan is not None and scan.ok and scan.body["aliveSinceMillis"] == t0 + 3_000
            assert scan.body["inactiveBrokers"] == [{"clusterName": "c1", "brokerName": "b2", "brokerId": 2}]
            assert scan.body["elections"] == []
            assert not new.scan_due(clock.t)

            clock.t = t0 + 6_500  # X reaches the new leader, within its timeout of the takeover
            assert (await new.write(hb("b1", 1, timeout_ms=4000))).ok
            assert (await new.write(hb("b2", 1, timeout_ms=4000))).ok
            clock.t = t0 + 7_000
            assert not new.scan_due(clock.t)  # takeover + Y's timeout: not past it yet

            clock.t = t0 + 7_001
            assert (await new.write(hb("b2", 1, timeout_ms=4000))).ok
            assert new.scan_due(clock.t)
            scan = await new.scan_once()
            assert scan is not None and scan.ok
            assert scan.body["inactiveBrokers"] == [{"clusterName": "c1", "brokerName": "b1", "brokerId": 2}]
            assert scan.body["elections"] == []  # X, the master, alive all along: nobody re-elected
            idx = new.node.status().commit
            for s in rest.values():
                await s.node.wait_applied(idx, 10)
                state = s.sm.sync.sets["b1"]
                assert (state.master_broker_id, state.master_epoch, state.sync_state_set_epoch) == (1, *epochs)
                assert s.sm.live.is_alive("c1", "b1", 1, clock.t)
            assert await new.scan_once() is None

    run(body)

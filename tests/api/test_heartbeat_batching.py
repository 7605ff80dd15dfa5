"""The leader's heartbeats, one entry per loop turn (api/service/controller.py, `_propose_heartbeat`): from feature
level 2 the heartbeats proposed in one loop turn become one BROKER_HEARTBEATS (1202) entry, each caller answered
with its outcome; a request proposed after them in the same turn commits after them; below level 2, or while an
alarm is raised, each heartbeat is its own 1018 as before. On a real 3-node group."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest

from api.remoting import headers as H
from api.service import requests as Q
from api.service.errors import CommandArgumentError, NotLeaderError
from raft.status import RaftError, RaftException
from statemachine import codes as C
from statemachine.result import Result
from tests.api.harness import Node, group

pytestmark = pytest.mark.anyio


def beat(broker_id: int, name: str = "b") -> Q.BrokerHeartbeat:
    return Q.of(
        Q.BrokerHeartbeat,
        {"clusterName": "c", "brokerName": name, "brokerAddr": f"10.0.0.{broker_id}:10911", "brokerId": broker_id},
    )


def recording(node: Node) -> list[list]:
    """Every command the node proposes from now on, decoded, in order."""
    seen: list[list] = []
    apply: Callable[[bytes], asyncio.Future] = node.service.node.apply

    def spy(data: bytes) -> asyncio.Future:
        seen.append(msgpack.unpackb(data))
        return apply(data)

    node.service.node.apply = spy  # type: ignore[method-assign]
    return seen


async def settle_all(nodes: list[Node], leader: Node) -> None:
    index = leader.last_index()
    for n in nodes:
        await n.service.node.wait_applied(index, 10)


async def test_one_turns_heartbeats_are_one_entry_and_a_later_request_commits_after_them(tmp_path: Path) -> None:
    async with group(tmp_path) as nodes:
        leader = next(n for n in nodes if n.service.is_leader())
        assert (await leader.service.raise_feature_level()).ok and leader.service.sm.features.level == 2
        seen = recording(leader)
        futures = [leader.service.propose(beat(i)) for i in range(1, 6)]  # one loop turn
        applied = leader.service.propose(
            Q.of(
                Q.ApplyBrokerId,
                {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "x:1;1"},
            )
        )
        results = [await f for f in futures]  # type: ignore[misc]
        assert all(r.code == C.SUCCESS and r.remark == "Heart beat success" for r in results)
        assert (await applied).ok  # type: ignore[misc]
        assert [c[1] for c in seen] == [C.BROKER_HEARTBEATS, C.APPLY_BROKER_ID]
        assert [h[3] for h in seen[0][3]] == [1, 2, 3, 4, 5]  # in the order they came
        await settle_all(nodes, leader)
        for n in nodes:
            assert sorted(k[2] for k in n.service.sm.live.table) == [1, 2, 3, 4, 5]
            assert {r[4] for r in n.service.sm.live.table.values()} == {seen[0][2]}  # the entry's time

        seen.clear()  # a lone heartbeat in its turn stays a 1018, byte for byte what it was before
        lone = leader.service.propose(beat(1))
        assert isinstance(lone, asyncio.Future) and (await lone).ok
        assert [c[1] for c in seen] == [C.BROKER_HEARTBEAT]

        # a bad field is refused before anything is queued; a follower refuses at once (2007)
        with pytest.raises(CommandArgumentError) as bad:
            leader.service.propose(dataclasses.replace(beat(1), brokerId=1 << 64))
        assert bad.value.field == "brokerId"
        follower = next(n for n in nodes if n is not leader)
        with pytest.raises(NotLeaderError):
            follower.service.propose(beat(7))


async def test_a_front_ends_callbacks_get_the_entry_in_order_beside_futures_and_one_that_raises_stops_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`propose_heartbeat`: the remoting listener's heartbeats wait with a callback, not a future of their own; each
    is called with the entry once it is done, in the order they came, whether the entry committed or its
    proposal failed, and a callback that raises is logged while the rest are still called."""
    async with group(tmp_path) as nodes:
        leader = next(n for n in nodes if n.service.is_leader())
        assert (await leader.service.raise_feature_level()).ok and leader.service.sm.features.level == 2
        seen = recording(leader)
        calls: list[tuple[int, object]] = []

        def waiter(k: int) -> Callable[[asyncio.Future[Result]], None]:
            def done(entry: asyncio.Future[Result]) -> None:
                calls.append((k, entry.exception() or entry.result().code))
                if k == 2:
                    raise RuntimeError("a front end's bug")

            return done

        def item(k: int) -> list[str | int]:
            fields = {"clusterName": "c", "brokerName": "b", "brokerAddr": f"10.0.0.{k}:10911", "brokerId": str(k)}
            got = H.heartbeat_item(fields)
            assert got is not None
            return got

        for k in (1, 2):
            assert leader.service.propose_heartbeat(item(k), waiter(k))
        fut = leader.service.propose(beat(3))  # a future in the same turn, between two callbacks
        assert leader.service.propose_heartbeat(item(4), waiter(4))
        assert isinstance(fut, asyncio.Future) and (await fut).ok
        assert calls == [(1, C.SUCCESS), (2, C.SUCCESS), (4, C.SUCCESS)]  # all called before the future's waiter woke
        assert [c[1] for c in seen] == [C.BROKER_HEARTBEATS] and [h[3] for h in seen[0][3]] == [1, 2, 3, 4]
        assert "a heartbeat's front end failed" in caplog.text

        # the proposal itself refused: every waiter gets the error a lone proposal would have raised
        calls.clear()
        busy = RaftException(RaftError.EBUSY, "too many uncommitted entries")

        def refuse(data: bytes) -> asyncio.Future[Result]:
            raise busy

        leader.service.node.apply = refuse  # type: ignore[method-assign]
        assert leader.service.propose_heartbeat(item(1), waiter(1))
        fut = leader.service.propose(beat(3))  # the same turn: one entry for both, refused
        with pytest.raises(RaftException):
            await fut  # type: ignore[misc]
        assert calls == [(1, busy)]


async def test_below_level_2_and_under_an_alarm_each_heartbeat_is_its_own_entry(tmp_path: Path) -> None:
    async with group(tmp_path, feature_level_auto=False) as nodes:
        leader = next(n for n in nodes if n.service.is_leader())
        assert leader.service.sm.features.level == 0
        seen = recording(leader)
        for f in [leader.service.propose(beat(i)) for i in (1, 2)]:
            assert (await f).ok  # type: ignore[misc]
        assert [c[1] for c in seen] == [C.BROKER_HEARTBEAT] * 2

        assert (await leader.service.raise_feature_level()).ok and leader.service.sm.features.level == 2
        assert (await leader.service.raise_alarm("NOSPACE", "store full")).ok
        seen.clear()
        known, unknown = leader.service.propose(beat(1)), leader.service.propose(beat(3))
        assert (await known).ok  # type: ignore[misc]
        assert unknown.code == C.SYSTEM_ERROR and "NOSPACE" in (unknown.remark or "")  # type: ignore[union-attr]
        assert [c[1] for c in seen] == [C.BROKER_HEARTBEAT]

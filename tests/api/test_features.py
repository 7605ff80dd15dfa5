"""The group's feature level through the service and HTTP: raised only once every member reads it (a member
of a release without feature levels, or one that does not answer, holds it back, named in the refusal), never
by a follower, and alarms wait for it; a committed level above this release's stops the node naming both
levels and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from raft.testing.cluster import free_ports
from statemachine import codes as C
from statemachine import commands
from statemachine.features import MAX_LEVEL
from tests.api.harness import GROUP_RAFT, Node, build, features_via, group, running, service_options, settled, solo
from tests.raft.helpers import eventually

pytestmark = pytest.mark.anyio


def levels(nodes: list[Node]) -> list[int]:
    return [n.service.sm.features.level for n in nodes]


async def test_a_member_that_reads_less_holds_the_level_and_the_alarms_back(tmp_path: Path) -> None:
    async with group(tmp_path) as nodes:
        leader = next(n for n in nodes if n.service.is_leader())
        old, other = [n for n in nodes if n is not leader]
        real = features_via(nodes)

        async def mixed(peer: str) -> int | None:  # `old` runs v0.3.0: its /api/v1/raft/features is a 404
            return 0 if peer == old.id else await real(peer)

        leader.service.peer_features = mixed
        doc = (await old.ok("GET", "/api/v1/raft/features", token=True))["body"]
        assert doc["level"] == 0 and doc["maxLevel"] == MAX_LEVEL and doc["nodeId"] == old.id

        env = await leader.ok("POST", "/api/v1/raft/features", token=True, json={}, code=C.CONTROLLER_INVALID_REQUEST)
        assert f"feature level {MAX_LEVEL} not raised: {old.id} reads 0" in env["remark"]
        r = await leader.service.raise_alarm("NOSPACE", "store full")
        assert r.code == C.CONTROLLER_INVALID_REQUEST and f"{old.id} reads 0" in (r.remark or "")
        assert "needs feature level 1 and the group is at 0" in (r.remark or "")

        async def silent(peer: str) -> int | None:
            return None if peer == other.id else await real(peer)

        leader.service.peer_features = silent
        env = await leader.ok("POST", "/api/v1/raft/features", token=True, json={}, code=C.CONTROLLER_INVALID_REQUEST)
        assert f"no feature level from {other.id}" in env["remark"]
        index = leader.last_index()
        for n in nodes:
            await n.service.node.wait_applied(index, 10)
        assert levels(nodes) == [0, 0, 0] and all(n.service.sm.alarms.table == {} for n in nodes)

        # Every member reads level 1 now: the first alarm raises the level on its way (controllerFeatureLevelAuto).
        leader.service.peer_features = real
        r = await leader.service.raise_alarm("NOSPACE", "store full")
        assert r.code == C.SUCCESS, r
        index = leader.last_index()
        for n in nodes:
            await n.service.node.wait_applied(index, 10)
        assert levels(nodes) == [1, 1, 1]
        assert all(n.service.sm.alarms.raised("NOSPACE") for n in nodes)
        env = await leader.ok("POST", "/api/v1/raft/features", token=True, json={})  # NOSPACE lets the level through
        assert env["body"]["raised"] is True and env["body"]["level"] == MAX_LEVEL
        env = await leader.ok("POST", "/api/v1/raft/features", token=True, json={})
        assert env["body"]["raised"] is False and env["body"]["level"] == MAX_LEVEL  # already there: nothing proposed


async def test_with_auto_off_only_the_operator_raises_it(tmp_path: Path) -> None:
    async with group(tmp_path, feature_level_auto=False) as nodes:
        leader = next(n for n in nodes if n.service.is_leader())
        follower = next(n for n in nodes if n is not leader)
        r = await leader.service.raise_alarm("NOSPACE", "store full")
        assert r.code == C.CONTROLLER_INVALID_REQUEST and "controllerFeatureLevelAuto=false" in (r.remark or "")
        env = await follower.ok("POST", "/api/v1/raft/features", token=True, json={}, code=C.CONTROLLER_NOT_LEADER)
        assert levels(nodes) == [0, 0, 0], env
        env = await leader.ok("POST", "/api/v1/raft/features", token=True, json={"level": 1})
        assert env["body"]["raised"] is True and env["body"]["level"] == 1
        assert (await leader.service.raise_alarm("NOSPACE", "store full")).code == C.SUCCESS


async def test_a_committed_level_above_this_release_stops_the_node(tmp_path: Path) -> None:
    async with solo(tmp_path) as node:
        with pytest.raises(Exception):  # noqa: B017, PT011 - the node stops under the write: whatever it raises
            await node.service.write(lambda now: commands.feature_level(now, MAX_LEVEL + 1), "CONTROLLER_FEATURE_LEVEL")
        error = node.service.node_status().error or ""
        assert (
            "FeatureLevelError" in error and f"the group's feature level is {MAX_LEVEL + 1}, above {MAX_LEVEL}" in error
        )
        assert "entry " in error and node.service.sm.features.level == 0


async def test_the_leader_raises_the_level_by_itself_once_every_member_reads_it(tmp_path: Path) -> None:
    """controllerFeatureLevelAuto: the leader's periodic check raises the level to the highest every member
    reads, and leaves it while one member (v0.3.0) reads less."""
    ports = free_ports(3)
    nodes = [
        build(service_options(tmp_path, ports, i, GROUP_RAFT, first_scan_delay_ms=0, feature_check_interval_ms=100))
        for i in range(3)
    ]
    real = features_via(nodes)
    old_id = ""  # the first member the leader asks runs v0.3.0 until `upgraded` (its features route: a 404)
    upgraded = False
    asked = 0

    async def fetch(peer: str) -> int | None:
        nonlocal asked, old_id
        asked += 1
        old_id = old_id or peer
        return 0 if peer == old_id and not upgraded else await real(peer)

    for n in nodes:
        n.service.peer_features = fetch
    async with running(nodes):
        await settled(nodes)
        await eventually(lambda: asked >= 6, timeout=10)  # three rounds of the leader's check (two peers each)
        assert levels(nodes) == [0, 0, 0]
        upgraded = True
        await eventually(lambda: levels(nodes) == [MAX_LEVEL] * 3, timeout=10)

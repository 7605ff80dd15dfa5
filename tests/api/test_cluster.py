"""Three nodes in one event loop: 2007 from followers, raft status and operations, membership, and 503 when
a commit cannot happen."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from api.http import models as M
from api.service import RefusedError, choose_transferee
from raft.core import ConfState, CoreStatus, PeerProgress, Role
from raft.core.progress import ProgressState
from raft.options import RaftOptions
from statemachine import codes as C
from tests.api.harness import Node, group, http_address, joiner, running, scrape, settled, value

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def trio(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[list[Node]]:
    async with group(tmp_path_factory.mktemp("trio")) as nodes:
        yield nodes


async def until(node: Node, cond: Callable[[], bool], timeout: float = 10) -> None:
    """Wait until cond() holds, re-checked after each of the node's processing rounds (no polling)."""
    await asyncio.wait_for(node.service.node._wait_for(cond), timeout)


async def caught_up(nodes: list[Node]) -> Node:
    """The leader, once it has heard every follower acknowledge its whole log."""
    leader = await settled(nodes)
    st = leader.service.node.status

    def done() -> bool:
        s = st()
        return all(p.match == s.last_index and p.contact_ticks >= 0 for p in s.progress.values())

    await until(leader, done)
    return leader


WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    (
        "POST",
        "/api/v1/controller/heartbeat",
        {"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1", "brokerId": 1},
    ),
    (
        "POST",
        "/api/v1/controller/apply-broker-id",
        {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "a:1;1"},
    ),
    ("POST", "/api/v1/controller/elect-master", {"brokerName": "b"}),
    ("POST", "/api/v1/admin/elect-master", {"clusterName": "c", "brokerName": "b", "brokerId": 1}),
    ("PUT", "/api/v1/admin/config", {"electMasterMaxRetryCount": "4"}),
    ("PUT", "/api/v1/kv/ns/k", {"value": "v"}),
    ("POST", "/api/v1/kv/ns/k/cas", {"expect": None, "value": "v"}),
    ("POST", "/api/v1/controller/replica-info", {"brokerName": "b"}),
    ("POST", "/api/v1/controller/next-broker-id", {"clusterName": "c", "brokerName": "b"}),
    ("POST", "/api/v1/admin/sync-state-data", {"brokerNames": ["b"]}),
    ("GET", "/api/v1/admin/broker-sets?clusterName=c", None),
    ("POST", "/api/v1/raft/transfer-leader", {}),
    ("POST", "/api/v1/raft/peers", {"id": "127.0.0.1:1"}),
]


async def test_followers_answer_2007_naming_the_leader(trio: list[Node]) -> None:
    leader = await settled(trio)
    for follower in (n for n in trio if n is not leader):
        before = (follower.last_index(), leader.last_index())
        for method, path, body in [
            *WRITES,
            ("GET", "/api/v1/kv/ns/k", None),
            ("DELETE", "/api/v1/kv/ns/k", None),
            ("DELETE", f"/api/v1/raft/peers/{quote(leader.id)}", None),
        ]:
            env = await follower.ok(
                method, path, token=True, code=C.CONTROLLER_NOT_LEADER, **({"json": body} if body is not None else {})
            )
            assert env["codeName"] == "CONTROLLER_NOT_LEADER"
            assert env["remark"] == "The controller is not in leader state", path
            assert env["header"] == {
                "controllerLeaderId": leader.id,
                "controllerLeaderAddress": http_address(leader.id),
            }, path
        assert (follower.last_index(), leader.last_index()) == before


async def test_status_peers_and_metadata_on_every_node(trio: list[Node]) -> None:
    leader = await caught_up(trio)
    for n in trio:
        env = await n.ok("GET", "/api/v1/controller/metadata")
        assert env["header"]["controllerLeaderId"] == leader.id and env["header"]["isLeader"] == (n is leader)
        assert env["header"]["peers"] == "".join(f"{http_address(i)};" for i in sorted(x.id for x in trio))
        status = M.RaftStatusAnswer.model_validate(await n.ok("GET", "/api/v1/raft/status", token=True)).body
        assert status is not None and status.leaderId == leader.id and status.nodeId == n.id
        assert status.role == ("leader" if n is leader else "follower")
        assert sorted(p.id for p in status.peers) == sorted(x.id for x in trio)
        assert all(p.voter and p.httpAddress == http_address(p.id) for p in status.peers)
        peers = M.RaftPeersAnswer.model_validate(await n.ok("GET", "/api/v1/raft/peers", token=True)).body
        assert peers is not None and len(peers.peers) == 3
        if n is leader:
            assert all(p.matchIndex == peers.lastLogIndex and p.lagEntries == 0 for p in peers.peers)
            assert sorted(p.role for p in peers.peers) == ["follower", "follower", "leader"]
        else:
            assert all(p.matchIndex is None for p in peers.peers)
        samples = await scrape(n)
        assert value(samples, "role") == (3 if n is leader else 2)
    samples = await scrape(leader)
    for n in trio:
        if n is not leader:
            assert value(samples, "controllerd_raft_follower_lag_entries", peer=n.id) == 0
            assert value(samples, "controllerd_raft_follower_last_contact_seconds", peer=n.id) >= 0


async def test_writes_on_the_leader_reach_every_node(trio: list[Node]) -> None:
    leader = await settled(trio)
    await leader.ok("PUT", "/api/v1/kv/trio/k", json={"value": "replicated"})
    index = leader.last_index()
    for n in trio:
        await n.service.node.wait_applied(index, 10)
        assert n.service.sm.kv.get_value("trio", "k") == "replicated"


async def test_transfer_leadership_and_back(trio: list[Node]) -> None:
    first = await caught_up(trio)
    env = await first.ok("POST", "/api/v1/raft/transfer-leader", token=True, json={})
    body = M.TransferLeaderAnswer.model_validate(env).body
    assert body is not None and body.previousLeaderId == first.id and body.leaderId != first.id
    assert body.targetLagEntries <= 100
    second = await caught_up(trio)
    assert second.id == body.leaderId
    # Refusals are 409 and change nothing.
    for to, says in [(second.id, "already leads"), ("10.9.9.9:1", "is not a voter")]:
        r = await second.call("POST", "/api/v1/raft/transfer-leader", token=True, json={"to": to})
        assert r.status_code == 409 and says in r.json()["message"], r.text
    env = await second.ok("POST", "/api/v1/raft/transfer-leader", token=True, json={"to": first.id, "maxLagEntries": 0})
    assert env["body"]["leaderId"] == first.id
    assert (await caught_up(trio)).id == first.id


async def test_add_and_remove_a_peer(trio: list[Node], tmp_path: Path) -> None:
    leader = await caught_up(trio)
    new = joiner(tmp_path, trio)
    async with running([new]):
        env = await leader.ok(
            "POST", "/api/v1/raft/peers", token=True, json={"id": new.id, "httpAddress": http_address(new.id)}
        )
        body = M.MembershipAnswer.model_validate(env).body
        assert body is not None and new.id in body.voters and body.learners == []
        assert await new.service.node.wait_for_leader(10) == leader.id
        status = (await leader.ok("GET", "/api/v1/raft/status", token=True))["body"]
        # Added without remotingAddress: none is known for it (test_remoting adds one with it).
        peer = {
            "id": new.id,
            "raftAddress": new.id,
            "httpAddress": http_address(new.id),
            "remotingAddress": None,
            "voter": True,
        }
        assert peer in status["peers"]
        # Issue 12, bug 5: the followers' configuration never named it; they learn both addresses from the log.
        for n in trio:

            def knows_new(n: Node = n) -> bool:
                return new.id in n.service.node.status().voters

            await until(n, knows_new)
            status = (await n.ok("GET", "/api/v1/raft/status", token=True))["body"]
            assert peer in status["peers"], n.id
            rows = (await n.ok("GET", "/api/v1/raft/peers", token=True))["body"]["peers"]
            row = next(p for p in rows if p["id"] == new.id)
            assert (row["raftAddress"], row["httpAddress"]) == (new.id, http_address(new.id)), n.id
            meta = (await n.ok("GET", "/api/v1/controller/metadata"))["header"]
            assert f"{http_address(new.id)};" in meta["peers"], n.id
        r = await leader.call("POST", "/api/v1/raft/peers", token=True, json={"id": new.id})
        assert r.status_code == 409 and r.json()["error"] == "PEER_EXISTS"
        r = await leader.call(
            "POST", "/api/v1/raft/peers", token=True, json={"id": "127.0.0.1:1", "remotingAddress": "nowhere"}
        )
        assert (
            r.status_code == 422
            and "remotingAddress" in r.text
            and "127.0.0.1:1" not in str(leader.service.node.status().learners)
        )
        env = await leader.ok("DELETE", f"/api/v1/raft/peers/{quote(new.id, safe='')}", token=True)
        assert new.id not in env["body"]["voters"]
        r = await leader.call("DELETE", f"/api/v1/raft/peers/{quote(new.id, safe='')}", token=True)
        assert r.status_code == 404 and r.json()["error"] == "PEER_NOT_FOUND"
    assert sorted(leader.service.node.status().voters) == sorted(n.id for n in trio)


async def test_a_commit_that_cannot_happen_is_503(tmp_path: Path) -> None:
    """A leader whose followers are gone (CheckQuorum off, so it keeps leading): the proposal times out."""
    raft = RaftOptions(election_timeout_ms=300, check_quorum=False)
    async with group(tmp_path, raft=raft, request_timeout_s=0.3) as nodes:
        leader = await caught_up(nodes)
        for n in nodes:
            if n is not leader:
                await n.service.stop(transfer=False)
        before_metrics = await scrape(leader)
        before = leader.last_index()
        r = await leader.call("PUT", "/api/v1/kv/ns/lost", json={"value": "v"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert r.json()["error"] == "UNAVAILABLE" and "outcome unknown" in r.json()["message"]
        assert leader.last_index() == before + 1  # proposed: it may still commit
        r = await leader.call("GET", "/api/v1/kv/ns/lost")
        assert r.status_code == 503 and r.json()["error"] == "UNAVAILABLE"
        after_metrics = await scrape(leader)
        timeouts = [
            value(m, "request_total", request_type="PUT_KV_CONFIG", request_handle_status="timeout")
            for m in (before_metrics, after_metrics)
        ]
        assert timeouts[1] - timeouts[0] == 1
        # A follower that stopped answering (and lags) is refused as a transfer target.
        gone = next(n for n in nodes if n is not leader)
        r = await leader.call(
            "POST", "/api/v1/raft/transfer-leader", token=True, json={"to": gone.id, "maxLagEntries": 0}
        )
        assert r.status_code == 409 and "not transferring" in r.json()["message"], r.text
        assert leader.service.node.is_leader()


def status(last: int, peers: dict[str, tuple[int, int]], me: str = "a") -> CoreStatus:
    """A leader's status with (match, contact_ticks) per peer."""
    progress = {p: PeerProgress(m, m + 1, last - m, ProgressState.REPLICATE, False, c) for p, (m, c) in peers.items()}
    return CoreStatus(
        id=me,
        role=Role.LEADER,
        term=1,
        leader=me,
        vote=me,
        commit=last,
        applied=last,
        first_index=1,
        last_index=last,
        conf=ConfState(tuple(sorted(peers))),
        progress=progress,
    )


@pytest.mark.parametrize(
    ("peers", "to", "max_lag", "expect"),
    [
        ({"a": (10, 0), "b": (10, 1), "c": (9, 1)}, None, 100, ("b", 0)),  # most caught up
        ({"a": (10, 0), "b": (8, 1), "c": (9, 1)}, None, 100, ("c", 1)),
        ({"a": (10, 0), "b": (10, 30), "c": (9, 1)}, None, 100, ("c", 1)),  # b is silent: skipped
        ({"a": (10, 0), "b": (10, 1), "c": (9, 1)}, "c", 1, ("c", 1)),
        ({"a": (10, 0), "b": (10, 1), "c": (9, 1)}, "c", 0, "lags by 1 entries"),
        ({"a": (10, 0), "b": (10, 1), "c": (9, -1)}, "c", 100, "has not answered"),
        ({"a": (10, 0), "b": (10, 25), "c": (9, -1)}, None, 100, "any other voter has not answered"),
        ({"a": (10, 0)}, None, 100, "no other voter"),
        ({"a": (10, 0), "b": (10, 1)}, "a", 100, "already leads"),
        ({"a": (10, 0), "b": (10, 1)}, "z", 100, "not a voter"),
    ],
)
def test_choose_transferee(peers: dict[str, tuple[int, int]], to: str | None, max_lag: int, expect: Any) -> None:
    st = status(10, peers)
    if isinstance(expect, tuple):
        assert choose_transferee(st, to, max_lag, 20) == expect
    else:
        with pytest.raises(RefusedError) as e:
            choose_transferee(st, to, max_lag, 20)
        assert e.value.error == "REFUSED" and expect in e.value.message

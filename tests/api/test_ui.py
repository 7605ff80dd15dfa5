"""The status page's routes on one node (api/http/ui): static files without a token, the JSON reads behind the
admin token when one is configured, the broker sets with heartbeats, and the event ring's elections with
their reasons. The page in a real browser against a real cluster: tests/daemon/test_demo.py."""

from __future__ import annotations

import pytest

from api.http.ui import Events, merge_events
from raft.core import ConfState, CoreStatus, Role
from statemachine import codes as C
from statemachine.result import Result
from tests.api.harness import Node, group, settled

pytestmark = pytest.mark.anyio
API = "/api/v1/controller"


async def test_the_static_files_are_served_without_a_token(node: Node) -> None:
    r = await node.call("GET", "/ui")
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    page = await node.call("GET", "/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/ui/ui.js" defer></script>' in page.text
    assert "://" not in page.text  # nothing from elsewhere (no CDN)
    for name, kind in (("ui.js", "text/javascript"), ("ui.css", "text/css")):
        r = await node.call("GET", f"/ui/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind) and len(r.content) > 500
        assert "://" not in r.text
    assert (await node.call("GET", "/ui/secret.txt")).status_code == 404


async def test_the_state_needs_the_configured_token(node: Node) -> None:
    for path in ("/ui/api/state", "/ui/api/node"):
        r = await node.call("GET", path)
        assert r.status_code == 401, r.text
        assert (await node.call("GET", path, token=True)).status_code == 200


async def test_the_state_shows_nodes_broker_sets_with_heartbeats_and_the_election(node: Node) -> None:
    ids = {"clusterName": "ui-c", "brokerName": "ui-b"}
    await node.ok("POST", f"{API}/apply-broker-id", json={**ids, "appliedBrokerId": 1, "registerCheckCode": "h:1;1"})
    await node.ok("POST", f"{API}/register-broker", json={**ids, "brokerId": 1, "brokerAddress": "h:1"})
    await node.ok(
        "POST",
        f"{API}/heartbeat",
        json={**ids, "brokerAddr": "h:1", "brokerId": 1, "epoch": 1, "maxOffset": 4096, "heartbeatTimeoutMills": 60000},
    )
    await node.ok("POST", f"{API}/elect-master", json={**ids, "brokerId": 1})
    r = await node.call("GET", "/ui/api/state", token=True)
    state = r.json()
    assert state["view"] == "leader" and state["leaderId"] == node.id == state["servedBy"]
    [me] = state["nodes"]
    assert me["id"] == node.id and me["role"] == "leader" and me["health"] == "ready"
    assert me["appliedIndex"] == me["commitIndex"] > 0
    [ui_b] = [s for s in state["brokerSets"] if s["brokerName"] == "ui-b"]
    assert (ui_b["masterBrokerId"], ui_b["masterEpoch"], ui_b["clusterName"]) == (1, 1, "ui-c")
    [replica] = ui_b["replicas"]
    assert replica["master"] and replica["inSync"] and replica["alive"] and replica["maxOffset"] == 4096
    assert 0 <= replica["lastHeartbeatMsAgo"] < 60000
    assert any(
        e["text"] == "ui-b: broker 1 elected master at epoch 1" and "elect-master request" in e["reason"]
        for e in state["events"]
    )


async def test_a_nodes_row_shows_its_newest_snapshot_with_its_age(node: Node) -> None:
    taken = (await node.ok("POST", "/api/v1/raft/snapshot", token=True))["body"]
    assert taken["index"] > 0
    me = (await node.call("GET", "/ui/api/node", token=True)).json()
    assert me["snapshotIndex"] == taken["index"] and 0 <= me["snapshotAgeS"] < 60
    [row] = (await node.call("GET", "/ui/api/state", token=True)).json()["nodes"]
    assert (row["snapshotIndex"], row["lastLogIndex"] >= taken["index"]) == (taken["index"], True)


def test_a_scan_election_is_recorded_with_its_trigger_and_the_expired_brokers(node: Node) -> None:
    events = Events(node.service)
    body = {
        "inactiveBrokers": [{"clusterName": "c", "brokerName": "b", "brokerId": 1}],
        "elections": [
            {
                "brokerName": "b",
                "trigger": "masterExpired",
                "code": 0,
                "codeName": "SUCCESS",
                "masterBrokerId": 2,
                "masterEpoch": 3,
            },
            {
                "brokerName": "d",
                "trigger": "retry",
                "code": C.CONTROLLER_MASTER_NOT_AVAILABLE,
                "codeName": "CONTROLLER_MASTER_NOT_AVAILABLE",
                "masterBrokerId": None,
                "masterEpoch": 7,
            },
        ],
    }
    events.on_result("CHECK_NOT_ACTIVE_BROKER", Result(C.SUCCESS, body=body))
    said = [(e["text"], e["reason"]) for e in events.ring if e["kind"] == "broker-election"]
    assert said == [
        (
            "b: broker 2 elected master at epoch 3",
            "inactive-broker scan: the master's heartbeats expired (expired: broker 1)",
        ),
        (
            "d: no master elected (2004 CONTROLLER_MASTER_NOT_AVAILABLE), epoch 7",
            "inactive-broker scan: retry of a failed re-election",
        ),
    ]


def test_the_rings_of_several_nodes_merge_newest_first_with_each_raft_change_once() -> None:
    def ev(t: float, node: str, kind: str, text: str) -> dict:
        return {"t": t, "kind": kind, "node": node, "text": text, "reason": "r"}

    old_leader = [ev(1, "n1", "broker-election", "b: broker 1 elected master at epoch 1")]
    new_leader = [
        ev(5.0, "n2", "raft-leader", "n2 leads term 3"),
        ev(6, "n2", "broker-election", "b: broker 2 elected master at epoch 2"),
        ev(30, "n2", "membership", "n3 is a voter"),
    ]
    follower = [ev(5.2, "n3", "raft-leader", "n2 leads term 3"), ev(50, "n3", "membership", "n3 is a voter")]
    merged = [(e["t"], e["node"], e["text"]) for e in merge_events([new_leader, old_leader, follower])]
    assert merged == [
        (50, "n3", "n3 is a voter"),  # the same change again, 20 s later: listed again
        (30, "n2", "n3 is a voter"),
        (6, "n2", "b: broker 2 elected master at epoch 2"),
        (5.0, "n2", "n2 leads term 3"),  # seen by n2 and n3: once, as first recorded
        (1, "n1", "b: broker 1 elected master at epoch 1"),  # the former leader's election is kept
    ]


class FakeService:
    """What Events.sample reads: node_status() of a node whose leader and membership change."""

    id = "n1"
    started = True

    def __init__(self) -> None:
        self.status = status("n1", 2, ("n1", "n2"))
        self.listeners: list = []

    def node_status(self) -> CoreStatus:
        return self.status


def status(leader: str, term: int, voters: tuple[str, ...], learners: tuple[str, ...] = ()) -> CoreStatus:
    return CoreStatus(
        id="n1",
        role=Role.FOLLOWER,
        term=term,
        leader=leader,
        vote="",
        commit=0,
        applied=0,
        first_index=1,
        last_index=0,
        conf=ConfState(voters, learners),
    )


def test_raft_leader_and_membership_changes_are_recorded_with_the_previous_state() -> None:
    svc = FakeService()
    events = Events(svc)  # type: ignore[arg-type]
    events.sample()
    assert list(events.ring) == []  # the first look records nothing
    svc.status = status("", 3, ("n1", "n2"))  # an election running
    events.sample()
    svc.status = status("n2", 3, ("n1", "n2"), ("n3",))
    events.sample()
    svc.status = status("n2", 3, ("n2", "n3"))
    events.sample()
    said = [(e["kind"], e["text"], e["reason"]) for e in events.ring]
    assert said == [
        ("raft-leader", "n2 leads term 3", "leader was n1 (term 2)"),
        ("membership", "n3 joined as a learner", "added; catching up"),
        ("membership", "n3 is a voter", "promoted from learner"),
        ("membership", "n1 left the group", "removed"),
    ]


async def test_a_follower_that_cannot_reach_the_leader_says_it_shows_its_own_applied_state(tmp_path) -> None:
    # In-process nodes serve HTTP through ASGI only: their advertised HTTP addresses (127.0.0.2:port) refuse
    # connections, so the follower cannot fetch the leader's view and the leader cannot fetch the others'.
    async with group(tmp_path) as nodes:
        leader = await settled(nodes)
        follower = next(n for n in nodes if n is not leader)
        ids = {"clusterName": "ui-c", "brokerName": "ui-f"}
        await leader.ok(
            "POST", f"{API}/apply-broker-id", json={**ids, "appliedBrokerId": 1, "registerCheckCode": "h:1;1"}
        )
        await leader.ok("POST", f"{API}/register-broker", json={**ids, "brokerId": 1, "brokerAddress": "h:1"})
        applied = leader.service.node_status().applied
        await follower.service.node.wait_applied(applied, 10)
        state = (await follower.call("GET", "/ui/api/state", token=True)).json()
        assert state["view"] == "follower" and state["servedBy"] == follower.id and state["leaderId"] == leader.id
        assert f"the leader {leader.id} did not answer: this is {follower.id}'s own applied state" in state["note"]
        assert [n["id"] for n in state["nodes"]] == [follower.id]
        assert [s["brokerName"] for s in state["brokerSets"]] == ["ui-f"]
        on_leader = (await leader.call("GET", "/ui/api/state", token=True)).json()
        assert on_leader["view"] == "leader"
        rows = {n["id"]: n for n in on_leader["nodes"]}
        assert set(rows) == {n.id for n in nodes} and rows[leader.id]["role"] == "leader"
        assert all(
            rows[n.id]["health"] == "unreachable"
            and rows[n.id]["role"] == "follower"
            and rows[n.id]["lagEntries"] is not None
            for n in nodes
            if n is not leader
        )
        assert [s["brokerName"] for s in on_leader["brokerSets"]] == ["ui-f"]

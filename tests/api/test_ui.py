"""The status page's routes on one node (api/http/ui): static files without a token, the JSON reads behind the
admin token when one is configured, the broker sets with heartbeats, and the event ring's elections with
their reasons. The page in a real browser against a real cluster: tests/daemon/test_demo.py."""

from __future__ import annotations

import asyncio

import pytest

from api.http.ui import merge_events
from api.service.history import HISTORY_FILE, HISTORY_SIZE, History
from raft.testing.cluster import free_ports
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.result import Result
from tests.api.harness import SOLO_RAFT, Node, build, group, register, running, service_options, settled

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


async def test_the_state_shows_raised_alarms_until_disarmed(node: Node) -> None:
    assert (await node.call("GET", "/ui/api/state", token=True)).json()["alarms"] == []
    await node.ok(
        "POST", "/api/v1/alarms", token=True, json={"alarm": "NOSPACE", "memberId": node.id, "detail": "full"}
    )
    try:
        state = (await node.call("GET", "/ui/api/state", token=True)).json()
        [row] = state["alarms"]
        assert (row["alarm"], row["memberId"], row["detail"]) == ("NOSPACE", node.id, "full")
    finally:
        await node.ok("POST", "/api/v1/alarms/disarm", token=True, json={})
    assert (await node.call("GET", "/ui/api/state", token=True)).json()["alarms"] == []
    page = (await node.call("GET", "/ui/")).text
    assert '<table id="alarms">' in page and "renderAlarms(state.alarms)" in (await node.call("GET", "/ui/ui.js")).text


async def test_a_nodes_row_shows_its_newest_snapshot_with_its_age(node: Node) -> None:
    taken = (await node.ok("POST", "/api/v1/raft/snapshot", token=True))["body"]
    assert taken["index"] > 0
    me = (await node.call("GET", "/ui/api/node", token=True)).json()
    assert me["snapshotIndex"] == taken["index"] and 0 <= me["snapshotAgeS"] < 60
    [row] = (await node.call("GET", "/ui/api/state", token=True)).json()["nodes"]
    assert (row["snapshotIndex"], row["lastLogIndex"] >= taken["index"]) == (taken["index"], True)


def history(directory: str | None = None, size: int = HISTORY_SIZE) -> History:
    return History("127.0.0.1:1", directory, lambda p: {"127.0.0.1:1": "n1", "127.0.0.1:2": "n2"}.get(p, p), size)


def test_a_scan_election_is_recorded_with_its_trigger_and_the_expired_brokers() -> None:
    h = history()
    body = {
        "checkTimeMillis": 1_700_000_000_000,
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
                "trigger": "masterInactive",
                "code": C.CONTROLLER_MASTER_NOT_AVAILABLE,
                "codeName": "CONTROLLER_MASTER_NOT_AVAILABLE",
                "masterBrokerId": None,
                "masterEpoch": 7,
            },
        ],
    }
    h.on_applied(12, cmd.check_not_active_broker(1_700_000_000_000), Result(C.SUCCESS, body=body), 1_700_000_000_000)
    said = [(e["text"], e["reason"], e["level"], e["key"], e["t"]) for e in h.events]
    assert said == [
        (
            "b: broker 2 elected master at epoch 3",
            "inactive-broker scan: the master's heartbeats expired (expired: broker 1)",
            "change",
            "log:12:b",
            1_700_000_000.0,  # the leader's time stamped into the entry
        ),
        (
            "d: no master elected (2004 CONTROLLER_MASTER_NOT_AVAILABLE), epoch 7",
            "inactive-broker scan: the master is not alive while a replica is",
            "failure",
            "log:12:d",
            1_700_000_000.0,
        ),
    ]
    h.on_applied(12, cmd.check_not_active_broker(1), Result(C.SUCCESS, body=body), 1)  # replayed: not again
    assert len(h.events) == 2


def test_an_election_request_is_a_change_and_a_master_still_alive_a_plain_line() -> None:
    h = history()
    t = 1_700_000_000_000
    won = Result(C.SUCCESS, header={"masterBrokerId": 2, "masterEpoch": 4})
    h.on_applied(5, cmd.elect_master(t, "b", cluster_name="c", broker_id=2), won, t)
    still = Result(C.CONTROLLER_MASTER_STILL_EXIST, header={"masterBrokerId": 2, "masterEpoch": 4})
    h.on_applied(6, cmd.elect_master(t, "b", cluster_name="c", broker_id=3), still, t)
    h.on_applied(7, cmd.elect_master(t, "b", cluster_name="c", broker_id=3, designate_elect=True), won, t)
    h.on_applied(
        8, cmd.elect_master(t, "b", cluster_name="c", broker_id=3), Result(C.CONTROLLER_ELECT_MASTER_FAILED), t
    )  # no election
    said = [(e["level"], e["text"], e["reason"]) for e in h.events]
    assert said == [
        ("change", "b: broker 2 elected master at epoch 4", "elect-master request (broker 2 asked to be master)"),
        (
            "info",  # harmless (issue 23: it was shown in bold like a failure)
            "b: broker 2 is still master at epoch 4",
            "elect-master request (broker 3 asked to be master): 2011 CONTROLLER_MASTER_STILL_EXIST, nothing changed",
        ),
        ("change", "b: broker 2 elected master at epoch 4", "elect-master request (an admin designated broker 3)"),
    ]


def test_the_histories_of_several_nodes_merge_newest_first_with_each_event_once() -> None:
    def ev(t: float, node: str, kind: str, text: str, key: str | None = None) -> dict:
        return {"t": t, "kind": kind, "node": node, "text": text, "reason": "r", **({"key": key} if key else {})}

    elected_1 = "b: broker 1 elected master at epoch 1"
    elected_2 = "b: broker 2 elected master at epoch 2"
    n1 = [ev(1, "n1", "broker-election", elected_1, "log:3"), ev(6, "n1", "broker-election", elected_2, "log:9:b")]
    n2 = [
        ev(1, "n2", "broker-election", elected_1, "log:3"),  # every node applied it: the same key, the same time
        ev(5.0, "n2", "raft-leader", "n2 leads term 3", "term:3"),
        ev(6, "n2", "broker-election", elected_2, "log:9:b"),
        ev(30, "n2", "membership", "n3 is a voter"),
    ]
    n3 = [ev(5.2, "n3", "raft-leader", "n2 leads term 3", "term:3"), ev(50, "n3", "membership", "n3 is a voter")]
    merged = [(e["t"], e["node"], e["text"]) for e in merge_events([n2, n1, n3])]
    assert merged == [
        (50, "n3", "n3 is a voter"),  # the same membership change again, 20 s later: listed again
        (30, "n2", "n3 is a voter"),
        (6, "n2", elected_2),  # recorded by n1 and n2: once
        (5.0, "n2", "n2 leads term 3"),  # seen by n2 and n3: once, as first recorded
        (1, "n2", elected_1),
    ]


def test_raft_leader_and_membership_changes_are_recorded_with_the_previous_state() -> None:
    h = history()
    n1, n2, n3 = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
    h.on_raft("", 1, (n1, n2), ())  # no leader yet: the membership is noted, nothing recorded
    h.on_raft(n1, 2, (n1, n2), ())
    h.on_raft("", 3, (n1, n2), ())  # an election running
    h.on_raft(n2, 3, (n1, n2), (n3,))
    h.on_raft(n2, 3, (n2, n3), ())
    h.on_raft(n2, 4, (n2, n3), ())  # re-elected in a new term
    said = [(e["kind"], e["text"], e["reason"], e.get("key")) for e in h.events]
    assert said == [
        ("raft-leader", "n1 leads term 2", "the first leader this node saw", "term:2"),
        ("raft-leader", "n2 leads term 3", "leader was n1 (term 2)", "term:3"),
        ("membership", "127.0.0.1:3 joined as a learner", "added; catching up", None),
        ("membership", "127.0.0.1:3 is a voter", "promoted from learner", None),
        ("membership", "n1 left the group", "removed", None),
        ("raft-leader", "n2 leads term 4", "leader was n2 (term 3)", "term:4"),
    ]


async def test_the_history_is_kept_in_a_file_bounded_to_its_size(tmp_path) -> None:
    h = history(str(tmp_path), size=3)
    t = 1_700_000_000_000
    for i in range(1, 6):
        won = Result(C.SUCCESS, header={"masterBrokerId": i, "masterEpoch": i})
        h.on_applied(10 + i, cmd.elect_master(t, "b", cluster_name="c", broker_id=i), won, t + i)
    h.on_raft("127.0.0.1:2", 7, ("127.0.0.1:1", "127.0.0.1:2"), ())
    await h.flush()
    again = history(str(tmp_path), size=3)
    again.load()
    assert [e["text"] for e in again.events] == [
        "b: broker 4 elected master at epoch 4",
        "b: broker 5 elected master at epoch 5",
        "n2 leads term 7",
    ]
    assert (again.applied_through, again.leader) == (15, ("127.0.0.1:2", 7))
    again.on_applied(
        15, cmd.elect_master(t, "b", cluster_name="c", broker_id=5), won, t
    )  # the replay after a restart: not again
    again.on_raft("127.0.0.1:2", 7, ("127.0.0.1:1", "127.0.0.1:2"), ())  # the same leader and term: not again
    assert len(again.events) == 3 and not again._dirty
    (tmp_path / HISTORY_FILE).write_text("{not json")
    broken = history(str(tmp_path))
    broken.load()  # said in the log, not fatal
    assert list(broken.events) == [] and broken.applied_through == 0


async def heard_from(leader: Node, peer: Node) -> None:
    """Until `leader` has had an answer from `peer` this term (a transfer to a peer it has not heard from is
    refused), re-checked after each of the raft node's rounds."""

    def heard() -> bool:
        pr = leader.service.node_status().progress.get(peer.id)
        return pr is not None and pr.contact_ticks >= 0

    await asyncio.wait_for(leader.service.node._wait_for(heard), 10)


async def test_a_follower_nobody_watches_records_every_election_and_leader_change(tmp_path) -> None:
    """Issue 23: after a broker election and two changes of controller leader, /ui/api/node of a node that
    was a follower throughout, asked for the first time at the end, lists them all."""
    async with group(tmp_path) as nodes:
        first = await settled(nodes)
        second, bystander = [n for n in nodes if n is not first]
        ids = {"clusterName": "ui-c", "brokerName": "ui-h"}
        await first.ok(
            "POST", f"{API}/apply-broker-id", json={**ids, "appliedBrokerId": 1, "registerCheckCode": "h:1;1"}
        )
        await first.ok("POST", f"{API}/register-broker", json={**ids, "brokerId": 1, "brokerAddress": "h:1"})
        await first.ok("POST", f"{API}/elect-master", json={**ids, "brokerId": 1})
        terms = []
        for frm, to in ((first, second), (second, first)):
            await heard_from(frm, to)
            body = (await frm.ok("POST", "/api/v1/raft/transfer-leader", token=True, json={"to": to.id}))["body"]
            assert body["leaderId"] == to.id
            terms.append(body["term"])
            await to.service.node.wait_for_leader(10)  # its first entry of the term is applied there
            await bystander.service.node.wait_applied(to.service.node_status().applied, 10)
        me = (await bystander.call("GET", "/ui/api/node", token=True)).json()
        assert me["role"] == "follower" and me["name"] == bystander.service.node_name(bystander.id)
        said = [(e["kind"], e["text"]) for e in me["events"]]
        name = first.service.display_name
        assert ("broker-election", "ui-h: broker 1 elected master at epoch 1") in said
        assert ("raft-leader", f"{name(second.id)} leads term {terms[0]}") in said
        assert ("raft-leader", f"{name(first.id)} leads term {terms[1]}") in said
        # The leader's page lists each of them once, though all three nodes recorded them.
        state = (await first.call("GET", "/ui/api/state", token=True)).json()
        texts = [e["text"] for e in state["events"]]
        assert texts.count("ui-h: broker 1 elected master at epoch 1") == 1


async def test_a_restarted_node_keeps_its_history(tmp_path) -> None:
    """The election is in the snapshot, not in the log replayed at the restart: only the history's file can
    bring it back; and what the replay does bring back is not listed twice."""
    opts = service_options(tmp_path, free_ports(1), 0, SOLO_RAFT)
    node = build(opts)
    ids = {"clusterName": "ui-c", "brokerName": "ui-r"}
    async with running([node]):
        await node.service.node.wait_for_leader(10)
        await register(node, "ui-c", "ui-r", 1, "h:1")  # and heartbeats: alive for a minute
        await node.ok("POST", f"{API}/elect-master", json={**ids, "brokerId": 1})
        await node.ok("POST", "/api/v1/raft/snapshot", token=True)
        await node.ok("POST", f"{API}/elect-master", json={**ids, "brokerId": 1}, code=C.CONTROLLER_MASTER_STILL_EXIST)
        before = (await node.call("GET", "/ui/api/node", token=True)).json()["events"]
    assert [e["text"] for e in before if e["kind"] == "broker-election"] == [
        "ui-r: broker 1 elected master at epoch 1",
        "ui-r: broker 1 is still master at epoch 1",
    ]
    again = build(opts)
    async with running([again]):
        await again.service.node.wait_for_leader(10)
        after = (await again.call("GET", "/ui/api/node", token=True)).json()["events"]
    assert after[: len(before)] == before  # then the term it leads after the restart
    assert [e["kind"] for e in after[len(before) :]] == ["raft-leader"]


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
        name = follower.service.display_name  # n1, n2, n3: the place in jRaftInitConf, as local-cluster names them
        assert (
            f"the leader {name(leader.id)} did not answer: this is {name(follower.id)}'s own applied state"
            in (state["note"])
        )
        configured = list(follower.service.opts.node.peers)
        assert state["names"] == {p: f"n{i + 1}" for i, p in enumerate(configured)}
        assert [(n["id"], n["name"]) for n in state["nodes"]] == [(follower.id, name(follower.id))]
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

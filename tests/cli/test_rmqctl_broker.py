"""`rmqctl broker run` against a small scripted controller (httpx.MockTransport): the requests a broker
sends in order, self-election when there is no master, the SyncStateSet kept to the alive replicas as the
master, a slave that leaves the election alone, and the end of heartbeats. A fake clock: nothing waits."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from statemachine import codes as C
from tests.cli.helpers import FakeTime, L, Serve, envelope, rmqctl

API = "/api/v1/controller"


class Controller:
    """Just enough of one broker set's controller state to answer a broker's requests."""

    def __init__(self) -> None:
        self.brokers: dict[int, str] = {}
        self.alive: set[int] = set()
        self.master: int | None = None
        self.master_epoch = 0
        self.sync: list[int] = []
        self.sync_epoch = 0
        self.sent: list[tuple[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.sent.append((path.rsplit("/", 1)[1], body))
        return httpx.Response(200, json=self.answer(path, body))

    def answer(self, path: str, b: Any) -> dict[str, Any]:
        if path == f"{API}/next-broker-id":
            return envelope(
                header={
                    "clusterName": b["clusterName"],
                    "brokerName": b["brokerName"],
                    "nextBrokerId": max(self.brokers, default=0) + 1,
                }
            )
        if path == f"{API}/apply-broker-id":
            self.brokers[b["appliedBrokerId"]] = ""
            return envelope(header={"clusterName": b["clusterName"], "brokerName": b["brokerName"]})
        if path == f"{API}/register-broker":
            if b["brokerId"] not in self.brokers:
                return envelope(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark="not applied")
            self.brokers[b["brokerId"]] = b["brokerAddress"]
            return envelope(header={"masterBrokerId": self.master})
        if path == f"{API}/heartbeat":
            self.alive.add(b["brokerId"])
            return envelope()
        if path == f"{API}/replica-info":
            return envelope(
                header={"masterBrokerId": self.master, "masterEpoch": self.master_epoch},
                body={"syncStateSet": self.sync, "syncStateSetEpoch": self.sync_epoch},
            )
        if path == f"{API}/elect-master":
            if self.master is not None:
                return envelope(
                    C.CONTROLLER_MASTER_STILL_EXIST,
                    header={"masterBrokerId": self.master},
                    remark="The old master is still alive",
                )
            self.master, self.master_epoch, self.sync, self.sync_epoch = (
                b["brokerId"],
                self.master_epoch + 1,
                [b["brokerId"]],
                self.sync_epoch + 1,
            )
            return envelope(header={"masterBrokerId": self.master})
        if path == "/api/v1/admin/sync-state-data":
            rows = [
                {"brokerName": "broker-a", "brokerId": i, "brokerAddress": a, "alive": i in self.alive}
                for i, a in sorted(self.brokers.items())
            ]
            return envelope(
                body={
                    "replicasInfoTable": {
                        "broker-a": {
                            "masterBrokerId": self.master,
                            "inSyncReplicas": [r for r in rows if r["brokerId"] in self.sync],
                            "notInSyncReplicas": [r for r in rows if r["brokerId"] not in self.sync],
                        }
                    }
                }
            )
        if path == f"{API}/alter-sync-state-set":
            assert (b["masterBrokerId"], b["masterEpoch"]) == (self.master, self.master_epoch)
            assert b["syncStateSet"]["syncStateSetEpoch"] == self.sync_epoch
            self.sync, self.sync_epoch = b["syncStateSet"]["syncStateSet"], self.sync_epoch + 1
            return envelope(header={"newSyncStateSetEpoch": self.sync_epoch})
        raise AssertionError(path)


@pytest.fixture
def controller(serve_rmqctl: Serve) -> tuple[Controller, FakeTime]:
    c = Controller()
    return c, serve_rmqctl(c.handler, FakeTime())


def lines(stdout: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in stdout.splitlines()]  # without the time of day


def test_a_new_broker_registers_elects_itself_and_heartbeats(controller: tuple[Controller, FakeTime]) -> None:
    c, clock = controller
    r = rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.1:10911", "--count", "3")
    assert r.exit_code == 0, r.stderr
    assert lines(r.stdout) == [
        "broker-a/1: registered at 10.0.0.1:10911 (master: none)",
        "broker-a/1: no master",
        "broker-a/1: elect-master 1 answered 0 SUCCESS",
        "broker-a/1: master is 1 at epoch 1: I am the master",
        "broker-a/1: stopped heartbeating; the controller expires it 10s after its last heartbeat (at its next "
        "inactive-broker scan)",
    ]
    assert [p for p, _ in c.sent[:4]] == ["next-broker-id", "apply-broker-id", "register-broker", "heartbeat"]
    apply = c.sent[1][1]
    assert apply["appliedBrokerId"] == 1 and apply["registerCheckCode"].startswith("10.0.0.1:10911;")
    assert [p for p, _ in c.sent].count("heartbeat") == 3
    assert c.sent[3][1] == {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerAddr": "10.0.0.1:10911",
        "brokerId": 1,
        "heartbeatTimeoutMills": 10000,
        "maxOffset": 0,  # it stores nothing; no epoch yet (RocketMQ's -1 when left out)
    }
    # Once the master, its heartbeats report the epoch it became master at (issue 23: the page showed -1).
    beats = [b for p, b in c.sent if p == "heartbeat"]
    assert [(b.get("epoch"), b["maxOffset"]) for b in beats] == [(None, 0), (None, 0), (1, 0)]
    assert clock.sleeps == [2.0, 2.0]


def test_the_master_adds_an_alive_replica_and_a_slave_never_asks_for_an_election(
    controller: tuple[Controller, FakeTime],
) -> None:
    c, _ = controller
    c.brokers, c.alive, c.master, c.master_epoch, c.sync, c.sync_epoch = {1: "10.0.0.1:10911"}, {1}, 1, 1, [1], 1
    r = rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.2:10911", "--id", "2", "--count", "1")
    assert r.exit_code == 0, r.stderr
    assert lines(r.stdout)[:2] == [
        "broker-a/2: registered at 10.0.0.2:10911 (master: 1)",
        "broker-a/2: master is 1 at epoch 1: I am a slave",
    ]
    assert [p for p, _ in c.sent] == [
        "register-broker",
        "apply-broker-id",
        "register-broker",
        "heartbeat",
        "replica-info",
    ]
    c.master = None  # as if the controller had not elected yet: the broker asks, and a live master exists
    c.sent.clear()
    r = rmqctl(
        "-o",
        "json",
        "broker",
        "run",
        "-a",
        L,
        "-b",
        "broker-a",
        "--addr",
        "10.0.0.1:10911",
        "--id",
        "1",
        "--count",
        "2",
    )
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["event"] for e in events] == ["registered", "master", "elect", "master", "sync-state-set", "stopped"]
    assert events[4]["syncStateSet"] == [1, 2] and c.sync == [1, 2]

    c.sent.clear()  # the slave again: with a live master it never asks to be elected
    rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.2:10911", "--id", "2", "--count", "2")
    assert [p for p, _ in c.sent] == ["register-broker", "heartbeat", "replica-info", "heartbeat", "replica-info"]


def test_a_broker_that_cannot_register_exits_1(
    controller: tuple[Controller, FakeTime], monkeypatch: pytest.MonkeyPatch
) -> None:
    c, _ = controller
    refused = envelope(C.CONTROLLER_BROKER_ID_INVALID, remark="the broker id 1 was applied by another broker")
    monkeypatch.setattr(c, "answer", lambda path, body: refused)
    r = rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.1:10911", "--id", "1")
    assert r.exit_code == 1
    assert r.stderr == (
        "rmqctl: error: register-broker 1: 127.0.0.1:9770 answered 2014 CONTROLLER_BROKER_ID_INVALID: "
        "the broker id 1 was applied by another broker\n"
    )
    assert r.stdout == ""


def test_a_refused_election_is_said_once_while_it_repeats(
    controller: tuple[Controller, FakeTime], monkeypatch: pytest.MonkeyPatch
) -> None:
    c, _ = controller
    answer = c.answer

    def no_master(path: str, body: Any) -> dict[str, Any]:
        if path.endswith("/elect-master"):  # nobody in the SyncStateSet is alive: every attempt fails
            c.master_epoch += 1  # a failed election still bumps the epoch
            return envelope(C.CONTROLLER_ELECT_MASTER_FAILED, remark="Failed to elect a new master")
        return answer(path, body)

    monkeypatch.setattr(c, "answer", no_master)
    r = rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.1:10911", "--count", "4")
    assert lines(r.stdout)[1:-1] == [
        "broker-a/1: no master",
        "broker-a/1: elect-master 1 answered 2012 CONTROLLER_ELECT_MASTER_FAILED: Failed to elect a new master",
    ]
    assert [p for p, _ in c.sent].count("elect-master") == 4  # still asked every round


def test_a_controller_that_stops_answering_is_said_once_and_heartbeats_go_on(
    controller: tuple[Controller, FakeTime], monkeypatch: pytest.MonkeyPatch
) -> None:
    c, clock = controller
    answer = c.answer
    down = (1001.0, 1013.0)  # every node refuses connections (the majority was stopped), then the group is back

    def sometimes_down(path: str, body: Any) -> dict[str, Any]:
        if down[0] <= clock.now < down[1]:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return answer(path, body)

    monkeypatch.setattr(c, "answer", sometimes_down)
    r = rmqctl("broker", "run", "-a", L, "-b", "broker-a", "--addr", "10.0.0.1:10911", "--count", "8")
    assert r.exit_code == 0, r.stderr  # not exit 3: a broker outlives its controller's outage
    assert lines(r.stdout) == [
        "broker-a/1: registered at 10.0.0.1:10911 (master: none)",
        "broker-a/1: no master",
        "broker-a/1: elect-master 1 answered 0 SUCCESS",
        "broker-a/1: the controller did not answer, still heartbeating (no controller could serve the request: "
        f"every address refused the connection ({L}: ConnectError: [Errno 111] Connection refused))",
        "broker-a/1: the controller answers again",
        "broker-a/1: master is 1 at epoch 1: I am the master",
        "broker-a/1: stopped heartbeating; the controller expires it 10s after its last heartbeat (at its next "
        "inactive-broker scan)",
    ]
    # A refused connection fails a round at once (no waiting for the client's 10 s deadline): rounds 2-7 at
    # 1002..1012 met the outage, each said nothing new, and the heartbeats went on every 2 s until it ended.
    assert clock.sleeps == [2.0] * 7

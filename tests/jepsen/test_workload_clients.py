"""The harness's clients: error mapping (httpx.MockTransport), leader following, process numbering, key
rotation, and histories written as docs/jepsen.md fixes them (the checkers read them back)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from jepsen.client import Answer, Client, LeaderHint, outcome
from jepsen.driver import Mix, Recorder
from jepsen.history import read_history
from jepsen.suite import check_history
from jepsen.workloads.base import KeyPool, Processes, Worker
from jepsen.workloads.controller import Controller
from jepsen.workloads.register import Register
from jepsen.workloads.set import SetWorkload

NODES = ["n1:9770", "n2:9770", "n3:9770"]
Handler = Callable[[httpx.Request], httpx.Response]


def env(code: int = 0, body: Any = None, header: Any = None) -> httpx.Response:
    return httpx.Response(200, json={"code": code, "codeName": "X", "remark": None, "header": header, "body": body})


def client(handler: Handler, *, op_timeout: float = 0.3, hint: LeaderHint | None = None) -> Client:
    return Client(
        NODES, hint or LeaderHint(), random.Random(1), op_timeout=op_timeout, transport=httpx.MockTransport(handler)
    )


def raises(exc: type[httpx.RequestError]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc("boom", request=request)

    return handler


# ------------------------------------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("handler", "status", "read", "write"),
    [
        (lambda r: env(0, {"value": "1"}), "ok", "ok", "ok"),
        (raises(httpx.ConnectError), "rejected", "fail", "fail"),  # connection refused: never sent
        (raises(httpx.ConnectTimeout), "rejected", "fail", "fail"),
        (raises(httpx.ReadTimeout), "unknown", "fail", "info"),  # sent; a paused or partitioned leader
        (raises(httpx.WriteTimeout), "unknown", "fail", "info"),
        (raises(httpx.RemoteProtocolError), "unknown", "fail", "info"),  # connection lost mid-request
        (raises(httpx.ReadError), "unknown", "fail", "info"),
        (lambda r: httpx.Response(503, json={"error": "UNAVAILABLE"}), "unknown", "fail", "info"),
        (lambda r: httpx.Response(422, json={"error": "INVALID"}), "rejected", "fail", "fail"),
        (lambda r: env(2007, None, {"controllerLeaderAddress": None}), "rejected", "fail", "fail"),
        (lambda r: env(2000), "ok", "fail", "fail"),  # CONTROLLER_FENCED_MASTER_EPOCH: a definite rejection
        (lambda r: env(2015), "ok", "fail", "info"),  # an internal error: the write may have happened
        (lambda r: env(2004), "ok", "fail", "info"),  # changes state although it is not SUCCESS
    ],
)
def test_error_mapping(handler: Handler, status: str, read: str, write: str) -> None:
    a = client(handler).call("GET", "/x")
    assert a.status == status
    assert outcome(a, read=True) == read
    assert outcome(a, read=False) == write


def test_not_leader_is_followed_to_the_leader() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        host = f"{request.url.host}:{request.url.port}"
        seen.append(host)
        if host != "n3:9770":
            return env(2007, None, {"controllerLeaderId": "n3:9880", "controllerLeaderAddress": "n3:9770"})
        return env(0, {"value": "7"})

    hint = LeaderHint()
    hint.address = "n1:9770"
    a = client(handler, hint=hint).call("GET", "/api/v1/kv/jepsen/k")
    assert a.status == "ok" and a.node == "n3:9770" and seen == ["n1:9770", "n3:9770"]
    assert hint.address == "n3:9770"


def test_spread_reads_ask_every_node_and_leave_the_leader_hint_alone() -> None:
    """The negative control's client: a GET goes to a random node (a cut-off replica is asked too) and a
    follower's answer does not become the leader hint; writes still go to the leader."""
    seen: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, f"{request.url.host}:{request.url.port}"))
        return env(0, {"value": "7"})

    hint = LeaderHint()
    hint.address = "n1:9770"
    c = Client(NODES, hint, random.Random(4), transport=httpx.MockTransport(handler), spread_reads=True)
    for _ in range(30):
        assert c.call("GET", "/api/v1/kv/jepsen/k").status == "ok"
    assert {node for _, node in seen} == set(NODES) and hint.address == "n1:9770"
    seen.clear()
    c.call("PUT", "/api/v1/kv/jepsen/k", {"value": "8"})
    assert seen == [("PUT", "n1:9770")]


def test_a_refused_connection_is_retried_on_another_node() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "n1":
            raise httpx.ConnectError("refused", request=request)
        return env(0, {"value": "1"})

    hint = LeaderHint()
    hint.address = "n1:9770"
    a = client(handler, op_timeout=5, hint=hint).call("PUT", "/k", {"value": "1"})
    assert a.status == "ok" and a.node != "n1:9770"


def test_an_unknown_outcome_is_never_retried() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ReadTimeout("slow", request=request)

    assert client(handler, op_timeout=5).call("PUT", "/k", {"value": "1"}).status == "unknown"
    assert len(calls) == 1


# ----------------------------------------------------------------------------------------- fake KV store


class FakeKV:
    """A linearizable KV behind MockTransport, with faults injected per request by `fault(request)`."""

    def __init__(self, fault: Callable[[httpx.Request], str | None] = lambda r: None) -> None:
        self.data: dict[str, str] = {}
        self.fault = fault

    def __call__(self, request: httpx.Request) -> httpx.Response:
        f = self.fault(request)
        if f == "refuse":
            raise httpx.ConnectError("refused", request=request)
        if f == "lost-before":
            raise httpx.ReadTimeout("timeout", request=request)
        parts = request.url.path.split("/")  # /api/v1/kv/<ns>/<key>[/cas]
        key = parts[5]
        body = json.loads(request.content) if request.content else {}
        if request.method == "GET":
            resp = env(22) if key not in self.data else env(0, {"value": self.data[key]})
        elif request.method == "PUT":
            self.data[key] = body["value"]
            resp = env(0, {"value": body["value"]})
        else:
            ok = self.data.get(key) == body["expect"]
            if ok:
                self.data[key] = body["value"]
            resp = env(0, {"succeeded": ok, "value": self.data.get(key)})
        if f == "lost-after":  # applied, but the answer never came
            raise httpx.ReadTimeout("timeout", request=request)
        return resp


def workers(tmp_path: Path, kv: FakeKV, n: int) -> tuple[list[Worker], Recorder]:
    rec = Recorder(tmp_path / "history.jsonl")
    procs = Processes(n)
    hint = LeaderHint()
    ws = [
        Worker(
            i,
            i,
            Client(NODES, hint, random.Random(i), op_timeout=0.2, transport=httpx.MockTransport(kv)),
            random.Random(100 + i),
            rec,
            procs,
        )
        for i in range(n)
    ]
    return ws, rec


def test_register_history_is_well_formed_and_linearizable(tmp_path: Path) -> None:
    rng = random.Random(5)

    def fault(request: httpx.Request) -> str | None:
        r = rng.random()
        return "lost-after" if r < 0.05 else "lost-before" if r < 0.08 else "refuse" if r < 0.1 else None

    kv = FakeKV(fault)
    ws, rec = workers(tmp_path, kv, 4)
    reg = Register(4)
    for _ in range(600):
        reg.op(ws[rng.randrange(4)])
    kv.fault = lambda r: None
    final = Worker(-1, Processes(1000).fresh(), ws[0].client, random.Random(0), rec, Processes(2000))
    assert reg.final(final, deadline=0) == {}
    rec.close()

    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert all(set(x) >= {"process", "type", "f", "time"} for x in lines)
    assert [x["time"] for x in lines] == sorted(x["time"] for x in lines)
    infos = [x for x in lines if x["type"] == "info"]
    assert infos, "faults must produce info completions"
    for inf in infos:  # a process never invokes again after an info
        later = [x for x in lines if x["process"] == inf["process"] and x["time"] > inf["time"]]
        assert later == []
    writes = [x["value"] for x in lines if x["type"] == "invoke" and x["f"] == "write"]
    cas_new = [x["value"][1] for x in lines if x["type"] == "invoke" and x["f"] == "cas"]
    assert len(set(writes + cas_new)) == len(writes + cas_new), "written values are unique"
    assert all(isinstance(v, int) for v in writes)
    h = read_history(tmp_path / "history.jsonl")
    res = check_history(h)
    assert res["verdict"] == "valid", res
    per_key: dict[Any, set[int]] = {}
    for op in h.ops:
        per_key.setdefault(op.key, set()).add(op.process)
    assert all(len(p) <= 10 for p in per_key.values())
    assert all(c <= 500 for c in reg.keys.ops.values()) and len(reg.keys.all) >= 2


def test_a_stale_read_is_caught(tmp_path: Path) -> None:
    """The harness records what it sees: a store that loses a write yields an invalid history."""
    kv = FakeKV()
    ws, rec = workers(tmp_path, kv, 2)
    reg = Register(2)
    reg.write(ws[0], "k1", 1)
    kv.data.clear()  # the write is lost
    reg.read(ws[1], "k1")
    rec.close()
    assert check_history(read_history(tmp_path / "history.jsonl"))["verdict"] == "invalid"


def test_cas_that_does_not_apply_is_an_ok_observation(tmp_path: Path) -> None:
    kv = FakeKV()
    ws, rec = workers(tmp_path, kv, 1)
    reg = Register(1)
    reg.write(ws[0], "k1", 1)
    reg.cas(ws[0], "k1", 2, 3)
    reg.cas(ws[0], "k1", 1, 4)
    rec.close()
    done = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines() if '"invoke"' not in x]
    assert [(d["f"], d["type"], d["value"]) for d in done] == [
        ("write", "ok", 1),
        ("cas", "ok", False),
        ("cas", "ok", [1, 4]),
    ]
    assert done[1]["current"] == 1 and "error" not in done[1]
    assert check_history(read_history(tmp_path / "history.jsonl"))["verdict"] == "valid"


def test_a_refused_cas_is_the_evidence_of_a_lost_write(tmp_path: Path) -> None:
    """No read sees the lost write; the cas refused on the old value does, and the checker uses it."""
    kv = FakeKV()
    ws, rec = workers(tmp_path, kv, 2)
    reg = Register(2)
    reg.write(ws[0], "k1", 1)
    reg.write(ws[0], "k1", 2)
    kv.data["k1"] = "1"  # write 2 is lost
    reg.cas(ws[1], "k1", 2, 3)
    rec.close()
    res = check_history(read_history(tmp_path / "history.jsonl"))
    assert res["verdict"] == "invalid"
    (f,) = res["checkers"]["linearizability"]["failures"]
    assert f["op"]["f"] == "cas" and f["op"]["result"] is False and f["op"]["extra"]["current"] == 1


def test_a_cas_answer_without_succeeded_is_an_unknown_outcome(tmp_path: Path) -> None:
    ws, rec = workers(tmp_path, FakeKV(), 1)
    ws[0].client = client(lambda r: env(0, {"value": "1"}))
    Register(1).cas(ws[0], "k1", None, 3)
    rec.close()
    (inv, done) = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert (done["type"], done["value"]) == ("info", [None, 3]) and "succeeded" in done["error"]


def test_set_history_is_checked_valid_and_reports_lost_elements(tmp_path: Path) -> None:
    rng = random.Random(9)
    kv = FakeKV(lambda r: "lost-after" if rng.random() < 0.05 else None)
    ws, rec = workers(tmp_path, kv, 3)
    s = SetWorkload(3)
    for _ in range(200):
        s.op(ws[rng.randrange(3)])
    kv.fault = lambda r: None
    final = Worker(-1, 999, ws[0].client, random.Random(0), rec, Processes(2000))
    assert s.final(final, deadline=0) == {}
    rec.close()
    res = check_history(read_history(tmp_path / "history.jsonl"))
    assert res["verdict"] == "valid", res
    assert res["checkers"]["set"]["counts"]["acknowledged"] > 50

    # the same run, with one acknowledged element removed before a final read: lost
    kv2 = FakeKV()
    (tmp_path / "b").mkdir()
    ws2, rec2 = workers(tmp_path / "b", kv2, 1)
    s2 = SetWorkload(1)
    for e in (1, 2, 3):
        s2.add(ws2[0], "s1", e)
    kv2.data["s1"] = "1,3"
    s2.read(ws2[0], "s1")
    rec2.close()
    res2 = check_history(read_history(tmp_path / "b" / "history.jsonl"))
    assert res2["verdict"] == "invalid" and res2["checkers"]["set"]["sets"][0]["lost"] == [2]


def test_key_pool_rotates_by_ops_and_processes() -> None:
    pool = KeyPool("k", slots=1, max_ops=5, max_procs=3)
    keys = [pool.acquire(p) for p in [0, 0, 0, 0, 0, 0]]
    assert keys == ["k1"] * 5 + ["k2"]
    keys = [pool.acquire(p) for p in [1, 2, 3]]
    assert pool.procs["k2"] == {0, 1, 2} and keys[-1] == "k3"


def test_key_pool_gives_each_group_of_workers_its_own_key() -> None:
    pool = KeyPool("k", slots=2, max_ops=400, max_procs=9)
    first = {w: pool.acquire(w, slot=w) for w in range(10)}
    assert {first[w] for w in range(0, 10, 2)} == {"k1"} and {first[w] for w in range(1, 10, 2)} == {"k2"}
    for _ in range(50):  # ten workers, two keys: no key collects more than its five processes
        for w in range(10):
            pool.acquire(w, slot=w)
    assert pool.all == ["k1", "k2"] and all(len(p) == 5 for p in pool.procs.values())


def test_controller_observations_use_rocketmq_fields() -> None:
    c = Controller(1)
    a = Answer(
        "ok",
        0,
        {
            "code": 0,
            "header": {"masterBrokerId": 1, "masterAddress": "x", "masterEpoch": 3},
            "body": {"syncStateSet": [2, 1], "syncStateSetEpoch": 4},
        },
    )
    assert c._observation("replica-info", a) == {
        "masterBrokerId": 1,
        "masterEpoch": 3,
        "syncStateSet": [1, 2],
        "syncStateSetEpoch": 4,
    }
    e = Answer(
        "ok",
        2011,
        {
            "code": 2011,
            "header": {"masterBrokerId": 2, "masterAddress": "y", "masterEpoch": 5, "syncStateSetEpoch": 6},
            "body": {"syncStateSet": [2]},
        },
    )
    assert c._observation("elect-master", e) == {
        "masterBrokerId": 2,
        "masterEpoch": 5,
        "syncStateSetEpoch": 6,
        "syncStateSet": [2],
    }
    assert outcome(e, read=False, ok_codes=frozenset({0, 2011})) == "ok"
    d = Answer(
        "ok",
        0,
        {
            "code": 0,
            "body": {
                "replicasInfoTable": {
                    "bs1": {
                        "masterBrokerId": 1,
                        "masterAddress": "x",
                        "masterEpoch": 2,
                        "syncStateSetEpoch": 3,
                        "inSyncReplicas": [
                            {"brokerName": "bs1", "brokerId": 3, "brokerAddress": "a", "alive": True},
                            {"brokerName": "bs1", "brokerId": 1, "brokerAddress": "b", "alive": True},
                        ],
                        "notInSyncReplicas": [],
                    }
                }
            },
        },
    )
    assert c._observation("sync-state-data", d) == {
        "bs1": {"masterBrokerId": 1, "masterEpoch": 2, "syncStateSetEpoch": 3, "syncStateSet": [1, 3]}
    }
    alter = Answer(
        "ok",
        0,
        {"code": 0, "header": {"newSyncStateSetEpoch": 4}, "body": {"syncStateSet": [1, 2], "syncStateSetEpoch": 4}},
    )
    assert c._observation("alter-sync-state-set", alter) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 4}


def test_a_mix_of_workloads_writes_one_history_that_each_checker_judges(tmp_path: Path) -> None:
    """`--workload register,set`: one driver per workload on one history; process numbers never collide
    (the linearizability checker assumes one op at a time per process), and each checker sees its own ops."""
    rng = random.Random(3)
    kv = FakeKV(lambda r: "lost-after" if rng.random() < 0.03 else None)
    rec = Recorder(tmp_path / "history.jsonl")
    hint = LeaderHint()

    def make_client(r: random.Random) -> Client:
        return Client(NODES, hint, r, op_timeout=0.2, transport=httpx.MockTransport(kv))

    mix = Mix(["register", "set"], rec, make_client, concurrency=3, rate=10, seed=7)
    firsts = [w.process for d in mix.drivers.values() for w in d.workers]
    assert sorted(firsts) == list(range(6))
    for _ in range(300):
        d = mix.drivers[rng.choice(["register", "set"])]
        d.workload.op(rng.choice(d.workers))
    kv.fault = lambda r: None
    assert mix.final(deadline=0) == {}
    assert mix.ops() == 300
    assert set(mix.stats()) == {"register", "set"} and mix.stats()["register"]["keys"] >= 1
    rec.close()

    h = read_history(tmp_path / "history.jsonl")
    owners: dict[int, set[str]] = {}
    for op in h.ops:
        owners.setdefault(op.process, set()).add("set" if str(op.key).startswith("s") else "register")
    assert all(len(o) == 1 for o in owners.values()), "a process belongs to one workload"
    res = check_history(h)
    assert res["workloads"] == ["register", "set"]
    assert {k: v["verdict"] for k, v in res["checkers"].items()} == {"linearizability": "valid", "set": "valid"}
    mix.close()


def test_a_mix_refuses_unknown_or_repeated_workloads(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "history.jsonl")
    for names in ([], ["register", "register"], ["register", "queue"]):
        with pytest.raises(ValueError, match="distinct names"):
            Mix(names, rec, lambda r: client(lambda q: env()), concurrency=1, rate=1, seed=1)
    rec.close()

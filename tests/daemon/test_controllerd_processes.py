"""The HTTP contract against a real 3-node group of `controllerd` processes: broker endpoints on the leader,
2007 from followers, SIGTERM (hand-over, exit 0), SIGKILL of the leader with a client following the new
leader, acknowledged writes surviving restarts, structured logs, and the data-directory lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.daemon.cluster import ROOT, ControllerdCluster

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("controllerd")]


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[ControllerdCluster]:
    # 1000 ms elections: with 500 the leader wait_ready() named was no longer leader a moment later, once, on a
    # loaded machine (the whole suite on three workers, 2026-11-30)
    c = ControllerdCluster(str(tmp_path), election_ms=1000)
    c.start_all()
    try:
        yield c
    finally:
        c.stop_all()


def post(c: ControllerdCluster, i: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(c.url(i, path), json=body, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_broker_registration_flow_on_the_leader_and_2007_from_followers(cluster: ControllerdCluster) -> None:
    leader = cluster.index_of(cluster.wait_ready())
    followers = [i for i in range(3) if i != leader]
    # A follower answers 2007 with the leader's raft id and HTTP address, and proposes nothing.
    env = post(cluster, followers[0], "/api/v1/controller/next-broker-id", {"clusterName": "c", "brokerName": "b"})
    assert env["code"] == 2007 and env["codeName"] == "CONTROLLER_NOT_LEADER"
    assert env["header"]["controllerLeaderId"] == cluster.rafts[leader]
    assert env["header"]["controllerLeaderAddress"] == cluster.https[leader]
    # RocketMQ's three-step registration, then the first election, on the leader.
    env = post(cluster, leader, "/api/v1/controller/next-broker-id", {"clusterName": "c", "brokerName": "b"})
    assert env["code"] == 0 and env["header"]["nextBrokerId"] == 1
    env = post(
        cluster,
        leader,
        "/api/v1/controller/apply-broker-id",
        {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "addr-1"},
    )
    assert env["code"] == 0, env
    env = post(
        cluster,
        leader,
        "/api/v1/controller/register-broker",
        {"clusterName": "c", "brokerName": "b", "brokerId": 1, "brokerAddress": "10.0.0.1:10911"},
    )
    assert env["code"] == 0, env
    env = post(
        cluster,
        leader,
        "/api/v1/controller/heartbeat",
        {"clusterName": "c", "brokerName": "b", "brokerAddr": "10.0.0.1:10911", "brokerId": 1},
    )
    assert env["code"] == 0, env
    env = post(
        cluster, leader, "/api/v1/controller/elect-master", {"clusterName": "c", "brokerName": "b", "brokerId": 1}
    )
    assert env["code"] == 0 and env["header"]["masterBrokerId"] == 1 and env["header"]["masterEpoch"] == 1, env
    env = post(cluster, leader, "/api/v1/controller/replica-info", {"brokerName": "b"})
    assert env["code"] == 0 and env["header"]["masterBrokerId"] == 1, env
    # Every node serves the metadata (no consensus) and names the same leader.
    for i in range(3):
        md = httpx.get(cluster.url(i, "/api/v1/controller/metadata"), timeout=5).json()
        assert md["header"]["controllerLeaderId"] == cluster.rafts[leader]
    # An HTTP client given a node's remoting address (jRaftControllerRPCAddr, what mqadmin takes) is sent to
    # that node's HTTP address; rmqctl follows, saying so.
    r = httpx.get(f"http://{cluster.remotings[followers[0]]}/api/v1/raft/status", timeout=5)
    assert r.status_code == 307 and r.json()["error"] == "REMOTING_PORT"
    assert r.headers["location"] == f"http://{cluster.https[followers[0]]}/api/v1/raft/status"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.rmqctl",
            "-o",
            "json",
            "-a",
            cluster.remotings[followers[0]],
            "getControllerMetaData",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["header"]["controllerLeaderId"] == cluster.rafts[leader]
    assert f"{cluster.remotings[followers[0]]} is a RocketMQ remoting address" in out.stderr
    # Discovery: every member's remoting address (its jRaftControllerRPCAddr entry) in the raft status and in
    # rmqctl raft peers.
    remoting = dict(zip(cluster.rafts, cluster.remotings, strict=True))
    status = httpx.get(cluster.url(followers[1], "/api/v1/raft/status"), timeout=5).json()["body"]
    assert {p["id"]: p["remotingAddress"] for p in status["peers"]} == remoting
    out = subprocess.run(
        [sys.executable, "-m", "cli.rmqctl", "-o", "json", "-a", cluster.https[leader], "raft", "peers"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert {p["id"]: p["remotingAddress"] for p in json.loads(out.stdout)["body"]["peers"]} == remoting


def test_sigterm_hands_leadership_over_and_exits_0(cluster: ControllerdCluster) -> None:
    leader = cluster.index_of(cluster.wait_ready())
    r = httpx.put(cluster.url(leader, "/api/v1/kv/ns/k"), json={"value": "v1"}, timeout=10).json()
    assert r["code"] == 0
    term = httpx.get(cluster.url(leader, "/api/v1/raft/status"), timeout=5).json()["body"]["term"]
    assert cluster.terminate(leader) == 0
    rest = [i for i in range(3) if i != leader]
    new = cluster.index_of(cluster.wait_ready(rest))
    st = httpx.get(cluster.url(new, "/api/v1/raft/status"), timeout=5).json()["body"]
    assert st["term"] == term + 1
    lines = [json.loads(x) for x in open(cluster.log_path(leader)).read().splitlines() if x.startswith("{")]
    assert any("leadership handed to" in x["msg"] for x in lines)
    assert lines[-1]["msg"] == "stopped"
    assert not any(x["logger"] == "uvicorn.access" for x in lines)  # off unless --access-log
    for x in lines:
        assert {"ts", "level", "logger", "msg", "node_id", "role", "term", "applied"} <= set(x)
        assert x["node_id"] == cluster.rafts[leader]
    r = httpx.get(cluster.url(new, "/api/v1/kv/ns/k"), timeout=10).json()
    assert r["code"] == 0 and r["body"] == {"value": "v1"}


def follow(c: ControllerdCluster, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A minimal leader-following client: 2007 -> the named leader; refused/503/timeout -> the next node, 20 ms
    later (an election takes an election timeout or two); for at most 30 s."""
    target, deadline, pause = 0, time.monotonic() + 30, threading.Event()
    while time.monotonic() < deadline:
        try:
            r = httpx.request(method, c.url(target, path), json=body, timeout=2)
            if r.status_code == 200:
                env = r.json()
                if env["code"] != 2007:
                    return env
                addr = env["header"].get("controllerLeaderAddress")
                target = c.https.index(addr) if addr in c.https else (target + 1) % len(c.https)
                continue
        except httpx.HTTPError:
            pass
        target = (target + 1) % len(c.https)
        pause.wait(0.02)
    raise AssertionError(f"{method} {path}: no leader answered in 30 s")


def test_a_client_follows_the_leader_through_sigkill_and_acknowledged_writes_survive(
    cluster: ControllerdCluster,
) -> None:
    leader = cluster.index_of(cluster.wait_ready())
    acked = {}
    for k in range(20):
        env = follow(cluster, "PUT", f"/api/v1/kv/ns/k{k}", {"value": f"v{k}"})
        assert env["code"] == 0
        acked[f"k{k}"] = f"v{k}"
    cluster.kill(leader)
    for k in range(20, 40):
        env = follow(cluster, "PUT", f"/api/v1/kv/ns/k{k}", {"value": f"v{k}"})
        assert env["code"] == 0
        acked[f"k{k}"] = f"v{k}"
    cluster.start(leader)  # the killed node comes back with its data directory
    cluster.wait_ready()
    for key, v in acked.items():
        env = follow(cluster, "GET", f"/api/v1/kv/ns/{key}")
        assert env["code"] == 0 and env["body"] == {"value": v}, (key, env)


def test_a_second_process_on_the_same_data_directory_is_refused(cluster: ControllerdCluster) -> None:
    cluster.wait_ready()
    other = ControllerdCluster(os.path.join(cluster.root, "other"), n=1, stores=[f"{cluster.root}/n0"])
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run(
        [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", other.confs[0], "--log-format", "json"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert p.returncode == 1
    assert f"{cluster.root}/n0: data directory is locked by process {cluster.procs[0].pid}".encode() in p.stderr

"""A 3-node `controllerd` group on loopback for the benchmarks (fsync on), whose nodes can be killed with
SIGKILL and started again on the same data directory: the failover benchmarks use it, and
`http_bench.start_group` is a thin wrapper over it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx

from raft.testing.cluster import free_ports

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEARTBEAT = "/api/v1/controller/heartbeat"


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def wait_http(url: str, timeout: float, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a server exited while waiting for {url}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # waiting for a child process to listen
    raise RuntimeError(f"{url} not ready within {timeout:g}s")


class ControllerGroup:
    """Three controllerd processes; `extra` is appended to every node's controller.conf (key=value lines)."""

    def __init__(self, root: str, extra: dict[str, Any] | None = None) -> None:
        self.root = root
        ports = free_ports(9)
        self.rafts, self.https, self.rpcs = ([f"127.0.0.1:{p}" for p in ports[k : k + 3]] for k in (0, 3, 6))
        self.extra = extra or {}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def _conf(self, i: int) -> str:
        rafts, https, rpcs = self.rafts, self.https, self.rpcs
        # jRaftControllerRPCAddr is the RocketMQ remoting listener; HTTP (what the benchmarks drive) is its own key.
        addrs = f"jRaftControllerRPCAddr={','.join(rpcs)}\ncontrollerHttpAddr={','.join(https)}\n"
        extra = "".join(f"{k}={v}\n" for k, v in self.extra.items())
        path = os.path.join(self.root, f"n{i}.conf")
        with open(path, "w") as f:
            f.write(
                f"controllerType=jRaft\njRaftServerId={rafts[i]}\njRaftInitConf={','.join(rafts)}\n{addrs}"
                f"controllerStorePath={self.root}/n{i}\n{extra}"
            )
        return path

    def start(self, i: int, wait: bool = True) -> None:
        log = open(os.path.join(self.root, f"n{i}.log"), "ab")  # noqa: SIM115 - the child's
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", self._conf(i), "--log-format", "json"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
        log.close()
        if wait:
            wait_http(f"http://{self.https[i]}/readyz", 60, [self.procs[i]])

    def start_all(self) -> None:
        for i in range(3):
            self.start(i, wait=False)
        for i in range(3):
            wait_http(f"http://{self.https[i]}/readyz", 60, list(self.procs.values()))

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

    def stop_all(self) -> None:
        procs = list(self.procs.values())
        self.procs.clear()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def status(self, i: int, timeout: float = 2.0) -> dict[str, Any]:
        return httpx.get(f"http://{self.https[i]}/api/v1/raft/status", timeout=timeout).json()["body"]

    def leader(self, timeout: float = 30.0) -> int:
        """The index of the node that every live node names as leader and that answers a heartbeat (code 0)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                named = {self.status(i).get("leaderId") for i in self.procs}
            except (httpx.HTTPError, KeyError, ValueError):
                named = set()
            if len(named) == 1 and (lid := named.pop()) in self.rafts and self.rafts.index(lid) in self.procs:
                i = self.rafts.index(lid)
                if heartbeat_ok(self.https[i], 0):
                    return i
            time.sleep(0.05)  # polling child processes
        raise TimeoutError("no leader answering heartbeats")


def heartbeat_body(i: int) -> dict[str, Any]:
    """Broker i's heartbeat (broker-set i // 3), the same model as the load generators'."""
    return {
        "clusterName": "DefaultCluster",
        "brokerName": f"broker-{i // 3}",
        "brokerAddr": f"10.1.{i // 250}.{i % 250}:10911",
        "brokerId": i % 3,
        "epoch": 1,
        "maxOffset": 1000 + i,
        "confirmOffset": 1000 + i,
        "heartbeatTimeoutMills": 10000,
        "electionPriority": 1,
    }


def heartbeat_ok(http: str, i: int, timeout: float = 1.0, client: httpx.Client | None = None) -> bool:
    """One heartbeat through consensus: True when answered with code 0 (committed and applied by a leader)."""
    try:
        post = client.post if client is not None else httpx.post
        r = post(f"http://{http}{HEARTBEAT}", json=heartbeat_body(i), timeout=timeout)
        return r.status_code == 200 and r.json().get("code") == 0
    except (httpx.HTTPError, ValueError):
        return False

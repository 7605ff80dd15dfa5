"""Real `controllerd` processes on loopback for the daemon tests: generated controller.conf files, JSON logs,
readiness by /readyz, SIGTERM/SIGKILL/restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx

from raft.testing.cluster import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ControllerdCluster:
    def __init__(self, root: str, n: int = 3, election_ms: int = 500, extra: str = "",
                 stores: list[str] | None = None) -> None:  # fmt: skip
        os.makedirs(root, exist_ok=True)
        self.root = root
        stores = stores or [f"{root}/n{i}" for i in range(n)]
        ports = free_ports(2 * n)
        self.rafts = [f"127.0.0.1:{p}" for p in ports[:n]]
        self.https = [f"127.0.0.1:{p}" for p in ports[n:]]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.confs = []
        for i in range(n):
            conf = os.path.join(root, f"n{i}.conf")
            with open(conf, "w") as f:
                f.write(
                    f"controllerType=jRaft\njRaftServerId={self.rafts[i]}\njRaftInitConf={','.join(self.rafts)}\n"
                    f"jRaftControllerRPCAddr={','.join(self.https)}\ncontrollerStorePath={stores[i]}\n"
                    f"jRaftElectionTimeoutMs={election_ms}\n{extra}"
                )
            self.confs.append(conf)

    def log_path(self, i: int) -> str:
        return os.path.join(self.root, f"n{i}.log")

    def start(self, i: int) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        log = open(self.log_path(i), "ab")  # noqa: SIM115 - handed to the child
        p = subprocess.Popen(
            [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", self.confs[i], "--log-format", "json"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        log.close()
        self.procs[i] = p
        return p

    def start_all(self) -> None:
        for i in range(len(self.confs)):
            self.start(i)

    def wait_ready(self, nodes: list[int] | None = None, timeout: float = 60) -> str:
        """Wait until the given nodes answer /readyz 200 and agree on a leader; its raft id."""
        nodes = list(self.procs) if nodes is None else nodes
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for i in nodes:
                if self.procs[i].poll() is not None:
                    raise AssertionError(f"node {i} exited with {self.procs[i].returncode}: {self.tail(i)}")
            try:
                if all(httpx.get(f"http://{self.https[i]}/readyz", timeout=2).status_code == 200 for i in nodes):
                    leaders = {httpx.get(f"http://{self.https[i]}/api/v1/raft/status", timeout=2).json()["body"]["leaderId"]
                               for i in nodes}  # fmt: skip
                    if len(leaders) == 1 and None not in leaders:
                        return leaders.pop()
                    last = leaders
            except httpx.HTTPError as e:
                last = e
            time.sleep(0.05)  # polling child processes' readiness (a deadline, not a synchronisation sleep)
        raise AssertionError(f"not ready within {timeout}s: {last}")

    def index_of(self, raft_id: str) -> int:
        return self.rafts.index(raft_id)

    def url(self, i: int, path: str) -> str:
        return f"http://{self.https[i]}{path}"

    def tail(self, i: int, n: int = 20) -> str:
        try:
            with open(self.log_path(i), "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].wait()

    def terminate(self, i: int, timeout: float = 30) -> int:
        self.procs[i].send_signal(signal.SIGTERM)
        return self.procs[i].wait(timeout)

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

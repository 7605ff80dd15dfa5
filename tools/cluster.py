"""Real `controllerd` processes on loopback, for the torture sweeps (tools/torture) and the daemon tests
(re-exported by tests/daemon/cluster.py): generated controller.conf files, JSON logs, readiness by /readyz,
SIGTERM/SIGKILL/restart.

Waiting never sleeps: each child's log is read by a thread that copies it to the node's log file and
counts lines; `wait_ready` re-probes only after some node logged something, `wait_applied` also every 50 ms (every state change that
matters here, a leader learned or an HTTP server started, is logged after it happened)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

import httpx

from cli.config import conf_settings, write_controller_conf
from cli.rocketmq import wait_until
from raft.testing.cluster import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
RETRY_S = 0.5  # wait_ready: how soon a request that failed is asked again


class ControllerdCluster:
    def __init__(
        self, root: str, n: int = 3, election_ms: int = 500, extra: str = "", stores: list[str] | None = None
    ) -> None:
        """`extra`: more controller.conf lines (`key=value`), merged into each node's generated file."""
        os.makedirs(root, exist_ok=True)
        self.root = root
        stores = stores or [f"{root}/n{i}" for i in range(n)]
        ports = free_ports(3 * n)
        self.rafts = [f"127.0.0.1:{p}" for p in ports[:n]]
        self.https = [f"127.0.0.1:{p}" for p in ports[n : 2 * n]]
        self.remotings = [f"127.0.0.1:{p}" for p in ports[2 * n :]]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.headers: dict[str, str] = {}  # sent by wait_ready (an Authorization header when a token is set)
        self._logged = threading.Condition()
        self._lines = 0  # log lines read from every child so far
        self.readers: dict[int, threading.Thread] = {}
        self.confs = []
        for i in range(n):
            conf = os.path.join(root, f"n{i}.conf")
            base = {
                "controllerType": "jRaft",
                "jRaftServerId": self.rafts[i],
                "jRaftInitConf": self.rafts,
                "jRaftControllerRPCAddr": self.remotings,
                "controllerHttpAddr": self.https,
                "controllerStorePath": stores[i],
                "jRaftElectionTimeoutMs": election_ms,
            }
            write_controller_conf(conf, {**base, **conf_settings(extra)})
            self.confs.append(conf)

    def log_path(self, i: int) -> str:
        return os.path.join(self.root, f"n{i}.log")

    def start(self, i: int, env_extra: dict[str, str] | None = None, tree: str = ROOT) -> subprocess.Popen[bytes]:
        """Start node i from the source tree `tree` (another release's, checked out elsewhere, runs with this
        interpreter and its installed dependencies: tests/daemon/test_upgrade.py)."""
        env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env_extra or {}))
        p = subprocess.Popen(
            [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", self.confs[i], "--log-format", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tree,
        )
        assert p.stdout is not None
        reader = threading.Thread(target=self._copy_log, args=(p.stdout, self.log_path(i)), daemon=True)
        reader.start()
        self.readers[i] = reader
        self.procs[i] = p
        return p

    def _copy_log(self, src: IO[bytes], path: str) -> None:
        with open(path, "ab") as dst:
            for line in src:
                dst.write(line)
                dst.flush()
                with self._logged:
                    self._lines += 1
                    self._logged.notify_all()
        with self._logged:  # the child exited: wake waiters so they see it
            self._lines += 1
            self._logged.notify_all()

    def start_all(self) -> None:
        for i in range(len(self.confs)):
            self.start(i)

    def wait_ready(self, nodes: list[int] | None = None, timeout: float = 60) -> str:
        """Wait until the given nodes answer /readyz 200 and agree on a leader; its raft id."""
        nodes = list(self.procs) if nodes is None else nodes
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            failed: httpx.HTTPError | None = None
            with self._logged:
                seen = self._lines
            for i in nodes:
                if self.procs[i].poll() is not None:
                    raise AssertionError(f"node {i} exited with {self.procs[i].returncode}: {self.tail(i)}")
            try:
                if all(httpx.get(f"http://{self.https[i]}/readyz", timeout=2).status_code == 200 for i in nodes):
                    leaders = {
                        httpx.get(f"http://{self.https[i]}/api/v1/raft/status", timeout=2, headers=self.headers).json()[
                            "body"
                        ]["leaderId"]
                        for i in nodes
                    }
                    if len(leaders) == 1 and None not in leaders:
                        return leaders.pop()
                    last = leaders
            except httpx.HTTPError as e:
                last = failed = e
            # Nothing a node decides changes without a log line: wait for the next one. But a request that failed
            # (a node too busy to answer in 2 s, on a loaded machine) says nothing of what the nodes decided, and
            # its answer coming later logs nothing: ask again within RETRY_S (2026-11-30: a group ready at
            # 11:43:58 went quiet and was reported not ready at 11:44:21).
            wait = deadline - time.monotonic()
            if failed is not None:
                wait = min(wait, RETRY_S)
            with self._logged:
                # wait_for calls the predicate before this iteration ends, so it sees this iteration's `seen`
                self._logged.wait_for(lambda: self._lines > seen, max(0.0, wait))  # noqa: B023
        raise AssertionError(f"not ready within {timeout}s: {last}")

    def wait_applied(self, i: int, index: int, timeout: float = 60) -> bool:
        """Whether node i applied `index` within `timeout` (False as soon as it exits). Applying logs nothing,
        so its status is asked again after any node's next log line or 50 ms, whichever comes first."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2, headers=self.headers) as client:
            while self.procs[i].poll() is None:
                try:
                    if client.get(self.url(i, "/api/v1/raft/status")).json()["body"]["appliedIndex"] >= index:
                        return True
                except (httpx.HTTPError, ValueError, KeyError):
                    pass  # not serving yet
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                with self._logged:
                    self._logged.wait(min(0.05, left))
        return False

    def index_of(self, raft_id: str) -> int:
        return self.rafts.index(raft_id)

    def lead_on(self, i: int, nodes: list[int] | None = None, timeout: float = 90) -> None:
        """Make node i the leader of `nodes` (all by default): a transfer to it asked of whoever leads, until
        wait_ready names it. A transfer slower than its own timeout (twice the election timeout) answers 503,
        one whose target has not answered within an election timeout 409, and a node that stopped leading
        meanwhile 2007: each is the designed answer on a loaded machine, so the transfer is asked again. Any other
        answer fails that try, and the last one is what the AssertionError at `timeout` reports."""
        target = self.rafts[i]

        def moved() -> bool | None:
            leader = self.wait_ready(nodes)
            if leader == target:
                return True
            r = httpx.post(
                self.url(self.index_of(leader), "/api/v1/raft/transfer-leader"),
                json={"to": target},
                headers=self.headers,
                timeout=30,
            )
            code = r.json().get("code") if r.status_code == 200 else None
            assert code in (0, 2007) or r.status_code in (409, 503), r.text
            return None

        wait_until(f"node {i} leads", moved, timeout, period=0.5)

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
        self.readers[i].join(10)

    def terminate(self, i: int, timeout: float = 30) -> int:
        self.procs[i].send_signal(signal.SIGTERM)
        code = self.procs[i].wait(timeout)
        self.readers[i].join(10)  # its last log lines are in the file
        return code

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

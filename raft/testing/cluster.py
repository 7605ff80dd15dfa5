"""Start and drive real kvnode processes on loopback (tests and benchmarks)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from typing import Any

PORTS_LOW = 20000  # the explicit ports' range starts here and ends below the kernel's ephemeral range
_handed: set[int] = set()  # every port this process handed out: a stopped node restarts on its own port


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections take their local port from it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _block() -> tuple[int, int]:
    """(index, count) of this pytest-xdist worker ((0, 1) outside xdist): each worker chooses ports only in
    its own block of the range, so two workers never choose the same port between choosing and binding it.
    Two pytest runs at once (the Makefile's ALONGSIDE file beside the offline files) split the range further:
    `TEST_PORT_BLOCKS=N` makes N blocks, at least one per worker, and outside xdist `TEST_PORT_BLOCK=I` takes
    block I. Without them a stopped RocketMQ controller's port was taken by the other run before it restarted
    on it (fresh clone 60: DLedger's rollback restart, "Address already in use")."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 0:
        index, n = int(worker[2:]), int(count)
    else:
        index, n = int(os.environ.get("TEST_PORT_BLOCK", "0") or 0), 1
    blocks = os.environ.get("TEST_PORT_BLOCKS", "")
    n = max(n, index + 1, int(blocks) if blocks.isdigit() else 0)
    return index % n, n


def free_port_base(offsets: tuple[int, ...], low: int = PORTS_LOW, high: int | None = None) -> int:
    """A base port such that base + each offset is free on 127.0.0.1 (a node's or a broker's port family).

    The ports lie in [low, high), by default below the kernel's ephemeral range. A port chosen there is not
    bound by anyone else until its user binds it, except by another explicit choice: no outgoing connection
    takes it as its local port and no bind to port 0 gets it, whereas a port of the ephemeral range can be
    taken in that gap (once it was, and 59 interop tests errored with EADDRINUSE). The same holds while a node
    restarted on its port is down. Each pytest-xdist worker chooses in its own block of the range, and one
    process never hands out a port twice."""
    offsets = offsets or (0,)
    high = ephemeral_low() if high is None else high
    index, count = _block()
    size = (high - low) // count
    lo, hi = low + index * size - min(offsets), low + (index + 1) * size - max(offsets)
    if hi <= lo:
        raise RuntimeError(f"no room for port offsets {offsets} in {low}..{high} split {count} ways")
    if len(_handed) > (hi - lo) // 2:
        _handed.clear()  # half the block handed out: the tests that used the first ones are long gone
    for _ in range(1000):
        base = random.randrange(lo, hi)  # once: inside the comprehension it was drawn anew for every offset
        family = [base + o for o in offsets]
        if _handed.intersection(family):
            continue
        socks = []
        try:
            for p in family:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        _handed.update(family)
        return base
    raise RuntimeError(f"no free port range for offsets {offsets} in {lo}..{hi}")


def free_ports(n: int) -> list[int]:
    """n distinct free ports on 127.0.0.1, chosen as free_port_base chooses (below the ephemeral range)."""
    return [free_port_base((0,)) for _ in range(n)]


class ProcessCluster:
    """N kvnode processes; raft and client ports on 127.0.0.1; data under `root`."""

    def __init__(
        self, root: str, n: int = 3, election_ms: int = 1000, uvloop: bool = False, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.extra_args = list(extra_args)
        self.root = root
        self.ids = [f"n{i + 1}" for i in range(n)]
        ports = free_ports(2 * n)
        self.raft_ports = dict(zip(self.ids, ports[:n], strict=True))
        self.client_ports = dict(zip(self.ids, ports[n:], strict=True))
        self.election_ms = election_ms
        self.uvloop = uvloop
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def peers_arg(self) -> str:
        return ",".join(f"{i}=127.0.0.1:{p}" for i, p in self.raft_ports.items())

    def start(self, node: str, timeout: float = 20.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "raft.testing.kvnode",
            "--id",
            node,
            "--data",
            os.path.join(self.root, node),
            "--peers",
            self.peers_arg(),
            "--client-port",
            str(self.client_ports[node]),
            "--election-ms",
            str(self.election_ms),
        ]
        if self.uvloop:
            cmd.append("--uvloop")
        cmd += self.extra_args
        env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the node prints READY (or dies)
        if not line.startswith(b"READY"):
            proc.kill()
            raise RuntimeError(f"node {node} failed to start: {line!r}")
        self.procs[node] = proc

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def kill(self, node: str) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def signal(self, node: str, sig: int) -> None:
        self.procs[node].send_signal(sig)

    def stop_all(self) -> None:
        for node in list(self.procs):
            self.kill(node)

    def call(self, node: str, req: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        with socket.create_connection(("127.0.0.1", self.client_ports[node]), timeout=timeout) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError(f"{node} closed the connection")
                buf += chunk
        return json.loads(buf)

    def wait_leader(self, among: list[str] | None = None, timeout: float = 15.0) -> str:
        """Ask a live node to wait (server side, bounded) for a leader with a committed entry of its
        term, then pass a read barrier on that leader."""
        deadline = time.monotonic() + timeout
        candidates = among or list(self.procs)
        while time.monotonic() < deadline:
            for node in candidates:
                left = max(0.1, deadline - time.monotonic())
                resp = self.call(node, {"op": "leader", "timeout": left}, timeout=left + 5)
                if resp["ok"] and resp["leader"] in candidates:
                    leader = resp["leader"]
                    if self.call(leader, {"op": "get", "k": "__probe__"}, timeout=left + 5)["ok"]:
                        return leader
        raise TimeoutError("no leader elected")

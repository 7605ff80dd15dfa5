"""mxsm/rocketmq-rust's controller (crates.io `rocketmq-controller` 1.0.0, binary `rocketmq-controller-rust`) as a
3-node group on loopback: a peer of tools/bench/peers.py (`--systems rust`).

The binary is found at $ROCKETMQ_RUST_CONTROLLER or build/rocketmq-rust/bin/rocketmq-controller-rust (`make
rocketmq-rust` builds it there with cargo; ~47 min on 2 cores). Each node reads one TOML file (`-c FILE`, its
`ControllerConfig` in camelCase, the rest at its serde defaults): `nodeId` 1..n, `listenAddr` (the RocketMQ
remoting port brokers use), `raftPeers` (OpenRaft's gRPC ports) and `controllerPeers` (every node's remoting
address, which GET_CONTROLLER_METADATA_INFO answers as the leader's), `storagePath` (RocksDB), `rocketmqHome`
(required). A group of more than one node is initialised only with ROCKETMQ_CONTROLLER_AUTO_INITIALIZE_CLUSTER=true
in the environment: then the lowest node id initialises the membership on its first start, and skips it once its
store holds committed entries (a node restarted on its store rejoins). A node logs "Controller started
successfully!" once it has seen a leader and recovered the committed state (src/bin/controller_bootstrap.rs
`run_controller`, after `wait_for_cluster_recovery`); that line is what `start` waits for.

What it does by default (rocketmq-controller 1.0.0's sources): every BROKER_HEARTBEAT (904) is an OpenRaft
`client_write` (open_raft_controller.rs `record_broker_heartbeat`, `ControllerRequest::BrokerHeartbeat`), answered
after the commit and apply; the log and the state go to RocksDB with `WriteOptions::set_sync(true)` and
`set_use_fsync(true)` (storage/rocksdb_backend.rs), so an fsync per appended batch; each applied batch also
re-serialises the whole state machine (broker live table included) as JSON and writes it, synced
(openraft/state_machine.rs `apply`, `persist_state_values`); a snapshot every 5,000 entries
(`snapshotLogsSinceLast`, OpenRaft `SnapshotPolicy::LogsSinceLast`), 1,000 entries kept behind it; election
timeout 1000-2000 ms (`electionTimeoutMs` 1000 as OpenRaft's minimum, twice that as its maximum), leader heartbeat
every 300 ms."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from cli.rocketmq import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
ENV = "ROCKETMQ_RUST_CONTROLLER"
BUILT = os.path.join(ROOT, "build", "rocketmq-rust", "bin", "rocketmq-controller-rust")
AUTO_INIT = "ROCKETMQ_CONTROLLER_AUTO_INITIALIZE_CLUSTER"
READY = "Controller started successfully!"
# The same as the JVM peers (cli/rocketmq.py): how often the leader looks for brokers whose heartbeats stopped.
SETTINGS: dict[str, object] = {"scanNotActiveBrokerInterval": 1000}
ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def binary() -> str | None:
    """The controller binary: $ROCKETMQ_RUST_CONTROLLER when set, else the one `make rocketmq-rust` installs;
    None when that file is not there or not executable."""
    path = os.environ.get(ENV) or BUILT
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def available() -> bool:
    """Whether the rocketmq-rust controller binary is here (`make rocketmq-rust`, or $ROCKETMQ_RUST_CONTROLLER)."""
    return binary() is not None


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"no TOML rendering for {v!r}")


def config(
    node_id: int,
    home: str,
    store: str,
    remotings: Sequence[str],
    rafts: Sequence[str],
    election_ms: int = 1000,
    extra: Mapping[str, object] | None = None,
) -> str:
    """The TOML file of node `node_id` (1-based, as the binary numbers them) of the group whose remoting and raft
    addresses are `remotings` and `rafts`, in node order."""
    if len(remotings) != len(rafts) or not 1 <= node_id <= len(rafts):
        raise ValueError(f"node {node_id} of {len(remotings)} remoting and {len(rafts)} raft addresses")
    values: dict[str, object] = {
        "rocketmqHome": home,
        "configStorePath": os.path.join(home, "controller.properties"),
        "nodeId": node_id,
        "listenAddr": remotings[node_id - 1],
        "storagePath": store,
        "electionTimeoutMs": election_ms,
        **SETTINGS,
        **(extra or {}),
    }
    lines = [f"{k} = {toml_value(v)}" for k, v in values.items()]
    for table, addrs in (("raftPeers", rafts), ("controllerPeers", remotings)):
        for k, addr in enumerate(addrs, 1):
            lines += ["", f"[[{table}]]", f"id = {k}", f"addr = {toml_value(addr)}"]
    return "\n".join(lines) + "\n"


def argv(program: str, config_file: str) -> list[str]:
    return [program, "-c", config_file]


def environment(base: Mapping[str, str], home: str) -> dict[str, str]:
    """The node's environment: `base`, with the group's auto-initialisation on and ROCKETMQ_HOME its home."""
    return {**base, AUTO_INIT: "true", "ROCKETMQ_HOME": home}


def started_since(log: bytes, offset: int) -> bool:
    """Whether the log, from byte `offset` on (one start's output), says the node is serving."""
    return READY.encode() in ANSI.sub(b"", log[offset:])


class RustControllers:
    """n nodes of rocketmq-controller-rust on 127.0.0.1, node i (0-based) under root/n{i}: its TOML file, its log
    (controller.log, appended to by every start) and its RocksDB store (store/). A context manager: every
    process it started is stopped however the block ends."""

    def __init__(
        self, root: str, n: int = 3, election_ms: int = 1000, extra: Mapping[str, object] | None = None
    ) -> None:
        program = binary()
        if program is None:
            raise RuntimeError(f"no rocketmq-controller-rust at ${ENV} or {BUILT}: make rocketmq-rust")
        self.program = program
        ports = [free_port() for _ in range(2 * n)]
        self.remotings = [f"127.0.0.1:{p}" for p in ports[:n]]
        self.rafts = [f"127.0.0.1:{p}" for p in ports[n:]]
        self.homes = [os.path.join(root, f"n{i}") for i in range(n)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * n
        self.offsets = [0] * n
        for i, home in enumerate(self.homes):
            os.makedirs(home, exist_ok=True)
            with open(self.conf(i), "w") as f:
                f.write(config(i + 1, home, self.store(i), self.remotings, self.rafts, election_ms, extra))

    def conf(self, i: int) -> str:
        return os.path.join(self.homes[i], "controller.toml")

    def log(self, i: int) -> str:
        return os.path.join(self.homes[i], "controller.log")

    def store(self, i: int) -> str:
        return os.path.join(self.homes[i], "store")

    def pid(self, i: int) -> int:
        proc = self.procs[i]
        if proc is None:
            raise RuntimeError(f"node {i} is not running")
        return proc.pid

    def spawn(self, i: int) -> None:
        if self.procs[i] is not None:
            raise RuntimeError(f"node {i} is running")
        self.offsets[i] = os.path.getsize(self.log(i)) if os.path.exists(self.log(i)) else 0
        with open(self.log(i), "ab") as out:
            self.procs[i] = subprocess.Popen(
                argv(self.program, self.conf(i)),
                cwd=self.homes[i],
                env=environment(os.environ, self.homes[i]),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, nodes: Sequence[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(nodes)
        while waiting:
            for i in list(waiting):
                proc = self.procs[i]
                with open(self.log(i), "rb") as f:
                    text = f.read()
                if started_since(text, self.offsets[i]):
                    waiting.remove(i)
                elif proc is None or proc.poll() is not None or time.monotonic() > deadline:
                    tail = ANSI.sub(b"", text[self.offsets[i] :]).decode(errors="replace").splitlines()[-8:]
                    how = "did not start" if proc is None else f"exited ({proc.returncode})"
                    if proc is not None and proc.returncode is None:
                        how = f"not serving after {timeout:.0f} s"
                    raise RuntimeError(f"rocketmq-rust node {i} {how}; {self.log(i)}:\n" + "\n".join(tail))
            time.sleep(0.1)

    def start(self, i: int | None = None, timeout: float = 60) -> None:
        """Node i (a killed one again, on its store and ports), or every node when i is None; returns once each
        started one serves (it has seen a leader and recovered the committed state)."""
        nodes: Sequence[int] = range(len(self.procs)) if i is None else [i]
        for k in nodes:
            self.spawn(k)
        self.wait_ready(nodes, timeout)

    def kill(self, i: int) -> None:
        """kill -9 node i."""
        proc = self.procs[i]
        if proc is not None:
            proc.kill()
            proc.wait()
            self.procs[i] = None

    def stop(self, i: int | None = None, grace: float = 10) -> None:
        """SIGTERM to node i (every running node when i is None), SIGKILL to any still running `grace` seconds
        later."""
        nodes = range(len(self.procs)) if i is None else [i]
        running = [p for k in nodes if (p := self.procs[k]) is not None and p.poll() is None]
        for p in running:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in running:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for k in nodes:
            self.procs[k] = None

    def applied(self, i: int, since_start: bool = True) -> int | None:
        """Node i's progress as tools/bench/peers.py asks it (the last applied index): rocketmq-rust exposes no
        index, but a node logs that it started only once it has seen a leader and recovered the committed state,
        and start(i) returns only then; so a serving node counts as caught up with any index (sys.maxsize), one
        that is not as None."""
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return None
        with open(self.log(i), "rb") as f:
            return sys.maxsize if started_since(f.read(), self.offsets[i]) else None

    def __enter__(self) -> RustControllers:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

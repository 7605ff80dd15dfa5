"""python -m tools.bench peers [--rounds R] [--systems ours,jraft,dledger] [--quick] [--json FILE] [--charts DIR]
                            [--dir D] [--keep]
python -m tools.bench peers --from FILE [--charts DIR]     (the table and charts of an earlier run's JSON)

Ours against RocketMQ's own controllers (issue 25), one system at a time, never two at once, each a fresh
3-node group on loopback on the same data disk: ours (`controllerd`, tools/cluster.py), RocketMQ's
JRaftController (`controllerType=jRaft`) and its DLedgerController (`controllerType=DLedger`), both JVMs with
the same heap cap (cli/rocketmq.py HEAP["peer"]). The systems alternate in rounds (ours, jraft, dledger, ours,
...); each row gives the median over the rounds, the range, and the ratio to JRaftController.

The load is interop/rocketmq/src/interop/ControllerLoad.java: RocketMQ's own NettyRemotingClient and request
headers, the requests brokers send (GET_CONTROLLER_METADATA_INFO 1005 to find the leader, the registration
sequence 1012/1013/1003, BROKER_HEARTBEAT 904, GET_REPLICA_INFO 1004), all to the leader. It reports its own
CPU time, printed beside each row, so that a reader can see it is not the limit. Per system and round:

* registration storm: N brokers (3 per broker set) register at once, 64 in flight: seconds until all have ids;
* heartbeat throughput: C heartbeats always in flight for S seconds (the first fifth is warm-up):
  acknowledged/s, p50, p99;
* disk: bytes of data under each node's store after those heartbeats (the largest node; per file the smaller
  of its size and its allocated blocks: sparse preallocation and reserved blocks do not count), its growth since
  the group started per heartbeat acknowledged (warm-up included), and the blocks allocated;
* memory and realistic load: B brokers registered, each heartbeating once a second: the leader's RSS at the end,
  its CPU % during the run, the heartbeats' p99;
* controller failover: kill -9 the leader while the last brokers heartbeat: seconds until a new leader
  answers GET_REPLICA_INFO and acknowledges a heartbeat.

DLedgerController keeps heartbeats in memory (DefaultBrokerHeartbeatManager's brokerLiveTable), never in its
log: its heartbeat, disk and realistic-load rows measure less work. The machine's load average before and
after is in the output; `--quick` is a smoke-test size whose figures mean nothing. `--charts DIR` writes one PNG
per row: each system's median as a bar, its range as a whisker, every round as a dot."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

from cli import rocketmq
from cli.rocketmq import Deployment
from tools.bench import broker_failover_peers, machine, rust_peer
from tools.cluster import ROOT, ControllerdCluster

T = TypeVar("T")

# "rust" (mxsm/rocketmq-rust's controller, tools/bench/rust_peer.py) only when its binary is here
SYSTEMS = ("ours", "jraft", "dledger", *(("rust",) if rust_peer.available() else ()))
DEFAULTS = {
    "ours": "heartbeats through the Raft log, fsync per log batch (group commit), snapshot every 10,000 entries "
    "(statemachineSnapshotThreshold) or 3600 s (jRaftSnapshotIntervalSecs), state hashed every 10,000 entries "
    "(controllerCorruptCheckEntries), election timeout 1000 ms",
    "jraft": "heartbeats through the Raft log (RaftBrokerHeartBeatManager), sofa-jraft's fsync per log batch "
    "(RaftOptions.sync=true), snapshot every 3600 s, election timeout 1000 ms; heap -Xmx256m",
    "dledger": "heartbeats in memory only (DefaultBrokerHeartbeatManager), DLedger log flushed every 10 ms "
    "(flushFileInterval, no fsync per append), DLedger's default election timing; heap -Xmx256m",
    "rust": "rocketmq-rust's controller 1.0.0 (OpenRaft, RocksDB): heartbeats through the Raft log (each 904 a "
    "client_write, answered after commit and apply), RocksDB writes synced (set_sync, use_fsync): fsync per log "
    "batch, and per applied batch the whole state re-serialised as JSON and written synced; snapshot every 5,000 "
    "entries (snapshotLogsSinceLast), election timeout 1000-2000 ms (electionTimeoutMs 1000), leader heartbeat "
    "300 ms; scanNotActiveBrokerInterval 1000 as the JVMs; native, no memory cap",
}
NOTES = {"dledger": "heartbeats in memory, not in its log"}
HISTOGRAMS = {
    "log_write": "controllerd_raft_fsync_duration_seconds",  # write + fdatasync of one log batch
    "commit": "controllerd_raft_commit_duration_seconds",  # a proposal batch, proposed to applied (the leader's)
    "loop_lag": "controllerd_event_loop_lag_seconds",  # how late the node's loop ran a 50 ms timer
}
"""The histograms of ours that say where a window's slow heartbeats waited (`Ours.histograms`)."""
BY_FAMILY = {family: name for name, family in HISTOGRAMS.items()}
QUERY = {"name[]": list(HISTOGRAMS.values())}  # these only: the whole text is ~10 MB at 10k brokers
SLOW_S = 0.05
"""A log write (write + fdatasync of one batch), commit or loop turn slower than this holds heartbeats well past
the realistic row's 20 ms goal; for a log write it is a disk stall: on an idle disk of the machine of
docs/performance.md ("The 10k tail's stall windows, attributed") one fdatasync of 256 B took 0.2 ms at the p50 and
up to 256 ms, with nothing else running. It is one of the nodes' histogram bounds (raft/latency.py)."""
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


class Addressed(Protocol):
    remotings: list[str]  # what ControllerLoad sends to


class Group(Addressed, Protocol):
    def pid(self, i: int) -> int: ...
    def store(self, i: int) -> str: ...
    def kill(self, i: int) -> None: ...
    def stop(self, i: int) -> None: ...
    def start(self, i: int) -> None: ...
    def applied(self, i: int, since_start: bool = True) -> int | None: ...


class Ours:
    """A 3-node `controllerd` group, every node started from the source tree `tree` (another checkout runs with
    this interpreter: tools/bench/realistic_ab.py), with `extra` controller.conf lines."""

    def __init__(self, root: str, tree: str = ROOT, extra: str = "") -> None:
        self.cluster = ControllerdCluster(root, election_ms=1000, extra=extra)
        self.remotings = self.cluster.remotings
        self.root, self.tree = root, tree

    def pid(self, i: int) -> int:
        return self.cluster.procs[i].pid

    def store(self, i: int) -> str:
        return os.path.join(self.root, f"n{i}")

    def kill(self, i: int) -> None:
        self.cluster.kill(i)

    def stop(self, i: int) -> None:
        self.cluster.terminate(i)

    def start(self, i: int) -> None:
        self.cluster.start(i, tree=self.tree)

    def applied(self, i: int, since_start: bool = True) -> int | None:
        """Node i's applied index (its HTTP status), None while it does not answer."""
        try:
            r = httpx.get(self.cluster.url(i, "/api/v1/raft/status"), timeout=2, headers=self.cluster.headers)
            return int(r.json()["body"]["appliedIndex"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None

    def histograms(self) -> list[dict[str, dict[float, float]] | None]:
        """Every node's HISTOGRAMS so far, from its /metrics: per name, the count at or under each bucket's upper
        bound in seconds (`math.inf` for all); a name the node does not serve (a follower's commits) is missing,
        and a node that does not answer is None."""
        out: list[dict[str, dict[float, float]] | None] = []
        for i in range(3):
            try:
                r = httpx.get(self.cluster.url(i, "/metrics"), params=QUERY, timeout=2, headers=self.cluster.headers)
                r.raise_for_status()
            except httpx.HTTPError:
                out.append(None)
                continue
            node: dict[str, dict[float, float]] = {}
            for fam in text_string_to_metric_families(r.text):
                if fam.name in BY_FAMILY:
                    node[BY_FAMILY[fam.name]] = {
                        float(s.labels["le"]): s.value for s in fam.samples if s.name.endswith("_bucket")
                    }
            out.append(node)
        return out


def slow_per_node(
    before: list[dict[str, dict[float, float]] | None], after: list[dict[str, dict[float, float]] | None]
) -> dict[str, dict[str, list[Any]]]:
    """Between two `Ours.histograms` readings, per histogram and node: how many took over SLOW_S
    (`over_50ms`) and the slowest one's bucket bound in ms (`slowest_ms`); None where a node had no reading."""
    out: dict[str, dict[str, list[Any]]] = {"over_50ms": {}, "slowest_ms": {}}
    for name in HISTOGRAMS:
        pairs = [((b or {}).get(name), (e or {}).get(name)) for b, e in zip(before, after, strict=True)]
        out["over_50ms"][name] = [slow_count(b, e, SLOW_S) for b, e in pairs]
        out["slowest_ms"][name] = [slowest_ms(b, e) for b, e in pairs]
    return out


def slow_count(before: dict[float, float] | None, after: dict[float, float] | None, over_s: float) -> int | None:
    """Observations slower than `over_s` (a bucket bound) between two readings of one node's histogram."""
    if before is None or after is None:
        return None
    slow = {k: h[math.inf] - h[over_s] for k, h in (("before", before), ("after", after))}
    return int(slow["after"] - slow["before"])


def slowest_ms(before: dict[float, float] | None, after: dict[float, float] | None) -> float | str | None:
    """The upper bound (ms) of the bucket that holds the slowest observation between two readings of one node's
    histogram; None if there was none or a reading is missing, "+Inf" past the last bound (as Prometheus writes
    that bound: JSON has no infinity)."""
    if before is None or after is None:
        return None
    total = after[math.inf] - before[math.inf]
    if total <= 0:
        return None
    # cumulative buckets: the slowest is under the lowest bound whose count rose as much as the +Inf one
    bound = min(le for le in after if after[le] - before.get(le, 0) >= total)
    return bound * 1000 if bound != math.inf else "+Inf"


class Rocket:
    """JRaftControllers or DLedgerControllers of one Deployment."""

    def __init__(self, group: rocketmq.JRaftControllers | rocketmq.DLedgerControllers) -> None:
        self.group = group
        self.remotings = group.remotings
        self.marks: dict[int, int] = {}

    def pid(self, i: int) -> int:
        return self.group.nodes[i].pid

    def store(self, i: int) -> str:
        return self.group.stores[i]

    def kill(self, i: int) -> None:
        self.group.nodes[i].kill()

    def stop(self, i: int) -> None:
        self.group.nodes[i].stop()

    def start(self, i: int) -> None:
        self.mark(i)
        self.group.nodes[i].start()

    def applied(self, i: int, since_start: bool = True) -> int | None:
        """The last index node i's controller state machine logged applying (neither exposes it otherwise):
        JRaftControllerStateMachine logs "process event: term T, index I" per entry, DLedgerControllerStateMachine
        "Apply N events index from A to B" per batch, into ~/logs/rocketmqlogs/controller.log (an AsyncAppender
        with discardingThreshold 0: no line is dropped). None before the first. With `since_start`, only what it
        logged since its last start counts (a restarted node's log is the file it wrote before); without, the last
        logged at all (DLedgerController logs nothing while only heartbeats come, which it keeps out of its
        log)."""
        return last_applied(self.log(i), self.marks.get(i, 0) if since_start else 0)

    def log(self, i: int) -> str:
        return os.path.join(self.group.nodes[i].home, "logs", "rocketmqlogs", "controller.log")

    def mark(self, i: int) -> None:
        """From now on applied(i) reads only what node i logs after this point (a restarted node's log file is
        the one it wrote before)."""
        self.marks[i] = os.path.getsize(self.log(i)) if os.path.exists(self.log(i)) else 0


APPLIED = re.compile(rb"process event: term \d+, index (\d+)|Apply \d+ events index from \d+ to (\d+)")


def last_applied(path: str, since: int = 0, tail: int = 1 << 18) -> int | None:
    """The highest applied index in the last lines of a RocketMQ controller's log written after byte `since` (all
    of it when the file is now shorter: it rolled over), None if none: the last `tail` bytes first, then four
    times as many, and so on back to `since` (other lines may follow the last applied entry for megabytes, e.g.
    DLedgerController's "new broker registered" per broker's first heartbeat)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = 0 if size < since else since
            while True:
                at = max(start, size - tail)
                f.seek(at)
                found = [int(a or b) for a, b in APPLIED.findall(f.read(size - at))]
                if found or at == start:
                    return max(found) if found else None
                tail *= 4
    except FileNotFoundError:
        return None


@contextmanager
def started(system: str, root: str) -> Iterator[Group]:
    """A running 3-node group of `system`; every process stopped however the block ends."""
    if system == "rust":
        with rust_peer.RustControllers(root) as rust:
            yield rust
        return
    if system == "ours":
        ours = Ours(root)
        try:
            ours.cluster.start_all()
            ours.cluster.wait_ready(timeout=120)
            yield ours
        finally:
            ours.cluster.stop_all()
        return
    with Deployment(root) as dep:
        g = (
            dep.jraft_controllers(3, election_ms=1000, kind="peer")
            if system == "jraft"
            else dep.dledger_controllers(3, kind="peer")
        )
        g.start()
        yield Rocket(g)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def runq_wait_s(pid: int) -> float:
    """Seconds the main thread of process `pid` (our node's event loop) has spent runnable but waiting for a CPU
    since it started: the second field of /proc/PID/schedstat. On a 2-core box shared by three nodes and the load
    generator, this is the part of a heartbeat's wait that no change to our code removes."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def cpu_pct_while(pid: int, work: Callable[..., T], *args: Any) -> tuple[T, float]:
    """`work(*args)`, and the percent of one core that process `pid` used while it ran."""
    c0, w0 = cpu_s(pid), time.monotonic()
    out = work(*args)
    c1, w1 = cpu_s(pid), time.monotonic()
    return out, round(100 * (c1 - c0) / (w1 - w0), 1)


def du(path: str, allocated: bool = False) -> int:
    """Bytes of data under `path`: per file the smaller of its size and its allocated blocks, so that neither a
    sparse preallocated segment (ours: a 64 MiB WAL segment, DLedger: 1 GiB mmapped files) nor blocks reserved
    ahead by fallocate(KEEP_SIZE) (sofa-jraft's RocksDB) count as written. With `allocated`: the blocks alone,
    what the disk has set aside."""
    total = 0
    for d, _, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(d, name))
            except FileNotFoundError:
                continue
            blocks = st.st_blocks * 512
            total += blocks if allocated else min(blocks, st.st_size)
    return total


class Load:
    """One run of ControllerLoad: its JSON lines as they come."""

    def __init__(self, group: Addressed, prefix: str, *args: object) -> None:
        rocketmq.require()
        cp = os.path.join(rocketmq.LIB, "*") + os.pathsep + rocketmq.CLASSES
        self.argv = [
            "java",
            *rocketmq.HEAP["load"],
            *rocketmq.COMMON,
            f"-Dpeers.prefix={prefix}",
            "-cp",
            cp,
            "interop.ControllerLoad",
            ";".join(group.remotings),
            *map(str, args),
        ]
        self.leader = ""  # the leader the generator sends to, as its last answer said
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout: float = 1800) -> dict[str, Any]:
        """The next JSON line; an error naming the command line when the generator exits first or sends nothing
        for `timeout` seconds (it is then killed)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"ControllerLoad sent nothing for {timeout:.0f} s: {' '.join(self.argv)}") from None
        if line is not None:
            out: dict[str, Any] = json.loads(line)
            return out
        self.lines.put(None)  # the end stays the end for the next caller
        code = self.proc.wait()
        self.stderr.seek(0)
        tail = "".join(self.stderr.readlines()[-8:]).rstrip()
        raise AssertionError(f"ControllerLoad exited ({code}) without a result: {' '.join(self.argv)}\n{tail}")

    def ask(self, command: str) -> dict[str, Any]:
        """One command of the `script` mode, and its answer."""
        self.say(command)
        out = self.next()
        if "leader" in out and out.get("mode") != "failover":
            self.leader = out["leader"]
        return out

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 60) -> None:
        """Wait for the generator to end, at most `timeout` seconds (then kill it). Its stdin is closed first:
        the `script` mode ends at the end of its commands, as at `quit` (without that, every run that did not
        say `quit` waited the whole timeout)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()

    def __enter__(self) -> Load:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None and exc[0] is not None:
            self.proc.kill()
        self.close()


def cores(r: dict[str, Any]) -> float:
    return round(r["cpu_s"] / r["wall_s"], 3) if r.get("wall_s") else 0.0


def caught_up(g: Group, i: int, target: int, deadline: float) -> float | None:
    """Seconds until node i has applied `target` (polled every 50 ms), None at `deadline`."""
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        got = g.applied(i)
        if got is not None and got >= target:
            return round(time.monotonic() - t0, 3)
        time.sleep(0.05)  # a poll period: nothing signals that a node applied an index
    return None


def leader_target(g: Group, leader: int, settle: float = 10) -> int:
    """The leader's applied index once it stops moving (the load has stopped; a RocketMQ controller's log line
    trails its apply by a moment)."""
    last, same_since, deadline = None, time.monotonic(), time.monotonic() + settle
    while time.monotonic() < deadline:
        now = g.applied(leader, since_start=False)
        if now != last:
            last, same_since = now, time.monotonic()
        elif now is not None and time.monotonic() - same_since >= 0.5:
            return now
        time.sleep(0.05)  # a poll period
    if last is None:
        raise AssertionError(f"the leader (node {leader}) reports no applied index")
    return last


def acked(r: dict[str, Any]) -> int:
    return int(r.get("total_acknowledged", r.get("acknowledged_before_kill", 0)))


def one_round(system: str, root: str, a: argparse.Namespace) -> dict[str, Any]:
    """Every row of one system, on a fresh group."""
    out: dict[str, Any] = {"system": system, "load1_before": os.getloadavg()[0]}
    t0 = time.monotonic()
    with started(system, root) as g:
        out["startup_s"] = round(time.monotonic() - t0, 2)
        empty = [du(g.store(i)) for i in range(3)]
        with Load(g, "storm", "register", a.storm, max(1, a.storm // 3), 64) as ld:
            reg = ld.next()
        out["register"] = reg
        with Load(g, "hb", "heartbeat", a.hb_brokers, max(1, a.hb_brokers // 3), a.inflight, a.seconds) as ld:
            out["heartbeat_register"] = ld.next()
            out["heartbeat"] = ld.next()
        heartbeats = acked(out["heartbeat"])
        out["disk"] = {
            "empty_bytes_per_node": empty,
            "bytes_per_node": [du(g.store(i)) for i in range(3)],
            "allocated_bytes_per_node": [du(g.store(i), allocated=True) for i in range(3)],
        }
        sizes = sorted(set(a.sizes) | {a.brokers, a.fo_brokers})
        n = max([*sizes, a.fo_brokers, a.hb_brokers])
        with Load(g, "big", "script", n, max(1, n // 3)) as sc:
            out["curve"] = []
            for size in sizes:
                step: dict[str, Any] = {"brokers": size, "register": sc.ask(f"register {size}")}
                pid = g.pid(g.remotings.index(step["register"]["leader"]))
                h0 = g.histograms() if isinstance(g, Ours) else None
                step["steady"], cpu_pct = cpu_pct_while(pid, sc.ask, f"steady {size} 1 {a.seconds}")
                if isinstance(g, Ours) and h0 is not None:  # per node: its slow log writes, commits and loop turns
                    step |= slow_per_node(h0, g.histograms())
                step["leader_rss_bytes"] = rss(pid)
                step["leader_cpu_pct"] = cpu_pct
                heartbeats += acked(step["steady"])
                out["curve"].append(step)
                if size == a.brokers:
                    out["steady_register"], out["steady"] = step["register"], step["steady"]
                    out["memory"] = {k: step[k] for k in ("leader_rss_bytes", "leader_cpu_pct")}
                if size == a.fo_brokers and a.kills:
                    out["failovers"] = failovers(g, sc, a)
                    heartbeats += sum(acked(f) for f in out["failovers"])
            # the disk and restart rows: heartbeats until `--million` were acknowledged in all
            sc.ask(f"register {a.hb_brokers}")
            count = max(0, a.million - heartbeats)
            out["million"] = (
                sc.ask(f"saturate {a.hb_brokers} {a.inflight} {a.million_seconds} {count}") if count else {}
            )
            heartbeats += acked(out["million"]) if count else 0
            out["million_disk"] = {
                "heartbeats": heartbeats,
                "bytes_per_node": [du(g.store(i)) for i in range(3)],
                "allocated_bytes_per_node": [du(g.store(i), allocated=True) for i in range(3)],
            }
            out["restart"] = restart(g, g.remotings.index(sc.leader))
            sc.say("quit")
    out["load1_after"] = os.getloadavg()[0]
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def failovers(g: Group, sc: Load, a: argparse.Namespace) -> list[dict[str, Any]]:
    """`a.kills` times: the realistic load on `a.fo_brokers` brokers for `a.fo_load` seconds, kill -9 of the
    leader, the time until a new one answers 1004 and accepts 904; then the killed node started again and
    waited for until it has applied what the new leader has."""
    runs = []
    for k in range(a.kills):
        ready = sc.ask(f"failover {a.fo_brokers} 1")
        leader = g.remotings.index(ready["leader"])
        time.sleep(a.fo_load)  # the load runs this long before the kill: a timed phase of the benchmark
        g.kill(leader)
        sc.say("killed")
        r = sc.next()
        r["kill"] = k
        sc.leader = r.get("new_leader") or sc.leader
        g.start(leader)
        new = g.remotings.index(r["new_leader"]) if r.get("new_leader") in g.remotings else None
        if new is not None:
            r["killed_node_caught_up_s"] = caught_up(g, leader, leader_target(g, new), time.monotonic() + 300)
        runs.append(r)
        if r.get("serving_s") is None or r.get("killed_node_caught_up_s") is None:
            raise AssertionError(f"failover {k}: no new leader served, or the killed node never caught up: {r}")
    return runs


def restart(g: Group, leader: int) -> dict[str, Any]:
    """A follower stopped (SIGTERM) and started again: seconds from its start until it has applied everything
    the leader had applied (the load is stopped)."""
    node = (leader + 1) % 3
    target = leader_target(g, leader)
    g.stop(node)
    t0 = time.monotonic()
    g.start(node)
    took = caught_up(g, node, target, t0 + 900)
    if took is None:
        raise AssertionError(f"node {node} did not apply index {target} within 900 s of its restart")
    return {"node": node, "target_index": target, "caught_up_s": round(time.monotonic() - t0, 3)}


# (row name, unit, how to read it from a round, higher is better)
ROWS: list[tuple[str, str, str, bool]] = [
    ("heartbeat throughput, acknowledged", "/s", "heartbeat.per_s", True),
    ("heartbeat p50 at saturation", "ms", "heartbeat.p50_ms", False),
    ("heartbeat p99 at saturation", "ms", "heartbeat.p99_ms", False),
    ("registration storm, all have ids", "s", "register.seconds", False),
    ("memory: leader RSS", "MiB", "memory.leader_rss_mib", False),
    ("realistic load: leader CPU", "%", "memory.leader_cpu_pct", False),
    # the same CPU over the heartbeats it answered: where a system answers few (a saturated JRaftController fails
    # them), its CPU % alone compares unequal work; no figure when it answered none
    ("realistic load: leader CPU per acknowledged heartbeat", "us", "memory.leader_cpu_us_per_ack", False),
    ("realistic load: heartbeat p99", "ms", "steady.p99_ms", False),
    ("realistic load: heartbeats unanswered", "count", "steady.unanswered", False),
    ("realistic load: heartbeats unanswered or failed", "count", "steady.unanswered_or_failed", False),
    ("controller failover under the realistic load, p50 of the kills", "s", "failover_kills.p50_s", False),
    ("controller failover under the realistic load, p99 of the kills", "s", "failover_kills.p99_s", False),
    ("restart after 1M heartbeats: caught-up follower", "s", "restart.caught_up_s", False),
    ("disk: bytes per node (largest)", "KiB", "disk.max_kib", False),
    ("disk: allocated per node, preallocation included", "KiB", "disk.allocated_max_kib", False),
    ("disk: growth per heartbeat", "B", "disk.per_heartbeat", False),
    # one kill at 300 brokers, in runs before 2026-11-28 (the rows above replace it)
    ("controller failover: 1004 + 904 answered", "s", "failover.serving_s", False),
    ("disk after 1M heartbeats: bytes per node (largest)", "KiB", "million_disk.max_kib", False),
    ("disk after 1M heartbeats: allocated per node", "KiB", "million_disk.allocated_max_kib", False),
    ("broker failover, real brokers: a slave is master (1004), p50", "s", "broker_failover.master_s.p50", False),
    ("broker failover, real brokers: a slave is master (1004), p99", "s", "broker_failover.master_s.p99", False),
    ("broker failover, real brokers: the NameServer routes to it, p50", "s", "broker_failover.route_s.p50", False),
    ("broker failover, real brokers: the NameServer routes to it, p99", "s", "broker_failover.route_s.p99", False),
    ("broker failover, real brokers: the producer's next send succeeds, p50", "s", "broker_failover.send_s.p50", False),
    ("broker failover, real brokers: the producer's next send succeeds, p99", "s", "broker_failover.send_s.p99", False),
    (
        "heartbeats acknowledged before those rows (1M unless --million-seconds ran out)",
        "count",
        "million_disk.heartbeats",
        True,
    ),
]
CURVE_AFTER = "realistic load: heartbeats unanswered or failed"  # the other sizes' rows come after this one


def row_defs(sizes: list[int] | None = None, brokers: int = 10000) -> list[tuple[str, str, str, bool]]:
    """ROWS with the realistic-load rows of every size of the curve other than `brokers` (whose rows are the
    realistic-load rows above)."""
    curve = []
    for n in sorted(sizes or []):
        if n != brokers:
            curve += [
                (f"realistic load at {n:,} brokers: leader CPU", "%", f"curve_by_size.{n}.leader_cpu_pct", False),
                (
                    f"realistic load at {n:,} brokers: leader CPU per acknowledged heartbeat",
                    "us",
                    f"curve_by_size.{n}.leader_cpu_us_per_ack",
                    False,
                ),
                (f"realistic load at {n:,} brokers: heartbeat p99", "ms", f"curve_by_size.{n}.p99_ms", False),
                (
                    f"realistic load at {n:,} brokers: unanswered or failed",
                    "count",
                    f"curve_by_size.{n}.unanswered",
                    False,
                ),
            ]
    k = next(i for i, r in enumerate(ROWS) if r[0] == CURVE_AFTER) + 1
    return ROWS[:k] + curve + ROWS[k:]


def nearest_rank(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (of 20 values, p99 is the largest)."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, -(-int(q * 100) * len(s) // 100) - 1))]


def cpu_us_per_ack(cpu_pct: float | None, per_s: float | None) -> float | None:
    """Microseconds of the leader's CPU per acknowledged heartbeat: its % of a core over the window, divided by the
    heartbeats it acknowledged per second; None when it acknowledged none."""
    if cpu_pct is None or not per_s:
        return None
    return round(cpu_pct * 10_000 / per_s, 1)


def derive(r: dict[str, Any]) -> None:
    """The derived figures of one round, in place (again on a saved round: `--from` derives what it lacks)."""
    r["memory"]["leader_rss_mib"] = round(r["memory"]["leader_rss_bytes"] / (1 << 20), 1)
    if "steady" in r:
        r["memory"]["leader_cpu_us_per_ack"] = cpu_us_per_ack(r["memory"].get("leader_cpu_pct"), r["steady"]["per_s"])
    sizes = r["disk"]["bytes_per_node"]
    grown = [b - e for b, e in zip(sizes, r["disk"]["empty_bytes_per_node"], strict=True)]
    r["disk"]["max_kib"] = round(max(sizes) / 1024, 1)
    r["disk"]["allocated_max_kib"] = round(max(r["disk"]["allocated_bytes_per_node"]) / 1024, 1)
    acked = r["heartbeat"]["total_acknowledged"]
    r["disk"]["heartbeats"] = acked
    r["disk"]["per_heartbeat"] = round(max(grown) / acked, 1) if acked else None
    if "curve" in r:  # runs since 2026-11-28: failed (timed out) heartbeats count as well
        r["steady"]["unanswered_or_failed"] = r["steady"]["unanswered"] + r["steady"]["errors"]
        r["curve_by_size"] = {
            str(c["brokers"]): {
                "leader_cpu_pct": c["leader_cpu_pct"],
                "leader_cpu_us_per_ack": cpu_us_per_ack(c["leader_cpu_pct"], c["steady"]["per_s"]),
                "leader_rss_mib": round(c["leader_rss_bytes"] / (1 << 20), 1),
                "p99_ms": c["steady"]["p99_ms"],
                "per_s": c["steady"]["per_s"],
                "unanswered": c["steady"]["unanswered"] + c["steady"]["errors"],
            }
            for c in r["curve"]
        }
    if r.get("failovers"):
        took = [f["serving_s"] for f in r["failovers"]]
        r["failover_kills"] = {
            "kills": len(took),
            "p50_s": round(nearest_rank(took, 0.50), 3),
            "p99_s": round(nearest_rank(took, 0.99), 3),
            "max_s": round(max(took), 3),
        }
    if "million_disk" in r:
        md = r["million_disk"]
        md["max_kib"] = round(max(md["bytes_per_node"]) / 1024, 1)
        md["allocated_max_kib"] = round(max(md["allocated_bytes_per_node"]) / 1024, 1)


def get(r: dict[str, Any], path: str) -> float | None:
    cur: Any = r
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return None if cur is None else float(cur)


def summarize(
    rounds: list[dict[str, Any]], systems: list[str], sizes: list[int] | None = None, brokers: int = 10000
) -> list[dict[str, Any]]:
    rows = []
    for name, unit, path, higher in row_defs(sizes, brokers):
        row: dict[str, Any] = {"name": name, "unit": unit, "higher_is_better": higher, "systems": {}}
        for s in systems:
            vals = [v for r in rounds if r["system"] == s and (v := get(r, path)) is not None]
            if vals:
                row["systems"][s] = {
                    "median": round(statistics.median(vals), 3),
                    "range": [round(min(vals), 3), round(max(vals), 3)],
                    "runs": len(vals),
                }
        ref = row["systems"].get("jraft", {}).get("median")
        for v in row["systems"].values():
            v["vs_jraft"] = round(v["median"] / ref, 3) if ref else None
        if row["systems"]:
            rows.append(row)
    return rows


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    return f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 1 else f"{v:.3f}"


def table(rows: list[dict[str, Any]], systems: list[str]) -> list[str]:
    head = [
        "row",
        *(f"{s}{' *' if s in NOTES else ''}" for s in systems),
        *(f"{s}/jraft" for s in systems if s != "jraft"),
    ]
    lines = [head]
    for r in rows:
        cells = [f"{r['name']} ({r['unit']})"]
        for s in systems:
            v = r["systems"].get(s)
            cells.append("-" if v is None else f"{fmt(v['median'])} [{fmt(v['range'][0])}-{fmt(v['range'][1])}]")
        for s in systems:
            if s != "jraft":
                v = r["systems"].get(s)
                cells.append("-" if v is None or v["vs_jraft"] is None else f"{v['vs_jraft']:.2f}x")
        lines.append(cells)
    widths = [max(len(line[k]) for line in lines) for k in range(len(head))]
    return [
        "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(line, widths, strict=True)))
        for line in lines
    ]


def chart_name(row: dict[str, Any]) -> str:
    """The file name of a row's chart: its name, lower case, words joined by dashes."""
    return "-".join(re.findall(r"[a-z0-9]+", row["name"].lower())) + ".png"


def charts(doc: dict[str, Any], out_dir: str) -> list[str]:
    """One PNG per row of `doc` (as `run` returns it) into `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for row in doc["rows"]:
        systems = list(row["systems"])
        fig, ax = plt.subplots(figsize=(7, 1.2 + 0.6 * len(systems)), dpi=100)
        for k, s in enumerate(systems):
            v = row["systems"][s]
            lo, hi = v["range"]
            ax.barh(k, v["median"], color=f"C{k}", alpha=0.75)
            ax.errorbar(v["median"], k, xerr=[[v["median"] - lo], [hi - v["median"]]], color="black", capsize=4)
            where = path_of(row, *curve_of(doc))
            dots = [x for r in doc["rounds"] if r["system"] == s and (x := get(r, where)) is not None]
            ax.scatter(dots, [k] * len(dots), color="black", s=10, zorder=3)
            ratio = f"  {v['vs_jraft']:.2f}x jraft" if v.get("vs_jraft") is not None and s != "jraft" else ""
            ax.annotate(f" {fmt(v['median'])}{ratio}", (hi, k), va="center", fontsize=8)
        medians = [v["median"] for v in row["systems"].values() if v["median"] > 0]
        if medians and max(medians) > 50 * min(medians):
            ax.set_xscale("log")  # a 100x gap would leave the smaller bars invisible
        ax.set_yticks(range(len(systems)), [f"{s} *" if s in NOTES else s for s in systems])
        ax.invert_yaxis()
        better = "higher is better" if row["higher_is_better"] else "lower is better"
        scale = ", log scale" if ax.get_xscale() == "log" else ""
        ax.set_xlabel(f"{row['unit']}{scale} ({better}; bar: median, whisker: range, dots: rounds)")
        ax.set_title(row["name"], fontsize=10)
        ax.margins(x=0.3)
        fig.tight_layout()
        path = os.path.join(out_dir, chart_name(row))
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def curve_of(doc: dict[str, Any]) -> tuple[list[int], int]:
    """The sizes of a run's realistic-load curve and the one whose rows are the realistic-load rows."""
    settings = doc.get("settings", {})
    return list(settings.get("sizes") or []), int(settings.get("brokers", 10000))


def rederive(doc: dict[str, Any], systems: list[str]) -> None:
    """A saved run's rows made again from its rounds, so that rows derived from what it measured, added since it
    ran, show too. Runs before 2026-11-28 (no realistic-load curve) keep the rows they saved."""
    rounds = doc.get("rounds") or []
    if not rounds or not all("curve" in r for r in rounds):
        return
    for r in rounds:
        derive(r)
    doc["rows"] = summarize(rounds, systems, *curve_of(doc))


def path_of(row: dict[str, Any], sizes: list[int] | None = None, brokers: int = 10000) -> str:
    """The path into a round of the figure a summarised row is made of."""
    return next(path for name, _, path, _ in row_defs(sizes, brokers) if name == row["name"])


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench peers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=2, help="rounds; each runs every system once (default 2)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="which, in this order (default all known)")
    p.add_argument("--storm", type=int, default=3000, help="brokers of the registration storm (default 3000)")
    p.add_argument("--hb-brokers", type=int, default=3000, help="broker identities of the heartbeat row")
    p.add_argument("--inflight", type=int, default=64, help="heartbeats in flight at saturation (default 64)")
    p.add_argument("--seconds", type=float, default=10, help="seconds of each heartbeat row (default 10)")
    p.add_argument("--brokers", type=int, default=10000, help="brokers at 1 heartbeat/s for memory (default 10000)")
    p.add_argument(
        "--sizes",
        type=lambda v: [int(x) for x in v.split(",") if x],
        default=[1000, 10000, 30000],
        help="brokers at 1 heartbeat/s each, the realistic-load curve (default 1000,10000,30000)",
    )
    p.add_argument("--fo-brokers", type=int, default=10000, help="brokers at 1/s through the failovers (default 10000)")
    p.add_argument("--kills", type=int, default=20, help="controller failovers (kill -9 of the leader) per round")
    p.add_argument("--fo-load", type=float, default=3, help="seconds of load before each kill (default 3)")
    p.add_argument(
        "--broker-kills",
        type=int,
        default=10,
        help="kill -9 of a real broker set's master per system and round (tools/bench/broker_failover_peers.py; "
        "ours, jraft, dledger; default 10, 0 for none)",
    )
    p.add_argument("--million", type=int, default=1_000_000, help="heartbeats before the restart and disk rows")
    p.add_argument(
        "--million-seconds",
        type=float,
        default=900,
        help="at most this long for them (default 900; the rows then say how many it reached)",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, one round: a smoke run, figures mean nothing")
    p.add_argument("--json", default="bench-peers.json", help="write every round and the table here")
    p.add_argument("--charts", help="write one PNG per row into this directory")
    p.add_argument("--from", dest="source", help="run nothing: print the table (and --charts) of this earlier JSON")
    p.add_argument("--dir", help="work here (default: a temp dir on the same disk as $TMPDIR, removed)")
    p.add_argument("--keep", action="store_true", help="keep the stores and logs")
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.storm, a.hb_brokers, a.inflight, a.seconds, a.brokers = 1, 30, 30, 8, 1.0, 60
        # real brokers are tools/bench/broker_failover_peers.py's own smoke test's
        a.sizes, a.fo_brokers, a.kills, a.fo_load, a.million, a.broker_kills = [20, 60, 90], 60, 1, 0.5, 500, 0
    return a


def available() -> bool:
    """Whether RocketMQ's jars and the load generator are built (`make rocketmq`)."""
    try:
        rocketmq.require()
    except RuntimeError:
        return False
    return os.path.exists(os.path.join(rocketmq.CLASSES, "interop", "ControllerLoad.class"))


def run(a: argparse.Namespace, systems: list[str]) -> dict[str, Any]:
    """Every round of every system; the document `--json` writes (rows summarised)."""
    rocketmq.require()
    root = a.dir or tempfile.mkdtemp(prefix="bench-peers-")
    doc: dict[str, Any] = {
        "benchmark": "peers",
        "rocketmq_version": rocketmq.version(),
        "loadavg_before": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "machine": machine.describe(),
        "settings": {k: v for k, v in vars(a).items() if k not in ("json", "dir", "keep")},
        "defaults": {s: DEFAULTS[s] for s in systems},
        "java_opt_ext": os.environ.get("JAVA_OPT_EXT", ""),  # JVM flags added to every RocketMQ JVM (tests: C1)
        "notes": {s: NOTES[s] for s in systems if s in NOTES},
        "rounds": [],
        "errors": [],
    }
    try:
        for k in range(a.rounds):
            for j, s in enumerate(systems):
                where = os.path.join(root, f"r{k}-{j}-{s}")  # by position: `--systems ours,ours` keeps both
                try:
                    r = one_round(s, where, a)
                    if a.broker_kills and s in broker_failover_peers.SYSTEMS:
                        r["broker_failover"] = bf = broker_failover_peers.broker_failover(s, where, a.broker_kills)
                        if bf.get("aborted"):
                            doc["errors"].append(
                                {"round": k, "system": s, "error": f"broker failover: {bf['aborted']}"}
                            )
                    derive(r)
                    r["round"] = k
                    doc["rounds"].append(r)
                    hb = r["heartbeat"]
                    print(
                        f"round {k} {s}: {fmt(hb['per_s'])} heartbeats/s (load generator {cores(hb)} cores), "
                        f"storm {r['register']['seconds']:.2f} s, load {os.getloadavg()[0]:.2f}",
                        file=sys.stderr,
                    )
                except Exception as e:  # noqa: BLE001  # one system failing must not hide the others' rows
                    doc["errors"].append({"round": k, "system": s, "error": repr(e)})
                    print(f"round {k} {s}: FAILED {e!r}", file=sys.stderr)
                finally:
                    if not a.keep:
                        shutil.rmtree(where, ignore_errors=True)
                if a.json:  # what is measured so far, in case a later round never ends
                    with open(a.json + ".partial", "w") as f:
                        json.dump(doc, f, indent=1)
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    doc["loadavg_after"] = list(os.getloadavg())
    doc["rows"] = summarize(doc["rounds"], systems, *curve_of(doc))
    doc["load_generator_cores_max"] = max((cores(r["heartbeat"]) for r in doc["rounds"]), default=0.0)
    return doc


def slow_lines(doc: dict[str, Any]) -> Iterator[str]:
    """Per round of ours and size of the realistic-load curve: where its slow heartbeats waited (`slow_per_node`
    of the step: log writes, the leader's commits and loop turns over 50 ms per node, and the slowest of each)."""
    for r in doc["rounds"]:
        for c in r.get("curve", []):
            if "over_50ms" in c:
                yield (
                    f"{r['system']} round {r['round']}, {c['brokers']:,} brokers, p99 {c['steady']['p99_ms']} ms; "
                    f"over {SLOW_S * 1000:g} ms per node: {slow_text(c)}"
                )


def slow_text(figures: dict[str, Any]) -> str:
    """`slow_per_node`'s figures in one line: 'log_write [1, 1, 1] (slowest up to [100.0, 100.0, 100.0] ms);
    commit ...'."""
    return "; ".join(
        f"{name} {figures['over_50ms'][name]} (slowest up to {figures['slowest_ms'][name]} ms)" for name in HISTOGRAMS
    )


def main(argv: list[str]) -> int:
    a = parse(argv)
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        print(f"peers: unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}", file=sys.stderr)
        return 2
    if a.source:
        with open(a.source) as f:
            doc = json.load(f)
        systems = [s for s in DEFAULTS if any(s in row["systems"] for row in doc["rows"])]
        rederive(doc, systems)
    else:
        doc = run(a, systems)
    print(
        f"RocketMQ {doc['rocketmq_version']} controllers vs ours, 3 nodes each on loopback, {doc['settings']['rounds']} round(s)"
    )
    print(f"load average before {doc['loadavg_before']} after {doc['loadavg_after']} ({doc['cpus']} CPUs)")
    if "machine" in doc:  # runs before 2026-11-28 13:00 UTC did not record it
        print(f"machine: {doc['machine']}")
    for s in systems:
        print(f"  {s}: {DEFAULTS[s]}")
    if doc.get("java_opt_ext"):
        print(f"  every RocketMQ JVM also ran with JAVA_OPT_EXT={doc['java_opt_ext']}")
    for line in table(doc["rows"], systems):
        print(line)
    for s, note in doc["notes"].items():
        print(f"* {s}: {note} (DefaultBrokerHeartbeatManager): its heartbeat rows measure less work")
    for line in slow_lines(doc):
        print(line)
    print(f"load generator CPU at saturation: at most {doc['load_generator_cores_max']} cores of {doc['cpus']}")
    if a.charts:
        print(f"wrote {len(charts(doc, a.charts))} charts into {a.charts}")
    if a.source:
        return 0
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    with contextlib.suppress(FileNotFoundError):
        os.remove(a.json + ".partial")  # the whole run is in a.json now
    print(f"wrote {a.json}")
    for e in doc["errors"]:
        print(f"round {e['round']} {e['system']} failed: {e['error']}", file=sys.stderr)
    return 1 if doc["errors"] else 0

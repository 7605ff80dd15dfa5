"""The database under test: `controllerd` processes, one per network namespace, and what faults do to them.

`Cluster` writes each node's RocketMQ `controller.conf` into the run folder (`nodes/nK.conf`, with a fresh
admin token and cluster secret per run, as non-loopback addresses require), starts the node inside its
namespace with its log appended to `nodes/nK.log`, and stops, kills, pauses, resumes, wipes and crashes it.

Spare nodes (`ClusterOptions.spares`, the last namespaces) are brand-new servers for the membership nemesis:
never started with the group, named in nobody's config file. `join_spare()` starts one with an empty data
directory and a config naming the current members and itself, as an operator would before adding it;
`retire()` kills and wipes it and gives it a new raft port, so that its next join is again an id the group has
never seen.

Every node runs with `CONTROLLERD_FSYNC_SIDECAR=1`, so the WAL records in `<store>/log/FSYNCED` how far it is
durable; `crash()` cuts the WAL back to that point (what a power cut would keep). With `faketime=True` every
node runs under libfaketime (the multi-threaded library) with its own timestamp file; `set_clock()` moves the
node's wall and monotonic clocks without a jump that the caller did not ask for (`FakeClock`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from cli.config import controller_conf  # docs/layout.md: jepsen may reuse cli/'s config writing
from jepsen.net import Net

RAFT_PORT = 9880
HTTP_PORT = 9770
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
FAKETIME_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime")
FSYNCED_FILE = "FSYNCED"  # raft.storage.wal.FSYNCED_FILE, read as text: the node is a black box
REPO = Path(__file__).resolve().parent.parent


def remoting_of(http: str) -> str:
    """A node's RocketMQ remoting address: its HTTP host, the HTTP port + 1000 (as `make run`)."""
    host, port = http.rsplit(":", 1)
    return f"{host}:{int(port) + 1000}"


class DBError(RuntimeError):
    """A node could not be started, stopped or changed as asked."""


def faketime_library() -> str:
    for d in FAKETIME_LIB_DIRS:
        p = os.path.join(d, "libfaketimeMT.so.1")
        if os.path.exists(p):
            return p
    raise DBError("libfaketimeMT.so.1 is not installed (the `faketime` package); run jepsen/setup.sh")


@dataclass
class FakeClock:
    """libfaketime's view of one process: fake(t) = start + (t - start) * rate + offset, for real time t.

    libfaketime applies a rate from the process's start, so writing a new rate alone would jump the clock by
    (t - start) * (new - old). `spec_for` keeps the clock continuous across a rate change by moving the
    offset, so the only jumps are the offsets the nemesis asks for.
    """

    start: float  # real time when the process (and libfaketime in it) started
    rate: float = 1.0
    offset: float = 0.0

    def fake(self, t: float) -> float:
        return self.start + (t - self.start) * self.rate + self.offset

    def skew(self, t: float) -> float:
        """How far this clock is ahead of real time at real time t (seconds)."""
        return self.fake(t) - t

    def retarget(self, t: float, *, rate: float | None = None, jump: float = 0.0) -> None:
        """From real time t on: run at `rate` (unchanged when None), `jump` seconds ahead of where it was."""
        new_rate = self.rate if rate is None else rate
        # continuity: start + (t - start) * new_rate + new_offset == fake(t) + jump
        self.offset = self.fake(t) + jump - self.start - (t - self.start) * new_rate
        self.rate = new_rate

    def reset(self) -> None:
        self.rate, self.offset = 1.0, 0.0

    def spec(self) -> str:
        return f"{self.offset:+.6f} x{self.rate:.6f}"


@dataclass
class Node:
    i: int  # 1-based
    name: str
    ns: str
    raft: str  # host:port, also the raft id
    http: str  # host:port
    conf: Path
    store: Path
    log: Path
    clock_file: Path
    proc: subprocess.Popen[bytes] | None = None
    ended_by_us: bool = False  # the last process was killed or stopped by the harness
    paused: bool = False
    starts: int = 0
    clock: FakeClock | None = None
    spare: bool = False  # a server outside the group, not running (the membership nemesis joins it)
    seeds: list[str] = field(default_factory=list)  # a joining spare's jRaftInitConf: current members, then itself
    generation: int = 0  # how many times this spare was retired: its raft port is RAFT_PORT + generation


LEASE_DRIFT_PERCENT = 50  # the clock-skew nemesis's rates span 0.5..1.5 (jepsen/nemesis.py)


@dataclass
class ClusterOptions:
    snapshot_threshold: int = 500
    trailing_logs: int = 100  # jRaftSnapshotTrailingLogs: small, so lagging nodes need InstallSnapshot often
    election_timeout_ms: int = 1000
    scan_interval_ms: int = 2000
    extra: dict[str, str] = field(default_factory=dict)  # more controller.conf keys
    faketime: bool = False
    unsafe_local_reads: bool = False  # the negative control: CONTROLLERD_UNSAFE_LOCAL_READS=1 on every node
    spares: int = 0  # the last `spares` namespaces hold brand-new servers, outside the group until joined
    lease_read: bool = False  # jRaftReadOnlyOption=ReadOnlyLeaseBased, with the drift bound of the clock nemesis
    unsafe_tick_lease: bool = False  # the lease negative control: CONTROLLERD_UNSAFE_TICK_LEASE=1 on every node


class Cluster:
    def __init__(self, net: Net, run_dir: Path, options: ClusterOptions | None = None) -> None:
        self.net = net
        self.opts = options or ClusterOptions()
        self.run_dir = Path(run_dir)
        self.token = secrets.token_urlsafe(24)
        self.secret = secrets.token_urlsafe(32)
        self._lock = threading.RLock()
        self.unexpected_exits: list[dict[str, Any]] = []  # nodes that exited without the harness asking
        nodes_dir = self.run_dir / "nodes"
        self.nodes: list[Node] = []
        for i in range(1, net.n + 1):
            name = f"n{i}"
            self.nodes.append(
                Node(
                    i=i,
                    name=name,
                    ns=net.ns(i),
                    raft=f"{net.addr(i)}:{RAFT_PORT}",
                    http=f"{net.addr(i)}:{HTTP_PORT}",
                    conf=nodes_dir / f"{name}.conf",
                    store=self.run_dir / "data" / name,
                    log=nodes_dir / f"{name}.log",
                    clock_file=nodes_dir / f"{name}.faketime",
                    spare=i > net.n - self.opts.spares,
                )
            )
        self.bootstrap = [n for n in self.nodes if not n.spare]  # the group every config file names
        self.http = httpx.Client(
            timeout=httpx.Timeout(2.0, connect=1.0),
            headers={"Authorization": f"Bearer {self.token}"},
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    # ------------------------------------------------------------------------------------------ configs

    def node(self, i: int) -> Node:
        return self.nodes[i - 1]

    def by_raft_id(self, raft_id: str | None) -> Node | None:
        return next((n for n in self.nodes if n.raft == raft_id), None)

    def config_text(self, node: Node) -> str:
        o = self.opts
        if node in self.bootstrap:
            peers = [(n.raft, n.http) for n in self.bootstrap]
        else:  # a joining spare: the members it was told of, and itself
            peers = [(r, self._http_of(r)) for r in node.seeds if r != node.raft] + [(node.raft, node.http)]
        settings: dict[str, object] = {
            "controllerType": "jRaft",
            "jRaftGroupId": "jepsen",
            "jRaftServerId": node.raft,
            "jRaftInitConf": [r for r, _ in peers],
            "jRaftControllerRPCAddr": [remoting_of(h) for _, h in peers],  # RocketMQ remoting
            "controllerHttpAddr": [h for _, h in peers],
            "controllerStorePath": node.store,
            "jRaftElectionTimeoutMs": o.election_timeout_ms,
            "statemachineSnapshotThreshold": o.snapshot_threshold,
            "jRaftSnapshotTrailingLogs": o.trailing_logs,
            "scanNotActiveBrokerInterval": o.scan_interval_ms,
            "controllerAdminToken": self.token,
            "jRaftClusterSecret": self.secret,
        }
        if o.lease_read or o.unsafe_tick_lease:
            # The clock-skew nemesis runs clocks at 0.5x..1.5x: the lease must allow for 50 % drift.
            settings.update(jRaftReadOnlyOption="ReadOnlyLeaseBased", jRaftMaxClockDriftPercent=LEASE_DRIFT_PERCENT)
        settings.update(sorted(o.extra.items()))
        return controller_conf(
            settings, header=[f"generated by the Jepsen harness for node {node.name} (namespace {node.ns})"]
        )

    def _http_of(self, raft_id: str) -> str:
        node = self.by_raft_id(raft_id)
        if node is None:
            raise DBError(f"no node has raft id {raft_id}")
        return node.http

    def write_configs(self) -> None:
        for node in self.bootstrap:
            node.conf.parent.mkdir(parents=True, exist_ok=True)
            node.store.mkdir(parents=True, exist_ok=True)
            node.conf.write_text(self.config_text(node))
            if self.opts.faketime:
                node.clock_file.write_text("+0 x1\n")

    # ---------------------------------------------------------------------------------------- processes

    def command(self, node: Node) -> list[str]:
        env = ["CONTROLLERD_FSYNC_SIDECAR=1", f"PYTHONPATH={REPO}", "PYTHONUNBUFFERED=1"]
        if self.opts.unsafe_local_reads:
            env.append("CONTROLLERD_UNSAFE_LOCAL_READS=1")
        if self.opts.unsafe_tick_lease:
            env.append("CONTROLLERD_UNSAFE_TICK_LEASE=1")
        if self.opts.faketime:
            env += [
                f"LD_PRELOAD={faketime_library()}",
                f"FAKETIME_TIMESTAMP_FILE={node.clock_file}",
                "FAKETIME_NO_CACHE=1",
            ]
        return [
            "ip",
            "netns",
            "exec",
            node.ns,
            "env",
            *env,
            sys.executable,
            "-m",
            "cli.controllerd",
            "--type",
            "jraft",
            "-c",
            str(node.conf),
            "--log-format",
            "json",
        ]

    def _mark(self, node: Node, event: str, **fields: Any) -> None:
        """A harness line in the node's log (JSON, like the node's own lines)."""
        line = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), "logger": "jepsen", "msg": event, **fields}
        node.log.parent.mkdir(parents=True, exist_ok=True)
        with open(node.log, "a") as f:
            f.write(json.dumps(line) + "\n")

    def start(self, i: int) -> None:
        node = self.node(i)
        with self._lock:
            if self.alive(i):
                return
            self._note_exit(node)
            node.log.parent.mkdir(parents=True, exist_ok=True)
            node.store.mkdir(parents=True, exist_ok=True)
            node.starts += 1
            self._mark(node, "jepsen: start", start=node.starts)
            if self.opts.faketime:
                node.clock = None
                node.clock_file.write_text("+0 x1\n")
            logf = open(node.log, "ab")  # noqa: SIM115 - handed to the child
            try:
                node.proc = subprocess.Popen(
                    self.command(node),
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=REPO,
                    start_new_session=True,
                )
            finally:
                logf.close()
            node.paused = False
            node.ended_by_us = False
            if self.opts.faketime:
                node.clock = FakeClock(start=time.time())

    def _note_exit(self, node: Node) -> None:
        p = node.proc
        if p is not None and p.poll() is not None and not node.ended_by_us:
            self.unexpected_exits.append({"node": node.name, "returncode": p.returncode, "start": node.starts})
            self._mark(node, "jepsen: the node exited on its own", returncode=p.returncode)
            node.ended_by_us = True

    def check_exits(self) -> list[dict[str, Any]]:
        """Record nodes that have exited on their own since the last look; returns all such exits so far."""
        with self._lock:
            for node in self.nodes:
                self._note_exit(node)
            return list(self.unexpected_exits)

    def start_all(self) -> None:
        for node in self.bootstrap:
            self.start(node.i)

    def members(self) -> list[Node]:
        """The nodes that should be in the group and running: every node but the spares not joined."""
        return [n for n in self.nodes if not n.spare]

    def join_spare(self, i: int, seeds: list[str]) -> None:
        """Start spare i as a brand-new server: empty data directory, a config naming `seeds` (raft ids of
        the current members) and itself. It is not in the group until the leader adds it."""
        node = self.node(i)
        with self._lock:
            if not node.spare or self.alive(i):
                raise DBError(f"{node.name} is not a stopped spare")
            shutil.rmtree(node.store, ignore_errors=True)
            node.seeds = list(seeds)
            node.conf.parent.mkdir(parents=True, exist_ok=True)
            node.conf.write_text(self.config_text(node))
            node.spare = False
            self._mark(node, "jepsen: joining as a brand-new server", raft=node.raft, seeds=seeds)
            self.start(i)

    def retire(self, i: int) -> None:
        """Kill a joined spare (already removed from the group), wipe it, and give it a new raft port: its next
        join is an id the group has never seen."""
        node = self.node(i)
        with self._lock:
            self.kill(i)
            self.wipe(i)
            node.spare = True
            node.generation += 1
            old, node.raft = node.raft, f"{node.raft.rsplit(':', 1)[0]}:{RAFT_PORT + node.generation}"
            self._mark(node, "jepsen: retired", old_raft=old, next_raft=node.raft)

    def alive(self, i: int) -> bool:
        p = self.node(i).proc
        return p is not None and p.poll() is None

    def pid(self, i: int) -> int | None:
        p = self.node(i).proc
        return p.pid if p is not None and p.poll() is None else None

    def kill(self, i: int) -> bool:
        """SIGKILL; True when a live process was killed."""
        node = self.node(i)
        with self._lock:
            p = node.proc
            if p is None or p.poll() is not None:
                return False
            node.ended_by_us = True
            p.send_signal(signal.SIGKILL)
            p.wait(STOP_TIMEOUT_S)
            node.paused = False
            self._mark(node, "jepsen: killed", returncode=p.returncode)
            return True

    def stop(self, i: int, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a clean stop), SIGKILL after `timeout`."""
        node = self.node(i)
        with self._lock:
            p = node.proc
            if p is None or p.poll() is not None:
                return
            node.ended_by_us = True
            if node.paused:
                p.send_signal(signal.SIGCONT)
                node.paused = False
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait(STOP_TIMEOUT_S)
            self._mark(node, "jepsen: stopped", returncode=p.returncode)

    def stop_all(self) -> None:
        threads = [threading.Thread(target=self.stop, args=(n.i,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def pause(self, i: int) -> bool:
        node = self.node(i)
        with self._lock:
            if not self.alive(i) or node.paused:
                return False
            assert node.proc is not None
            node.proc.send_signal(signal.SIGSTOP)
            node.paused = True
            return True

    def resume(self, i: int) -> bool:
        node = self.node(i)
        with self._lock:
            if not self.alive(i) or not node.paused:
                node.paused = False
                return False
            assert node.proc is not None
            node.proc.send_signal(signal.SIGCONT)
            node.paused = False
            return True

    def exit_codes(self) -> dict[str, int | None]:
        """Nodes that exited on their own (not killed or stopped by us are told apart in their logs)."""
        return {n.name: (n.proc.poll() if n.proc is not None else None) for n in self.nodes}

    # ---------------------------------------------------------------------------------------- disk faults

    def wipe(self, i: int) -> None:
        """Delete node i's data directory (the node must be down)."""
        if self.alive(i):
            raise DBError(f"{self.node(i).name} is running; kill it before wiping its data")
        node = self.node(i)
        shutil.rmtree(node.store, ignore_errors=True)
        node.store.mkdir(parents=True, exist_ok=True)
        self._mark(node, "jepsen: data directory wiped")

    def crash(self, i: int, rng: random.Random, *, torn: bool) -> dict[str, Any]:
        """SIGKILL node i, then lose what it had not fsynced (see `lose_unsynced`). Returns what was cut."""
        self.kill(i)
        node = self.node(i)
        cut = lose_unsynced(node.store / "log", rng, torn=torn)
        self._mark(node, "jepsen: unsynced WAL data dropped", **cut)
        return cut

    def log_count(self, i: int, needle: str) -> int:
        """How many lines of node i's log since its latest start contain `needle`."""
        marker = f'"start": {self.node(i).starts}'
        count, seen_start = 0, False
        try:
            with open(self.node(i).log, errors="replace") as f:
                for line in f:
                    if '"jepsen: start"' in line and marker in line:
                        seen_start, count = True, 0
                    elif seen_start and needle in line:
                        count += 1
        except OSError:
            return 0
        return count

    # ------------------------------------------------------------------------------------------- clocks

    def set_clock(self, i: int, *, rate: float | None = None, jump: float = 0.0, reset: bool = False) -> str | None:
        """Move node i's clock (faketime runs only). Returns the spec written, None when the node is down."""
        node = self.node(i)
        if not self.opts.faketime:
            raise DBError("the cluster was not started under faketime")
        with self._lock:
            if node.clock is None or not self.alive(i):
                return None
            if reset:
                node.clock.reset()
            else:
                node.clock.retarget(time.time(), rate=rate, jump=jump)
            spec = node.clock.spec()
            tmp = node.clock_file.with_suffix(".tmp")
            tmp.write_text(spec + "\n")
            os.replace(tmp, node.clock_file)
            return spec

    def skews(self) -> dict[str, float]:
        t = time.time()
        return {n.name: round(n.clock.skew(t), 3) for n in self.nodes if n.clock is not None}

    # ---------------------------------------------------------------------------------------- HTTP admin

    def admin(self, i: int, method: str, path: str, body: Any = None, timeout: float = 2.0) -> dict[str, Any]:
        """An admin/raft request to node i; the decoded answer. Raises httpx.HTTPError or DBError."""
        r = self.http.request(method, f"http://{self.node(i).http}{path}", json=body, timeout=timeout)
        try:
            data = r.json()
        except ValueError:
            raise DBError(f"{self.node(i).name} {method} {path}: HTTP {r.status_code}: {r.text[:200]}") from None
        if r.status_code != 200:
            raise DBError(f"{self.node(i).name} {method} {path}: HTTP {r.status_code}: {json.dumps(data)[:300]}")
        return data

    def status(self, i: int) -> dict[str, Any] | None:
        try:
            env = self.admin(i, "GET", "/api/v1/raft/status", timeout=1.0)
        except (httpx.HTTPError, DBError):
            return None
        body = env.get("body")
        return body if isinstance(body, dict) else None

    def leader(self) -> Node | None:
        """The node that leads in the highest term any live node reports (None when nobody knows)."""
        best: tuple[int, str] | None = None
        for node in self.nodes:
            if not self.alive(node.i) or node.paused:
                continue
            st = self.status(node.i)
            if st is None or not st.get("leaderId"):
                continue
            cand = (int(st.get("term", 0)), st["leaderId"])
            if best is None or cand[0] > best[0]:
                best = cand
        return self.by_raft_id(best[1]) if best else None

    def ready(self, i: int) -> bool:
        try:
            return self.http.get(f"http://{self.node(i).http}/readyz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, nodes: list[int] | None = None, timeout: float = READY_TIMEOUT_S) -> list[int]:
        """Poll /readyz of `nodes` (default: all) until each answers 200 or `timeout` passes.
        Returns the nodes that are not ready (empty: all ready). A node whose process died is not ready."""
        want = list(nodes or [n.i for n in self.members()])
        deadline = time.monotonic() + timeout
        pending = set(want)
        while pending and time.monotonic() < deadline:
            for i in sorted(pending):
                if self.alive(i) and self.ready(i):
                    pending.discard(i)
            if pending:
                time.sleep(0.2)  # polling child processes' readiness with a deadline
        return sorted(pending)

    def close(self) -> None:
        self.stop_all()
        self.http.close()


def lose_unsynced(log_dir: Path, rng: random.Random, *, torn: bool) -> dict[str, Any]:
    """Cut the WAL in `log_dir` back to what its `FSYNCED` sidecar says is durable.

    The sidecar names the last fsynced segment and the byte offset up to which it is durable; earlier
    segments are durable, later ones are not durable at all. We truncate that segment to the offset and
    delete every later segment. With `torn`, a few bytes past the offset survive as well: part of the
    next, never-fsynced batch (or junk where there was none), which recovery must treat as a torn write.
    Bytes before the offset are never touched: they were fsynced, so a crash cannot lose them.
    """
    out: dict[str, Any] = {"sidecar": None, "truncated_bytes": 0, "deleted_segments": [], "torn_bytes": 0}
    side = log_dir / FSYNCED_FILE
    try:
        text = side.read_text().strip()
    except OSError:
        text = ""
    if not text:
        return out  # nothing was ever fsynced with the sidecar on
    seg_name, offset_text = text.split()[:2]
    offset = int(offset_text)
    out["sidecar"] = f"{seg_name} {offset}"
    seg_id = _seg_id(seg_name)
    for entry in sorted(os.listdir(log_dir)):
        sid = _seg_id(entry)
        if sid is not None and seg_id is not None and sid > seg_id:
            os.unlink(log_dir / entry)
            out["deleted_segments"].append(entry)
    seg = log_dir / seg_name
    if seg.exists():
        size = seg.stat().st_size
        keep = offset
        if torn:
            extra = rng.randint(1, 64)
            if size > offset:
                keep = offset + min(extra, size - offset - 1) if size - offset > 1 else offset
            out["torn_bytes"] = keep - offset
        with open(seg, "r+b") as f:
            f.truncate(keep)
            if torn and size <= offset:
                junk = bytes(rng.getrandbits(8) for _ in range(extra))
                f.seek(keep)
                f.write(junk)
                out["torn_bytes"] = len(junk)
        out["truncated_bytes"] = max(0, size - keep)
    return out


def _seg_id(name: str) -> int | None:
    """seg_id of a segment file name `<first_index:020d>-<seg_id:016x>.wal` (docs/log-format.md)."""
    if not name.endswith(".wal") or "-" not in name:
        return None
    with contextlib.suppress(ValueError):
        return int(name[:-4].split("-", 1)[1], 16)
    return None

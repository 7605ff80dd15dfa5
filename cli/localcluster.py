"""`controllerd local-cluster`: N controllerd processes on loopback, for trying the controller (`make run`).

Each node gets a generated RocketMQ config under `<data>/conf/nK.conf` (the same keys a production node
reads), its store under `<data>/nK/` and its JSON log in `<data>/logs/nK.log`. Ports: raft 9880.. (RocketMQ's
default), HTTP 9770.. and RocketMQ remoting (jRaftControllerRPCAddr) on HTTP + 1000, 10770.., unless told
otherwise, so a restart finds the same cluster again. The files set no controllerHttpAddr: its default (each
remoting port - 1000) is the HTTP port, as in an operator's RocketMQ controller.conf.

The supervisor prints each node's PID, addresses and data directory. Ctrl-C, SIGTERM or SIGHUP stops every
node with SIGTERM (leader transfer, flush) and waits for them; SIGINT and SIGHUP are handled explicitly, so
that a cluster started in the background of a non-interactive script (which starts with SIGINT ignored)
still stops on `kill -INT`. Every port is checked before any node starts (one in use is named, nothing
starts); a node that fails has the last error lines of its log printed.

Beside the nodes it runs simulated broker groups (`python -m tools.brokersim --remoting`, `--broker-groups`,
off with `--no-brokers`), speaking RocketMQ remoting to the jRaftControllerRPCAddr entries as real brokers do,
so that the status page (/ui/ on every node) shows brokers registering and heartbeating. `--brokers rocketmq`
runs real ones instead (`RealBrokers`: RocketMQ's NameServer and brokers in controller mode, as JVMs of
cli/rocketmq.py, under `<data>/rocketmq/`); every JVM is stopped whenever the supervisor exits.

While it runs, the supervisor answers on a control socket (`<data>/local-cluster.sock`): from another
terminal `controllerd local-cluster stop|start|restart NODE` and `controllerd local-cluster status`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cli.rocketmq import Broker, Deployment

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import click
import httpx

from statemachine.values import JSON, JSONObject

STOP_WAIT_S = 20.0
READY_WAIT_S = 60.0
ERROR_LINES = 5  # how many of a failed node's last error lines are printed
CONTROL_TIMEOUT_S = STOP_WAIT_S + READY_WAIT_S + 10.0
_SOCKET_NAME = "local-cluster.sock"
_MAX_SOCKET_PATH = 100  # sockaddr_un's sun_path is 108 bytes on Linux (104 on BSDs)
# The demo brokers' heartbeatTimeoutMills: a killed master is replaced within this + the scan interval (5 s).
BROKER_HEARTBEAT_TIMEOUT_MS = 3000


REMOTING_OFFSET = 1000  # node i serves RocketMQ remoting on the HTTP port + 1000 (9770 -> 10770): the inverse of
# controllerHttpAddr's default (cli.config.HTTP_PORT_OFFSET), so the generated files leave that key out


@dataclass
class LocalNode:
    name: str
    raft: str
    http: str
    conf: str
    log: str
    data: str
    remoting: str = ""
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # where this run's lines start in the (appended) log file
    stopped_on_request: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    @property
    def how(self) -> str:
        """How the process ended, for messages: `exit 1`, or `killed by SIGKILL` (`kill -9`), not `exit -9`."""
        code = self.returncode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit {code}"


def write_configs(data: str, n: int, raft_port: int, http_port: int, election_ms: int) -> list[LocalNode]:
    from cli.config import write_controller_conf  # the one controller.conf writer (loads the node's options)

    data = os.path.abspath(data)
    os.makedirs(os.path.join(data, "conf"), exist_ok=True)
    os.makedirs(os.path.join(data, "logs"), exist_ok=True)
    rafts = [f"127.0.0.1:{raft_port + i}" for i in range(n)]
    https = [f"127.0.0.1:{http_port + i}" for i in range(n)]
    remotings = [f"127.0.0.1:{http_port + REMOTING_OFFSET + i}" for i in range(n)]
    nodes = []
    for i in range(n):
        name = f"n{i + 1}"
        conf = os.path.join(data, "conf", f"{name}.conf")
        write_controller_conf(
            conf,
            {
                "controllerType": "jRaft",
                "jRaftGroupId": "jRaft-Controller",
                "jRaftServerId": rafts[i],
                "jRaftInitConf": rafts,
                "jRaftControllerRPCAddr": remotings,
                "controllerHttpAddr": None,
                "controllerStorePath": os.path.join(data, name),
                "jRaftElectionTimeoutMs": election_ms,
            },
            header=[
                f"generated by `controllerd local-cluster` for node {name}; loopback only, so no secrets are needed"
            ],
            comments={
                "jRaftControllerRPCAddr": "RocketMQ remoting, where brokers (controllerAddr) and mqadmin connect",
                "controllerHttpAddr": f"controllerHttpAddr not set: HTTP (rmqctl, /ui/) on each remoting port - 1000: "
                f"{','.join(https)}",
            },
            separator=" = ",
        )
        log = os.path.join(data, "logs", f"{name}.log")
        nodes.append(LocalNode(name, rafts[i], https[i], conf, log, os.path.join(data, name), remotings[i]))
    return nodes


def start(node: LocalNode) -> None:
    logf = open(node.log, "ab")  # noqa: SIM115 - owned by the child from here on
    node.log_offset = logf.tell()
    node.stopped_on_request = False
    node.proc = subprocess.Popen(
        [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", node.conf, "--log-format", "json"],
        stdout=logf,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches only us; we stop the nodes in order
    )
    logf.close()


def last_errors(node: LocalNode, limit: int = ERROR_LINES) -> list[str]:
    """The last `limit` error lines this run of `node` wrote to its log (JSON lines at level error or
    critical, with their exception's last line, and any line that is not JSON, e.g. a traceback printed
    before logging was set up); the last lines of any level when there is no error line."""
    try:
        with open(node.log, "rb") as f:
            f.seek(node.log_offset)
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        return [f"(cannot read {node.log}: {e.strerror or e})"]
    errors: list[str] = []
    anything: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            anything.append(line.rstrip())
            if not line.startswith("controllerd: warning:"):  # config warnings come before logging starts
                errors.append(line.rstrip())
            continue
        shown = f"{record.get('level', '?')}: {record.get('msg', '')}"
        exc = str(record.get("exc") or "").strip()
        if exc:
            shown += f" ({exc.splitlines()[-1]})"
        anything.append(shown)
        if record.get("level") in ("error", "critical"):
            errors.append(shown)
    return (errors or anything)[-limit:]


def report_exit(node: LocalNode, what: str) -> None:
    """`what` about a node that exited, with the last error lines of its log, on stderr."""
    click.echo(f"{node.name} {what} ({node.how}); its last log lines ({node.log}):", err=True)
    for line in last_errors(node):
        click.echo(f"    {line}", err=True)


def ports_in_use(nodes: list[LocalNode]) -> list[str]:
    """Every address a node would listen on that something already holds (`n1 HTTP 127.0.0.1:9770: Address
    already in use`). Checked before any node starts: another local cluster on the same ports (a second `make
    run` with another --data) would answer /readyz in our nodes' place, and the run would look ready."""
    taken = []
    for node in nodes:
        for what, address in (("raft", node.raft), ("HTTP", node.http), ("remoting", node.remoting)):
            if not address:
                continue
            host, port = address.rsplit(":", 1)
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
                try:
                    probe.bind((host, int(port)))
                except OSError as e:
                    taken.append(f"{node.name} {what} {address}: {e.strerror}")
    return taken


def _ready(client: httpx.Client, node: LocalNode) -> bool:
    try:
        return client.get(f"http://{node.http}/readyz").status_code == 200
    except httpx.HTTPError:
        return False


def wait_ready(nodes: list[LocalNode], timeout: float, cancelled: Callable[[], bool] = lambda: False) -> str | None:
    """Wait until every node answers /readyz; the leader's raft id (None on timeout, a dead node, or once
    `cancelled()`)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline and not cancelled():
            if any(n.proc is not None and n.proc.poll() is not None for n in nodes):
                return None
            if all(_ready(client, n) for n in nodes):
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    return client.get(f"http://{nodes[0].http}/api/v1/raft/status").json()["body"].get("leaderId")
            time.sleep(0.2)  # polling a child process's readiness; not a test
    return None


def stop(node: LocalNode) -> None:
    """SIGTERM one node and wait for it (SIGKILL after STOP_WAIT_S)."""
    stop_all([node])


def stop_all(nodes: list[LocalNode]) -> None:
    for n in nodes:
        if n.running:
            n.stopped_on_request = True
            n.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    deadline = time.monotonic() + STOP_WAIT_S
    for n in nodes:
        if n.proc is None:
            continue
        try:
            n.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            click.echo(f"{n.name} did not stop within {STOP_WAIT_S:g}s; killing it", err=True)
            n.proc.kill()
            n.proc.wait()


def describe(node: LocalNode, leader: str | None = None) -> list[str]:
    pid = f"pid {node.pid}" if node.running else "stopped"
    mark = "  <- leader" if leader is not None and node.raft == leader else ""
    return [
        f"  {node.name}  {pid}  http://{node.http}  remoting {node.remoting}  raft {node.raft}{mark}",
        f"      data {node.data}  log {node.log}",
    ]


# --- simulated brokers beside the controllers ----------------------------------------------------------------


@dataclass
class Brokers:
    """`python -m tools.brokersim` against the local cluster (the demo's broker groups), its identities and
    epoch files in `<data>/brokers/`. Its lines (registrations, role and SyncStateSet changes, kills, and a
    heartbeat summary every 10 s) go to `<data>/logs/brokers.log` and to the supervisor's terminal."""

    groups: int
    chaos: float | None
    log: str
    proc: subprocess.Popen[bytes] | None = None
    _copier: threading.Thread | None = None

    def start(self, data: str, nodes: list[LocalNode]) -> None:
        args = [
            sys.executable,
            "-m",
            "tools.brokersim",
            "--remoting",  # as real brokers: RocketMQ remoting to the jRaftControllerRPCAddr entries
            "-a",
            ",".join(n.remoting for n in nodes),
            "--groups",
            str(self.groups),
            "--replicas",
            "3",
            "--data",
            os.path.join(data, "brokers"),
            "--heartbeat-timeout",
            str(BROKER_HEARTBEAT_TIMEOUT_MS),
        ]
        if self.chaos:
            args += ["--chaos", f"{self.chaos:g}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._copier = threading.Thread(target=self._copy, args=(self.proc,), name="brokers-output", daemon=True)
        self._copier.start()

    def _copy(self, proc: subprocess.Popen[bytes]) -> None:
        """Each line of the simulator to its log and to the terminal, until it exits."""
        assert proc.stdout is not None
        with open(self.log, "ab") as logf:
            for line in proc.stdout:
                logf.write(line)
                logf.flush()
                with contextlib.suppress(OSError, ValueError):  # a closed terminal: the log still gets it
                    click.echo(line.decode(errors="replace"), nl=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._copier is not None:
            self._copier.join(STOP_WAIT_S)  # its last lines, then EOF
            self._copier = None


# --- real RocketMQ brokers beside the controllers ----------------------------------------------------------

REAL_BOOT_WAIT_S = 180.0  # a cold broker JVM on 2 busy cores
REAL_MASTER_WAIT_S = 60.0
REAL_STOP_GRACE_S = 10.0  # SIGTERM (RocketMQ's shutdown hooks), then SIGKILL
REAL_NAMESRV_PORT = 9876  # RocketMQ's default, when free


def rocketmq_missing() -> str | None:
    """Why real brokers cannot start here (no jars, no java), or None."""
    from cli import rocketmq

    try:
        rocketmq.require()
    except RuntimeError as e:
        return f"{e} (or `make run BROKERS=rocketmq`, which runs it)"
    if shutil.which("java") is None:
        return "no `java` on PATH: real RocketMQ brokers need Java 17"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_sets_of(nodes: list[LocalNode]) -> dict[str, JSONObject] | None:
    """The broker sets of the status page's state (/ui/api/state), asked of each running node in turn until
    one answers (a follower forwards to the leader); None when none does."""
    with httpx.Client(timeout=1.0) as client:
        for node in nodes:
            if node.running:
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                    state = client.get(f"http://{node.http}/ui/api/state").json()
                    return {s["brokerName"]: s for s in state["brokerSets"]}
    return None


@dataclass
class RealBrokers:
    """Real RocketMQ beside the local cluster (`--brokers rocketmq`): a NameServer and `groups` broker sets
    (broker-a, broker-b, ...) of `replicas` brokers in controller mode, their controllerAddr the nodes'
    jRaftControllerRPCAddr entries, every address 127.0.0.1, data under `root` (`<data>/rocketmq`). Role and
    SyncStateSet changes (read from the status page's state) are printed as they happen; with `chaos`, the
    master of a random set is killed -9 every `chaos` seconds and started again once another is elected."""

    root: str
    groups: int = 2
    replicas: int = 2
    chaos: float | None = None
    deployment: Deployment | None = None  # imported when used
    sets: dict[str, list[Broker]] = field(default_factory=dict)  # name -> its brokers
    seen: dict[str, tuple[JSON, ...]] = field(default_factory=dict)  # name -> (master, epoch, in-sync ids)
    reported: set[str] = field(default_factory=set)  # brokers whose unexpected exit was printed
    pending: tuple[str, Broker, int, float] | None = None  # (set, killed broker, its id, when)
    next_kill: float = 0.0

    @staticmethod
    def label(b: Broker) -> str:
        return os.path.basename(b.home)  # broker-a-0

    def start(self, nodes: list[LocalNode]) -> None:
        from cli.rocketmq import Deployment, free_port, port_triples

        self.deployment = Deployment(self.root)
        port = REAL_NAMESRV_PORT if _port_free(REAL_NAMESRV_PORT) else free_port()
        click.echo(
            f"\nStarting RocketMQ: a NameServer and {self.groups} broker sets of {self.replicas} (under {self.root}) ..."
        )
        sys.stdout.flush()
        try:
            ns = self.deployment.namesrv(port)
        except AssertionError as e:
            raise click.ClickException(f"the RocketMQ NameServer did not start: {e}") from None
        ns_log = os.path.join(ns.home, "logs", "rocketmqlogs", "namesrv.log")
        click.echo(f"  namesrv      {self.deployment.namesrv_addr}  pid {ns.pid}  log {ns_log}")
        ports = iter(port_triples(self.groups * self.replicas))
        controllers = [n.remoting for n in nodes]
        for g in range(self.groups):
            name = f"broker-{chr(ord('a') + g)}"
            brokers = [self.deployment.broker(name, next(ports), controllers, index=i) for i in range(self.replicas)]
            self.sets[name] = brokers
            for b in brokers:  # a set at a time: more cold JVMs at once starve two cores
                b.start()
            for b in brokers:
                try:
                    b.wait_line(r"The broker\[.*boot success", REAL_BOOT_WAIT_S)
                except AssertionError as e:
                    raise click.ClickException(f"{self.label(b)} did not start (see {b.log}): {e}") from None
                click.echo(f"  {self.label(b):<12} {b.addr}  pid {b.pid}  log {b.rocketmq_log()}")
            sys.stdout.flush()
            self._wait_master(name, nodes)
        click.echo(
            f"RocketMQ {self._version()} is running: NameServer {self.deployment.namesrv_addr}, "
            f"brokers {', '.join(self.sets)}" + (f"; a master is killed -9 every {self.chaos:g}s" if self.chaos else "")
        )
        sys.stdout.flush()
        self.next_kill = time.monotonic() + (self.chaos or 0)

    @staticmethod
    def _version() -> str:
        from cli.rocketmq import version

        return version()

    def _wait_master(self, name: str, nodes: list[LocalNode]) -> None:
        deadline = time.monotonic() + REAL_MASTER_WAIT_S
        while time.monotonic() < deadline:
            s = (broker_sets_of(nodes) or {}).get(name)
            if s is not None and s["masterBrokerId"] is not None:
                self._show(name, s)
                return
            time.sleep(0.5)  # polling the controller for an election; not a test
        click.echo(f"{name}: no master within {REAL_MASTER_WAIT_S:g}s (see the brokers' logs)", err=True)

    def _show(self, name: str, s: JSONObject) -> None:
        """One line when a set's master, epoch or SyncStateSet changed since the last one."""
        in_sync = tuple(r["brokerId"] for r in s["replicas"] if r["inSync"])
        key = (s["masterBrokerId"], s["masterEpoch"], in_sync)
        if self.seen.get(name) == key:
            return
        self.seen[name] = key
        who = next((self.label(b) for b in self.sets.get(name, []) if b.addr == s["masterAddress"]), "?")
        master = (
            f"master id {s['masterBrokerId']} ({who}, {s['masterAddress']}) at epoch {s['masterEpoch']}"
            if s["masterBrokerId"] is not None
            else "no master"
        )
        click.echo(f"{time.strftime('%H:%M:%S')} {name}: {master}, SyncStateSet {list(in_sync)}")

    def tick(self, nodes: list[LocalNode]) -> None:
        """Called about every second by the supervisor: report changes and exits; chaos."""
        sets = broker_sets_of(nodes) or {}
        for name in self.sets:
            if name in sets:
                self._show(name, sets[name])
        killed = self.pending[1] if self.pending else None
        for brokers in self.sets.values():
            for b in brokers:
                if b is not killed and not b.running() and self.label(b) not in self.reported:
                    self.reported.add(self.label(b))
                    click.echo(f"{self.label(b)} exited ({b.returncode()}); see {b.rocketmq_log()}", err=True)
        if self.chaos:
            self._chaos(sets)

    def _chaos(self, sets: dict[str, JSONObject]) -> None:
        now = time.monotonic()
        if self.pending is not None:
            name, b, old, since = self.pending
            s = sets.get(name) or {}
            elected = s.get("masterBrokerId") not in (None, old)
            if elected or now - since > REAL_MASTER_WAIT_S:
                why = f"master id {s['masterBrokerId']} elected" if elected else "no new master yet"
                b.start()
                click.echo(f"chaos: {name}: {why} after {now - since:.1f}s; {self.label(b)} restarted, pid {b.pid}")
                self.pending = None
                self.next_kill = now + (self.chaos or 0)
            return
        if now < self.next_kill:
            return
        candidates = []
        for name, s in sets.items():
            master = next((b for b in self.sets.get(name, []) if b.addr == s["masterAddress"] and b.running()), None)
            healthy = [r for r in s["replicas"] if r["inSync"] and r["alive"]]
            if master is not None and len(healthy) >= 2:  # someone to take over
                candidates.append((name, master, s["masterBrokerId"]))
        if not candidates:
            self.next_kill = now + 1.0  # a set still catching up: try again soon
            return
        name, b, old = random.choice(candidates)
        pid = b.pid
        b.kill()
        click.echo(f"{time.strftime('%H:%M:%S')} chaos: kill -9 {self.label(b)} (master id {old} of {name}, pid {pid})")
        self.pending = (name, b, old, now)

    def stop(self) -> None:
        """SIGTERM every JVM (RocketMQ's shutdown hooks), SIGKILL what is left after REAL_STOP_GRACE_S."""
        if self.deployment is None:
            return
        procs = [p for p in self.deployment.procs if p.running()]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.signal(signal.SIGTERM)
        deadline = time.monotonic() + REAL_STOP_GRACE_S
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                if p.proc is not None:
                    p.proc.wait(max(0.1, deadline - time.monotonic()))
        late = [p for p in procs if p.running()]
        self.deployment.close()  # SIGKILL, process groups included, and wait
        if procs:
            killed = f", {len(late)} killed after {REAL_STOP_GRACE_S:g}s" if late else ""
            click.echo(f"RocketMQ stopped ({len(procs)} JVMs{killed}).")
        self.deployment = None


# --- the control socket -------------------------------------------------------------------------------------


def socket_path(data: str) -> str:
    """`<data>/local-cluster.sock`, or a short path under the temp dir named after the data dir when that one
    is too long for a Unix socket (both sides compute the same one)."""
    data = os.path.abspath(data)
    path = os.path.join(data, _SOCKET_NAME)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(data.encode()).hexdigest()[:16]
    return os.path.join("/tmp", f"controllerd-local-{digest}.sock")


class Supervisor:
    """The running nodes, changed by the main thread (start, failures, stop) and by control requests."""

    def __init__(self, nodes: list[LocalNode], data: str) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.lock = threading.Lock()
        self.stopping = False
        self.path = socket_path(data)
        self.server: socket.socket | None = None

    def listen(self) -> None:
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(self.path)
            raise click.ClickException(f"a local cluster is already running on this data directory ({self.path})")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a supervisor that was killed
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.path)
        server.listen(4)
        self.server = server
        threading.Thread(target=self._serve, name="local-cluster-control", daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.server = None

    def _serve(self) -> None:
        while self.server is not None:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    conn.settimeout(5.0)
                    request = conn.makefile("r").readline().split()
                    ok, lines = self.handle(request)
                    conn.sendall("".join(f"{line}\n" for line in [*lines, "ok" if ok else "failed"]).encode())
                except OSError:
                    continue

    def handle(self, request: list[str]) -> tuple[bool, list[str]]:
        """One control request: (succeeded, the lines to show)."""
        if request == ["status"]:
            with self.lock:
                leader = _leader_of(list(self.nodes.values()))
                return True, [line for n in self.nodes.values() for line in describe(n, leader)]
        if len(request) != 2 or request[0] not in ("stop", "start", "restart"):
            return False, [f"unknown request {' '.join(request)!r}: status, stop NODE, start NODE, restart NODE"]
        verb, name = request
        node = self.nodes.get(name)
        if node is None:
            return False, [f"no node {name!r}; the nodes are {', '.join(self.nodes)}"]
        with self.lock:
            if self.stopping:
                return False, ["the cluster is stopping"]
            lines: list[str] = []
            if verb in ("stop", "restart"):
                if not node.running and verb == "stop":
                    return False, [f"{name} is not running"]
                if node.running:
                    stop(node)
                    lines.append(f"{name} stopped ({node.how})")
                    click.echo(f"{name} stopped on request ({node.how})")
            if verb in ("start", "restart"):
                if node.running:
                    return False, [f"{name} is already running (pid {node.pid})"]
                start(node)
                ok = wait_ready([node], READY_WAIT_S, cancelled=lambda: self.stopping)
                if not node.running:
                    return False, [
                        *lines,
                        f"{name} exited with {node.returncode} while starting:",
                        *(f"    {x}" for x in last_errors(node)),
                    ]
                click.echo(f"{name} started on request: pid {node.pid}")
                state = "ready" if ok is not None else f"not ready within {READY_WAIT_S:g}s (see its log)"
                lines += [f"{name} started, {state}", *describe(node)]
            return True, lines


def _leader_of(nodes: list[LocalNode]) -> str | None:
    with httpx.Client(timeout=1.0) as client:
        for node in nodes:
            if node.running:
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, AttributeError):
                    leader = client.get(f"http://{node.http}/api/v1/raft/status").json()["body"].get("leaderId")
                    if leader:
                        return str(leader)
    return None


def control(data: str, request: str) -> None:
    """Send one request to the supervisor running on `data`; print its answer; exit 1 if it failed."""
    path = socket_path(data)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(CONTROL_TIMEOUT_S)
        try:
            conn.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise click.ClickException(
                f"no local cluster is running on {os.path.abspath(data)} (no control socket at {path}); "
                "start one with `make run` or `controllerd local-cluster`, or pass the --data it was started with"
            ) from None
        conn.sendall(f"{request}\n".encode())
        lines = conn.makefile("r").read().splitlines()
    if not lines:
        raise click.ClickException("the supervisor closed the control connection without an answer")
    for line in lines[:-1]:
        click.echo(line)
    if lines[-1] != "ok":
        raise SystemExit(1)


# --- the command ----------------------------------------------------------------------------------------------


def _run(
    data: str, n: int, raft_port: int, http_port: int, election_ms: int, brokers: Brokers | RealBrokers | None
) -> None:
    nodes = write_configs(data, n, raft_port, http_port, election_ms)
    supervisor = Supervisor(nodes, data)
    supervisor.listen()
    interrupted = False

    def on_signal(sig: int, _frame: object) -> None:
        nonlocal interrupted
        if interrupted:  # a second Ctrl-C while stopping: the stop goes on
            return
        interrupted = True
        click.echo(f"\n{signal.Signals(sig).name}: stopping the cluster ...", err=True)
        raise KeyboardInterrupt

    # Explicitly: a background job of a non-interactive shell starts with SIGINT ignored, and Python then
    # installs no handler of its own; SIGHUP (the terminal went away) would kill us and orphan the nodes.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        taken = ports_in_use(nodes)
        if taken:
            click.echo(
                "the cluster did not start: its ports are in use (another local cluster, or another program):\n"
                + "".join(f"    {t}\n" for t in taken)
                + "pick others with --http-port and --raft-port (make run RUN_ARGS='--http-port P --raft-port Q')",
                err=True,
            )
            raise SystemExit(1)
        for node in nodes:
            start(node)
        leader = wait_ready(nodes, READY_WAIT_S)
        if leader is None:
            dead = [x for x in nodes if x.proc is not None and x.proc.poll() is not None]
            why = (
                f"stopped: {', '.join(f'{x.name} ({x.how})' for x in dead)}"
                if dead
                else f"not ready within {READY_WAIT_S:g}s"
            )
            click.echo(
                f"the cluster did not start ({why}); the logs are in {os.path.join(os.path.abspath(data), 'logs')}",
                err=True,
            )
            for x in dead:
                report_exit(x, "exited")
            stop_all(nodes)
            raise SystemExit(1)
        first = nodes[0].http
        click.echo(f"A {n}-node RocketMQ jRaft controller group is running (data under {os.path.abspath(data)}).")
        for node in nodes:
            for line in describe(node, leader):
                click.echo(line)
        here = "" if os.path.abspath(data) == os.path.abspath("./data") else f" --data {data}"
        click.echo(f"\nStatus page: http://{first}/ui/  (on every node)")
        if isinstance(brokers, Brokers):
            click.echo(
                f"Simulated brokers: {brokers.groups} broker sets of 3 (broker-a, ...), their lines below and in "
                f"{brokers.log}" + (f"; a master is killed every {brokers.chaos:g}s" if brokers.chaos else "")
            )
        click.echo("\nTry:")
        click.echo(f"  rmqctl -a {','.join(x.http for x in nodes)} raft status")
        click.echo(f"  rmqctl -a {first} getControllerMetaData")
        click.echo(
            f"  python -m cli.rocketmq mqadmin getControllerMetaData -a {nodes[0].remoting}"
            "     (RocketMQ's own mqadmin, over remoting; after `make rocketmq`)"
        )
        click.echo(f"  controllerd local-cluster{here} restart {nodes[-1].name}     (also: stop, start, status)")
        click.echo("Ctrl-C stops the cluster.", nl=True)
        sys.stdout.flush()
        if isinstance(brokers, Brokers):  # after the instructions: their lines follow
            brokers.start(os.path.abspath(data), nodes)
        elif isinstance(brokers, RealBrokers):
            brokers.start(nodes)
        while True:
            with supervisor.lock:
                for node in nodes:
                    if node.proc is not None and node.proc.poll() is not None and not node.stopped_on_request:
                        report_exit(node, "exited")
                        node.stopped_on_request = True  # reported once
            if isinstance(brokers, RealBrokers):
                brokers.tick(nodes)
            time.sleep(1.0)
    except KeyboardInterrupt:
        supervisor.stopping = True
        supervisor.close()
        if brokers is not None:
            brokers.stop()
        if not interrupted:
            click.echo("\nstopping the cluster ...", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            acquired = supervisor.lock.acquire(timeout=CONTROL_TIMEOUT_S)  # a control request finishes first
            stop_all(nodes)
            if acquired:
                supervisor.lock.release()
        click.echo("stopped.")
    finally:
        supervisor.close()
        if brokers is not None:
            brokers.stop()
        stop_all(nodes)  # whatever ended the run, no node outlives the supervisor


@click.group("local-cluster", invoke_without_command=True)
@click.option("--data", default="./data", show_default=True, help="Configs, stores and logs go here.")
@click.option("--nodes", "n", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option("--raft-port", default=9880, show_default=True, help="First raft port (RocketMQ's default).")
@click.option(
    "--http-port",
    default=9770,
    show_default=True,
    help="First HTTP port; RocketMQ remoting (jRaftControllerRPCAddr) listens on each HTTP port + 1000.",
)
@click.option("--election-ms", default=1000, show_default=True)
@click.option(
    "--broker-groups",
    default=2,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Broker sets beside the controllers (simulated: 3 brokers each; rocketmq: 2 each); 0: none.",
)
@click.option(
    "--brokers",
    "kind",
    type=click.Choice(["sim", "rocketmq", "none"]),
    default="sim",
    show_default=True,
    help="sim: simulated brokers (tools.brokersim, start in a second). rocketmq: real RocketMQ "
    "(make rocketmq's jars and Java 17): a NameServer and broker sets broker-a, broker-b of 2 brokers in "
    "controller mode, data under DATA/rocketmq, one set at a time (~30 s each); every JVM stops with the "
    "cluster. none: no brokers.",
)
@click.option("--no-brokers", is_flag=True, help="No brokers (same as --brokers none).")
@click.option(
    "--broker-chaos",
    default=None,
    type=click.FloatRange(1),
    metavar="SECONDS",
    help="Kill a random master every SECONDS (kill -9 with --brokers rocketmq) and start it again once "
    "another is elected, to watch failovers.",
)
@click.pass_context
def local_cluster(
    ctx: click.Context,
    data: str,
    n: int,
    raft_port: int,
    http_port: int,
    election_ms: int,
    broker_groups: int,
    kind: str,
    no_brokers: bool,
    broker_chaos: float | None,
) -> None:
    """Run N nodes on 127.0.0.1 until Ctrl-C (a local cluster to try the controller).

    \b
    From another terminal, while it runs (same --data):
      controllerd local-cluster status           each node's PID, addresses, data dir
      controllerd local-cluster stop n2          SIGTERM one node and wait for it
      controllerd local-cluster start n2         start it again and wait until it is ready
      controllerd local-cluster restart n2       both
    """
    ctx.obj = {"data": data}
    if ctx.invoked_subcommand is None:
        groups = 0 if no_brokers or kind == "none" else broker_groups
        brokers: Brokers | RealBrokers | None = None
        if groups and kind == "rocketmq":
            missing = rocketmq_missing()  # before any node starts
            if missing:
                raise click.ClickException(missing)
            brokers = RealBrokers(os.path.join(os.path.abspath(data), "rocketmq"), groups, chaos=broker_chaos)
        elif groups:
            brokers = Brokers(groups, broker_chaos, os.path.join(os.path.abspath(data), "logs", "brokers.log"))
        _run(data, n, raft_port, http_port, election_ms, brokers)


@local_cluster.command("status")
@click.pass_context
def status(ctx: click.Context) -> None:
    """Each node of the running local cluster: PID (or stopped), addresses, data dir, the leader."""
    control(ctx.obj["data"], "status")


def _node_verb(verb: str, doc: str) -> None:
    @local_cluster.command(verb, help=doc)
    @click.argument("node", metavar="NODE")
    @click.pass_context
    def command(ctx: click.Context, node: str) -> None:
        control(ctx.obj["data"], f"{verb} {node}")


_node_verb("stop", "Stop one node (SIGTERM: a leader hands over first) of the running local cluster.")
_node_verb("start", "Start a stopped node of the running local cluster again; wait until it is ready.")
_node_verb("restart", "Stop one node and start it again; wait until it is ready.")

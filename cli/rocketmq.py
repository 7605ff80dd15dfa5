"""Real RocketMQ processes on loopback, beside our controller: a NameServer, brokers in controller mode,
RocketMQ's own 3-node JRaftController, mqadmin, and the small Java producer and consumer of
interop/rocketmq/src (docs/interop.md). The jars are the ones `make rocketmq` resolves from
interop/rocketmq/pom.xml into interop/rocketmq/build/lib.

Every process is a plain JVM (`java -cp 'lib/*' MAIN`) with the flags Java 17 needs, a small heap, its own
`user.home` (RocketMQ puts logs, stores and config files there) and `java.io.tmpdir`, and every address it is
given is 127.0.0.1. A `Deployment` owns the processes it starts and stops all of them (SIGKILL, their process
groups included) however the test ends; `atexit` does it too for a harness abandoned by a crash.

Waiting never sleeps: a thread per process copies its stdout to a log file and signals each line, so a
readiness line is waited for directly; conditions on the controller's answers are re-checked every
`POLL` seconds up to a deadline (`wait_until`)."""

from __future__ import annotations

import atexit
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, TypeVar

from raft.testing.cluster import free_port_base
from statemachine.values import JSONObject

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
INTEROP = os.path.join(ROOT, "interop", "rocketmq")
LIB = os.path.join(INTEROP, "build", "lib")
CLASSES = os.path.join(INTEROP, "build", "classes")
POLL = 0.1
T = TypeVar("T")

# What RocketMQ's JVMs need on Java 17 (docs/interop.md): hessian reflects into java.lang, DLedger and the
# store into NIO buffers; stack traces stay whole.
JDK17_FLAGS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "-XX:-OmitStackTraceInFastThrow",
]
# Heaps that let three brokers, a NameServer and three controllers run beside the suite on 2 cores / 24 GiB.
HEAP = {
    "namesrv": ["-Xms64m", "-Xmx256m"],
    "controller": ["-Xms128m", "-Xmx512m"],
    "broker": ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m"],
    "tools": ["-Xms32m", "-Xmx256m", "-XX:TieredStopAtLevel=1"],
    "client": ["-Xms32m", "-Xmx256m", "-XX:TieredStopAtLevel=1"],
    # tools/bench/peers.py: RocketMQ's controllers as benchmark peers, and its load generator (full JIT)
    "peer": ["-Xms128m", "-Xmx256m"],
    # the load generator: at 30,000 brokers a second against a controller that answers 10,000, ~200k requests
    # wait for answers (a ResponseFuture each) at the end of a 10 s step; 256m ran out of heap there
    "load": ["-Xms128m", "-Xmx1536m", "-XX:+ExitOnOutOfMemoryError"],
}
# RocketMQ's logging configuration per kind of process: the jars ship rmq.{broker,controller,namesrv,tools,
# client}.logback.xml; a benchmark peer is a controller and logs as one (without this it fell back to a default
# configuration writing broker_default.log, before 2026-11-28).
LOGBACK = {"peer": "controller"}
COMMON = ["-XX:+UseSerialGC", "-XX:MaxMetaspaceSize=192m", "-Xss512k"]


def version() -> str:
    """The RocketMQ version interop/rocketmq/pom.xml pins."""
    with open(os.path.join(INTEROP, "pom.xml")) as f:
        m = re.search(r"<rocketmq.version>([^<]+)</rocketmq.version>", f.read())
    assert m is not None, "interop/rocketmq/pom.xml names no <rocketmq.version>"
    return m.group(1)


def require() -> None:
    """Fail with what to run when the jars or the Java client are not built."""
    jar = os.path.join(LIB, f"rocketmq-broker-{version()}.jar")
    if not os.path.exists(jar) or not os.path.isdir(CLASSES):
        raise RuntimeError(f"RocketMQ {version()} is not resolved ({jar} missing): run `make rocketmq`")
    stale = newer_than_build()
    if stale:
        raise RuntimeError(f"{os.path.relpath(stale, ROOT)} changed since the last build: run `make rocketmq`")


def newer_than_build() -> str | None:
    """A source of the build (pom.xml, build.sh, src/) newer than build/.stamp, as build.sh itself decides."""
    stamp = os.path.join(INTEROP, "build", ".stamp")
    if not os.path.exists(stamp):
        return stamp
    built = os.stat(stamp).st_mtime
    sources = [os.path.join(INTEROP, "pom.xml"), os.path.join(INTEROP, "build.sh")]
    for dirpath, _, files in os.walk(os.path.join(INTEROP, "src")):
        sources += [os.path.join(dirpath, f) for f in files]
    return next((p for p in sources if os.stat(p).st_mtime > built), None)


def wait_until(what: str, check: Callable[[], T | None], timeout: float, period: float = POLL) -> T:
    """`check()` again every `period` seconds until it returns something other than None or False; that value.
    An AssertionError naming `what` and the last exception when the deadline passes."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value is not None and value is not False:
                return value
        except Exception as e:  # noqa: BLE001  # a process not serving yet: try again until the deadline
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s" + (f" (last error: {last!r})" if last else ""))
        threading.Event().wait(period)


def settled(s: JSONObject | None, in_sync: int) -> bool:
    """Whether a broker set as our controller's status page shows it (an item of `brokerSets` in GET /ui/api/state)
    has an alive master and exactly `in_sync` alive replicas in its SyncStateSet."""
    if s is None or s["masterBrokerId"] is None:
        return False
    alive_in_sync = [r for r in s["replicas"] if r["inSync"] and r["alive"]]
    return len(alive_in_sync) == in_sync and any(r["master"] and r["alive"] for r in s["replicas"])


def port_triples(n: int) -> list[int]:
    """n broker listen ports p with p-2 (the VIP channel), p and p+1 (HA) free on 127.0.0.1, 10 apart at least."""
    found: list[int] = []
    while len(found) < n:
        p = free_port_base((-2, 0, 1))
        if all(abs(p - q) >= 10 for q in found):
            found.append(p)
    return found


def free_port() -> int:
    """A free port on 127.0.0.1, below the ephemeral range (raft/testing/cluster.py's free_port_base says why)."""
    return free_port_base((0,))


def properties(values: dict[str, object]) -> str:
    return "".join(f"{k}={'true' if v is True else 'false' if v is False else v}\n" for k, v in values.items())


_live: weakref.WeakSet[JavaProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for p in list(_live):
        p.kill()


class JavaProcess:
    """One JVM: started in its own process group, stdout and stderr copied line by line to `log`."""

    STDIN: int = subprocess.DEVNULL  # subprocess.PIPE for a process that reads commands (MQAdminShell)

    def __init__(
        self, name: str, kind: str, main: str, args: list[str], home: str, extra_cp: str = "", jvm: tuple[str, ...] = ()
    ) -> None:
        """`jvm`: more JVM flags, e.g. RocketMQ's TLS system properties (-Dtls.enable=true, -Dtls.config.file=...)."""
        require()
        self.name, self.kind, self.home = name, kind, home
        os.makedirs(os.path.join(home, "tmp"), exist_ok=True)
        self.log = os.path.join(home, "stdout.log")
        cp = os.path.join(LIB, "*") + (os.pathsep + extra_cp if extra_cp else "")
        self.argv = [
            "java",
            *HEAP[kind],
            *COMMON,
            *JDK17_FLAGS,
            *shlex.split(os.environ.get("JAVA_OPT_EXT", "")),
            f"-Drocketmq.home.dir={home}",
            f"-Duser.home={home}",
            f"-Djava.io.tmpdir={os.path.join(home, 'tmp')}",
            f"-Drmq.logback.configurationFile=rmq.{LOGBACK.get(kind, kind)}.logback.xml",
            "-Drocketmq.namesrv.domain=127.0.0.1:1",  # never the default HTTP name-server lookup off this host
            *jvm,
            "-cp",
            cp,
            main,
            *args,
        ]
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.proc: subprocess.Popen[bytes] | None = None
        self.reader: threading.Thread | None = None
        self.paused = False

    def start(self) -> JavaProcess:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        self.lines = []
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=self.STDIN,
            cwd=self.home,
            start_new_session=True,  # its own process group: a kill reaches everything it started
            env=dict(os.environ, ROCKETMQ_HOME=self.home),
        )
        _live.add(self)
        assert self.proc.stdout is not None
        self.reader = threading.Thread(target=self._copy, args=(self.proc.stdout,), daemon=True)
        self.reader.start()
        return self

    def _copy(self, src: IO[bytes]) -> None:
        with open(self.log, "ab") as dst:
            for raw in src:
                dst.write(raw)
                dst.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                if "|-INFO in " in line or "|-WARN in " in line:
                    continue  # logback's own start-up chatter
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_line(self, pattern: str, timeout: float = 120, since: int = 0) -> str:
        """The first stdout line matching the regex `pattern`, from line `since` on; fails when the process exits
        first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = since
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if rx.search(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if not self.running() and (self.reader is None or not self.reader.is_alive()):
                    raise AssertionError(f"{self.name} exited ({self.returncode()}) before /{pattern}/: {self.tail()}")
                if left <= 0:
                    raise AssertionError(f"{self.name}: no /{pattern}/ within {timeout}s: {self.tail()}")
                self._changed.wait(min(left, 1.0))

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def tail(self, n: int = 15) -> str:
        with self._changed:
            return "\n".join(self.lines[-n:])

    def signal(self, sig: int) -> None:
        if self.running():
            assert self.proc is not None
            os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """kill -9 (the process group), and wait for it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        if self.reader is not None:
            self.reader.join(10)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (RocketMQ's shutdown hooks run), then SIGKILL after `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self.reader is not None:
            self.reader.join(10)
        return code


class Broker(JavaProcess):
    """A RocketMQ broker in controller mode (brokerId -1, its id assigned by the controller)."""

    def __init__(self, home: str, conf: dict[str, object], jvm: tuple[str, ...] = ()) -> None:
        os.makedirs(home, exist_ok=True)
        self.conf = conf
        self.conf_path = os.path.join(home, "broker.conf")
        with open(self.conf_path, "w") as f:
            f.write(properties(conf))
        super().__init__(
            f"broker {conf['brokerName']}@{conf['listenPort']}",
            "broker",
            "org.apache.rocketmq.broker.BrokerStartup",
            ["-c", self.conf_path],
            home,
            jvm=jvm,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.conf['listenPort']}"

    @property
    def broker_name(self) -> str:
        return str(self.conf["brokerName"])

    def start_and_wait(self, timeout: float = 180) -> Broker:
        self.start()
        self.wait_line(r"The broker\[.*boot success", timeout)
        return self

    def rocketmq_log(self, name: str = "broker.log") -> str:
        """One of RocketMQ's own logs of this broker, under its user.home: broker.log (role changes,
        registration), store.log (HA replication, epochs)."""
        return os.path.join(self.home, "logs", "rocketmqlogs", name)

    def log_mark(self, name: str = "broker.log") -> int:
        """Where the log ends now: `log_since(mark)` reads what it logged after."""
        try:
            return os.path.getsize(self.rocketmq_log(name))
        except FileNotFoundError:
            return 0

    def log_since(self, mark: int, name: str = "broker.log") -> str:
        try:
            with open(self.rocketmq_log(name), "rb") as f:
                f.seek(mark)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def ha_addr(self) -> str:
        return f"127.0.0.1:{self.conf['haListenPort']}"

    def wait_log(self, pattern: str, mark: int = 0, timeout: float = 60) -> str:
        """The first broker.log line after `mark` matching the regex `pattern` (re-read every POLL seconds)."""
        rx = re.compile(pattern)

        def find() -> str | None:
            return next((line for line in self.log_since(mark).splitlines() if rx.search(line)), None)

        return wait_until(f"{self.name}: /{pattern}/ in broker.log", find, timeout)

    def identity(self) -> int | None:
        """The controller-assigned id this broker saved (storePathBrokerIdentity), None before it has one."""
        path = os.path.join(str(self.conf["storePathRootDir"]), "brokerIdentity")
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        m = re.fullmatch(r"[^#]*#[^#]*#(-?\d+)\s*", text)  # clusterName#brokerName#brokerId (BrokerMetadata)
        return int(m.group(1)) if m else None


def store_marks(brokers: list[Broker]) -> dict[str, int]:
    """Where each broker's store.log ends now (for `ha_race_stuck` after a master change)."""
    return {b.name: b.log_mark("store.log") for b in brokers}


def ha_race_stuck(brokers: list[Broker], old: Broker, marks: dict[str, int]) -> list[Broker]:
    """The slaves caught by a race of RocketMQ's brokers after a master change (docs/interop.md, "Found on the
    way"): a slave that re-registers with the NameServer before the demoted master `old` does is given the
    demoted master's HA address, and replicates from it (a slave now, or frozen) until that connection
    breaks, never joining the new master's SyncStateSet. Seen in the slave's store.log since `marks`."""
    needle = f"NEW: {old.ha_addr}"
    return [b for b in brokers if b is not old and needle in b.log_since(marks.get(b.name, 0), "store.log")]


def settle_past_ha_race(
    what: str,
    settled: Callable[[], T | None],
    brokers: list[Broker],
    old: Broker,
    marks: dict[str, int],
    timeout: float = 165,
    grace: float = 10,
) -> T:
    """`settled()`'s value once it has one, after a master change from `old`: a slave caught in RocketMQ's HA race
    (`ha_race_stuck`) that is still stuck `grace` seconds after it was first seen, the set not settled, is
    restarted once, as an operator would. Until 2026-11-30 the tests waited 45 s before looking (fresh clone 39:
    `test_mqadmin_controller_verbs` took 90 s when the race hit, 23 s when it did not)."""
    seen: float | None = None
    restarted = False

    def check() -> T | None:
        nonlocal seen, restarted
        value = settled()
        if value is not None or restarted:
            return value
        stuck = ha_race_stuck(brokers, old, marks)
        if stuck:
            seen = seen if seen is not None else time.monotonic()
            if time.monotonic() - seen >= grace:
                restarted = True
                for b in stuck:
                    print(
                        f"RocketMQ's HA race: {b.name} replicates from the demoted master {old.ha_addr}; restarting it"
                    )
                    b.stop()
                    b.start_and_wait()
        return None

    return wait_until(what, check, timeout)


def broker_conf(
    store: str, name: str, port: int, controllers: list[str], namesrv: str, **extra: object
) -> dict[str, object]:
    """A small controller-mode broker on loopback: every address 127.0.0.1, a 16 MiB commit log, no timer wheel,
    no transient store pool, short metadata and SyncStateSet periods (docs/interop.md). haMaxTimeSlaveNotCatchup
    keeps its default (15 s): below haSendHeartbeatInterval (5 s) an idle slave would fall out of the
    SyncStateSet between two of its HA heartbeats and the set would flap."""
    conf: dict[str, object] = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": -1,
        "brokerRole": "SLAVE",
        "enableControllerMode": True,
        "controllerAddr": ";".join(controllers),
        "namesrvAddr": namesrv,
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",
        "listenPort": port,
        "haListenPort": port + 1,
        "storePathRootDir": store,
        "allAckInSyncStateSet": True,
        "syncBrokerMetadataPeriod": 1000,
        "checkSyncStateSetPeriod": 1000,
        "syncControllerMetadataPeriod": 2000,
        "controllerHeartBeatTimeoutMills": 4000,
        "brokerHeartbeatInterval": 1000,
        # A slave learns its new master's HA address only from a NameServer registration answer, so after a
        # master change it may wait a whole period for it: the shortest RocketMQ allows (default 30 s).
        "registerNameServerPeriod": 10000,
        "mappedFileSizeCommitLog": 16 * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 60000,
        "maxHashSlotNum": 10000,
        "maxIndexNum": 40000,
        "timerWheelEnable": False,
        "transientStorePoolEnable": False,
        "waitTimeMillsInSendQueue": 3000,
        "osPageCacheBusyTimeOutMills": 5000,
        "flushDiskType": "ASYNC_FLUSH",
        "enablePropertyFilter": False,
        "autoCreateTopicEnable": True,
        "brokerFastFailureEnable": True,
        "sendMessageThreadPoolNums": 2,
        "pullMessageThreadPoolNums": 4,
        "enableSlaveActingMaster": False,
        "duplicationEnable": False,
        "fetchNamesrvAddrByAddressServer": False,
        "enableDetailStat": False,
        # RocketMQ 5.5.0's TransactionMetricsFlushService spins on a core until its first flush (apache/rocketmq
        # issue #10515, fixed by PR #10517; 5.5.0 still spins, measured here): 10 CPU-seconds at every broker start with the 10 s
        # default, 1 with this. Its file (config/transactionMetrics) is then written once a second.
        "transactionMetricFlushInterval": 1000,
    }
    conf.update(extra)
    return conf


class Deployment:
    """The RocketMQ processes of one test: started on demand, all stopped by `close()` (a context manager)."""

    def __init__(self, root: str) -> None:
        require()
        os.makedirs(root, exist_ok=True)
        self.root = root
        self.procs: list[JavaProcess] = []
        self.namesrv_addr = ""
        self.shells: dict[tuple[str, tuple[str, ...]], MQAdminShell] = {}

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for p in self.procs:
            p.kill()

    def adopt(self, p: T) -> T:
        assert isinstance(p, JavaProcess)
        self.procs.append(p)
        return p

    def namesrv(self, port: int | None = None, jvm: tuple[str, ...] = ()) -> JavaProcess:
        port = port or free_port()
        home = os.path.join(self.root, "namesrv")
        os.makedirs(home, exist_ok=True)
        conf = os.path.join(home, "namesrv.conf")
        with open(conf, "w") as f:
            f.write(properties({"listenPort": port, "bindAddress": "127.0.0.1"}))
        p = self.adopt(
            JavaProcess("namesrv", "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", ["-c", conf], home, jvm=jvm)
        )
        p.start().wait_line("The Name Server boot success", 120)
        self.namesrv_addr = f"127.0.0.1:{port}"
        return p

    def broker(
        self, name: str, port: int, controllers: list[str], index: int = 0, jvm: tuple[str, ...] = (), **extra: object
    ) -> Broker:
        home = os.path.join(self.root, f"{name}-{index}")
        conf = broker_conf(os.path.join(home, "store"), name, port, controllers, self.namesrv_addr, **extra)
        return self.adopt(Broker(home, conf, jvm))

    def jraft_controllers(
        self, n: int = 3, election_ms: int = 1000, kind: str = "controller", **extra: object
    ) -> JRaftControllers:
        group = JRaftControllers(os.path.join(self.root, "jraft"), n, election_ms, extra, kind)
        for p in group.nodes:
            self.adopt(p)
        return group

    def dledger_controllers(self, n: int = 3, kind: str = "controller", **extra: object) -> DLedgerControllers:
        group = DLedgerControllers(os.path.join(self.root, "dledger"), n, extra, kind)
        for p in group.nodes:
            self.adopt(p)
        return group

    def mqadmin(self, *args: str, timeout: float = 120, jvm: tuple[str, ...] = (), home: str = "") -> str:
        """mqadmin's stdout and stderr (it exits 0 even when the command failed: callers parse the text), given
        this deployment's NameServer. One MQAdminShell per ROCKETMQ_HOME (`home`, where mqadmin reads the
        conf/tools.yml it signs with; default <root>/mqadmin) and set of JVM flags, stopped by `close()`."""
        home = home or os.path.join(self.root, "mqadmin")
        shell = self.shells.get((home, jvm))
        if shell is None:
            shell = self.shells[(home, jvm)] = self.adopt(MQAdminShell(home, jvm))
        return shell.run([*args, *(["-n", self.namesrv_addr] if self.namesrv_addr else [])], timeout)

    def java_client(self, main: str, *args: str, name: str = "") -> JavaProcess:
        """One of interop/rocketmq/src's programs (interop.Producer, interop.Consumer), not yet started."""
        home = os.path.join(self.root, name or main.rsplit(".", 1)[-1].lower())
        os.makedirs(home, exist_ok=True)
        return self.adopt(JavaProcess(name or main, "client", main, list(args), home, extra_cp=CLASSES))


class MQAdminShell(JavaProcess):
    """mqadmin's commands one after another in one JVM (interop/rocketmq/src/interop/MQAdminShell.java: each goes
    through MQAdminStartup.main0, what the `mqadmin` script runs), instead of a JVM of about 6 s per command."""

    STDIN = subprocess.PIPE  # it reads its commands
    READY = "--- interop.MQAdminShell ready"
    DONE = "--- interop.MQAdminShell done"

    def __init__(self, home: str, jvm: tuple[str, ...] = ()) -> None:
        super().__init__("mqadmin", "tools", "interop.MQAdminShell", [], home, extra_cp=CLASSES, jvm=jvm)

    def run(self, args: list[str], timeout: float) -> str:
        """One command's output; the JVM is started on first use, and killed when a command outlives `timeout`
        (the next command starts a new one)."""
        bad = [a for a in args if "\t" in a or "\n" in a]
        assert not bad, f"mqadmin arguments cannot hold a tab or a newline: {bad}"
        if not self.running():
            self.start()
            self.wait_line(re.escape(self.READY), timeout)
        assert self.proc is not None and self.proc.stdin is not None
        with self._changed:
            since = len(self.lines)
        self.proc.stdin.write(("\t".join(args) + "\n").encode())
        self.proc.stdin.flush()
        try:
            self.wait_line(re.escape(self.DONE), timeout, since)
        except AssertionError as e:
            self.kill()
            raise AssertionError(f"mqadmin {' '.join(args)}: {e}") from None
        with self._changed:
            lines = self.lines[since:]
        return "\n".join(lines[: lines.index(self.DONE)])


def controller_node(name: str, kind: str, home: str, conf: dict[str, object]) -> JavaProcess:
    """One RocketMQ ControllerStartup JVM, its controller.conf written under `home`."""
    path = os.path.join(home, "controller.conf")
    with open(path, "w") as f:
        f.write(properties(conf))
    return JavaProcess(name, kind, "org.apache.rocketmq.controller.ControllerStartup", ["-c", path], home)


def start_controllers(nodes: list[JavaProcess], timeout: float) -> None:
    """Start every node, then wait until each says it booted."""
    for p in nodes:
        p.start()
    for p in nodes:
        p.wait_line("The Controller Server boot success", timeout)


class JRaftControllers:
    """RocketMQ's own controller, controllerType=jRaft, n nodes on loopback (the reference of the differential
    test and the peer of the benchmarks)."""

    def __init__(self, root: str, n: int, election_ms: int, extra: dict[str, object], kind: str = "controller") -> None:
        ports = [free_port() for _ in range(2 * n)]
        self.rafts = [f"127.0.0.1:{p}" for p in ports[:n]]
        self.remotings = [f"127.0.0.1:{p}" for p in ports[n:]]
        self.nodes: list[JavaProcess] = []
        for i in range(n):
            home = os.path.join(root, f"n{i}")
            os.makedirs(home, exist_ok=True)
            conf: dict[str, object] = {
                "controllerType": "jRaft",
                "jRaftGroupId": "jRaft-Controller",
                "jRaftServerId": self.rafts[i],
                "jRaftInitConf": ",".join(self.rafts),
                "jRaftControllerRPCAddr": ",".join(self.remotings),
                "jRaftElectionTimeoutMs": election_ms,
                "jRaftSnapshotIntervalSecs": 3600,
                "controllerStorePath": os.path.join(home, "store"),
                "configStorePath": os.path.join(home, "controller.properties"),
                "controllerThreadPoolNums": 4,
                "scanNotActiveBrokerInterval": 1000,
                **extra,
            }
            self.nodes.append(controller_node(f"jraft-n{i}", kind, home, conf))
        self.stores = [os.path.join(root, f"n{i}", "store") for i in range(n)]

    def start(self, timeout: float = 180) -> None:
        start_controllers(self.nodes, timeout)


class DLedgerControllers:
    """RocketMQ's own controller, controllerType=DLedger, n nodes on loopback (a peer of tools/bench/peers.py).
    DLedger serves the controller's remoting requests on its own peer port, so `remotings` are the DLedger peer
    addresses (controllerDLegerPeers `n0-127.0.0.1:P0;n1-...`). Everything else keeps RocketMQ's defaults."""

    def __init__(self, root: str, n: int, extra: dict[str, object], kind: str = "controller") -> None:
        self.remotings = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        peers = ";".join(f"n{i}-{a}" for i, a in enumerate(self.remotings))
        self.nodes: list[JavaProcess] = []
        self.stores = [os.path.join(root, f"n{i}", "store") for i in range(n)]
        for i in range(n):
            home = os.path.join(root, f"n{i}")
            os.makedirs(home, exist_ok=True)
            conf: dict[str, object] = {
                "controllerType": "DLedger",
                "controllerDLegerGroup": "DLedger-Controller",
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": self.stores[i],
                "configStorePath": os.path.join(home, "controller.properties"),
                "listenPort": self.remotings[i].rsplit(":", 1)[1],
                "controllerThreadPoolNums": 4,
                "scanNotActiveBrokerInterval": 1000,
                **extra,
            }
            self.nodes.append(controller_node(f"dledger-n{i}", kind, home, conf))

    def start(self, timeout: float = 180) -> None:
        start_controllers(self.nodes, timeout)


def main(argv: list[str] | None = None) -> int:
    """`python -m cli.rocketmq mqadmin ARGS...`: RocketMQ's own mqadmin, from the jars `make rocketmq`
    resolved, with the flags Java 17 needs; its output as it prints it."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "mqadmin":
        print("usage: python -m cli.rocketmq mqadmin SUBCOMMAND [ARGS...]   (RocketMQ's mqadmin)", file=sys.stderr)
        return 2
    try:
        require()
    except RuntimeError as e:
        print(f"cli.rocketmq: {e}", file=sys.stderr)
        return 2
    home = os.path.join(os.path.expanduser("~"), ".cache", "rmq-jraft-mqadmin")
    p = JavaProcess("mqadmin", "tools", "org.apache.rocketmq.tools.command.MQAdminStartup", args[1:], home)
    p.start()
    code = p.wait(600)
    print("\n".join(p.lines))
    return code


if __name__ == "__main__":
    raise SystemExit(main())

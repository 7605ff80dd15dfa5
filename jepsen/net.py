"""The test network: one Linux network namespace per node, joined by a bridge, with nftables grudges.

Layout (docs/jepsen-background.md §4a), for a run tagged `jp<tag>` on the subnet 10.A.B.0/24:

    root namespace: jp<tag>c (10.A.B.254)  -- the clients, the nemesis and the probes live here
    jp<tag>sw:      bridge br0 with one port per node (p1..pn) and one for the control veth (ctl)
    jp<tag>n<i>:    eth0 (10.A.B.<i>) and lo; node i runs here

A partition is a *grudge*: node -> the nodes whose packets it drops. It becomes one nftables table
(`inet jepsen`) per dropping node, dropping inbound packets by source address. Over TCP a one-way drop cuts
both directions (the handshake needs both), so node a reaches node b iff neither drops the other. The control
address is never dropped: clients always reach every node, as in Jepsen.

Every run takes a fresh tag and a subnet nobody else uses, reserved under `RESERVATIONS` with the owner's pid,
so two runs (pytest -n 2) never collide, and a run that died without cleaning up (SIGKILL) is cleaned up by the
next one. `teardown()` is idempotent and removes everything: processes left in the namespaces, the namespaces,
the control veth and the reservation.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import random
import selectors
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RESERVATIONS = "/run/jepsen-net"
NFT_TABLE = "jepsen"
CLONE_NEWNET = 0x40000000
PROBE_TIMEOUT_S = 0.5

Grudge = Mapping[int, Iterable[int]]  # node -> nodes whose packets it drops (nodes are 1-based)


class NetError(RuntimeError):
    """The network could not be set up, changed or probed. The message is meant for a human."""


def _run(args: list[str], *, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        p = subprocess.run(args, input=input, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetError(f"{args[0]} is not installed (run jepsen/setup.sh)") from None
    if check and p.returncode != 0:
        raise NetError(f"`{' '.join(args)}` failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


def require_tools() -> None:
    """Fail with a plain message when the machine cannot make namespaces (not root, no `ip`, no `nft`)."""
    if os.geteuid() != 0:
        raise NetError("the Jepsen suite needs root to create network namespaces (run it as root)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            raise NetError(f"`{tool}` is not installed; run jepsen/setup.sh")


def expected_matrix(n: int, grudge: Grudge) -> list[list[int]]:
    """m[src][dst] (0-based) = 1 when a TCP connect from node src+1 to node dst+1 succeeds under `grudge`."""
    drops = {int(k): {int(x) for x in v} for k, v in grudge.items()}
    m = [[1] * n for _ in range(n)]
    for a in range(1, n + 1):
        for b in range(1, n + 1):
            if a != b and (b in drops.get(a, ()) or a in drops.get(b, ())):
                m[a - 1][b - 1] = 0
    return m


def format_matrix(m: list[list[int]], names: list[str] | None = None) -> list[str]:
    names = names or [f"n{i + 1}" for i in range(len(m))]
    return [f"{names[i]}: {' '.join(str(x) for x in row)}" for i, row in enumerate(m)]


def nft_script(sources: Iterable[str]) -> str:
    """An nft transaction that atomically replaces the jepsen table with one dropping `sources`."""
    srcs = sorted(sources)
    lines = [f"table inet {NFT_TABLE} {{}}", f"delete table inet {NFT_TABLE}"]
    if srcs:
        lines += [
            f"table inet {NFT_TABLE} {{",
            "  chain input {",
            "    type filter hook input priority 0; policy accept;",
            f"    ip saddr {{ {', '.join(srcs)} }} drop",
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- reservations


def _pid_start(pid: int) -> str | None:
    """The start time of a process (field 22 of /proc/pid/stat): tells a live owner from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


@contextlib.contextmanager
def _reservations_locked() -> Any:
    os.makedirs(RESERVATIONS, exist_ok=True)
    fd = os.open(os.path.join(RESERVATIONS, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_reservations() -> list[dict[str, Any]]:
    out = []
    for name in sorted(os.listdir(RESERVATIONS)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(RESERVATIONS, name)) as f:
                r = json.load(f)
            r["_file"] = os.path.join(RESERVATIONS, name)
            out.append(r)
        except (OSError, ValueError):
            continue
    return out


def _owner_alive(r: dict[str, Any]) -> bool:
    pid = r.get("pid")
    return isinstance(pid, int) and _pid_start(pid) is not None and _pid_start(pid) == r.get("pid_start")


def _remove(namespaces: Iterable[str], links: Iterable[str]) -> list[str]:
    """Kill what runs in `namespaces`, delete them and `links`; returns what it could not remove."""
    left = []
    existing = set(list_namespaces())
    for ns in namespaces:
        if ns not in existing:
            continue
        pids = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
                # (SIGCONT is not needed: SIGKILL ends stopped processes too)
        if _run(["ip", "netns", "del", ns], check=False).returncode != 0:
            left.append(ns)
    for link in links:
        if os.path.exists(f"/sys/class/net/{link}"):
            _run(["ip", "link", "del", link], check=False)
            if os.path.exists(f"/sys/class/net/{link}"):
                left.append(link)
    return left


def reclaim_stale() -> list[str]:
    """Remove the networks of runs whose process is gone (a harness killed with SIGKILL). Returns their tags."""
    reclaimed = []
    with _reservations_locked():
        for r in _read_reservations():
            if _owner_alive(r):
                continue
            _remove(r.get("namespaces", []), r.get("links", []))
            with contextlib.suppress(OSError):
                os.unlink(r["_file"])
            reclaimed.append(str(r.get("tag")))
    return reclaimed


def list_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _subnets_in_use() -> set[str]:
    """/24 prefixes ("10.A.B") routed or addressed in the root namespace."""
    used = set()
    out = _run(["ip", "-4", "-o", "addr"], check=False).stdout + _run(["ip", "-4", "route"], check=False).stdout
    for tok in out.split():
        if tok.count(".") == 3 and tok[0].isdigit():
            parts = tok.split("/")[0].split(".")
            used.add(".".join(parts[:3]))
    return used


# ------------------------------------------------------------------------------------------------ the net


@dataclass
class ProbeResult:
    expected: list[list[int]]
    actual: list[list[int]]
    control: list[int]  # 1 when the root namespace reaches node i
    elapsed_ms: int
    grudge: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.expected == self.actual and all(self.control)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "grudge": self.grudge,
            "expected": self.expected,
            "actual": self.actual,
            "control": self.control,
            "elapsed_ms": self.elapsed_ms,
        }


class Net:
    """The namespaces, bridge and veths of one run. Use as a context manager, or call setup()/teardown()."""

    def __init__(self, n: int, *, tag: str | None = None, seed: int | None = None) -> None:
        if not 1 <= n <= 200:
            raise ValueError(f"n must be in 1..200, got {n}")
        self.n = n
        self.tag = tag or f"{random.SystemRandom().getrandbits(20):05x}"
        self._seed = seed
        self.prefix = ""  # "10.A.B", chosen in setup()
        self.switch = f"jp{self.tag}sw"
        self.ctl_link = f"jp{self.tag}c"
        self.namespaces = [f"jp{self.tag}n{i}" for i in range(1, n + 1)]
        self._reservation: str | None = None
        self._lock = threading.Lock()
        self.grudge: dict[int, set[int]] = {}
        self.is_setup = False

    # -- addresses

    def addr(self, i: int) -> str:
        """Address of node i (1-based)."""
        return f"{self.prefix}.{i}"

    @property
    def ctl_addr(self) -> str:
        return f"{self.prefix}.254"

    def ns(self, i: int) -> str:
        return self.namespaces[i - 1]

    # -- lifecycle

    def __enter__(self) -> Net:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def setup(self) -> None:
        require_tools()
        reclaim_stale()
        self._reserve()
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        self.is_setup = True

    def _reserve(self) -> None:
        with _reservations_locked():
            taken = {r.get("prefix") for r in _read_reservations()} | _subnets_in_use()
            if any(r.get("tag") == self.tag for r in _read_reservations()):
                raise NetError(f"network tag {self.tag} is already in use")
            rng = random.Random(self._seed) if self._seed is not None else random.SystemRandom()
            for _ in range(1000):
                prefix = f"10.{rng.randint(200, 249)}.{rng.randint(0, 255)}"
                if prefix not in taken:
                    break
            else:
                raise NetError("no free 10.x.y.0/24 subnet for the test network")
            self.prefix = prefix
            path = os.path.join(RESERVATIONS, f"{self.tag}.json")
            record = {
                "tag": self.tag,
                "prefix": prefix,
                "pid": os.getpid(),
                "pid_start": _pid_start(os.getpid()),
                "namespaces": [self.switch, *self.namespaces],
                "links": [self.ctl_link],
                "created": time.time(),
            }
            with open(path + ".tmp", "w") as f:
                json.dump(record, f)
            os.replace(path + ".tmp", path)
            self._reservation = path

    def _build(self) -> None:
        ip = ["ip"]
        sw = self.switch
        _run(ip + ["netns", "add", sw])
        _run(ip + ["-n", sw, "link", "set", "lo", "up"])
        _run(ip + ["-n", sw, "link", "add", "br0", "type", "bridge"])
        _run(ip + ["-n", sw, "link", "set", "br0", "up"])
        for i, ns in enumerate(self.namespaces, start=1):
            _run(ip + ["netns", "add", ns])
            _run(ip + ["link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"p{i}", "netns", sw])
            _run(ip + ["-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0"])
            _run(ip + ["-n", ns, "link", "set", "eth0", "up"])
            _run(ip + ["-n", ns, "link", "set", "lo", "up"])
            _run(ip + ["-n", sw, "link", "set", f"p{i}", "master", "br0"])
            _run(ip + ["-n", sw, "link", "set", f"p{i}", "up"])
        _run(ip + ["link", "add", self.ctl_link, "type", "veth", "peer", "name", "ctl", "netns", sw])
        _run(ip + ["addr", "add", f"{self.ctl_addr}/24", "dev", self.ctl_link])
        _run(ip + ["link", "set", self.ctl_link, "up"])
        _run(ip + ["-n", sw, "link", "set", "ctl", "master", "br0"])
        _run(ip + ["-n", sw, "link", "set", "ctl", "up"])

    def teardown(self) -> list[str]:
        """Remove everything this run made (idempotent). Returns what could not be removed (normally [])."""
        with self._lock:
            left = _remove([*self.namespaces, self.switch], [self.ctl_link])
            if self._reservation is not None and not left:
                with contextlib.suppress(OSError):
                    os.unlink(self._reservation)
                self._reservation = None
            self.is_setup = False
            self.grudge = {}
            return left

    # -- faults

    def apply_grudge(self, grudge: Grudge) -> None:
        """Make node a drop every packet from the nodes in grudge[a]; nodes not named drop nothing."""
        g = {int(a): {int(b) for b in bs} for a, bs in grudge.items()}
        for a, bs in g.items():
            if not 1 <= a <= self.n or any(not 1 <= b <= self.n for b in bs):
                raise ValueError(f"grudge names a node outside 1..{self.n}: {grudge}")
        with self._lock:
            for i in range(1, self.n + 1):
                script = nft_script(self.addr(b) for b in g.get(i, ()))
                _run(["ip", "netns", "exec", self.ns(i), "nft", "-f", "-"], input=script)
            self.grudge = {a: bs for a, bs in g.items() if bs}

    def heal(self) -> None:
        self.apply_grudge({})

    def rules(self, i: int) -> str:
        """nft's listing of node i's jepsen table ('' when there is none)."""
        p = _run(["ip", "netns", "exec", self.ns(i), "nft", "list", "table", "inet", NFT_TABLE], check=False)
        return p.stdout if p.returncode == 0 else ""

    # -- probing

    def probe(self, port: int, timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
        """TCP connects from every node's namespace to every other node's `port`, and from the root namespace to
        every node. A connect that is accepted or refused proves the path works both ways (1); one that times
        out means packets are dropped (0). No server needs to listen on `port`."""
        started = time.monotonic()
        actual = [[1] * self.n for _ in range(self.n)]
        control = [0] * self.n
        errors: list[BaseException] = []

        def from_ns(src: int) -> None:
            try:
                _enter_netns(self.ns(src))
                dsts = [d for d in range(1, self.n + 1) if d != src]
                for dst, up in zip(dsts, _reachable_all([self.addr(d) for d in dsts], port, timeout), strict=True):
                    actual[src - 1][dst - 1] = up
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)

        def from_root() -> None:
            control[:] = _reachable_all([self.addr(d) for d in range(1, self.n + 1)], port, timeout)

        threads = [threading.Thread(target=from_ns, args=(i,), daemon=True) for i in range(1, self.n + 1)]
        threads.append(threading.Thread(target=from_root, daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise NetError(f"probing failed: {errors[0]}")
        return ProbeResult(
            expected=expected_matrix(self.n, self.grudge),
            actual=actual,
            control=control,
            elapsed_ms=int((time.monotonic() - started) * 1000),
            grudge={str(a): sorted(bs) for a, bs in sorted(self.grudge.items())},
        )


_libc = ctypes.CDLL(None, use_errno=True)


def _enter_netns(name: str) -> None:
    """Move the calling thread (only it) into network namespace `name`; sockets it opens then live there."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise NetError(f"setns({name}) failed: {os.strerror(e)}")
    finally:
        os.close(fd)


def _reachable_all(hosts: list[str], port: int, timeout: float) -> list[int]:
    """Connect to every host at once (non-blocking); 1 when accepted or refused, 0 when no answer in time."""
    socks = []
    result = [0] * len(hosts)
    sel = selectors.DefaultSelector()
    try:
        for k, host in enumerate(hosts):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            socks.append(s)
            err = s.connect_ex((host, port))
            if err in (0, errno.ECONNREFUSED):
                result[k] = 1
            elif err == errno.EINPROGRESS:
                sel.register(s, selectors.EVENT_WRITE, k)
            elif err not in (errno.EHOSTUNREACH, errno.ENETUNREACH):
                raise OSError(err, f"connect to {host}:{port}: {os.strerror(err)}")
        deadline = time.monotonic() + timeout
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                assert isinstance(key.fileobj, socket.socket)
                s = key.fileobj
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                result[key.data] = 1 if err in (0, errno.ECONNREFUSED) else 0
                sel.unregister(s)
    finally:
        sel.close()
        for s in socks:
            s.close()
    return result

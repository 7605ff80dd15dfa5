"""Workloads: the clients of a run, and how their answers become history records (docs/jepsen.md).

- `register`: read, write and cas on KV keys (`/api/v1/kv/jepsen/<key>`), written values unique per key.
- `set`: each add appends a unique element to a set held in one KV key (a read, then a cas loop); reads
  return the whole set. After healing, every set is read once more.
- `controller`: simulated brokers register, heartbeat, elect masters and alter SyncStateSets on a few
  broker-sets; a final `sync-state-data` read gives the final state.

Clients are *processes* in Jepsen's sense: sequential (one op in flight), and an op whose outcome is unknown
(`info`) retires its process, so the worker takes a new process number. Keys rotate so that no key sees more
than ~500 ops or more than 10 processes (final reads included).

Error mapping (`outcome`): an op that surely did not happen is `fail` - a read that did not answer, a
request refused before it was sent (connection refused, connect timeout, every node answering 2007), a
definite rejection code. A write or cas whose request may have reached a leader (HTTP 503, read timeout,
lost connection, an unexpected code) is `info`. A cas that did not apply is `ok` with the value false and
`current`, the value the key held: its precondition failed when the log applied it, which the checker uses.
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from jepsen.history import FAIL, INFO, INVOKE, OK, HistoryWriter

KV_NS = "jepsen"
NOT_LEADER = 2007
QUERY_NOT_FOUND = 22
# Codes that say "rejected by the state machine, nothing changed" (controller-spec.md §3.2). 2004 is missing on
# purpose: a controller-triggered election that finds nobody still bumps masterEpoch.
DEFINITE_REJECTIONS = frozenset({16, 22, 2000, 2001, 2002, 2003, 2005, 2006, 2008, 2009, 2010, 2012, 2013, 2014,
                                 2016})  # fmt: skip
MASTER_STILL_EXIST = 2011
MAX_OPS_PER_KEY = 400  # leaves room for final reads under the checker's ~500
MAX_PROCESSES_PER_KEY = 9  # the final reader is the 10th
KEY_GROUP = 5  # workers sharing one register key at a time


# ------------------------------------------------------------------------------------------------ history


class Recorder:
    """Writes history records in the order they happen, stamping `time` (monotonic ns since the start)."""

    def __init__(self, path: Path) -> None:
        self.t0 = time.monotonic_ns()
        self.t0_s = self.t0 / 1e9
        self._writer = HistoryWriter(path)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record["time"] = self.now()
            self._writer.write(record)
            self.counts[f"{record['process'] if record['process'] == 'nemesis' else 'client'}:{record['type']}"] += 1
        return record

    def nemesis(self, f: str, value: Any) -> None:
        self.write({"process": "nemesis", "type": INFO, "f": f, "value": value})

    def close(self) -> None:
        with self._lock:
            self._writer.close()


class Processes:
    """Hands out process numbers: 0..concurrency-1 first, then fresh ones after each `info`."""

    def __init__(self, start: int = 0) -> None:
        self._next = start
        self._lock = threading.Lock()

    def fresh(self) -> int:
        with self._lock:
            p = self._next
            self._next += 1
            return p


# ------------------------------------------------------------------------------------------------- client


@dataclass
class Answer:
    """What one logical request got. `status`: "ok" (an envelope: see `code`), "rejected" (surely not applied:
    never sent, refused before the log, no leader found) or "unknown" (it may have been applied)."""

    status: str
    code: int | None = None
    env: dict[str, Any] | None = None
    node: str | None = None
    error: str | None = None

    @property
    def body(self) -> Any:
        return (self.env or {}).get("body")

    @property
    def header(self) -> Any:
        return (self.env or {}).get("header")


class LeaderHint:
    """The HTTP address of the last known leader, shared by all clients (2007 answers update it)."""

    def __init__(self) -> None:
        self.address: str | None = None


class Client:
    """One process's HTTP client. Follows 2007 redirects and retries on nodes that refuse connections until
    `op_timeout`; gives up at once when a request may have been delivered.

    With `spread_reads` (the negative control, `--read-mode local`) every GET goes to a random node and its
    answer does not move the leader hint, as a client of a follower-read system would do: the replicas that
    a partition cut off are asked too."""

    def __init__(
        self,
        addresses: list[str],
        hint: LeaderHint,
        rng: random.Random,
        *,
        token: str | None = None,
        request_timeout: float = 5.0,
        connect_timeout: float = 1.0,
        op_timeout: float = 6.0,
        transport: httpx.BaseTransport | None = None,
        spread_reads: bool = False,
    ) -> None:
        self.addresses = addresses
        self.spread_reads = spread_reads
        self.hint = hint
        self.rng = rng
        self.op_timeout = op_timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            timeout=httpx.Timeout(request_timeout, connect=connect_timeout),
            limits=httpx.Limits(max_keepalive_connections=0),  # a fresh connection each time: no stale sockets
            headers=headers,
            trust_env=False,
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def _forget(self, target: str) -> None:
        """A leader that does not answer may be paused or cut off: let the next op look for the leader anew."""
        if self.hint.address == target:
            self.hint.address = None

    def _next(self, current: str) -> str:
        others = [a for a in self.addresses if a != current] or self.addresses
        return self.rng.choice(others)

    def call(self, method: str, path: str, body: Any = None) -> Answer:
        deadline = time.monotonic() + self.op_timeout
        anywhere = self.spread_reads and method == "GET"
        target = self.rng.choice(self.addresses) if anywhere else self.hint.address or self.rng.choice(self.addresses)
        last = "no attempt"
        while True:
            try:
                r = self.http.request(method, f"http://{target}{path}", json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                last = f"{target}: {type(e).__name__}: {e}"  # never delivered
                if self.hint.address == target:
                    self.hint.address = None
            except httpx.HTTPError as e:  # read/write timeout, connection lost after sending
                self._forget(target)
                return Answer("unknown", node=target, error=f"{type(e).__name__}: {e}")
            else:
                if r.status_code == 503:
                    self._forget(target)
                    return Answer("unknown", node=target, error=f"HTTP 503: {r.text[:200]}")
                try:
                    env = r.json()
                except ValueError:
                    return Answer("unknown", node=target, error=f"HTTP {r.status_code}: not JSON: {r.text[:200]}")
                if r.status_code != 200 or not isinstance(env, dict) or "code" not in env:
                    # 4xx answers are refused before anything is proposed
                    status = "rejected" if 400 <= r.status_code < 500 else "unknown"
                    return Answer(status, node=target, error=f"HTTP {r.status_code}: {r.text[:200]}")
                if env["code"] != NOT_LEADER:
                    if not anywhere:
                        self.hint.address = target
                    return Answer("ok", code=env["code"], env=env, node=target)
                leader = (env.get("header") or {}).get("controllerLeaderAddress")
                last = f"{target}: 2007, leader {leader or 'unknown'}"
                if leader and leader != target:
                    self.hint.address = leader
                    if time.monotonic() < deadline:
                        target = leader
                        continue
                else:
                    self.hint.address = None
            if time.monotonic() >= deadline:
                return Answer("rejected", node=target, error=last)
            time.sleep(0.05)  # backoff before the next node: no leader yet, or this one is down
            target = self._next(target)


def outcome(answer: Answer, *, read: bool, ok_codes: frozenset[int] = frozenset({0})) -> str:
    """The completion type of an op from its answer (see the module docstring)."""
    if answer.status == "ok" and answer.code in ok_codes:
        return OK
    if read or answer.status == "rejected":
        return FAIL
    if answer.status == "ok" and answer.code in DEFINITE_REJECTIONS:
        return FAIL
    return INFO


# ------------------------------------------------------------------------------------------------ workers


@dataclass
class Worker:
    """One sequential client: its process number changes after every `info`."""

    index: int
    process: int
    client: Client
    rng: random.Random
    recorder: Recorder
    processes: Processes
    ops: int = 0

    def invoke(self, f: str, key: Any, value: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {"process": self.process, "type": INVOKE, "f": f}
        if key is not None:
            rec["key"] = key
        rec["value"] = value
        self.ops += 1
        return self.recorder.write(rec)

    def complete(self, inv: dict[str, Any], type_: str, value: Any, answer: Answer | None = None,
                 **extra: Any) -> dict[str, Any]:  # fmt: skip
        rec: dict[str, Any] = {"process": inv["process"], "type": type_, "f": inv["f"]}
        if "key" in inv:
            rec["key"] = inv["key"]
        rec["value"] = value
        if answer is not None:
            if answer.node:
                rec["node"] = answer.node
            if type_ != OK and answer.error:
                rec["error"] = answer.error
            if answer.code not in (None, 0):
                rec["code"] = answer.code
        rec.update(extra)
        self.recorder.write(rec)
        if type_ == INFO:
            self.process = self.processes.fresh()
        return rec


class KeyPool:
    """Independent keys, as Jepsen's `independent` generator hands them out: the workers are split into
    `slots` groups, each group works on one key at a time, and a group moves to a fresh key once its key has
    seen `max_ops` ops or would see more than `max_procs` processes (a worker's process number changes after
    every `info`, so a long-lived key collects processes)."""

    def __init__(self, prefix: str, slots: int = 1, max_ops: int = MAX_OPS_PER_KEY,
                 max_procs: int = MAX_PROCESSES_PER_KEY) -> None:  # fmt: skip
        self.prefix = prefix
        self.max_ops = max_ops
        self.max_procs = max_procs
        self.ops: Counter[str] = Counter()
        self.procs: dict[str, set[int]] = defaultdict(set)
        self.current: list[str | None] = [None] * max(1, slots)
        self.all: list[str] = []
        self._lock = threading.Lock()

    def _new(self) -> str:
        key = f"{self.prefix}{len(self.all) + 1}"
        self.all.append(key)
        return key

    def acquire(self, process: int, slot: int = 0) -> str:
        """The key for the next op of `process`, a worker of group `slot` (any int: taken modulo the groups)."""
        with self._lock:
            k = slot % len(self.current)
            key = self.current[k]
            if key is None or self.ops[key] >= self.max_ops or (
                process not in self.procs[key] and len(self.procs[key]) >= self.max_procs
            ):
                key = self.current[k] = self._new()
            self.ops[key] += 1
            self.procs[key].add(process)
            return key


# ----------------------------------------------------------------------------------------------- register


def _parse(v: Any) -> Any:
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return v


class Workload(ABC):
    name = "?"

    def setup(self, worker: Worker) -> None:  # noqa: B027 - optional hook: nothing to set up is the default
        """Runs once before the clock starts (on worker 0)."""

    @abstractmethod
    def op(self, worker: Worker) -> None:
        """One operation: invoke, call the cluster, complete (each worker runs them one at a time)."""

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        """Final reads after the heal; returns what could not be read."""
        return {}

    def stats(self) -> dict[str, Any]:
        return {}


def _kv(key: str) -> str:
    return f"/api/v1/kv/{KV_NS}/{key}"


class Register(Workload):
    name = "register"

    def __init__(self, concurrency: int) -> None:
        self.keys = KeyPool("k", slots=-(-concurrency // KEY_GROUP))  # groups of up to 5 workers per key
        self.values = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        self.last: dict[str, Any] = {}  # the latest value anyone saw per key: a cas expectation that may hold

    def _unique(self) -> int:
        with self._lock:
            return next(self.values)

    def op(self, worker: Worker) -> None:
        key = self.keys.acquire(worker.process, worker.index)
        r = worker.rng.random()
        if r < 0.5:
            self.read(worker, key)
        elif r < 0.75:
            self.write(worker, key, self._unique())
        else:
            self.cas(worker, key, self.last.get(key), self._unique())

    def read(self, worker: Worker, key: str) -> str:
        inv = worker.invoke("read", key, None)
        a = worker.client.call("GET", _kv(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            worker.complete(inv, OK, None, a)
            return OK
        t = outcome(a, read=True)
        value = _parse((a.body or {}).get("value")) if t == OK else None
        if t == OK:
            self.last[key] = value
        worker.complete(inv, t, value, a)
        return t

    def write(self, worker: Worker, key: str, value: int) -> None:
        inv = worker.invoke("write", key, value)
        a = worker.client.call("PUT", _kv(key), {"value": str(value)})
        t = outcome(a, read=False)
        if t == OK:
            self.last[key] = value
        worker.complete(inv, t, value, a)

    def cas(self, worker: Worker, key: str, expect: Any, new: int) -> None:
        inv = worker.invoke("cas", key, [expect, new])
        a = worker.client.call("POST", _kv(key) + "/cas", {"expect": None if expect is None else str(expect),
                                                           "value": str(new)})  # fmt: skip
        t = outcome(a, read=False)
        body = a.body if isinstance(a.body, dict) else {}
        applied = body.get("succeeded")
        if t == OK and applied is False:
            # Not applied: the log ordered this cas at an instant when the key held `current`, not `expect`.
            # That is an observation (an ok op with the result false), not an op that did not happen.
            current = _parse(body.get("value"))
            self.last[key] = current
            worker.complete(inv, OK, False, a, current=current)
            return
        if t == OK and applied is not True:  # code 0 without an answer we understand: it may have applied
            worker.complete(inv, INFO, [expect, new], a, error=f"cas: no 'succeeded' in the answer {a.env!r:.200}")
            return
        if t == OK:
            self.last[key] = new
        worker.complete(inv, t, [expect, new], a)

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        unread = read_until_ok(self.keys.all, lambda key: self.read(worker, key), deadline)
        return {"unread_keys": unread} if unread else {}

    def stats(self) -> dict[str, Any]:
        return {"keys": len(self.keys.all), "max_ops_per_key": max(self.keys.ops.values(), default=0)}


def read_until_ok(keys: list[Any], read: Callable[[Any], str], deadline: float) -> list[Any]:
    """The final phase: read every key until a read is `ok` (the cluster may still be recovering); the keys
    still unread at the deadline."""
    unread = []
    for key in keys:
        while read(key) != OK:
            if time.monotonic() >= deadline:
                unread.append(key)
                break
            time.sleep(0.5)  # the harness waits for a recovering cluster; bounded by the deadline
    return unread


# ---------------------------------------------------------------------------------------------------- set


def _elements(text: Any) -> list[int]:
    if not text:
        return []
    return [int(x) for x in str(text).split(",") if x]


class SetWorkload(Workload):
    """Sets held in KV keys `s1`, `s2`, ...: an add reads the set, then cas-es it to itself plus the element,
    retrying on a lost race. The cas makes an add atomic; a read returns the set as of one instant."""

    name = "set"
    MAX_ELEMENTS = 250
    CAS_TRIES = 30

    def __init__(self, concurrency: int) -> None:
        self.keys = KeyPool("s", slots=1, max_ops=self.MAX_ELEMENTS * 2, max_procs=10**9)
        self.elements = iter(range(1, 1 << 62))
        self._lock = threading.Lock()

    def op(self, worker: Worker) -> None:
        key = self.keys.acquire(worker.process)
        if worker.rng.random() < 0.8:
            with self._lock:
                element = next(self.elements)
            self.add(worker, key, element)
        else:
            self.read(worker, key)

    def read(self, worker: Worker, key: str) -> str:
        inv = worker.invoke("read", key, None)
        a = worker.client.call("GET", _kv(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            worker.complete(inv, OK, [], a)
            return OK
        t = outcome(a, read=True)
        worker.complete(inv, t, _elements((a.body or {}).get("value")) if t == OK else None, a)
        return t

    def add(self, worker: Worker, key: str, element: int) -> None:
        inv = worker.invoke("add", key, element)
        a = worker.client.call("GET", _kv(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            current: str | None = None
        elif outcome(a, read=True) == OK:
            current = (a.body or {}).get("value")
        else:
            worker.complete(inv, FAIL, element, a)  # nothing was written
            return
        for _ in range(self.CAS_TRIES):
            new = f"{current},{element}" if current else str(element)
            a = worker.client.call("POST", _kv(key) + "/cas", {"expect": current, "value": new})
            t = outcome(a, read=False)
            if t != OK:
                worker.complete(inv, t, element, a)
                return
            if (a.body or {}).get("succeeded"):
                worker.complete(inv, OK, element, a)
                return
            current = (a.body or {}).get("value")
        worker.complete(inv, FAIL, element, a, error=f"cas lost {self.CAS_TRIES} races")

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        unread = read_until_ok(self.keys.all, lambda key: self.read(worker, key), deadline)
        return {"unread_sets": unread} if unread else {}

    def stats(self) -> dict[str, Any]:
        return {"sets": len(self.keys.all)}


# --------------------------------------------------------------------------------------------- controller

CLUSTER = "jepsen"
HEARTBEAT_TIMEOUT_MS = 4000
HEARTBEAT_EVERY_S = 1.0


@dataclass
class Broker:
    name: str  # brokerName (the broker-set)
    id: int
    addr: str
    registered: bool = False
    up: bool = True  # a down broker sends no heartbeats: its liveness expires
    last_heartbeat: float = 0.0
    busy: bool = False


@dataclass
class View:
    """The latest replica info some client saw for a broker-set (inputs for elect and alter requests)."""

    master: int | None = None
    master_epoch: int | None = None
    sss: list[int] = field(default_factory=list)
    sss_epoch: int | None = None


def _state(header: Any, body: Any) -> dict[str, Any]:
    """The observation the controller checker reads: masterBrokerId, masterEpoch, syncStateSet, ...Epoch."""
    header, body = header or {}, body or {}
    out = {"masterBrokerId": header.get("masterBrokerId"), "masterEpoch": header.get("masterEpoch")}
    if "syncStateSetEpoch" in body:
        out["syncStateSetEpoch"] = body["syncStateSetEpoch"]
    elif header.get("syncStateSetEpoch") is not None:
        out["syncStateSetEpoch"] = header["syncStateSetEpoch"]
    if body.get("syncStateSet") is not None:
        out["syncStateSet"] = sorted(body["syncStateSet"])
    return out


class Controller(Workload):
    """Broker-sets `bs1..` with brokers 1..3 each. Brokers register (next-broker-id, apply-broker-id,
    register-broker), heartbeat every second while up, ask for elections (as brokers do: with their own id),
    and the master alters its SyncStateSet using the replica info it just read. Brokers go down and up now and
    then so that masters expire and elections happen."""

    name = "controller"
    PATH = "/api/v1/controller/"

    def __init__(self, concurrency: int, broker_sets: int = 3, replicas: int = 3) -> None:
        self.brokers = [Broker(f"bs{s}", b, f"10.255.{s}.{b}:10911")
                        for s in range(1, broker_sets + 1) for b in range(1, replicas + 1)]  # fmt: skip
        self.names = sorted({b.name for b in self.brokers})
        self.views: dict[str, View] = {n: View() for n in self.names}
        self._lock = threading.Lock()

    def _claim(self, pred: Callable[[Broker], bool], rng: random.Random) -> Broker | None:
        with self._lock:
            free = [b for b in self.brokers if not b.busy and pred(b)]
            if not free:
                return None
            b = rng.choice(free)
            b.busy = True
            return b

    def _call(self, worker: Worker, f: str, key: str | None, request: dict[str, Any], *, read: bool,
              ok_codes: frozenset[int] = frozenset({0})) -> tuple[str, Answer]:  # fmt: skip
        inv = worker.invoke(f, key, request)
        path = "/api/v1/admin/sync-state-data" if f == "sync-state-data" else self.PATH + f
        a = worker.client.call("POST", path, request)
        t = outcome(a, read=read, ok_codes=ok_codes)
        value: Any = None
        if t == OK:
            value = self._observation(f, a)
            if f in ("replica-info", "elect-master", "register-broker") and key is not None:
                self._learn(key, value)
            elif f == "sync-state-data":
                for name, obs in value.items():
                    if name in self.views:
                        self._learn(name, obs)
        worker.complete(inv, t, value, a)
        return t, a

    def _observation(self, f: str, a: Answer) -> Any:
        if f == "heartbeat" or f == "apply-broker-id":
            return None
        if f == "next-broker-id":
            return {"nextBrokerId": (a.header or {}).get("nextBrokerId")}
        if f == "sync-state-data":
            table = (a.body or {}).get("replicasInfoTable") or {}
            return {name: {"masterBrokerId": info.get("masterBrokerId"), "masterEpoch": info.get("masterEpoch"),
                           "syncStateSetEpoch": info.get("syncStateSetEpoch"),
                           "syncStateSet": sorted(r["brokerId"] for r in info.get("inSyncReplicas") or [])}
                    for name, info in table.items()}  # fmt: skip
        if f == "alter-sync-state-set":
            body = a.body or {}
            return {"syncStateSet": sorted(body.get("syncStateSet") or []), "syncStateSetEpoch": body.get("syncStateSetEpoch")}
        return _state(a.header, a.body)

    def _learn(self, name: str, obs: dict[str, Any]) -> None:
        with self._lock:
            v = self.views[name]
            if obs.get("masterEpoch") is not None and (v.master_epoch is None or obs["masterEpoch"] >= v.master_epoch):
                v.master, v.master_epoch = obs.get("masterBrokerId"), obs["masterEpoch"]
            if obs.get("syncStateSetEpoch") is not None and (v.sss_epoch is None or obs["syncStateSetEpoch"] >= v.sss_epoch):
                v.sss_epoch = obs["syncStateSetEpoch"]
                if obs.get("syncStateSet") is not None:
                    v.sss = list(obs["syncStateSet"])

    def heartbeat(self, worker: Worker, b: Broker) -> None:
        b.last_heartbeat = time.monotonic()
        self._call(worker, "heartbeat", b.name, {"clusterName": CLUSTER, "brokerName": b.name, "brokerAddr": b.addr,
                                                 "brokerId": b.id, "heartbeatTimeoutMills": HEARTBEAT_TIMEOUT_MS},
                   read=False)  # fmt: skip

    def register(self, worker: Worker, b: Broker) -> None:
        t, a = self._call(worker, "next-broker-id", b.name, {"clusterName": CLUSTER, "brokerName": b.name}, read=True)
        if t != OK:
            return
        t, a = self._call(worker, "apply-broker-id", b.name, {"clusterName": CLUSTER, "brokerName": b.name,
                          "appliedBrokerId": b.id, "registerCheckCode": f"{b.addr};{b.id}"}, read=False)  # fmt: skip
        if t != OK:
            return
        t, a = self._call(worker, "register-broker", b.name, {"clusterName": CLUSTER, "brokerName": b.name,
                          "brokerId": b.id, "brokerAddress": b.addr}, read=False)  # fmt: skip
        if t == OK:
            b.registered = True
            self.heartbeat(worker, b)

    def op(self, worker: Worker) -> None:
        rng = worker.rng
        now = time.monotonic()
        b = self._claim(lambda b: b.up and b.registered and now - b.last_heartbeat >= HEARTBEAT_EVERY_S, rng)
        if b is not None:
            try:
                self.heartbeat(worker, b)
            finally:
                b.busy = False
            return
        b = self._claim(lambda b: not b.registered, rng)
        if b is not None:
            try:
                self.register(worker, b)
            finally:
                b.busy = False
            return
        name = rng.choice(self.names)
        r = rng.random()
        if r < 0.3:
            self._call(worker, "replica-info", name, {"brokerName": name}, read=True)
        elif r < 0.5:
            b = self._claim(lambda b: b.name == name and b.up, rng)
            if b is None:
                return
            try:
                self._call(worker, "elect-master", name, {"clusterName": CLUSTER, "brokerName": name, "brokerId": b.id},
                           read=False, ok_codes=frozenset({0, MASTER_STILL_EXIST}))  # fmt: skip
            finally:
                b.busy = False
        elif r < 0.8:
            self.alter(worker, name)
        elif r < 0.9:
            self._call(worker, "sync-state-data", None, {"brokerNames": list(self.names)}, read=True)
        else:
            b = self._claim(lambda b: b.registered, rng)
            if b is not None:
                b.up = not b.up  # a broker going down stops heartbeating; coming back it heartbeats at once
                b.busy = False

    def alter(self, worker: Worker, name: str) -> None:
        t, _ = self._call(worker, "replica-info", name, {"brokerName": name}, read=True)
        if t != OK:
            return
        with self._lock:
            v = self.views[name]
            master, epoch, sss, sss_epoch = v.master, v.master_epoch, list(v.sss), v.sss_epoch
        if master is None or epoch is None or sss_epoch is None:
            return
        ids = sorted({b.id for b in self.brokers if b.name == name and b.registered})
        others = [i for i in ids if i != master]
        if not others:
            return
        flip = worker.rng.choice(others)
        new = sorted(set(sss) ^ {flip} | {master})
        request = {"brokerName": name, "masterBrokerId": master, "masterEpoch": epoch,
                   "syncStateSet": {"syncStateSet": new, "syncStateSetEpoch": sss_epoch}}  # fmt: skip
        inv = worker.invoke("alter-sync-state-set", name,
                            {"masterBrokerId": master, "masterEpoch": epoch, "syncStateSet": new,
                             "syncStateSetEpoch": sss_epoch})  # fmt: skip
        a = worker.client.call("POST", self.PATH + "alter-sync-state-set", request)
        t = outcome(a, read=False)
        value = self._observation("alter-sync-state-set", a) if t == OK else inv["value"]
        if t == OK:
            self._learn(name, {"syncStateSet": value["syncStateSet"], "syncStateSetEpoch": value["syncStateSetEpoch"]})
        worker.complete(inv, t, value, a)

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        while True:
            t, _ = self._call(worker, "sync-state-data", None, {"brokerNames": list(self.names)}, read=True)
            if t == OK:
                return {}
            if time.monotonic() >= deadline:
                return {"unread": "sync-state-data"}
            time.sleep(0.2)  # the cluster is recovering; bounded by the deadline

    def stats(self) -> dict[str, Any]:
        return {"broker_sets": len(self.names), "brokers": len(self.brokers),
                "registered": sum(b.registered for b in self.brokers)}  # fmt: skip


WORKLOADS: dict[str, Callable[[int], Workload]] = {"register": Register, "set": SetWorkload, "controller": Controller}


# ------------------------------------------------------------------------------------------------ driving


class Driver:
    """Runs `concurrency` workers against a workload at `rate` ops/s in total until told to stop."""

    def __init__(self, workload: Workload, recorder: Recorder, make_client: Callable[[random.Random], Client],
                 concurrency: int, rate: float, seed: int | str, processes: Processes | None = None,
                 halt: threading.Event | None = None) -> None:  # fmt: skip
        """`processes` and `halt` are shared when several drivers write one history (a combined run): process
        numbers must then be unique across all of them, and one event stops them all."""
        self.workload = workload
        self.recorder = recorder
        self.processes = processes if processes is not None else Processes()
        self.workers = [
            Worker(i, self.processes.fresh(), make_client(random.Random(f"{seed}:client:{i}")),
                   random.Random(f"{seed}:worker:{i}"), recorder, self.processes)
            for i in range(concurrency)
        ]  # fmt: skip
        self.make_client = make_client
        self.seed = seed
        self.rate = rate
        self.halt = halt if halt is not None else threading.Event()
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for w in self.workers:
            t = threading.Thread(target=self._loop, args=(w,), name=f"worker-{w.index}", daemon=True)
            self._threads.append(t)
            t.start()

    def _loop(self, w: Worker) -> None:
        period = len(self.workers) / self.rate if self.rate > 0 else 0.0
        next_at = time.monotonic() + w.rng.uniform(0, period)
        while not self.halt.is_set():
            if self.halt.wait(max(0.0, next_at - time.monotonic())):
                break
            next_at = max(next_at + period * w.rng.uniform(0.5, 1.5), time.monotonic() - period)
            try:
                self.workload.op(w)
            except Exception as e:  # noqa: BLE001 - a harness bug: record it and keep the run going
                self.errors.append(f"worker {w.index}: {type(e).__name__}: {e}")
                if len(self.errors) > 100:
                    self.halt.set()

    def stop(self) -> None:
        self.halt.set()
        for t in self._threads:
            t.join(timeout=30)

    def final(self, deadline: float) -> dict[str, Any]:
        p = self.processes.fresh()
        w = Worker(-1, p, self.make_client(random.Random(f"{self.seed}:final")), random.Random(f"{self.seed}:final"),
                   self.recorder, self.processes)  # fmt: skip
        try:
            return self.workload.final(w, deadline)
        finally:
            w.client.close()

    def close(self) -> None:
        for w in self.workers:
            w.client.close()

    def ops(self) -> int:
        return sum(w.ops for w in self.workers)


class Mix:
    """One or more workloads against one cluster, writing one history: a Driver each (its own `concurrency`
    workers at its own `rate`), with process numbers unique across them. The checkers split the history by
    workload again (jepsen/checker/workloads.py), so a combined run is judged exactly as separate runs are."""

    def __init__(self, names: list[str], recorder: Recorder, make_client: Callable[[random.Random], Client],
                 concurrency: int, rate: float, seed: int) -> None:  # fmt: skip
        if not names or len(set(names)) != len(names) or any(n not in WORKLOADS for n in names):
            raise ValueError(f"workloads must be distinct names among {', '.join(WORKLOADS)}: {names}")
        self.halt = threading.Event()
        processes = Processes()
        self.drivers: dict[str, Driver] = {}
        for name in names:
            # a single workload keeps its historical seed (the same run as before combined runs existed)
            driver_seed: int | str = seed if len(names) == 1 else f"{seed}:{name}"
            self.drivers[name] = Driver(WORKLOADS[name](concurrency), recorder, make_client, concurrency, rate,
                                        driver_seed, processes, self.halt)  # fmt: skip

    @property
    def errors(self) -> list[str]:
        return [f"{name}: {e}" for name, d in self.drivers.items() for e in d.errors]

    def start(self) -> None:
        for d in self.drivers.values():
            d.start()

    def stop(self) -> None:
        for d in self.drivers.values():
            d.stop()

    def final(self, deadline: float) -> dict[str, Any]:
        """Each workload's final reads; what could not be read, by workload (empty: all done)."""
        missing = {name: d.final(deadline) for name, d in self.drivers.items()}
        return {name: m for name, m in missing.items() if m}

    def stats(self) -> dict[str, Any]:
        return {name: d.workload.stats() for name, d in self.drivers.items()}

    def close(self) -> None:
        for d in self.drivers.values():
            d.close()

    def ops(self) -> int:
        return sum(d.ops() for d in self.drivers.values())

"""What every workload is made of (docs/jepsen.md, "Workloads").

A workload module (`register`, `set`, `controller`) pairs three things and names them in its `SPEC`:
its *generator and client* (a `Workload`: which op to do next, and how it becomes HTTP requests and a
history record), the *vocabulary* of its ops (`fs`, `validate`: what a history may say), and its *checker*
(`check`, with the lines it adds to the summary).

Clients are *processes* in Jepsen's sense: sequential (one op in flight), and an op whose outcome is unknown
(`info`) retires its process, so the worker takes a new process number. Keys rotate so that no key sees more
than ~500 ops or more than 10 processes (final reads included).
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jepsen.checker.linearizable import CheckOptions
from jepsen.client import Answer, Client
from jepsen.history import INFO, INVOKE, OK, Op

KV_NS = "jepsen"
MAX_OPS_PER_KEY = 400  # leaves room for final reads under the checker's ~500
MAX_PROCESSES_PER_KEY = 9  # the final reader is the 10th
KEY_GROUP = 5  # workers sharing one register key at a time


class Records(Protocol):
    """Where a worker writes its records (jepsen.driver.Recorder): stamps `time`, keeps the order."""

    def write(self, record: dict[str, Any]) -> dict[str, Any]: ...


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


@dataclass
class Worker:
    """One sequential client: its process number changes after every `info`."""

    index: int
    process: int
    client: Client
    rng: random.Random
    recorder: Records
    processes: Processes
    ops: int = 0

    def invoke(self, f: str, key: Any, value: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {"process": self.process, "type": INVOKE, "f": f}
        if key is not None:
            rec["key"] = key
        rec["value"] = value
        self.ops += 1
        return self.recorder.write(rec)

    def complete(
        self, inv: dict[str, Any], type_: str, value: Any, answer: Answer | None = None, **extra: Any
    ) -> dict[str, Any]:
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

    def __init__(
        self, prefix: str, slots: int = 1, max_ops: int = MAX_OPS_PER_KEY, max_procs: int = MAX_PROCESSES_PER_KEY
    ) -> None:
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
            if (
                key is None
                or self.ops[key] >= self.max_ops
                or (process not in self.procs[key] and len(self.procs[key]) >= self.max_procs)
            ):
                key = self.current[k] = self._new()
            self.ops[key] += 1
            self.procs[key].add(process)
            return key


def parse_value(v: Any) -> Any:
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return v


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


def kv_path(key: str) -> str:
    return f"/api/v1/kv/{KV_NS}/{key}"


class Workload(ABC):
    """A workload's generator and client: `op` picks the next operation and performs it through a worker."""

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


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload, whole: the harness builds `make(concurrency)`; the checker suite gives it the ops whose
    `f` is in `fs` (jepsen.suite.classify), checks each with `validate` (raises HistoryError) and judges them
    with `check`, stored under `checker` in results.json. In the summary, `counts` (a format string over the
    result and its `counts`) follows the verdict, and `details` adds lines about what was not valid."""

    name: str
    make: Callable[[int], Workload]
    fs: frozenset[str]
    validate: Callable[[Op], None]
    checker: str
    check: Callable[[list[Op], CheckOptions], dict[str, Any]]
    counts: str
    details: Callable[[dict[str, Any]], list[str]]


def scalar(v: Any) -> bool:
    """A value a history may hold: a string or an integer (not a bool)."""
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def scalar_or_null(v: Any) -> bool:
    return v is None or scalar(v)

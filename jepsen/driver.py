"""The driver of a run: the recorder that writes the history, and the worker threads that play the
workloads against the cluster at a given rate (docs/jepsen.md, "Workloads").
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jepsen.client import Client
from jepsen.history import INFO, HistoryWriter
from jepsen.workloads import WORKLOADS
from jepsen.workloads.base import Processes, Worker, Workload


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


class Driver:
    """Runs `concurrency` workers against a workload at `rate` ops/s in total until told to stop."""

    def __init__(
        self,
        workload: Workload,
        recorder: Recorder,
        make_client: Callable[[random.Random], Client],
        concurrency: int,
        rate: float,
        seed: int | str,
        processes: Processes | None = None,
        halt: threading.Event | None = None,
    ) -> None:
        """`processes` and `halt` are shared when several drivers write one history (a combined run): process
        numbers must then be unique across all of them, and one event stops them all."""
        self.workload = workload
        self.recorder = recorder
        self.processes = processes if processes is not None else Processes()
        self.workers = [
            Worker(
                i,
                self.processes.fresh(),
                make_client(random.Random(f"{seed}:client:{i}")),
                random.Random(f"{seed}:worker:{i}"),
                recorder,
                self.processes,
            )
            for i in range(concurrency)
        ]
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
        w = Worker(
            -1,
            p,
            self.make_client(random.Random(f"{self.seed}:final")),
            random.Random(f"{self.seed}:final"),
            self.recorder,
            self.processes,
        )
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
    workload again (jepsen.suite.classify), so a combined run is judged exactly as separate runs are."""

    def __init__(
        self,
        names: list[str],
        recorder: Recorder,
        make_client: Callable[[random.Random], Client],
        concurrency: int,
        rate: float,
        seed: int,
    ) -> None:
        if not names or len(set(names)) != len(names) or any(n not in WORKLOADS for n in names):
            raise ValueError(f"workloads must be distinct names among {', '.join(WORKLOADS)}: {names}")
        self.halt = threading.Event()
        processes = Processes()
        self.drivers: dict[str, Driver] = {}
        for name in names:
            # a single workload keeps its historical seed (the same run as before combined runs existed)
            driver_seed: int | str = seed if len(names) == 1 else f"{seed}:{name}"
            self.drivers[name] = Driver(
                WORKLOADS[name].make(concurrency),
                recorder,
                make_client,
                concurrency,
                rate,
                driver_seed,
                processes,
                self.halt,
            )

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

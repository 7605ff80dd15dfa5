"""One PySyncObj 0.3.17 node for the peer baseline (bench extra only).

    python -m tools.bench.pysyncobj_peer SELF_PORT OTHER_PORT,OTHER_PORT SECONDS CONCURRENCY SIZE [tuned]

The node that is leader once the cluster is ready drives CONCURRENCY callback-chained proposers of SIZE
bytes for SECONDS (PySyncObj's async submit, as measured in dependencies.md) and prints one JSON line.
PySyncObj runs with its in-memory log and no fsync: its fastest, least durable mode.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from pysyncobj import SyncObj, SyncObjConf, replicated


class Counter(SyncObj):
    def __init__(self, me: str, others: list[str], conf: SyncObjConf) -> None:
        super().__init__(me, others, conf)
        self.n = 0

    @replicated
    def add(self, payload: bytes) -> int:
        self.n += 1
        return self.n


def main() -> None:
    me, others, seconds, concurrency, size = sys.argv[1:6]
    tuned = len(sys.argv) > 6 and sys.argv[6] == "tuned"
    # Defaults tick every 50 ms and send appends every 100 ms; "tuned" is the 1 ms / 5 ms setting that
    # dependencies.md measured as PySyncObj's fastest for a latency-bound client.
    extra = {"autoTickPeriod": 0.001, "appendEntriesPeriod": 0.005} if tuned else {}
    conf = SyncObjConf(dynamicMembershipChange=False, commandsWaitLeader=True, **extra)
    node = Counter(f"127.0.0.1:{me}", [f"127.0.0.1:{p}" for p in others.split(",")], conf)
    node.waitReady()
    deadline_ready = time.monotonic() + 20
    while node._getLeader() is None and time.monotonic() < deadline_ready:
        time.sleep(0.01)
    time.sleep(0.5)  # let the other nodes see the same leader
    if node._getLeader() != node.selfNode:
        time.sleep(float(seconds) + 3)
        return
    payload = b"\x00" * int(size)
    lat: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + float(seconds)
    done = threading.Event()
    live = [int(concurrency)]

    def submit() -> None:
        t0 = time.perf_counter()

        def cb(result: object, err: int) -> None:
            with lock:
                if err == 0:
                    lat.append(time.perf_counter() - t0)
            if time.perf_counter() < deadline:
                submit()
            else:
                with lock:
                    live[0] -= 1
                    if live[0] == 0:
                        done.set()

        node.add(payload, callback=cb)

    t0 = time.perf_counter()
    for _ in range(int(concurrency)):
        submit()
    done.wait(float(seconds) + 10)
    elapsed = time.perf_counter() - t0
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0.0

    print(
        json.dumps(
            {
                "committed": len(lat),
                "seconds": elapsed,
                "rate": len(lat) / elapsed,
                "p50_ms": pct(0.5),
                "p99_ms": pct(0.99),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()

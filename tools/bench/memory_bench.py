"""Memory and scale figures (each in a fresh process, so that RSS is this workload's alone):

* `leader`: a one-node Node (fsync on, default snapshot triggers) with the controller state machine, fed
  `sets` broker-sets x 3 brokers (registration, election, SyncStateSet) and then heartbeats until the log
  has taken `entries` entries; RSS and peak RSS of the leader process, and how many log entries it still
  holds in memory (bounded by the snapshot threshold plus the trailing margin, not by the entries taken);
* `per_broker`: the Python memory a bare ControllerStateMachine allocates and keeps per broker after the same
  setup (tracemalloc: exact, unlike the RSS growth, which the allocator's reuse of freed memory hides);
* `snapshot`: snapshot save time (apply thread + writer thread) and size for a given number of brokers.

    python -m tools.bench.memory_bench leader SETS ENTRIES | per_broker SETS | snapshot SETS   (one JSON line)
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

from tools.bench.group import REPO, child_env


def rss_bytes() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5]] = int(line.split()[1]) * 1024
    return {"rss": out["VmRSS"], "peak_rss": out["VmHWM"]}


async def _leader(sets: int, entries: int) -> dict[str, Any]:
    from raft.node import Node
    from raft.options import NodeOptions
    from raft.testing.cluster import free_ports
    from statemachine import ControllerStateMachine
    from tools.bench.statemachine_bench import Workload

    with tempfile.TemporaryDirectory(prefix="mem-bench-", dir=os.environ.get("BENCH_DIR") or None) as root:
        port = free_ports(1)[0]
        node = Node(
            NodeOptions(node_id="n1", data_dir=root, peers={"n1": ("127.0.0.1", port)}, secret=b"x"),
            ControllerStateMachine(),
        )
        w = Workload(sets)
        await node.start()
        t0 = time.perf_counter()
        try:
            await node.wait_for_leader(30)
            base = node.status().last_index
            setup = w.setup()
            done = False
            while not done:
                batch = []
                for _ in range(1000):
                    try:
                        batch.append(next(setup))
                    except StopIteration:
                        done = True
                        break
                await asyncio.gather(*(node.apply(c) for c in batch))
            taken = node.status().last_index - base
            while taken < entries:
                n = min(1000, entries - taken)
                await asyncio.gather(*(node.apply(w.heartbeat()) for _ in range(n)))
                taken += n
            gc.collect()
            st = node.status()
            mem = rss_bytes()
        finally:
            await node.stop()
    return {
        "sets": sets,
        "brokers": 3 * sets,
        "entries": taken,
        "seconds": time.perf_counter() - t0,
        **mem,
        "log_entries_held": st.last_index - st.first_index + 1,
        "snapshots": st.snapshot.saves,
        "snapshot_index": st.snapshot.index,
    }


def _per_broker(sets: int) -> dict[str, Any]:
    from statemachine import ControllerStateMachine
    from tools.bench.statemachine_bench import Entry, Workload

    cmds = list(Workload(sets).setup())
    entries = [Entry(k + 1, 1, c) for k, c in enumerate(cmds)]
    del cmds
    gc.collect()
    before = rss_bytes()["rss"]
    tracemalloc.start()  # what the state machine allocates and keeps, exactly (the commands were built before)
    sm = ControllerStateMachine()
    for k in range(0, len(entries), 256):
        sm.on_apply(entries[k : k + 256])
    del entries
    gc.collect()
    kept, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    grown = rss_bytes()["rss"] - before
    return {
        "sets": sets,
        "brokers": 3 * sets,
        "python_bytes": kept,
        "bytes_per_broker": kept / (3 * sets),
        "rss_growth": grown,
        "state_machine": type(sm).__name__,
    }


def _snapshot(sets: int) -> dict[str, Any]:
    from statemachine import ControllerStateMachine
    from tools.bench.statemachine_bench import Workload, snapshot_figures, timed_apply

    sm = ControllerStateMachine()
    it = iter(list(Workload(sets).setup()))
    timed_apply(sm, lambda: next(it), sum(1 for _ in Workload(sets).setup()), None, 0)
    snap = snapshot_figures(sm, 3 * sets, 0.0)
    return {
        "sets": sets,
        "brokers": 3 * sets,
        "save_ms": snap["save_apply_thread_ms"] + snap["save_writer_thread_ms"],
        "save_apply_thread_ms": snap["save_apply_thread_ms"],
        "file_bytes": snap["file_bytes"],
        "raw_bytes": snap["raw_bytes"],
    }


def run(kind: str, *args: int, timeout: float = 1800) -> dict[str, Any]:
    """One measurement in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench.memory_bench", kind, *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory_bench {kind} failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    kind, *nums = argv
    ints = [int(x) for x in nums]
    if kind == "leader":
        out = asyncio.run(_leader(*ints))
    elif kind == "per_broker":
        out = _per_broker(*ints)
    elif kind == "snapshot":
        out = _snapshot(*ints)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

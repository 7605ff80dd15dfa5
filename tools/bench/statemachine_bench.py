"""python -m tools.bench statemachine [--sets N] [--seconds S | --count N] [--json FILE]

The controller state machine alone, on one core: commands are built untimed in chunks of Raft-sized batches,
then only `on_apply` is timed. Workloads over N broker-sets of 3 brokers (default 10,000):
  * setup: the registration of every broker, heartbeats, first elections, full SyncStateSets;
  * heartbeats: every broker beating in turn (the hot path);
  * mixed: mostly heartbeats, plus the metadata polls, registrations, ISR changes, elections, admin reads,
    KV writes and periodic inactive-broker scans a controller sees;
and the snapshot: section sizes per broker (raw msgpack and lz4), encode and load times, and a real save's
split between the apply thread and the writer thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import lz4.frame

from snapshot import SnapshotWriter
from statemachine import SECTION_NAMES, ControllerStateMachine
from statemachine import commands as cmd

T0 = 1_700_000_000_000
CLUSTER = "DefaultCluster"
BATCH = 256  # entries per on_apply call, about one Raft apply batch
CHUNK = 8192  # commands built per untimed step
# Share of each command in the mixed workload (per 1000 commands); one scan every SCAN_EVERY commands.
MIX = {
    "heartbeat": 800,
    "getReplicaInfo": 100,
    "registerBroker": 40,
    "alterSyncStateSet": 20,
    "getNextBrokerId": 20,
    "electMaster": 10,
    "getSyncStateData": 5,
    "kvPut": 5,
}
SCAN_EVERY = 20_000


@dataclass(slots=True)
class Entry:
    index: int
    term: int
    data: bytes


def name(i: int) -> str:
    return f"broker-{i:05d}"


def addr(i: int, b: int) -> str:
    return f"10.{i // 250 % 250}.{i % 250}.{b}:10911"


class Workload:
    """Builds commands that stay meaningful as they are applied (times move forward, epochs are tracked)."""

    def __init__(self, sets: int) -> None:
        self.sets = sets
        self.now = T0
        self.n = 0  # commands built so far
        self.ss_epoch = [2] * sets  # syncStateSetEpoch after setup (elect -> 1, alter -> 2)
        self.full = [True] * sets  # SyncStateSet is {1,2,3} (else {1})

    def tick(self) -> int:
        self.n += 1
        if self.n % 10 == 0:  # 1 ms per 10 commands: a full heartbeat round stays well inside 10 s
            self.now += 1
        return self.now

    def setup(self) -> Iterator[bytes]:
        for i in range(self.sets):
            n = name(i)
            for b in (1, 2, 3):
                yield cmd.get_next_broker_id(self.now, CLUSTER, n)
                yield cmd.apply_broker_id(self.now, CLUSTER, n, b, f"{addr(i, b)};{T0}")
                yield cmd.register_broker(self.now, CLUSTER, n, b, addr(i, b))
                yield cmd.heartbeat(self.now, CLUSTER, n, addr(i, b), b, epoch=1, max_offset=0)
            yield cmd.elect_master(self.now, n, cluster_name=CLUSTER, broker_id=1)
            yield cmd.alter_sync_state_set(self.now, n, 1, 1, (1, 2, 3), 1)

    def heartbeat(self) -> bytes:
        k = self.n
        i, b = k // 3 % self.sets, k % 3 + 1
        t = self.tick()
        return cmd.heartbeat(t, CLUSTER, name(i), addr(i, b), b, epoch=1, max_offset=k, confirm_offset=k)

    def mixed(self) -> Iterator[bytes]:
        kinds = [k for k, share in MIX.items() for _ in range(share)]
        j = 0
        while True:
            j += 1
            if j % SCAN_EVERY == 0:
                yield cmd.check_not_active_broker(self.tick())
                continue
            kind = kinds[(j * 7919) % len(kinds)]  # a fixed spread of the shares, no randomness
            i = (j * 104_729) % self.sets
            if kind == "heartbeat":
                yield self.heartbeat()
                continue
            t = self.tick()
            if kind == "getReplicaInfo":
                yield cmd.get_replica_info(t, name(i))
            elif kind == "registerBroker":
                yield cmd.register_broker(t, CLUSTER, name(i), 2, addr(i, 2))
            elif kind == "alterSyncStateSet":  # the master shrinks and grows its ISR in turn
                members = (1,) if self.full[i] else (1, 2, 3)
                yield cmd.alter_sync_state_set(t, name(i), 1, 1, members, self.ss_epoch[i])
                self.ss_epoch[i] += 1
                self.full[i] = not self.full[i]
            elif kind == "getNextBrokerId":
                yield cmd.get_next_broker_id(t, CLUSTER, name(i))
            elif kind == "electMaster":  # a slave asks: the alive master is kept (2011)
                yield cmd.elect_master(t, name(i), cluster_name=CLUSTER, broker_id=2)
            elif kind == "getSyncStateData":
                yield cmd.get_sync_state_data(t, [name((i + d) % self.sets) for d in range(5)])
            else:
                yield cmd.kv_put(t, "bench", f"key-{i % 1000}", str(j))


def timed_apply(
    sm: ControllerStateMachine, make: Callable[[], bytes], count: int | None, seconds: float | None, first_index: int
) -> dict[str, Any]:
    """Apply commands from `make` until `count` are applied or `seconds` of apply time are spent."""
    applied, spent, index, failures = 0, 0.0, first_index, 0
    clock = time.perf_counter
    while (count is None or applied < count) and (seconds is None or spent < seconds):
        size = CHUNK if count is None else min(CHUNK, count - applied)
        entries = []
        for _ in range(size):
            index += 1
            entries.append(Entry(index, 1, make()))
        batches = [entries[k : k + BATCH] for k in range(0, size, BATCH)]
        start = clock()
        for batch in batches:
            results = sm.on_apply(batch)
            failures += sum(r.code == 2015 for r in results)
        spent += clock() - start
        applied += size
    return {
        "applied": applied,
        "seconds": spent,
        "per_second": applied / spent if spent else 0.0,
        "malformed": failures,
        "last_index": index,
    }


def snapshot_figures(sm: ControllerStateMachine, brokers: int, cold_ms: float) -> dict[str, Any]:
    """`cold_ms`: the first snapshot's encode (no cached rows yet); `encode_ms`: this one, after a workload
    changed some sets since that first snapshot (the steady state of periodic snapshots)."""
    start = time.perf_counter()
    sections = sm.encode_sections()
    encode_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    ControllerStateMachine().load_sections(sections)
    load_ms = (time.perf_counter() - start) * 1000
    with tempfile.TemporaryDirectory(prefix="sm-bench-") as tmp:  # a real save, as the snapshot manager does
        writer = SnapshotWriter(os.path.join(tmp, "data"), known_types=SECTION_NAMES)
        start = time.perf_counter()
        sm.on_snapshot_save(writer)  # the apply thread's share
        save_apply_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        written = writer.finish()  # the writer thread's share: lz4, CRCs, fsync
        save_writer_ms = (time.perf_counter() - start) * 1000
    per = {
        SECTION_NAMES[t]: {"raw_bytes": len(b), "lz4_bytes": len(lz4.frame.compress(b))} for t, b in sections.items()
    }
    raw = sum(s["raw_bytes"] for s in per.values())
    packed = sum(s["lz4_bytes"] for s in per.values())
    return {
        "sections": per,
        "raw_bytes": raw,
        "lz4_bytes": packed,
        "raw_bytes_per_broker": raw / brokers,
        "lz4_bytes_per_broker": packed / brokers,
        "first_encode_ms": cold_ms,
        "encode_ms": encode_ms,
        "load_ms": load_ms,
        "save_apply_thread_ms": save_apply_ms,
        "save_writer_thread_ms": save_writer_ms,
        "file_bytes": written.size,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench statemachine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sets", type=int, default=10_000, help="broker-sets (3 brokers each); default 10000")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--seconds", type=float, help="apply time per workload (default 3)")
    limit.add_argument("--count", type=int, help="commands per workload instead of a time budget")
    p.add_argument("--json", dest="json_path", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    seconds = None if args.count is not None else (args.seconds if args.seconds is not None else 3.0)

    sm = ControllerStateMachine()
    w = Workload(args.sets)
    setup_cmds = list(w.setup())
    it = iter(setup_cmds)
    setup = timed_apply(sm, lambda: next(it), len(setup_cmds), None, 0)
    heartbeats = timed_apply(sm, w.heartbeat, args.count, seconds, setup["last_index"])
    start = time.perf_counter()
    sm.encode_sections()  # the first snapshot: every row is encoded
    cold_ms = (time.perf_counter() - start) * 1000
    mixed_it = w.mixed()
    mixed = timed_apply(sm, lambda: next(mixed_it), args.count, seconds, heartbeats["last_index"])
    snap = snapshot_figures(sm, 3 * args.sets, cold_ms)

    rows = [
        ("broker-sets x brokers", f"{args.sets:,} x 3"),
        ("setup (registration) commands/s", f"{setup['per_second']:,.0f}"),
        ("heartbeats applied/s", f"{heartbeats['per_second']:,.0f}"),
        ("mixed commands applied/s", f"{mixed['per_second']:,.0f}"),
        (
            "snapshot bytes per broker, raw / lz4",
            f"{snap['raw_bytes_per_broker']:.1f} / {snap['lz4_bytes_per_broker']:.1f}",
        ),
        ("snapshot total, raw / lz4", f"{snap['raw_bytes']:,} / {snap['lz4_bytes']:,} B"),
        ("snapshot encode, first / after mixed (ms)", f"{snap['first_encode_ms']:.1f} / {snap['encode_ms']:.1f}"),
        (
            "snapshot save: apply / writer thread (ms)",
            f"{snap['save_apply_thread_ms']:.1f} / {snap['save_writer_thread_ms']:.1f}",
        ),
        ("snapshot load (ms)", f"{snap['load_ms']:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    report = {
        "workload": {
            "sets": args.sets,
            "brokers_per_set": 3,
            "seconds": seconds,
            "count": args.count,
            "batch": BATCH,
            "mix_per_1000": MIX,
            "scan_every": SCAN_EVERY,
        },
        "setup": setup,
        "heartbeats": heartbeats,
        "mixed": mixed,
        "snapshot": snap,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=2)
    if setup["malformed"] or heartbeats["malformed"] or mixed["malformed"]:
        print("some commands were refused as malformed: the benchmark is broken", file=sys.stderr)
        return 1
    return 0

"""python -m tools.bench audit [--entries N] [--sets S] [--dir D] [--keep] [--json FILE]

The Spark audit (tools/audit) on a synthetic 3-node group, against `rmqctl log replay` on the same log.

Build (untimed): N entries in total across the 3 nodes, i.e. N/3 log indexes held by each node, like a
real controller's log: the registration of S broker-sets of 3 brokers (default 10,000, fewer for small N),
then a stream that is >= 90 % heartbeats plus elections, SyncStateSet changes, registrations, KV puts,
inactive-broker scans and a config change. Node 0's log is written with the project's own WAL writer
(raft.storage.SegmentLog, 1,024 entries per append) and the state machine applies every command, so that
snapshots (at 50 % and 90 % of the log, written with the snapshot package) hold the real state; nodes 1
and 2 are byte copies (consensus is not needed to audit).

Timed: the whole audit (`tools.audit.pipeline.run`) on local[1], then local[2], each in a SparkSession
already started and warmed on a tiny log (the "after start-up" figure: JVM and Python workers up), and
`rmqctl log replay --no-snapshot` on node 0 (one process, wall time). Entries/s counts the N stored
entries; each is CRC-checked and log-matched, each log index replayed once (so indexes/s = entries/s / 3).
Targets: >= 300k entries/s per core, local[2] >= 1.7x local[1]; a miss is reported, never an error.
The machine is shared: each row carries the 1-minute load average just before it ran ("load") and the CPU
seconds the other processes of the machine used while it ran ("others CPU s", from /proc/stat).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from raft.core.confchange import encode_conf
from raft.core.messages import ConfState, Entry, EntryType
from raft.leaf.durable import atomic_write
from raft.storage import SegmentLog
from raft.storage.identity import IDENTITY_FILE, DataDirIdentity, encode_identity
from raft.storage.layout import LOG_DIR, SNAPSHOT_DIR
from snapshot.storage import FileSnapshotStorage
from statemachine import SECTION_NAMES, ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd
from tools.bench.statemachine_bench import CLUSTER, Workload, addr, name

NODES = ("n0", "n1", "n2")
VOTERS = tuple(f"127.0.0.1:{9880 + k}" for k in range(3))
APPEND = 1024
HEARTBEAT_PER_MILLE = 960  # of the stream after setup
TARGET_PER_CORE, TARGET_SPEEDUP = 300_000, 1.7


def stream(w: Workload, sets: int) -> Iterator[bytes]:
    """After setup: heartbeats, and in the remaining slots (fixed spread, no randomness) elections,
    SyncStateSet changes, registrations, KV puts, a scan every 20,000 and one config change."""
    others = ("alter", "elect", "register", "kv", "kv", "alter")
    j = 0
    while True:
        j += 1
        if j % 20_000 == 0:
            yield cmd.check_not_active_broker(w.tick())
        elif j == 50_000:
            yield cmd.update_controller_config(w.tick(), {"electMasterMaxRetryCount": 5})
        elif (j * 7919) % 1000 < HEARTBEAT_PER_MILLE:
            yield w.heartbeat()
        else:
            kind, i, t = others[j % len(others)], (j * 104_729) % sets, w.tick()
            if kind == "alter":
                members = (1,) if w.full[i] else (1, 2, 3)
                yield cmd.alter_sync_state_set(t, name(i), 1, 1, members, w.ss_epoch[i])
                w.ss_epoch[i] += 1
                w.full[i] = not w.full[i]
            elif kind == "elect":
                yield cmd.elect_master(t, name(i), cluster_name=CLUSTER, broker_id=2)
            elif kind == "register":
                yield cmd.register_broker(t, CLUSTER, name(i), 2, addr(i, 2))
            else:
                yield cmd.kv_put(t, "bench", f"key-{i % 1000}", str(j))


def build(root: Path, entries: int, sets: int | None = None) -> dict[str, Any]:
    """Write the 3 data dirs under root; returns what was built."""
    indexes = max(entries // len(NODES), 100)
    sets = sets or max(2, min(10_000, indexes // 300))  # registration stays a few % of the log
    w = Workload(sets)
    setup = list(w.setup())
    commands = iter(setup)
    more = stream(w, sets)
    sm = ControllerStateMachine()
    marks = sorted({max(3, indexes // 2), max(4, indexes * 9 // 10)})
    node0 = root / NODES[0]
    snaps = FileSnapshotStorage(node0 / SNAPSHOT_DIR, max_reserved=1 << 30, known_types=SECTION_NAMES)
    heartbeats, unpackb = 0, msgpack.unpackb
    start = time.perf_counter()
    with SegmentLog(node0 / LOG_DIR) as log:
        batch = [Entry(1, 1, EntryType.NOOP), Entry(1, 2, EntryType.CONF, encode_conf(ConfState(VOTERS)))]
        for index in range(3, indexes + 1):
            data = next(commands, None) or next(more)
            heartbeats += unpackb(data)[1] == C.BROKER_HEARTBEAT
            sm.apply(data)
            batch.append(Entry(1, index, EntryType.NORMAL, data))
            if len(batch) >= APPEND or index in marks:
                log.append(batch)
                batch = []
            if index in marks:
                pending = snaps.create(index, 1, VOTERS, (), created_at=1_700_000_000.0)
                writer = pending.writer()
                sm.on_snapshot_save(writer)
                writer.finish()
                pending.commit()
        if batch:
            log.append(batch)
    for k, n in enumerate(NODES):  # what a node writes at its first start (raft/storage/identity.py)
        if k:
            shutil.copytree(node0, root / n)
        atomic_write(root / n, IDENTITY_FILE, encode_identity(DataDirIdentity("jRaft-Controller", VOTERS[k])))
    size = sum(f.stat().st_size for f in (node0 / LOG_DIR).iterdir())
    return {
        "indexes": indexes,
        "entries": indexes * len(NODES),
        "sets": sets,
        "brokers": 3 * sets,
        "heartbeat_share": heartbeats / (indexes - 2),
        "log_bytes_per_node": size,
        "snapshots": marks,
        "build_seconds": time.perf_counter() - start,
    }


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of a process and all its descendants (the JVM and its Python workers), from /proc:
    the machine is shared, so wall time alone says little about the work done per core."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(d)] = int(fields[1])
        times[int(d)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(c for c, p in parents.items() if p == pid)
    return total


def machine_cpu_seconds() -> float:
    """CPU seconds every process of the machine has used (busy time in /proc/stat): minus this run's own,
    what the neighbours took while it ran."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def jit_seconds(spark: Any) -> float:
    """Time the JVM's JIT compilers have spent so far (its CompilationMXBean): JVM warm-up that the timed
    run still pays (the tiny warm-up log makes little code hot), reported beside the run's CPU."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    return float(bean.getTotalCompilationTime()) / 1000


def audit_once(cores: int, root: Path, warm: Path, out: Path) -> dict[str, Any]:
    from tools.audit.job import session
    from tools.audit.pipeline import Options, run

    spark = session(f"local[{cores}]", "ERROR", spark_ui_showConsoleProgress="false", spark_ui_enabled="false")
    try:
        run(spark, Options([str(warm)], str(out / f"warm-{cores}"), f"warm-{cores}", plots=False))
        load, jit, machine = os.getloadavg()[0], jit_seconds(spark), machine_cpu_seconds()
        start, cpu = time.perf_counter(), tree_cpu_seconds(os.getpid())
        result = run(spark, Options([str(root)], str(out / f"local-{cores}"), f"bench-{cores}", plots=False))
        seconds = time.perf_counter() - start
        cpu = tree_cpu_seconds(os.getpid()) - cpu
        jit = jit_seconds(spark) - jit
        others = max(0.0, machine_cpu_seconds() - machine - cpu)
    finally:
        spark.stop()
    return {
        "cores": cores,
        "load_before": load,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "jit_cpu_seconds": jit,
        "others_cpu_seconds": others,
        "findings": result.total,
        "exit_code": result.exit_code,
        "applied": result.summary["commandsApplied"],
        "scanned": result.summary["entriesScanned"],
    }


def replay_once(root: Path) -> tuple[float, float, float]:
    """(wall, CPU) seconds of `rmqctl log replay --no-snapshot` on node 0, in its own process, and the
    1-minute load average before it."""
    rmqctl = [sys.executable, "-m", "cli.rmqctl"]
    load = os.getloadavg()[0]
    start, before = time.perf_counter(), os.times()
    subprocess.run(
        [*rmqctl, "log", "replay", str(root / NODES[0]), "--no-snapshot", "-o", "json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return time.perf_counter() - start, cpu, load


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench audit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--entries", type=int, default=10_000_000, help="stored entries over the 3 nodes (default 10M)")
    p.add_argument("--sets", type=int, help="broker-sets (default: 10,000, fewer below 9M entries)")
    p.add_argument("--dir", help="build here (default: a temp dir, removed at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the built data dirs")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="with --dir: audit what an earlier run built there (its built.json) instead of building again",
    )
    p.add_argument("--cores", default="1,2", help="local[N] masters to time, comma-separated (default 1,2)")
    p.add_argument(
        "--json",
        dest="json_path",
        default="audit_bench.json",
        help="write the figures as JSON here (default: ./audit_bench.json)",
    )
    args = p.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="audit-bench-"))
    try:
        record = base / "built.json"
        if args.reuse and record.exists():
            built = json.loads(record.read_text())
            print(f"reusing {built['entries']:,} entries under {base}; auditing", file=sys.stderr)
        else:
            print(f"building {args.entries:,} entries over 3 nodes under {base} ...", file=sys.stderr)
            shutil.rmtree(base / "data", ignore_errors=True)
            shutil.rmtree(base / "warm", ignore_errors=True)
            built = build(base / "data", args.entries, args.sets)
            build(base / "warm", 3_000, 4)
            record.write_text(json.dumps(built))
            print(f"built in {built['build_seconds']:.1f}s; auditing", file=sys.stderr)
        shutil.rmtree(base / "out", ignore_errors=True)
        cores = [int(c) for c in args.cores.split(",")]
        runs = [audit_once(c, base / "data", base / "warm", base / "out") for c in cores]
        replay_s, replay_cpu, replay_load = replay_once(base / "data")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    n = built["entries"]
    rows = []
    for r in runs:
        rate = n / r["seconds"]
        rows.append(
            {
                "what": f"audit local[{r['cores']}]",
                "cores": r["cores"],
                "load_before": r["load_before"],
                "seconds": r["seconds"],
                "entries_per_s": rate,
                "entries_per_s_per_core": rate / r["cores"],
                "indexes_per_s": built["indexes"] / r["seconds"],
                "cpu_seconds": r["cpu_seconds"],
                "jit_cpu_seconds": r["jit_cpu_seconds"],
                "others_cpu_seconds": r["others_cpu_seconds"],
                "entries_per_cpu_s": n / r["cpu_seconds"] if r["cpu_seconds"] else None,
                "findings": r["findings"],
            }
        )
    rows.append(
        {
            "what": "rmqctl log replay (node 0)",
            "cores": 1,
            "load_before": replay_load,
            "seconds": replay_s,
            "entries_per_s": None,
            "entries_per_s_per_core": None,
            "indexes_per_s": built["indexes"] / replay_s,
            "cpu_seconds": replay_cpu,
            "jit_cpu_seconds": None,
            "others_cpu_seconds": None,
            "entries_per_cpu_s": None,
            "findings": None,
        }
    )
    one = [r for r in runs if r["cores"] == 1]
    two = [r for r in runs if r["cores"] == 2]
    speedup = one[0]["seconds"] / two[0]["seconds"] if one and two else None
    doc = {
        "built": built,
        "rows": rows,
        "speedup_local2_over_local1": speedup,
        "targets": {"entries_per_s_per_core": TARGET_PER_CORE, "speedup": TARGET_SPEEDUP},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "shared": True},
    }
    print(
        f"{built['entries']:,} entries ({built['indexes']:,} indexes x 3 nodes), {built['sets']:,} broker-sets, "
        f"{built['heartbeat_share']:.1%} heartbeats, {built['log_bytes_per_node'] / 1e6:.0f} MB of log per node"
    )
    print(
        f"{'run':<28}{'load':>6}{'seconds':>9}{'entries/s':>13}{'per core':>12}{'indexes/s':>12}{'CPU s':>8}"
        f"{'of it JIT':>10}{'others CPU s':>13}{'entries/CPU s':>15}{'findings':>10}"
    )
    for r in rows:
        eps = "-" if r["entries_per_s"] is None else f"{r['entries_per_s']:,.0f}"
        epc = "-" if r["entries_per_s_per_core"] is None else f"{r['entries_per_s_per_core']:,.0f}"
        ecpu = "-" if r["entries_per_cpu_s"] is None else f"{r['entries_per_cpu_s']:,.0f}"
        jit = "-" if r["jit_cpu_seconds"] is None else f"{r['jit_cpu_seconds']:.1f}"
        others = "-" if r["others_cpu_seconds"] is None else f"{r['others_cpu_seconds']:.1f}"
        print(
            f"{r['what']:<28}{r['load_before']:>6.2f}{r['seconds']:>9.2f}{eps:>13}{epc:>12}{r['indexes_per_s']:>12,.0f}"
            f"{r['cpu_seconds']:>8.1f}{jit:>10}{others:>13}{ecpu:>15}{'-' if r['findings'] is None else r['findings']:>10}"
        )
    print(
        f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
        "(the machine is shared)"
    )
    best = max(r["entries_per_s_per_core"] for r in rows if r["entries_per_s_per_core"] is not None)
    if speedup is not None:
        print(
            f"local[2] / local[1]: {speedup:.2f}x (target >= {TARGET_SPEEDUP}x: "
            f"{'met' if speedup >= TARGET_SPEEDUP else 'MISSED'})"
        )
    print(
        f"best per core {best:,.0f}/s (target >= {TARGET_PER_CORE:,}: {'met' if best >= TARGET_PER_CORE else 'MISSED'})"
    )
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(doc, f, indent=2)
    return 0

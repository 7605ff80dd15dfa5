"""python -m tools.bench raft [--seconds N] [--json FILE] [--peer pysyncobj]

A 3-node cluster of real processes over loopback TCP with fsync on; 64 concurrent proposers of 256-byte
commands on the leader, then a serial client. With --peer pysyncobj, the same workload on PySyncObj."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from raft.testing.cluster import ProcessCluster, free_ports


def run_ours(seconds: float, concurrency: int, size: int, uvloop: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="raft-bench-", dir=os.environ.get("BENCH_DIR") or None) as root:
        cluster = ProcessCluster(root, n=3, election_ms=1000, uvloop=uvloop)
        try:
            cluster.start_all()
            leader = cluster.wait_leader(timeout=30)
            cluster.call(leader, {"op": "bench", "seconds": 0.5, "concurrency": concurrency, "size": size}, 60)
            load = cluster.call(
                leader, {"op": "bench", "seconds": seconds, "concurrency": concurrency, "size": size}, seconds + 60
            )
            serial = cluster.call(
                leader, {"op": "bench", "seconds": seconds / 2, "concurrency": 1, "size": size}, seconds + 60
            )
        finally:
            cluster.stop_all()
    return {"load": load, "serial": serial}


def run_pysyncobj(seconds: float, concurrency: int, size: int, tuned: bool) -> dict[str, Any]:
    ports = free_ports(3)
    procs = []
    for p in ports:
        others = ",".join(str(q) for q in ports if q != p)
        cmd = [
            sys.executable,
            "-m",
            "tools.bench.pysyncobj_peer",
            str(p),
            others,
            str(seconds),
            str(concurrency),
            str(size),
        ] + (["tuned"] if tuned else [])
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    result: dict[str, Any] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 60)
        for line in out.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
    if not result:
        raise RuntimeError("PySyncObj produced no result (no leader?)")
    return result


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench raft", description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--json", dest="json_path")
    p.add_argument("--peer", choices=["pysyncobj"])
    p.add_argument("--no-uvloop", action="store_true")
    args = p.parse_args(argv)
    ours = run_ours(args.seconds, args.concurrency, args.size, uvloop=not args.no_uvloop)
    load, serial = ours["load"], ours["serial"]
    rows = [
        ("committed entries/s", f"{load['rate']:,.0f}"),
        ("commit latency p50 / p99 (ms)", f"{load['p50_ms']:.2f} / {load['p99_ms']:.2f}"),
        ("leader fsyncs/s", f"{load.get('fsyncs_per_s', 0):,.0f}"),
        ("mean entries per fsync batch", f"{load.get('mean_batch', 0):.1f}"),
        ("serial client p50 / p99 (ms)", f"{serial['p50_ms']:.2f} / {serial['p99_ms']:.2f}"),
        ("serial client commits/s", f"{serial['rate']:,.0f}"),
    ]
    report: dict[str, Any] = {"workload": vars(args), "ours": ours}
    if args.peer == "pysyncobj":
        default = run_pysyncobj(args.seconds, args.concurrency, args.size, tuned=False)
        tuned = run_pysyncobj(args.seconds, args.concurrency, args.size, tuned=True)
        report["pysyncobj"] = {"default": default, "tuned": tuned}
        best = max(default["rate"], tuned["rate"])
        rows.append(("PySyncObj entries/s, defaults (no fsync)", f"{default['rate']:,.0f}"))
        rows.append(("PySyncObj entries/s, 1ms tick (no fsync)", f"{tuned['rate']:,.0f}"))
        rows.append(("ratio ours / best PySyncObj", f"{load['rate'] / best:.2f}x"))
    width = max(len(r[0]) for r in rows)
    print(
        f"raft: 3 processes, loopback TCP, fsync on, {args.concurrency} proposers x {args.size} B, {args.seconds:g} s"
    )
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>14}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=2)
    return 0

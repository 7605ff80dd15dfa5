"""python -m tools.bench remoting [--seconds S] [--connections C] [--clients P] [--brokers N] [--json FILE] [--quick]

Broker heartbeats through consensus against one 3-node `controllerd` group on loopback (fsync on), in one
run with the same load generator (tools/bench/http_bench.py: P processes, C closed-loop connections, the
same broker identities and fields): first as RocketMQ remoting 904 frames to the leader's
jRaftControllerRPCAddr, then as HTTP POST /api/v1/controller/heartbeat to its controllerHttpAddr. Reports
both rates and remoting / HTTP.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
from typing import Any

from tools.bench.http_bench import drive, parse_args, start_group, stop_group


def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        http, remoting = start_group(root, procs)
        load = (args.seconds, args.connections, args.clients, args.brokers)
        out = {}
        for proto, addr in (("remoting", remoting), ("http", http)):
            host, port = addr.rsplit(":", 1)
            drive(host, int(port), 1.0, *load[1:], proto=proto)  # warm-up
            out[proto] = drive(host, int(port), *load, proto=proto)
        return out
    finally:
        stop_group(procs)


def main(argv: list[str]) -> int:
    args = parse_args("remoting", argv, __doc__ or "")
    with tempfile.TemporaryDirectory(prefix="bench-remoting-") as root:
        out = run(args, root)
    rem, http = out["remoting"], out["http"]
    ratio = rem["per_s"] / http["per_s"] if http["per_s"] else 0.0
    print(f"{'heartbeat (3 nodes, consensus, fsync)':<40} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for name, r in (("remoting 904 (ROCKETMQ header)", rem), ("HTTP POST heartbeat", http)):
        print(f"{name:<40} {r['per_s']:>8} {r['p50_ms']!s:>8} {r['p99_ms']!s:>8} {r['errors']:>7}")
    print(f"remoting / HTTP = {ratio:.2f}x")
    doc = {
        "benchmark": "remoting",
        "seconds": args.seconds,
        "connections": args.connections,
        "clients": args.clients,
        "remoting": rem,
        "http": http,
        "ratio": round(ratio, 3),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    return 0 if rem["errors"] == 0 and http["errors"] == 0 else 1

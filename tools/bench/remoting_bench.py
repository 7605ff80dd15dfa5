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
import signal
import subprocess
import sys
import tempfile
from typing import Any

import httpx

from raft.testing.cluster import free_ports
from tools.bench.http_bench import _env, _wait_http, drive


def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    ports = free_ports(9)
    rafts, https, rpcs = ([f"127.0.0.1:{p}" for p in ports[k : k + 3]] for k in (0, 3, 6))
    procs = []
    try:
        for i in range(3):
            conf = os.path.join(root, f"n{i}.conf")
            with open(conf, "w") as f:
                f.write(f"controllerType=jRaft\njRaftServerId={rafts[i]}\njRaftInitConf={','.join(rafts)}\n"
                        f"jRaftControllerRPCAddr={','.join(rpcs)}\ncontrollerHttpAddr={','.join(https)}\n"
                        f"controllerStorePath={root}/n{i}\n")  # fmt: skip
            log = open(os.path.join(root, f"n{i}.log"), "wb")  # noqa: SIM115 - the child's
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "cli.controllerd", "--type", "jraft", "-c", conf, "--log-format", "json"],
                stdout=log, stderr=subprocess.STDOUT, env=_env()))  # fmt: skip
        for h in https:
            _wait_http(f"http://{h}/readyz", 60, procs)
        leader = httpx.get(f"http://{https[0]}/api/v1/raft/status", timeout=5).json()["body"]["leaderId"]
        i = rafts.index(leader)
        load = (args.seconds, args.connections, args.clients, args.brokers)
        out = {}
        for proto, addr in (("remoting", rpcs[i]), ("http", https[i])):
            host, port = addr.rsplit(":", 1)
            drive(host, int(port), 1.0, *load[1:], proto=proto)  # warm-up
            out[proto] = drive(host, int(port), *load, proto=proto)
        return out
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench remoting", description=__doc__.split("\n\n")[1])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--clients", type=int, default=2, help="load-generator processes")
    ap.add_argument("--brokers", type=int, default=3000, help="distinct broker identities per client process")
    ap.add_argument("--json", default="bench-remoting.json")
    ap.add_argument("--quick", action="store_true", help="tiny run for a smoke test")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.connections, args.clients, args.brokers = 1.0, 4, 1, 30
    with tempfile.TemporaryDirectory(prefix="bench-remoting-") as root:
        out = run(args, root)
    rem, http = out["remoting"], out["http"]
    ratio = rem["per_s"] / http["per_s"] if http["per_s"] else 0.0
    print(f"{'heartbeat (3 nodes, consensus, fsync)':<40} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for name, r in (("remoting 904 (ROCKETMQ header)", rem), ("HTTP POST heartbeat", http)):
        print(f"{name:<40} {r['per_s']:>8} {r['p50_ms']!s:>8} {r['p99_ms']!s:>8} {r['errors']:>7}")
    print(f"remoting / HTTP = {ratio:.2f}x")
    doc = {"benchmark": "remoting", "seconds": args.seconds, "connections": args.connections, "clients": args.clients,
           "remoting": rem, "http": http, "ratio": round(ratio, 3), "cpus": os.cpu_count(),
           "python": platform.python_version()}  # fmt: skip
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    return 0 if rem["errors"] == 0 and http["errors"] == 0 else 1

"""python -m tools.bench tls [--seconds S] [--connections C] [--clients P] [--brokers N] [--reps R] [--json FILE]

The cost of TLS on the heartbeat path: broker heartbeats (RocketMQ remoting 904 frames, through consensus, fsync
on) against one 3-node `controllerd` group on loopback whose remoting ports run `tls.server.mode=permissive` with
verified client certificates (`need.client.auth=optional`, `authClient=true`), so that the same nodes, in the
same run, serve plain connections and TLS connections that present a client certificate. Plain and TLS runs
alternate `--reps` times with the same load generator (tools/bench/http_bench.py); reports each rate, the
medians, and TLS / plain. Certificates are made at start (tools/pki.py).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.bench.http_bench import drive, parse_args, start_group, stop_group
from tools.pki import CA


def main(argv: list[str]) -> int:
    reps = 3
    if "--reps" in argv:
        i = argv.index("--reps")
        reps = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    args = parse_args("tls", argv, __doc__ or "")
    rates: dict[str, list[dict[str, object]]] = {"plain": [], "tls": []}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as root:
        ca = CA(Path(root) / "pki")
        server, client = ca.issue("controller"), ca.issue("broker")
        extra = (
            "tls.server.mode=permissive\ntls.test.mode.enable=false\n"
            f"tls.config.file={root}/absent\ntls.server.certPath={server.cert}\ntls.server.keyPath={server.key}\n"
            f"tls.server.need.client.auth=optional\ntls.server.authClient=true\ntls.server.trustCertPath={ca.path}\n"
        )
        procs: list[subprocess.Popen[bytes]] = []
        try:
            _, remoting = start_group(root, procs, extra)
            host, port = remoting.rsplit(":", 1)
            load = (args.seconds, args.connections, args.clients, args.brokers)
            tls = (ca.path, client.cert, client.key)
            drive(host, int(port), 1.0, *load[1:], proto="remoting")  # warm-up
            for _ in range(reps):
                rates["plain"].append(drive(host, int(port), *load, proto="remoting"))
                rates["tls"].append(drive(host, int(port), *load, proto="remoting", tls=tls))
        finally:
            stop_group(procs)
    medians = {k: statistics.median(float(str(r["per_s"])) for r in v) for k, v in rates.items()}
    ratio = medians["tls"] / medians["plain"] if medians["plain"] else 0.0
    print(f"{'heartbeats/s (remoting 904, 3 nodes, fsync)':<46} {'runs':<30} {'median':>8}")
    for k, v in rates.items():
        print(f"{k:<46} {' '.join(str(r['per_s']) for r in v):<30} {medians[k]:>8.0f}")
    print(f"TLS / plain = {ratio:.2f}x; errors {sum(int(str(r['errors'])) for v in rates.values() for r in v)}")
    doc = {
        "benchmark": "tls",
        "seconds": args.seconds,
        "connections": args.connections,
        "clients": args.clients,
        "runs": rates,
        "median_per_s": medians,
        "ratio": round(ratio, 3),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

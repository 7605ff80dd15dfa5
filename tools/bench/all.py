"""python -m tools.bench all [--quick] [--json FILE] [--reps N] [--only SECTION,...]

Every figure of issue 14 in one run, on this machine (3 nodes on loopback, fsync on), each next to its target:
one table with a verdict per row, and `--json FILE`: {"rows": [{"name", "value", "unit", "target", "met"}],
"details": {...}, "machine": {...}}. Where a figure has a peer (PySyncObj for Raft, a bare FastAPI app for
the HTTP heartbeat), ours and the peer run alternately `--reps` times (default 5) in the same run; a row
gives the median and the range (min-max) over the repetitions. `--quick` is a smoke-test size (tiny inputs,
one repetition, a few failovers): its figures mean nothing.

Issue 25's rows are ratios to a reference measured in the same run, alternately with ours, each reference a
row of its own ("reference: ...") so that a reader sees the machine a figure came from: Raft commits/s over
the best PySyncObj, the serial commit p50 over the machine's fdatasync p50 (tools/bench/machine.py), HTTP
heartbeats over the bare lean path (bare_app --lean), remoting heartbeats from RocketMQ's Java client over the
same client against our remoting stack with no consensus (tools/bench/bare_remoting.py), InstallSnapshot over
the machine's sequential write + fsync bandwidth (machine.py).

Sections (--only): raft, http, remoting, install, restart, stall, failover, broker_failover, memory, scale, peers.
`peers` (tools/bench/peers.py: RocketMQ's own controllers side by side) runs by default only when RocketMQ's jars
are built (`make rocketmq`) and not with --quick (its smoke test is tests/interop/test_peers_bench_smoke.py);
`remoting` (its load generator is RocketMQ's client, interop/rocketmq) only when they are built.
HTTP load comes from `wrk` (C); without it the Python client of http_bench is used and the rows say so."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.bench import wrk
from tools.bench.machine import fdatasync_latency, ratio, verdict, write_bandwidth

SECTIONS = (
    "raft",
    "http",
    "remoting",
    "install",
    "restart",
    "stall",
    "failover",
    "broker_failover",
    "memory",
    "scale",
    "peers",
)
# What the issue 25 asks of ours against RocketMQ's JRaftController, as ours / JRaftController (same run).
PEER_TARGETS = {
    "heartbeat throughput, acknowledged": (">=", 1.5),
    "registration storm, all have ids": ("<=", 0.5),
    "memory: leader RSS": ("<=", 0.5),
    "realistic load: leader CPU": ("<=", 1.0),
    "disk after 1M heartbeats: bytes per node (largest)": ("<=", 0.2),
    "controller failover under the realistic load, p99 of the kills": ("<=", 0.5),
    "restart after 1M heartbeats: caught-up follower": ("<=", 0.5),
    **{f"realistic load at {n:,} brokers: leader CPU": ("<=", 1.0) for n in (1000, 30000)},
    "broker failover, real brokers: a slave is master (1004), p50": ("<=", 1.0),
    "broker failover, real brokers: the producer's next send succeeds, p50": ("<=", 1.0),
}
# ... and in absolute terms, ours alone
PEER_ABSOLUTE = {
    "realistic load: heartbeat p99": ("<=", 20.0),
    "controller failover under the realistic load, p99 of the kills": ("<=", 1.0),
}
# Issue 25: ours as a ratio to a reference measured in the same run (op, threshold).
RATIO_TARGETS = {
    "raft_vs_pysyncobj": (">=", 5.5),  # x: committed/s over the best PySyncObj's
    "serial_vs_fdatasync": ("<=", 3.0),  # x: serial commit p50 over the machine's fdatasync p50
    "http_vs_lean": (">=", 60.0),  # %: heartbeats through consensus over the bare lean path's
    "remoting_vs_echo": (">=", 60.0),  # %: remoting heartbeats over the bare remoting echo server's
    "install_vs_disk": (">=", 50.0),  # %: InstallSnapshot MiB/s over sequential write + fsync MiB/s
}
MiB = 1 << 20


class Report:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.details: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def row(
        self,
        name: str,
        values: list[float] | float,
        unit: str,
        op: str | None = None,
        threshold: float | None = None,
        note: str = "",
    ) -> None:
        """A row from one value or the values of several repetitions (median; range kept)."""
        vals = values if isinstance(values, list) else [values]
        value = statistics.median(vals)
        met = None
        if op is not None and threshold is not None:
            met = verdict(value, op, threshold)
        self.rows.append(
            {
                "name": name,
                "value": round(value, 4),
                "unit": unit,
                "target": f"{op} {threshold:g}" if op is not None else None,
                "met": met,
                "range": [round(min(vals), 4), round(max(vals), 4)],
                "runs": len(vals),
                "note": note,
            }
        )


def fmt(v: float) -> str:
    a = abs(v)
    return f"{v:,.0f}" if a >= 1000 else f"{v:.1f}" if a >= 100 else f"{v:.2f}" if a >= 1 else f"{v:.3f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    table = [
        (
            r["name"],
            f"{fmt(r['value'])} {r['unit']}",
            f"{fmt(r['range'][0])}-{fmt(r['range'][1])}" if r["runs"] > 1 else "",
            r["target"] or "",
            "" if r["met"] is None else ("yes" if r["met"] else "MISS"),
        )
        for r in rows
    ]
    head = ("figure", "median", "range", "target", "met")
    widths = [max(len(h), *(len(t[k]) for t in table)) for k, h in enumerate(head)] if table else [len(h) for h in head]
    print("  ".join(f"{h:<{w}}" for h, w in zip(head, widths, strict=True)))
    for t in table:
        print(f"{t[0]:<{widths[0]}}  {t[1]:>{widths[1]}}  {t[2]:>{widths[2]}}  {t[3]:<{widths[3]}}  {t[4]}")


# --- sections -------------------------------------------------------------------------------------------------


def sec_raft(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.raft_bench import run_ours, run_pysyncobj

    seconds = 0.5 if a.quick else a.seconds
    syncs = 50 if a.quick else 1000
    runs: list[dict[str, Any]] = []
    for _ in range(a.reps):  # ours and the references alternately, in the same run
        ours = run_ours(seconds, 64, 256, uvloop=True)
        disk = fdatasync_latency(n=syncs)  # on the disk run_ours' stores use (BENCH_DIR or the temp dir)
        tuned = run_pysyncobj(seconds, 64, 256, tuned=True)
        default = run_pysyncobj(seconds, 64, 256, tuned=False)
        best = max(tuned["rate"], default["rate"])
        runs.append(
            {
                "ours": ours,
                "fdatasync": disk,
                "pysyncobj_tuned": tuned,
                "pysyncobj_default": default,
                "pysyncobj_best": best,
                "ratio": ratio(ours["load"]["rate"], best),
                "serial_vs_fdatasync": ratio(ours["serial"]["p50_ms"], disk["p50_ms"]),
            }
        )
    rep.details["raft"] = runs
    rep.row("Raft, 64 proposers x 256 B, committed/s", [r["ours"]["load"]["rate"] for r in runs], "/s", ">=", 50_000)
    rep.row(
        "Raft, ours / best PySyncObj (no fsync)", [r["ratio"] for r in runs], "x", *RATIO_TARGETS["raft_vs_pysyncobj"]
    )
    rep.row("  reference: best PySyncObj, same load, committed/s", [r["pysyncobj_best"] for r in runs], "/s")
    rep.row("Raft, serial client commit p50", [r["ours"]["serial"]["p50_ms"] for r in runs], "ms", "<=", 0.6)
    rep.row("Raft, serial client commit p99", [r["ours"]["serial"]["p99_ms"] for r in runs], "ms", "<=", 1.5)
    rep.row(
        "Raft, serial commit p50 / the machine's fdatasync p50",
        [r["serial_vs_fdatasync"] for r in runs],
        "x",
        *RATIO_TARGETS["serial_vs_fdatasync"],
    )
    rep.row(
        f"  reference: fdatasync p50 after a 256 B pwrite, preallocated file ({syncs} writes)",
        [r["fdatasync"]["p50_ms"] for r in runs],
        "ms",
        note=f"p99 {fmt(statistics.median(r['fdatasync']['p99_ms'] for r in runs))} ms",
    )


def sec_http(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.group import ControllerGroup, wait_http
    from tools.bench.http_bench import _env

    seconds = 1.0 if a.quick else a.seconds
    conns, brokers = (4, 30) if a.quick else (64, 3000)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-all-http-", dir=os.environ.get("BENCH_DIR") or None) as root:
        group = ControllerGroup(root)
        from raft.testing.cluster import free_ports

        port, lean_port = free_ports(2)
        # The peer (FastAPI with the same model), and the controller's lean heartbeat path answering a
        # constant with no consensus (bare_app --lean): what the front end alone costs.
        bare = subprocess.Popen([sys.executable, "-m", "tools.bench.bare_app", str(port)], env=_env())
        lean = subprocess.Popen([sys.executable, "-m", "tools.bench.bare_app", str(lean_port), "--lean"], env=_env())
        try:
            group.start_all()
            wait_http(f"http://127.0.0.1:{port}/livez", 30, [bare])
            wait_http(f"http://127.0.0.1:{lean_port}/livez", 30, [lean])
            leader = group.https[group.leader()]
            bare_addr, lean_addr = f"127.0.0.1:{port}", f"127.0.0.1:{lean_port}"
            wrk.drive(leader, 1.0, conns, brokers)  # warm-up: every broker registered
            wrk.drive(bare_addr, 1.0, conns, brokers)
            wrk.drive(lean_addr, 1.0, conns, brokers)
            for _ in range(a.reps):
                c = wrk.drive(leader, seconds, conns, brokers)
                b = wrk.drive(bare_addr, seconds, conns, brokers)
                bl = wrk.drive(lean_addr, seconds, conns, brokers)
                runs.append({"controller": c, "bare": b, "bare_lean": bl, "ratio": ratio(c["per_s"], b["per_s"])})
        finally:
            group.stop_all()
            for p in (bare, lean):
                p.terminate()
                p.wait(30)
    rep.details["http"] = runs
    gen = runs[0]["controller"]["generator"]
    note = "" if gen == "wrk" else f"Python load generator: {wrk.INSTALL_HINT}"
    errors = sum(r["controller"]["errors"] + r["bare"]["errors"] for r in runs)
    if errors:
        note += f" {errors} requests failed"
    name = f"Heartbeats through consensus over HTTP ({gen}, {conns} conns)"
    rep.row(f"{name}, /s", [r["controller"]["per_s"] for r in runs], "/s", ">=", 5000, note)
    rep.row("  same, % of bare FastAPI", [100 * r["ratio"] for r in runs], "%", ">=", 65)
    rep.row("  same, p99", [r["controller"]["p99_ms"] for r in runs], "ms", "<=", 25)
    rep.row("  same, p50", [r["controller"]["p50_ms"] for r in runs], "ms")
    rep.row("  bare FastAPI, same model, /s", [r["bare"]["per_s"] for r in runs], "/s")
    rep.row(
        "  same (consensus), % of the bare lean path",
        [100 * ratio(r["controller"]["per_s"], r["bare_lean"]["per_s"]) for r in runs],
        "%",
        *RATIO_TARGETS["http_vs_lean"],
    )
    rep.row(
        "  reference: bare lean path (bare_app --lean, no consensus), /s", [r["bare_lean"]["per_s"] for r in runs], "/s"
    )


class _Echo:
    """The bare remoting echo server (tools/bench/bare_remoting.py) as the one address ControllerLoad asks."""

    def __init__(self, address: str, proc: subprocess.Popen[bytes]) -> None:
        self.remotings = [address]
        self.proc = proc

    def pid(self, i: int) -> int:
        return self.proc.pid

    def store(self, i: int) -> str:
        return ""

    def kill(self, i: int) -> None:
        self.proc.kill()


def wait_port(host: str, port: int, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    """Until host:port accepts a connection; RuntimeError when `proc` exits first or `timeout` passes."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited ({proc.returncode}) before listening on {host}:{port}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)  # polling a port: a starting process sends no signal
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout:g} s")


def sec_remoting(rep: Report, a: argparse.Namespace) -> None:
    """RocketMQ's Java client (ControllerLoad, heartbeat mode: register N brokers, then INFLIGHT 904s always in
    flight) against our 3-node group's leader and against the bare remoting echo server, alternately."""
    from raft.testing.cluster import free_ports
    from tools.bench import peers
    from tools.bench.http_bench import _env

    peers.rocketmq.require()  # RuntimeError saying what to run
    if not peers.available():
        raise RuntimeError("ControllerLoad is not built: make rocketmq")
    seconds = 1.0 if a.quick else a.seconds
    brokers, inflight = (30, 8) if a.quick else (3000, 64)
    load = ("heartbeat", brokers, max(1, brokers // 3), inflight, seconds)
    (port,) = free_ports(1)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-all-remoting-", dir=os.environ.get("BENCH_DIR") or None) as root:
        proc = subprocess.Popen([sys.executable, "-m", "tools.bench.bare_remoting", str(port)], env=_env())
        try:
            wait_port("127.0.0.1", port, 30, proc)
            echo = _Echo(f"127.0.0.1:{port}", proc)
            with peers.started("ours", os.path.join(root, "ours")) as group:
                for k in range(a.reps):  # ours and the echo server alternately, each run registering new sets
                    run: dict[str, Any] = {}
                    for name, target in (("ours", group), ("echo", echo)):
                        with peers.Load(target, f"{name}{k}", *load) as ld:
                            run[f"{name}_register"] = ld.next()
                            run[name] = ld.next()
                    run["ratio"] = ratio(run["ours"]["per_s"], run["echo"]["per_s"])
                    runs.append(run)
        finally:
            proc.terminate()
            proc.wait(30)
    rep.details["remoting"] = runs
    errors = sum(r[s]["errors"] + r[s]["unanswered"] for r in runs for s in ("ours", "echo"))
    gen = max(peers.cores(r[s]) for r in runs for s in ("ours", "echo"))
    note = f"load generator at most {gen:.2f} cores" + (f"; {errors} heartbeats failed or unanswered" if errors else "")
    rep.row(
        f"Heartbeats through consensus over remoting (Java NettyRemotingClient, {inflight} in flight), /s",
        [r["ours"]["per_s"] for r in runs],
        "/s",
        note=note,
    )
    rep.row(
        "  same, % of the bare remoting echo server",
        [100 * r["ratio"] for r in runs],
        "%",
        *RATIO_TARGETS["remoting_vs_echo"],
    )
    rep.row("  same, p50", [r["ours"]["p50_ms"] or 0.0 for r in runs], "ms")
    rep.row("  same, p99", [r["ours"]["p99_ms"] or 0.0 for r in runs], "ms")
    rep.row(
        "  reference: bare remoting echo server (bare_remoting: our remoting stack, no consensus), /s",
        [r["echo"]["per_s"] for r in runs],
        "/s",
    )


def sec_install(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.snapshot_bench import bench_install

    size = 2 if a.quick else 100
    written = (16 if a.quick else 1024) * MiB  # the reference: dd bs=1M count=1024 conv=fsync, on the stores' disk
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-all-install-", dir=os.environ.get("BENCH_DIR") or None) as root:
        for k in range(1 if a.quick else 3):
            r = bench_install(Path(root) / f"r{k}", size * MiB, processes=True)
            r["disk"] = write_bandwidth(root, written)
            r["vs_disk"] = ratio(r["processes"]["mib_s"], r["disk"]["mib_s"])
            runs.append(r)
    rep.details["install"] = runs
    rep.row(
        f"InstallSnapshot of {size} MiB, restart until caught up (3 processes)",
        [r["processes"]["mib_s"] for r in runs],
        "MiB/s",
        ">=",
        100,
    )
    rep.row(
        "  same, % of the machine's sequential write + fsync bandwidth",
        [100 * r["vs_disk"] for r in runs],
        "%",
        *RATIO_TARGETS["install_vs_disk"],
    )
    rep.row(
        f"  reference: sequential write + fsync, 1 MiB writes, {written // MiB:,} MiB (dd-like)",
        [r["disk"]["mib_s"] for r in runs],
        "MiB/s",
    )
    rep.row("  same, 3 nodes in one process", [r["in_process"]["mib_s"] for r in runs], "MiB/s")


def sec_restart(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.snapshot_bench import bench_restart

    entries, keys = (5000, 50) if a.quick else (1_000_000, 10_000)
    with tempfile.TemporaryDirectory(prefix="bench-all-restart-", dir=os.environ.get("BENCH_DIR") or None) as root:
        r = bench_restart(Path(root), entries, keys, election_ms=100, snapshot_reps=1 if a.quick else 5)
    rep.details["restart"] = r
    runs = r["from_snapshot_runs"]
    rep.row(
        f"Restart with a snapshot vs full replay, {entries:,} puts over {keys:,} keys",
        [r["replay"]["total_s"] / s["total_s"] for s in runs],
        "x",
        ">=",
        20,
    )
    rep.row("  restart with a snapshot", [s["total_s"] for s in runs], "s", "<=", 0.5)
    rep.row("  full replay", r["replay"]["total_s"], "s")


def sec_stall(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.snapshot_bench import bench_stall, build_state

    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-all-stall-", dir=os.environ.get("BENCH_DIR") or None) as root:
        fsm = build_state((1 if a.quick else 10) * MiB)
        for k in range(1 if a.quick else a.reps):
            runs.append(bench_stall(fsm, Path(root) / f"r{k}", 3 if a.quick else 20))
        del fsm
        gc.collect()
    rep.details["stall"] = runs
    # "<= 5 ms on every run": the row's value is the worst run's p99.
    p99s = [r["stall_p99_ms"] for r in runs]
    rep.row(
        f"Snapshot save of {1 if a.quick else 10} MiB, apply stall p99 (worst run)",
        max(p99s),
        "ms",
        "<=",
        5,
        f"per run: {', '.join(f'{x:.2f}' for x in p99s)}",
    )


def sec_failover(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.failover_bench import controller_failover

    n = 2 if a.quick else 20
    with tempfile.TemporaryDirectory(prefix="bench-all-failover-", dir=os.environ.get("BENCH_DIR") or None) as root:
        idle = controller_failover(root + "/idle", n, load=False)
        r = controller_failover(root + "/load", n, load=True, connections=8 if a.quick else 64)
    rep.details["failover_idle"] = idle
    rep.details["failover"] = r
    rep.row(
        f"Controller failover, kill -9 leader until a new leader commits, T=1 s, p99 over {n}",
        idle["p99_s"],
        "s",
        "<=",
        1.5,
        f"p50 {idle['p50_s']:.3f} s, min {idle['min_s']:.3f} s",
    )
    load = "under wrk heartbeat load" if r["load"] else "NO load (wrk missing)"
    rep.row(
        f"  same, {load}, p99 over {n}", r["p99_s"], "s", "<=", 1.5, f"p50 {r['p50_s']:.3f} s, min {r['min_s']:.3f} s"
    )


def sec_broker_failover(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.failover_bench import broker_failover

    n = 2 if a.quick else 20
    with tempfile.TemporaryDirectory(prefix="bench-all-brokerfo-", dir=os.environ.get("BENCH_DIR") or None) as root:
        r = broker_failover(root, n)
    rep.details["broker_failover"] = r
    rep.row(
        f"Broker master failover (heartbeat timeout {r['heartbeat_timeout_ms']} ms + scan "
        f"{r['scan_interval_ms']} ms + 1 s), p99 over {n}",
        r["p99_s"],
        "s",
        "<=",
        r["bound_s"],
        f"p50 {r['p50_s']:.3f} s",
    )


def sec_memory(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.memory_bench import run

    sets, entries = (100, 5000) if a.quick else (10_000, 1_000_000)
    leader = run("leader", sets, entries)
    per = run("per_broker", sets)
    rep.details["memory"] = {"leader": leader, "per_broker": per}
    rep.row(
        f"Memory: RSS of a leader with {sets:,} broker-sets x 3 + {leader['entries']:,} log entries",
        leader["rss"] / MiB,
        "MiB",
        "<=",
        300,
        f"peak {leader['peak_rss'] / MiB:.0f} MiB; log entries held in memory {leader['log_entries_held']:,} "
        f"after {leader['snapshots']} snapshots",
    )
    rep.row("  state machine bytes per broker (Python allocations kept)", per["bytes_per_broker"], "B")
    rep.row("  log entries held in memory (bounded by the snapshot threshold)", leader["log_entries_held"], "entries")


def sec_scale(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench.group import ControllerGroup
    from tools.bench.memory_bench import run

    sizes = (30, 300) if a.quick else (1000, 10_000, 30_000)
    seconds = 1.0 if a.quick else a.seconds
    conns = 8 if a.quick else 64
    curve: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-all-scale-", dir=os.environ.get("BENCH_DIR") or None) as root:
        group = ControllerGroup(root)
        try:
            group.start_all()
            leader = group.https[group.leader()]
            for n in sizes:
                wrk.drive(leader, max(1.0, seconds / 2), conns, n)  # every broker registered
                curve.append({"brokers": n, "load": wrk.drive(leader, seconds, conns, n)})
        finally:
            group.stop_all()
    for c in curve:
        c["snapshot"] = run("snapshot", max(1, c["brokers"] // 3))
        n = c["brokers"]
        rep.row(f"Scale, {n:,} brokers: heartbeats/s", c["load"]["per_s"], "/s")
        rep.row(f"Scale, {n:,} brokers: heartbeat p99", c["load"]["p99_ms"], "ms")
        rep.row(f"Scale, {n:,} brokers: snapshot save", c["snapshot"]["save_ms"], "ms")
        rep.row(f"Scale, {n:,} brokers: snapshot size", c["snapshot"]["file_bytes"] / 1024, "KiB")
    rep.details["scale"] = curve


def sec_peers(rep: Report, a: argparse.Namespace) -> None:
    from tools.bench import peers

    args = peers.parse(["--quick"] if a.quick else [])
    with tempfile.TemporaryDirectory(prefix="bench-all-peers-", dir=os.environ.get("BENCH_DIR") or None) as root:
        args.dir = root
        doc = peers.run(args, list(peers.SYSTEMS))
    rep.details["peers"] = doc
    if doc["errors"]:
        raise RuntimeError(f"peers: {doc['errors']}")
    for row in doc["rows"]:
        ours = row["systems"].get("ours")
        if ours is None or ours["vs_jraft"] is None:
            continue
        others = ", ".join(f"{s} {fmt(v['median'])}" for s, v in row["systems"].items() if s != "ours")
        op, threshold = PEER_TARGETS.get(row["name"], (None, None))
        rep.row(
            f"Peers: {row['name']}, ours / JRaftController",
            ours["vs_jraft"],
            "x",
            op,
            threshold,
            f"ours {fmt(ours['median'])} {row['unit']}; {others}",
        )
        if row["name"] in PEER_ABSOLUTE:
            op, threshold = PEER_ABSOLUTE[row["name"]]
            rep.row(f"Peers: {row['name']}, ours", ours["median"], row["unit"], op, threshold)


RUNNERS: dict[str, Callable[[Report, argparse.Namespace], None]] = {
    "raft": sec_raft,
    "http": sec_http,
    "remoting": sec_remoting,
    "install": sec_install,
    "restart": sec_restart,
    "stall": sec_stall,
    "failover": sec_failover,
    "broker_failover": sec_broker_failover,
    "memory": sec_memory,
    "scale": sec_scale,
    "peers": sec_peers,
}


def parse_only(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in SECTIONS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown section(s) {bad or text!r}; known: {', '.join(SECTIONS)}")
    return names


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="smoke-test sizes; the figures mean nothing")
    p.add_argument("--json", dest="json_path", help="write the rows and details here")
    p.add_argument("--reps", type=int, help="repetitions of each ours/peer pair (default 5; --quick 1)")
    p.add_argument("--seconds", type=float, default=5.0, help="load duration of each throughput run (default 5)")
    p.add_argument("--only", type=parse_only, help="comma-separated sections (default: all; peers see above)")
    a = p.parse_args(argv)
    if a.only is None:
        from tools.bench.peers import available

        jars = available()
        with_peers = jars and not a.quick
        a.only = [s for s in SECTIONS if (s != "peers" or with_peers) and (s != "remoting" or jars)]
        if not with_peers:
            why = "--quick" if a.quick else "RocketMQ's jars are not built (make rocketmq)"
            print(f"note: section peers skipped: {why}", file=sys.stderr)
        if not jars:
            print("note: section remoting skipped: RocketMQ's jars are not built (make rocketmq)", file=sys.stderr)
    if a.reps is None:
        a.reps = 1 if a.quick else 5
    if a.reps < 1 or a.seconds <= 0:
        p.error("--reps must be >= 1 and --seconds positive")
    rep = Report()
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    if not wrk.available():
        print(f"note: wrk not found, HTTP rows use the Python load generator; {wrk.INSTALL_HINT}", file=sys.stderr)
    for name in a.only:
        t = time.perf_counter()
        print(f"[{name}] ...", file=sys.stderr, flush=True)
        try:
            RUNNERS[name](rep, a)
        except Exception as e:  # noqa: BLE001 - one broken section must not hide the others' figures
            rep.errors[name] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        print(f"[{name}] {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    machine = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg_1m_before": load_before,
        "loadavg_1m_after": os.getloadavg()[0],
        "wall_s": round(time.perf_counter() - t0, 1),
        "wrk": wrk.available(),
        "quick": a.quick,
        "reps": a.reps,
    }
    print(
        f"issue 14 figures: {machine['cpus']} CPUs, load average {load_before:.1f} before / "
        f"{machine['loadavg_1m_after']:.1f} after, {a.reps} repetition(s), wall {machine['wall_s']:.0f} s"
        + (" (QUICK: smoke-test sizes, figures mean nothing)" if a.quick else "")
    )
    print_table(rep.rows)
    for name, err in rep.errors.items():
        print(f"section {name} failed: {err}")
    if a.json_path:
        with open(a.json_path, "w") as f:
            json.dump({"rows": rep.rows, "errors": rep.errors, "machine": machine, "details": rep.details}, f, indent=2)
    return 1 if rep.errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

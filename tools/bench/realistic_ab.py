"""python -m tools.bench realistic_ab --trees NAME=DIR,NAME=DIR [--rounds R] [--windows W] [--seconds S]
                                     [--brokers N] [--warmup S] [--extra 'key=value;...'] [--conf NAME='key=value;...']
                                     [--profile DIR [--profile-node leader|follower]] [--disk-alone S]
                                     [--scrape S] [--json FILE]

The peers benchmark's realistic row (N brokers registered, each heartbeating once a second, through RocketMQ's own
remoting client: tools/bench/peers.py, interop/rocketmq/src/interop/ControllerLoad.java) for two or more source
trees of this controller, alternating in one run: each round starts a fresh 3-node group of each tree in turn
(`ControllerdCluster.start(tree=...)`: another checkout, e.g. `git worktree add ../base <commit>`, run with this
interpreter), registers the brokers, and measures W windows of S seconds. Each window's p50, p99 and the leader's
CPU (user + system time over the window's wall time, as the peers row's) and the time its event loop's thread was
runnable but waiting for a CPU (`peers.runq_wait_s`, % of the window) is one figure, with the entries the leader
applied over it (`entries`: its heartbeats go one entry per loop turn) and, per node, how many of its log writes
(write + fdatasync), commits (the leader's: proposed to applied) and event loop turns (how late a 50 ms timer ran)
took over 50 ms in the window and the slowest one's histogram bucket, read from each node's /metrics (`over_50ms`,
`slowest_ms`), which say where a window's slow heartbeats waited; the table gives each
tree's median and range over every window, and the 1-minute load average before each window. The A/B method of docs/performance.md, for the p99 of the realistic row (issue 25). Two names may
give the same tree, told apart by `--conf` (one setting's default against another value, say). The three nodes
share one disk here, so a disk stall holds every node's commit at once: the summary counts the windows with a log
write over 50 ms on some node and gives the p99 of the windows without one beside the p99 of all. Before the
first round, `--disk-alone S` seconds of 256 B fdatasyncs with nothing else of the run going
(`machine.fdatasync_stalls`) say how often the disk stalls that long on its own.

`--scrape S` scrapes every node's whole /metrics every S seconds through each window, as a Prometheus would
(`Accept-Encoding: gzip`): each row then says how many scrapes it held and the slowest one (`scrapes`).

`--warmup S` runs the same steady load for S seconds after registration, unmeasured, before the first window: near
saturation (30,000 brokers on two cores) a leader just past registering N brokers starts its first window behind,
and that window measures the catching up (its heartbeats' count and p99 are kept in each row as `warmup`).

With `--profile DIR`, py-spy samples the leader through every window (tools/bench/profile.py): DIR/NAME-rR-wW.txt
holds each window's folded stacks, and the output ends with each tree's busiest functions over all its windows.
`--profile-node follower` samples a follower instead (the first node that does not lead).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import httpx

from tools.bench import machine, peers, profile


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.bench realistic_ab", description=__doc__.split("\n\n")[1])
    p.add_argument("--trees", required=True, help="NAME=DIR,NAME=DIR: the source trees, in the order they alternate")
    p.add_argument("--rounds", type=int, default=5, help="rounds; each starts every tree once (default 5)")
    p.add_argument("--windows", type=int, default=2, help="measured windows per group (default 2)")
    p.add_argument("--seconds", type=float, default=10, help="seconds of each window (default 10)")
    p.add_argument("--brokers", type=int, default=10_000, help="brokers at 1 heartbeat/s (default 10000)")
    p.add_argument(
        "--warmup",
        type=float,
        default=0,
        metavar="S",
        help="seconds of the same load, unmeasured, before the first window (default 0)",
    )
    p.add_argument("--extra", default="", help="controller.conf lines for every node, 'key=value;key=value'")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="NAME=LINES",
        help="controller.conf lines for tree NAME only, 'key=value;key=value' (after --extra; may be repeated)",
    )
    p.add_argument("--profile", metavar="DIR", help="py-spy the leader in every window; folded stacks into DIR")
    p.add_argument(
        "--profile-node",
        choices=("leader", "follower"),
        default="leader",
        help="which node --profile samples (default leader)",
    )
    p.add_argument(
        "--disk-alone",
        type=float,
        default=20,
        metavar="S",
        help="first, S seconds of the disk alone: 256 B fdatasyncs, how many took over 50 ms (0: skip; default 20)",
    )
    p.add_argument(
        "--scrape",
        type=float,
        default=0,
        metavar="S",
        help="scrape every node's whole /metrics every S seconds through each window, as Prometheus (0: no; default)",
    )
    p.add_argument("--json", help="write every window and the summary here")
    a = p.parse_args(argv)
    if a.profile is not None:
        if profile.available() is None:
            p.error("--profile: py-spy is not installed (pip install -e '.[bench]')")
        os.makedirs(a.profile, exist_ok=True)
    trees: dict[str, str] = {}
    for item in a.trees.split(","):
        name, sep, path = item.partition("=")
        if not sep or not name or not os.path.isdir(os.path.join(path, "cli")):
            p.error(f"--trees: {item!r} is not NAME=DIR of a source tree (DIR/cli missing)")
        trees[name] = os.path.abspath(path)
    a.trees = trees
    confs: dict[str, str] = {}
    for item in a.conf:
        name, sep, lines = item.partition("=")
        if not sep or name not in trees:
            p.error(f"--conf: {item!r} is not NAME=LINES for a NAME of --trees ({', '.join(trees)})")
        confs[name] = confs.get(name, "") + ";" + lines
    a.conf = confs
    for k in ("rounds", "windows", "brokers"):
        if getattr(a, k) < 1:
            p.error(f"--{k} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    if a.disk_alone < 0:
        p.error("--disk-alone must be >= 0")
    if a.scrape < 0:
        p.error("--scrape must be >= 0")
    return a


class Scraper:
    """Every `period` seconds, each node's whole /metrics, as Prometheus scrapes it, in a thread of its own."""

    def __init__(self, group: peers.Ours, period: float) -> None:
        self.urls = [group.cluster.url(i, "/metrics") for i in range(3)]
        self.headers = {**group.cluster.headers, "Accept-Encoding": "gzip"}
        self.period, self.failed = period, 0
        self.took_ms: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="scraper", daemon=True)

    def run(self) -> None:
        with httpx.Client(timeout=30, headers=self.headers) as client:
            while not self.stop.wait(self.period):
                for url in self.urls:
                    t = time.monotonic()
                    try:
                        client.get(url).raise_for_status()
                    except httpx.HTTPError:
                        self.failed += 1
                    else:
                        self.took_ms.append(round(1000 * (time.monotonic() - t), 1))

    def __enter__(self) -> Scraper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def figures(self) -> dict[str, Any]:
        return {"count": len(self.took_ms), "failed": self.failed, "slowest_ms": max(self.took_ms, default=None)}


def measure(group: peers.Ours, a: argparse.Namespace, name: str, r: int) -> list[dict[str, Any]]:
    """Register the brokers, then W windows of steady heartbeats; one row per window (tree `name`, round `r`)."""
    rows = []
    with peers.Load(group, "ab", "script", a.brokers, max(1, a.brokers // 3)) as load:
        reg = load.ask(f"register {a.brokers}")
        if reg.get("registered") != a.brokers:
            raise RuntimeError(f"registered {reg.get('registered')} of {a.brokers} brokers: {reg}")
        leader = group.remotings.index(reg["leader"])
        pid = group.pid(leader)
        followers = [group.pid(i) for i in range(3) if i != leader]
        sampled_pid = pid if a.profile_node == "leader" else followers[0]
        warm = load.ask(f"steady {a.brokers} 1 {a.warmup:g}") if a.warmup > 0 else None
        warmup = {"seconds": a.warmup} | ({k: warm[k] for k in ("acknowledged", "p99_ms")} if warm else {})
        for w in range(a.windows):
            before = os.getloadavg()[0]
            sampled = os.path.join(a.profile, f"{name}-r{r}-w{w}.txt") if a.profile else None
            scraper = Scraper(group, a.scrape) if a.scrape else contextlib.nullcontext()
            with profile.record(sampled_pid, sampled) if sampled else contextlib.nullcontext(), scraper:
                i0 = group.applied(leader)
                h0 = group.histograms()
                q0, t0 = peers.runq_wait_s(pid), time.monotonic()
                f0 = [peers.cpu_s(p) for p in followers]
                st, cpu_pct = peers.cpu_pct_while(pid, load.ask, f"steady {a.brokers} 1 {a.seconds:g}")
                took = time.monotonic() - t0
                wait_pct = round(100 * (peers.runq_wait_s(pid) - q0) / took, 1)
                followers_pct = [
                    round(100 * (peers.cpu_s(p) - c) / took, 1) for p, c in zip(followers, f0, strict=True)
                ]
                i1 = group.applied(leader)  # after the figures timed over `took`: an HTTP request would stretch them
                h1 = group.histograms()
            rows.append(
                {
                    "p50_ms": st["p50_ms"],
                    "p99_ms": st["p99_ms"],
                    "leader_cpu_pct": cpu_pct,
                    "leader_wait_pct": wait_pct,  # its loop thread runnable, waiting for a CPU: % of the window
                    "followers_cpu_pct": followers_pct,
                    "acknowledged": st["acknowledged"],
                    # the leader's log entries applied over the window (its heartbeats go one entry per loop turn)
                    "entries": None if i0 is None or i1 is None else i1 - i0,
                    "errors": st["errors"],
                    "unanswered": st["unanswered"],
                    "load_before": round(before, 2),
                    "warmup": warmup,
                }
                # per node: its log writes, commits (the leader's) and loop turns over 50 ms, and the slowest
                | peers.slow_per_node(h0, h1)
                | ({"profile": sampled} if sampled else {})
                | ({"scrapes": scraper.figures()} if isinstance(scraper, Scraper) else {})
            )
    if load.proc.returncode != 0:  # it ends when its input does: anything else is a generator that hung or failed
        raise RuntimeError(f"ControllerLoad ended with {load.proc.returncode} after its last command: {load.argv}")
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def spread(key: str) -> dict[str, float]:
        xs = [r[key] for r in rows]
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

    keys = {"p99_ms": "p99_ms", "p50_ms": "p50_ms", "leader_cpu_pct": "leader_cpu_pct", "load": "load_before"}
    keys["leader_wait_pct"] = "leader_wait_pct"
    out: dict[str, Any] = {"windows": len(rows)} | {name: spread(key) for name, key in keys.items()}
    # The windows in which no node's log write took over peers.SLOW_S: their p99 is the controller's, where a
    # write that slow is the disk's (all three nodes share it here, so one stall holds every node's commit)
    quiet = [r["p99_ms"] for r in rows if not any(r["over_50ms"]["log_write"])]
    out["disk_stall_windows"] = len(rows) - len(quiet)
    out["p99_ms_without_disk_stall"] = (
        {"median": statistics.median(quiet), "min": min(quiet), "max": max(quiet)} if quiet else None
    )
    return out


def main(argv: list[str]) -> int:
    a = parse(argv)
    windows: dict[str, list[dict[str, Any]]] = {name: [] for name in a.trees}
    alone = machine.fdatasync_stalls(a.disk_alone, peers.SLOW_S) if a.disk_alone else None
    if alone:
        print(
            f"the disk alone, {alone['seconds']:g} s: {alone['writes']} fdatasyncs of 256 B, p50 {alone['p50_ms']} ms, "
            f"{alone['over']} over {alone['over_ms']:g} ms, slowest {alone['max_ms']} ms"
        )
    for r in range(a.rounds):
        for name, tree in a.trees.items():
            with tempfile.TemporaryDirectory(prefix="realistic-ab-") as root:
                extra = f"{a.extra};{a.conf.get(name, '')}".replace(";", "\n")
                group = peers.Ours(root, tree, extra)
                try:
                    for i in range(3):
                        group.start(i)
                    group.cluster.wait_ready(timeout=120)
                    rows = measure(group, a, name, r)
                finally:
                    group.cluster.stop_all()
            for row in rows:
                row["round"] = r
                print(
                    f"round {r} {name}: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, "
                    f"leader CPU {row['leader_cpu_pct']} %, waiting for a CPU {row['leader_wait_pct']} %, "
                    f"followers' CPU {' and '.join(map(str, row['followers_cpu_pct']))} %, "
                    f"{row['entries']} entries for {row['acknowledged']} heartbeats, "
                    f"over {peers.SLOW_S * 1000:g} ms per node: {peers.slow_text(row)}, load {row['load_before']}"
                    + (f", {sc['count']} scrapes, slowest {sc['slowest_ms']} ms" if (sc := row.get("scrapes")) else "")
                )
            windows[name].extend(rows)
    out = {name: summary(rows) for name, rows in windows.items()}
    print(f"\n{a.brokers} brokers at 1 heartbeat/s, {a.rounds} rounds x {a.windows} windows of {a.seconds:g} s")
    print(
        f"{'tree':<12} {'p99 median [range] (ms)':<28} {'p50 median [range] (ms)':<28} "
        f"{'leader CPU median [range] (%)':<32} {'waiting for a CPU (%)':<24} load before"
    )
    for name, s in out.items():
        p99, p50, cpu, ld, wt = s["p99_ms"], s["p50_ms"], s["leader_cpu_pct"], s["load"], s["leader_wait_pct"]
        print(
            f"{name:<12} {p99['median']:>7.1f} [{p99['min']:.1f}-{p99['max']:.1f}]{'':<10}"
            f"{p50['median']:>7.2f} [{p50['min']:.2f}-{p50['max']:.2f}]{'':<10}"
            f"{cpu['median']:>7.1f} [{cpu['min']:.1f}-{cpu['max']:.1f}]{'':<14}"
            f"{wt['median']:>7.1f} [{wt['min']:.1f}-{wt['max']:.1f}]{'':<6}{ld['min']:.2f}-{ld['max']:.2f}"
        )
    print(
        f"\nwindows in which a node's log write took over {peers.SLOW_S * 1000:g} ms (a disk stall), and the p99 of the others"
    )
    for name, s in out.items():
        q = s["p99_ms_without_disk_stall"]
        rest = f"{q['median']:.1f} [{q['min']:.1f}-{q['max']:.1f}] ms" if q else "none without"
        print(f"{name:<12} {s['disk_stall_windows']} of {s['windows']}; p99 of the others {rest}")
    if a.profile:
        for name, rows in windows.items():
            out[name]["profile"] = busiest = profile.top(row["profile"] for row in rows)
            node = "the leader" if a.profile_node == "leader" else "a follower"
            print(f"\n{name}: {node}'s busiest functions, % of its {busiest['samples']:,} busy samples")
            for kind in ("self", "inclusive"):
                print(f"  {kind}: " + "; ".join(f"{share} {fn}" for share, fn in busiest[kind]))
    if a.json:
        with open(a.json, "w") as f:
            doc = {"args": {**vars(a)}, "machine": machine.describe(), "disk_alone": alone}
            doc |= {"windows": windows, "summary": out}
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

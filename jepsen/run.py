"""`python -m jepsen run`: start a cluster in network namespaces, run a workload under a nemesis, check it.

    python -m jepsen run --workload register --nemesis partition-random-halves --time-limit 60 --nodes 5 --seed 7
    python -m jepsen run --nemesis all --time-limit 600        # every nemesis in turn, one folder each

A run folder holds everything needed to re-check it offline (`python -m jepsen check history.jsonl`):
history.jsonl, results.json, summary.txt, schedule.json (the seeded nemesis plan), params.json, probes.json,
nodes/nK.conf and nodes/nK.log, latency.png and rate.png. The data directories (data/nK) are kept only when
the run did not pass (or with --keep-data).

A run (`run_one`) has three phases, `Run.setup` (network, nodes, recorder, clients, nemesis), `Run.run` (the
workload under the nemesis's schedule) and `Run.heal` (final heal, recovery, final reads); each pushes on one
`ExitStack` what undoes it, so that whichever phase fails or is interrupted the teardown stops the load and
the nemesis, stops every node, closes the clients and the history, and removes the network, in that order.

Exit codes: 0 every checker valid; 1 invalid (an anomaly: see summary.txt); 2 unknown (a checker ran out of
budget, or nothing could be judged); 4 the run was aborted (no namespaces, a fault not in effect, the cluster
never came up); 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID
from jepsen.client import Client, LeaderHint
from jepsen.db import Cluster, ClusterOptions, DBError
from jepsen.driver import Mix, Recorder
from jepsen.history import HistoryError, read_history
from jepsen.nemesis import (
    NEMESES,
    Context,
    Nemesis,
    NemesisAbort,
    Runner,
    Step,
    effective_nemesis,
    make_nemesis,
    make_schedule,
    spare_nodes,
)
from jepsen.net import Net, NetError
from jepsen.suite import EXIT_CODE, CheckOptions, check_history, summary
from jepsen.workloads import WORKLOADS

EXIT_ABORTED = 4
EXIT_INTERRUPTED = 130
RANK = {VALID: 0, UNKNOWN: 1, INVALID: 2}


@dataclass
class RunConfig:
    workload: str
    nemesis: str
    time_limit: float
    nodes: int
    rate: float
    concurrency: int
    seed: int
    interval: float
    recovery: float
    snapshot_threshold: int
    keep_data: bool
    budget: float
    read_mode: str = "read-index"

    @property
    def unsafe_reads(self) -> bool:
        """The negative control: nodes answer reads without ReadIndex, clients spread their GETs."""
        return self.read_mode == "local"

    @property
    def spread_reads(self) -> bool:
        """Clients send each GET to a random node. With leases too: a deposed leader that still believes it
        leads is then asked by clients that already saw the new leader's writes, so a stale lease shows."""
        return self.read_mode in ("local", "lease", "tick-lease")

    @property
    def negative_control(self) -> str | None:
        """What a negative-control read mode breaks (such a run should come out invalid), or None."""
        return {"local": "reads skip ReadIndex", "tick-lease": "the lease counts ticks, which a paused node drops"}.get(
            self.read_mode
        )


class Aborted(Exception):
    """The run cannot prove anything (infrastructure failure); the message says why."""


def _echo(msg: str) -> None:
    click.echo(f"[{time.strftime('%H:%M:%S')}] {msg}", err=True)


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=repr) + "\n")
    os.replace(tmp, path)


_interrupted = False
_cleaning = False


def _raise_interrupt(signum: int, _frame: Any) -> None:
    """SIGTERM/SIGHUP/SIGINT: unwind once (the finally blocks stop the nodes and remove the network). Signals
    during the cleanup, or after the first one, are ignored, so that a second Ctrl-C cannot leave namespaces
    or nodes behind."""
    global _interrupted
    if _interrupted or _cleaning:
        _interrupted = True
        _echo(f"signal {signum}: cleaning up, please wait")
        return
    _interrupted = True
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass(frozen=True)
class Parts:
    """What a run is built from: the real network, nodes, driver and nemesis runner. Tests swap in fakes."""

    net: Callable[[int], Net] = Net
    cluster: Callable[[Net, Path, ClusterOptions], Cluster] = Cluster
    driver: Callable[[list[str], Recorder, Callable[[random.Random], Client], int, float, int], Mix] = Mix
    runner: Callable[[Context, Nemesis, list[Step], float], Runner] = Runner


@contextmanager
def _teardown() -> Iterator[ExitStack]:
    """The stack the phases push their undo steps on, unwound however the phases end (done, aborted, Ctrl-C);
    signals that arrive while it unwinds are ignored (see _raise_interrupt)."""
    global _cleaning
    stack = ExitStack()
    try:
        yield stack
    finally:
        _cleaning = True
        try:
            stack.close()
        finally:
            _cleaning = False


class Run:
    """One workload under one nemesis in `out`: setup, run, heal, each pushing on the teardown stack what
    undoes it, so that whichever phase fails the nemesis stops, every node stops and the network goes."""

    # built by setup()
    cluster: Cluster
    recorder: Recorder
    driver: Mix
    runner: Runner
    deadline: float  # set by run(): the end of the workload, time.monotonic()

    def __init__(self, cfg: RunConfig, out: Path, parts: Parts) -> None:
        self.cfg, self.out, self.parts = cfg, out, parts
        out.mkdir(parents=True, exist_ok=True)
        name, note = effective_nemesis(cfg.nemesis, cfg.nodes)
        if note:
            _echo(note)
        self.nemesis = name
        self.steps = make_schedule(name, cfg.nodes, cfg.seed, cfg.time_limit, cfg.interval)
        _write_json(
            out / "params.json",
            {
                **asdict(cfg),
                "effective_nemesis": name,
                "note": note,
                "argv": sys.argv,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        )
        _write_json(
            out / "schedule.json",
            {
                "nemesis": name,
                "requested": cfg.nemesis,
                "note": note,
                "seed": cfg.seed,
                "interval": cfg.interval,
                "time_limit": cfg.time_limit,
                "steps": [s.to_json() for s in self.steps],
            },
        )
        self.history = out / "history.jsonl"
        self.history.unlink(missing_ok=True)
        self.info: dict[str, Any] = {
            "workload": cfg.workload,
            "nemesis": name,
            "requested_nemesis": cfg.nemesis,
            "seed": cfg.seed,
            "nodes": cfg.nodes,
            "note": note,
            "read_mode": cfg.read_mode,
        }
        self.abort: str | None = None
        self.spares = spare_nodes(name)  # brand-new servers the membership nemesis adds: extra namespaces, not started
        self.net = parts.net(cfg.nodes + self.spares)
        self.ctx: Context | None = None

    def setup(self, stack: ExitStack) -> None:
        """The network, the nodes (until every one is ready), the recorder, the clients and the nemesis."""
        cfg, net = self.cfg, self.net
        stack.callback(self._remove_network)  # also after a setup that failed half-way
        try:
            net.setup()
        except NetError as e:
            raise Aborted(f"cannot build the test network: {e}") from None
        _echo(f"network {net.prefix}.0/24, namespaces {net.namespaces[0]}..{net.namespaces[-1]}")
        # closed after the nodes stop (the stack unwinds in reverse): clients and the history outlive them
        closing = stack.enter_context(ExitStack())
        cluster = self.cluster = self.parts.cluster(
            net,
            self.out,
            ClusterOptions(
                snapshot_threshold=cfg.snapshot_threshold,
                faketime=self.nemesis == "clock-skew",
                unsafe_local_reads=cfg.unsafe_reads,
                lease_read=cfg.read_mode == "lease",
                unsafe_tick_lease=cfg.read_mode == "tick-lease",
                spares=self.spares,
            ),
        )
        stack.callback(self._stop_nodes)
        cluster.write_configs()
        cluster.start_all()
        not_ready = cluster.wait_ready(timeout=60)
        if not_ready:
            raise Aborted(
                f"nodes {', '.join(cluster.node(i).name for i in not_ready)} did not become ready in 60 s; "
                f"see {self.out / 'nodes'}"
            )
        leader = cluster.leader()
        _echo(
            f"{cfg.nodes} nodes ready, leader {leader.name if leader else '?'}; running {cfg.workload} under "
            f"{self.nemesis} for {cfg.time_limit:g} s (seed {cfg.seed})"
        )
        recorder = self.recorder = Recorder(self.history)
        closing.callback(recorder.close)
        self.ctx = Context(net, cluster, recorder, log=_echo)
        self.ctx.probe("setup")  # the healthy matrix: proves the probe itself works
        hint = LeaderHint()
        addresses = [n.http for n in cluster.nodes]

        def make_client(rng: random.Random) -> Client:
            # the token: sync-state-data is an admin endpoint
            return Client(addresses, hint, rng, token=cluster.token, spread_reads=cfg.spread_reads)

        driver = self.driver = self.parts.driver(
            cfg.workload.split(","), recorder, make_client, cfg.concurrency, cfg.rate, cfg.seed
        )
        closing.callback(driver.close)
        self.runner = self.parts.runner(self.ctx, make_nemesis(self.nemesis), self.steps, recorder.t0_s)
        stack.callback(self._stop_load)

    def run(self) -> None:
        """The workload and the nemesis's schedule for --time-limit seconds (less if the nemesis fails)."""
        driver, runner, cluster = self.driver, self.runner, self.cluster
        driver.start()
        runner.start()
        self.deadline = self.recorder.t0_s + self.cfg.time_limit
        while time.monotonic() < self.deadline and not runner.failed.is_set():
            runner.failed.wait(min(1.0, max(0.0, self.deadline - time.monotonic())))
            cluster.check_exits()
        driver.stop()
        if runner.failed.is_set():
            self.abort = f"the nemesis failed: {runner.error}"
            self.info["nemesis_error"] = runner.error_text
        _echo(f"workload stopped after {driver.ops()} ops; healing")

    def heal(self) -> None:
        """The final heal, then --recovery seconds for every node to be ready, and the final reads."""
        cfg, info, driver, cluster = self.cfg, self.info, self.driver, self.cluster
        info["final_heal"] = self.runner.finish()
        info["faults_applied"] = self.runner.applied
        t_heal = time.monotonic()
        not_ready = cluster.wait_ready(timeout=cfg.recovery)
        recovered_s = round(time.monotonic() - t_heal, 2)
        final = driver.final(deadline=time.monotonic() + max(10.0, cfg.recovery - recovered_s))
        info["recovery"] = {
            "not_ready": [cluster.node(i).name for i in not_ready],
            "seconds": recovered_s,
            "final_reads": final or "all done",
        }
        info["unexpected_exits"] = cluster.check_exits()
        info["workload_stats"] = driver.stats()
        info["ops"] = driver.ops()
        if driver.errors:
            info["harness_errors"] = driver.errors[:20]
        _echo(f"recovery: {'all nodes ready' if not not_ready else f'not ready: {not_ready}'} in {recovered_s} s")

    # teardown, in the order the stack unwinds it

    def _stop_load(self) -> None:
        self.driver.halt.set()
        self.runner.abandon()  # a no-op after finish(); on Ctrl-C or an abort it stops the faults first

    def _stop_nodes(self) -> None:
        self.cluster.close()
        self.info["final_exit_codes"] = self.cluster.exit_codes()

    def _remove_network(self) -> None:
        left = self.net.teardown()
        if left:
            _echo(f"could not remove: {left}")


def run_one(cfg: RunConfig, out: Path, parts: Parts | None = None) -> int:
    """One workload under one nemesis in `out`; the exit code."""
    run = Run(cfg, out, parts or Parts())
    interrupted = False
    try:
        with _teardown() as stack:
            run.setup(stack)
            run.run()
            run.heal()
    except Aborted as e:
        run.abort = str(e)
    except NemesisAbort as e:
        run.abort = f"the nemesis failed: {e}"
    except (NetError, DBError) as e:
        run.abort = f"{type(e).__name__}: {e}"
    except KeyboardInterrupt:
        interrupted = True
        run.abort = "interrupted"
    except Exception as e:  # noqa: BLE001 - a harness bug: the teardown ran; report it
        run.abort = f"harness error: {type(e).__name__}: {e}"
        run.info["harness_traceback"] = traceback.format_exc()
    interrupted = interrupted or _interrupted
    if run.ctx is not None:
        _write_json(out / "probes.json", run.ctx.probes)
    return finish(cfg, out, run.info, run.abort, interrupted)


def recovery_verdict(info: dict[str, Any]) -> dict[str, Any]:
    """Liveness after the final heal: every node ready within --recovery, final reads done, no node exited on
    its own during the run."""
    rec = info.get("recovery", {})
    problems = []
    if rec.get("not_ready"):
        problems.append(f"not ready {rec['seconds']} s after the heal: {', '.join(rec['not_ready'])}")
    if isinstance(rec.get("final_reads"), dict):
        problems.append(f"final reads failed: {rec['final_reads']}")
    interference = []
    for e in info.get("unexpected_exits", []):
        if e["returncode"] == 0:
            # controllerd exits 0 only after SIGTERM/SIGINT ("stopping (signal)" in its log), which the harness
            # did not send: another process on this machine stopped it. Not the node's fault, but the run is
            # not what it claims to be.
            interference.append(f"{e['node']} was stopped by a signal the harness did not send (exit 0)")
        else:
            problems.append(f"{e['node']} exited on its own with code {e['returncode']}")
    verdict = INVALID if problems else UNKNOWN if interference else VALID
    return {"verdict": verdict, "problems": problems + interference, **rec}


def finish(cfg: RunConfig, out: Path, info: dict[str, Any], abort: str | None, interrupted: bool) -> int:
    history = out / "history.jsonl"
    results: dict[str, Any] = {"run": info}
    code = EXIT_INTERRUPTED if interrupted else EXIT_ABORTED
    if history.exists() and not interrupted:
        try:
            checked = check_history(read_history(history), CheckOptions(budget_s=cfg.budget))
        except HistoryError as e:
            checked = {
                "verdict": UNKNOWN,
                "checkers": {},
                "error": f"malformed history: {e}",
                "counts": {},
                "history": str(history),
            }
        checked["recovery"] = recovery_verdict(info)
        verdicts = [c["verdict"] for c in checked["checkers"].values()] + [checked["recovery"]["verdict"]]
        verdict = max(verdicts, key=RANK.__getitem__) if checked["checkers"] else UNKNOWN
        checked["history_verdict"] = checked["verdict"]
        checked["verdict"] = verdict
        results.update(checked)
        if abort is None:
            code = EXIT_CODE[verdict]
    if abort is not None:
        # what was recorded is still checked (above), but an aborted run proves nothing either way
        results.update(verdict="aborted", abort=abort, checked_verdict=results.get("verdict"))
        _echo(f"ABORTED: {abort}")
    results["exit_code"] = code
    _write_json(out / "results.json", results)
    lines = [
        f"run: {out}",
        f"workload {cfg.workload}, nemesis {info.get('nemesis')}, {cfg.nodes} nodes, seed {cfg.seed}, "
        f"{cfg.time_limit:g} s at {cfg.rate:g} ops/s, concurrency {cfg.concurrency}",
    ]
    if cfg.negative_control:
        lines.append(f"read mode {cfg.read_mode}: a negative control ({cfg.negative_control}); expect invalid")
    if info.get("note"):
        lines.append(f"note: {info['note']}")
    if abort is not None:
        lines.append(f"ABORTED: {abort}")
    if "checkers" in results:
        lines.append(f"faults applied: {info.get('faults_applied')}; ops {info.get('ops')}")
        if "error" in results:
            lines.append(results["error"])
        else:
            lines += summary({**results, "verdict": results["history_verdict"]})[:-1]
        rec = results["recovery"]
        lines.append(
            f"{'recovery':<22} {rec['verdict']:<8} all nodes ready {rec.get('seconds')} s after the heal"
            if not rec["problems"]
            else f"{'recovery':<22} {rec['verdict']}"
        )
        lines += [f"    {p}" for p in rec["problems"]]
    lines.append(f"verdict: {results['verdict']} (exit {code})")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    click.echo("\n".join(lines))
    if history.exists():
        try:
            from jepsen.plots import plot_run

            plot_run(history, out, title=f"{cfg.workload} / {info.get('nemesis')}")
        except Exception as e:  # noqa: BLE001 - plots are a convenience; the verdict stands without them
            _echo(f"plots failed: {type(e).__name__}: {e}")
    data = out / "data"
    if data.exists() and code == 0 and not cfg.keep_data:
        shutil.rmtree(data, ignore_errors=True)
    return code


def _nemeses(spec: str) -> list[str]:
    names = list(NEMESES) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in NEMESES]
    if unknown or not names:
        raise click.BadParameter(
            f"unknown nemesis {', '.join(unknown) or spec!r}; known: all, {', '.join(NEMESES)}", param_hint="--nemesis"
        )
    return names


def _workloads(spec: str) -> list[str]:
    names = list(WORKLOADS) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names or len(set(names)) != len(names):
        raise click.BadParameter(
            f"unknown or repeated workload in {spec!r}; known: all, {', '.join(WORKLOADS)}", param_hint="--workload"
        )
    return names


@click.command("run")
@click.option(
    "--workload",
    "workload_spec",
    default="register",
    show_default=True,
    help=f"A workload, a comma list run together on one cluster and one history (each with its own "
    f"--rate and --concurrency), or all. Known: {', '.join(WORKLOADS)}.",
)
@click.option(
    "--nemesis",
    "nemesis_spec",
    default="partition-random-halves",
    show_default=True,
    help=f"A nemesis, a comma list (run in turn), or all. Known: {', '.join(NEMESES)}.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    default=60,
    show_default=True,
    help="Seconds of workload per nemesis (then heal, recovery and final reads).",
)
@click.option("--nodes", type=click.Choice(["3", "5"]), default="5", show_default=True)
@click.option(
    "--rate", type=click.FloatRange(min=0.1), default=20, show_default=True, help="Ops/s, all clients together."
)
@click.option("--concurrency", type=click.IntRange(1, 50), default=5, show_default=True, help="Client processes.")
@click.option("--seed", type=int, default=None, help="Seed of the schedule and the clients (default: random, printed).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.5),
    default=10,
    show_default=True,
    help="Seconds of quiet, then seconds of fault, alternately.",
)
@click.option(
    "--recovery",
    type=click.FloatRange(min=1),
    default=30,
    show_default=True,
    help="Seconds the cluster may take after the final heal before it counts as not recovered.",
)
@click.option(
    "--snapshot-threshold",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="statemachineSnapshotThreshold of the nodes (small: snapshots and log truncation happen).",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=1),
    default=60,
    show_default=True,
    help="Seconds the linearizability checker may spend.",
)
@click.option(
    "--read-mode",
    type=click.Choice(["read-index", "lease", "tick-lease", "local"]),
    default="read-index",
    show_default=True,
    help="lease: jRaftReadOnlyOption=ReadOnlyLeaseBased (drift bound 50 %, the clock nemesis's range). "
    "tick-lease: the same with the old tick-counted lease (CONTROLLERD_UNSAFE_TICK_LEASE=1), a negative "
    "control. local: the nodes answer reads from local state with no ReadIndex (CONTROLLERD_UNSAFE_LOCAL_READS=1), "
    "a negative control that must come out invalid.",
)
@click.option("--keep-data", is_flag=True, help="Keep the nodes' data directories even when the run passes.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run folder (default ./jepsen-runs/<timestamp>-<workload>-<nemesis>).",
)
def run(
    workload_spec: str,
    nemesis_spec: str,
    time_limit: float,
    nodes: str,
    rate: float,
    concurrency: int,
    seed: int | None,
    interval: float,
    recovery: float,
    snapshot_threshold: int,
    budget: float,
    read_mode: str,
    keep_data: bool,
    out: Path | None,
) -> int:
    """Run WORKLOAD under each nemesis in turn against a real cluster in network namespaces, and check it.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 4 aborted (the run proves nothing), 130 interrupted.
    """
    names = _nemeses(nemesis_spec)
    workload = ",".join(_workloads(workload_spec))
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "all" if nemesis_spec == "all" else ("+".join(names) if len(names) > 1 else names[0])
    base = out or Path("jepsen-runs") / f"{stamp}-{workload.replace(',', '+')}-{label}"
    template = RunConfig(
        workload=workload,
        nemesis=names[0],
        time_limit=time_limit,
        nodes=int(nodes),
        rate=rate,
        concurrency=concurrency,
        seed=seed,
        interval=interval,
        recovery=recovery,
        snapshot_threshold=snapshot_threshold,
        keep_data=keep_data,
        budget=budget,
        read_mode=read_mode,
    )
    global _interrupted
    _interrupted = False
    previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        if len(names) == 1:
            return run_one(template, base)
        combined: list[dict[str, Any]] = []
        worst = 0
        for k, name in enumerate(names, start=1):
            folder = base / f"{k:02d}-{name}"
            _echo(f"=== {k}/{len(names)}: {name} -> {folder}")
            code = run_one(dataclasses.replace(template, nemesis=name), folder)
            combined.append(run_summary(name, folder, code))
            worst = code if _worse(code, worst) else worst
            _write_json(
                base / "results.json",
                {
                    "workload": workload,
                    "seed": seed,
                    "time_limit": time_limit,
                    "nodes": int(nodes),
                    "read_mode": read_mode,
                    "runs": combined,
                    "exit_code": worst,
                },
            )
            if code == EXIT_INTERRUPTED:
                break
        click.echo("\n".join(combined_table(combined)))
        return worst
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _worse(a: int, b: int) -> bool:
    order = {0: 0, 2: 1, 1: 2, EXIT_ABORTED: 3, EXIT_INTERRUPTED: 4}
    return order.get(a, 3) > order.get(b, 3)


def combined_table(lines: list[dict[str, Any]]) -> list[str]:
    """The end-of-run table of a multi-nemesis run: one row per nemesis."""
    names = sorted(
        {c for r in lines for c in r.get("checkers", {})}, key=["linearizability", "set", "controller-invariants"].index
    )
    out = [f"{'nemesis':<26} {'verdict':<8} {'exit':>4} {'ops':>7} {'faults':>6} {'recovery':>8}  " + "  ".join(names)]
    for r in lines:
        rec = "-" if r.get("recovery_s") is None else f"{r['recovery_s']:.1f} s"
        checks = "  ".join(f"{r.get('checkers', {}).get(n, '-'):<{len(n)}}" for n in names)
        out.append(
            f"{r['nemesis']:<26} {r['verdict']:<8} {r['exit_code']:>4} {r.get('ops') or 0:>7} "
            f"{r.get('faults_applied') or 0:>6} {rec:>8}  {checks}".rstrip()
        )
    return out


def run_summary(nemesis: str, folder: Path, code: int) -> dict[str, Any]:
    """One nemesis's line of the combined results.json: the verdicts and the numbers a reader wants first."""
    res = json.loads((folder / "results.json").read_text())
    info = res.get("run", {})
    return {
        "nemesis": nemesis,
        "folder": str(folder),
        "verdict": res.get("verdict"),
        "exit_code": code,
        "abort": res.get("abort"),
        "checkers": {name: c.get("verdict") for name, c in res.get("checkers", {}).items()},
        "recovery": (res.get("recovery") or {}).get("verdict"),
        "ops": info.get("ops"),
        "faults_applied": info.get("faults_applied"),
        "recovery_s": (info.get("recovery") or {}).get("seconds"),
        "counts": {name: c.get("counts") for name, c in res.get("checkers", {}).items()},
    }

"""Nemeses: the faults of docs/jepsen.md, applied on a seeded schedule and written into the history.

Each nemesis alternates fault and heal: quiet for `interval` seconds, fault for `interval`, heal, and so on
until the time limit; then `finish()` heals everything (network, paused and dead processes, clocks,
membership). The schedule, and every random choice that does not depend on the cluster's state (which node,
which halves, which ring, how far a clock jumps), is drawn up front from the seed (`make_schedule`), so a
seed replays the same faults. Only the leader-targeting nemeses choose at run time: they ask who leads.

History: each applied fault is `{"process": "nemesis", "type": "info", "f": "start", "value": {...}}` and
each heal `f: "stop"`; `value.nemesis` names the nemesis and the rest says what was done to whom. After every
network change the connectivity matrix is probed with TCP connects (`f: "probe"`), and the run is aborted
(`NemesisAbort`) when the matrix is not the one the grudge asks for: a partition that silently does nothing
would make the run vacuous.

Grudges (node -> nodes whose packets it drops) are pure functions of (rng, nodes): `grudge_for`.
"""

from __future__ import annotations

import math
import random
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from jepsen.db import Cluster, DBError, Node, remoting_of
from jepsen.net import Net, NetError, format_matrix

NEMESES = (
    "partition-random-node",
    "partition-random-halves",
    "partition-majorities-ring",
    "bridge",
    "kill-random-processes",
    "crash-random-nodes",
    "hammer-time",
    "clock-skew",
    "isolate-leader",
    "pause-leader",
    "pause-isolated-leader",
    "snapshot-storm",
    "membership",
)
PARTITIONS = ("partition-random-node", "partition-random-halves", "partition-majorities-ring", "bridge")
MAX_BUMP_S = 8.0  # see ClockSkew: a backward jump of the monotonic clock stalls a node's timers this long
RAFT_PORT_PROBE = 9880
MEMBERSHIP_MODES = ("remove", "add-new", "shrink")  # see Membership
SPARES = {"membership": 2}  # brand-new servers (extra namespaces) a nemesis needs beyond the group


def spare_nodes(name: str) -> int:
    """How many spare servers (not in the group, never started) a run of nemesis `name` needs."""
    return SPARES.get(name, 0)


Grudge = dict[int, set[int]]


class NemesisAbort(RuntimeError):
    """The fault could not be applied or is not in effect; the run must stop (it would prove nothing)."""


# ------------------------------------------------------------------------------------------------ grudges


def complete_grudge(components: Iterable[Iterable[int]]) -> Grudge:
    """Nobody talks across components: each node drops every node outside its own component."""
    comps = [set(c) for c in components]
    everyone = set().union(*comps) if comps else set()
    return {a: everyone - c for c in comps for a in c}


def isolate(node: int, nodes: Sequence[int]) -> Grudge:
    return complete_grudge([[node], [x for x in nodes if x != node]])


def halves(rng: random.Random, nodes: Sequence[int]) -> list[list[int]]:
    """Shuffle and cut in two; the first (smaller) half has n // 2 nodes: 5 -> 2 | 3, 3 -> 1 | 2."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    k = len(shuffled) // 2
    return [sorted(shuffled[:k]), sorted(shuffled[k:])]


def majorities_ring(ring: Sequence[int]) -> Grudge:
    """Each node keeps links to the majority-sized window of the ring centred on itself and drops the rest.

    With 5 nodes every node sees itself and its two neighbours: a majority, and no two nodes see the same one.
    Needs an odd ring of at least 5: with 3 nodes the window cannot be centred and Jepsen's construction
    degenerates into one-way drops that, over TCP, isolate every node (docs/jepsen-background.md §3).
    """
    n = len(ring)
    if n < 5 or n % 2 == 0:
        raise ValueError(f"partition-majorities-ring needs an odd number of nodes >= 5, got {n}")
    reach = (n // 2 + 1) // 2  # each side of the window: 5 nodes -> 1, 7 -> 2, 9 -> 2
    g: Grudge = {}
    for pos, a in enumerate(ring):
        seen = {ring[(pos + d) % n] for d in range(-reach, reach + 1)}
        g[a] = set(ring) - seen
    return g


def bridge(comps: list[list[int]]) -> tuple[int, Grudge]:
    """Two halves; the first node of the larger half is the bridge and keeps every link."""
    small, large = comps
    the_bridge = large[0]
    g: Grudge = {}
    for a in small:
        g[a] = {b for b in large if b != the_bridge}
    for b in large:
        if b != the_bridge:
            g[b] = set(small)
    g[the_bridge] = set()
    return the_bridge, g


def sees(grudge: Grudge, nodes: Sequence[int]) -> dict[int, set[int]]:
    """Who each node can talk to over TCP (itself included): neither side drops the other."""
    return {
        a: {b for b in nodes if b == a or (b not in grudge.get(a, ()) and a not in grudge.get(b, ()))} for a in nodes
    }


def mostly_small_subset(rng: random.Random, nodes: Sequence[int]) -> list[int]:
    """A non-empty random subset, its size drawn log-uniformly (1 most often, everyone rarely)."""
    n = len(nodes)
    k = min(n, max(1, int(math.floor(2 ** rng.uniform(0, math.log2(n + 1))))))
    return sorted(rng.sample(list(nodes), k))


def grudge_for(name: str, rng: random.Random, nodes: Sequence[int]) -> dict[str, Any]:
    """The planned partition of a network nemesis: {"grudge": {node: [dropped...]}, ...what it is made of}."""
    if name == "partition-random-node":
        node = rng.choice(list(nodes))
        return {"isolated": node, "grudge": _jsonable(isolate(node, nodes))}
    if name == "partition-random-halves":
        comps = halves(rng, nodes)
        return {"components": comps, "grudge": _jsonable(complete_grudge(comps))}
    if name == "partition-majorities-ring":
        ring = list(nodes)
        rng.shuffle(ring)
        return {"ring": ring, "grudge": _jsonable(majorities_ring(ring))}
    if name == "bridge":
        comps = halves(rng, nodes)
        b, g = bridge(comps)
        return {"components": comps, "bridge": b, "grudge": _jsonable(g)}
    raise ValueError(f"{name} is not a partition nemesis")


def _jsonable(g: Grudge) -> dict[str, list[int]]:
    return {str(a): sorted(bs) for a, bs in sorted(g.items()) if bs}


def _grudge(j: dict[str, list[int]]) -> Grudge:
    return {int(a): set(bs) for a, bs in j.items()}


# ------------------------------------------------------------------------------------------------ schedule


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the workload starts
    f: str  # "start" or "stop"
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "f": self.f, "params": self.params}


def effective_nemesis(name: str, n: int) -> tuple[str, str | None]:
    """(the nemesis to run, a note) - partition-majorities-ring on fewer than 5 nodes becomes bridge."""
    if name == "partition-majorities-ring" and n < 5:
        return "bridge", (
            f"partition-majorities-ring needs 5 nodes; with {n} it degenerates into one-way drops that isolate "
            "every node over TCP, so this run uses bridge instead (docs/jepsen.md)"
        )
    return name, None


def plan(name: str, rng: random.Random, nodes: Sequence[int], interval: float) -> dict[str, Any]:
    """The random choices of one fault, drawn before the run."""
    if name in PARTITIONS:
        return grudge_for(name, rng, nodes)
    if name == "kill-random-processes":
        return {"nodes": mostly_small_subset(rng, nodes)}
    if name == "crash-random-nodes":
        victims = mostly_small_subset(rng, nodes)
        return {"nodes": victims, "torn": {str(v): rng.random() < 0.5 for v in victims}, "seed": rng.getrandbits(32)}
    if name == "hammer-time":
        return {"nodes": [rng.choice(list(nodes))]}
    if name == "clock-skew":
        victims = mostly_small_subset(rng, nodes)
        mode = rng.choice(["bump", "strobe", "rate"])
        out: dict[str, Any] = {"mode": mode, "nodes": victims}
        if mode == "bump":
            out["bumps"] = {
                str(v): round(rng.choice([-1, 1]) * 2 ** rng.uniform(math.log2(0.1), math.log2(MAX_BUMP_S)), 3)
                for v in victims
            }
        elif mode == "strobe":
            out["delta"] = round(2 ** rng.uniform(math.log2(0.05), math.log2(2.0)), 3)
            out["period"] = round(2 ** rng.uniform(math.log2(0.01), math.log2(1.0)), 3)
        else:
            out["rates"] = {str(v): round(rng.uniform(0.5, 1.5), 3) for v in victims}
        return out
    if name in ("isolate-leader", "pause-leader", "pause-isolated-leader"):
        return {}
    if name == "snapshot-storm":
        return {"victim_rank": rng.randrange(len(nodes)), "period": 0.5}
    if name == "membership":
        return {"mode": rng.choice(MEMBERSHIP_MODES), "node": rng.choice(list(nodes)), "wipe": rng.random() < 0.5}
    raise ValueError(f"unknown nemesis {name!r} (known: {', '.join(NEMESES)})")


def make_schedule(name: str, n: int, seed: int, time_limit: float, interval: float) -> list[Step]:
    """Fault/heal steps: quiet for `interval`, fault for `interval`, ... while a fault can start before
    `time_limit`; a heal past the time limit is left to the final heal."""
    if name not in NEMESES:
        raise ValueError(f"unknown nemesis {name!r} (known: {', '.join(NEMESES)})")
    if interval <= 0:
        raise ValueError("interval must be positive")
    rng = random.Random(f"{seed}:{name}:{n}")
    nodes = list(range(1, n + 1))
    steps: list[Step] = []
    t = interval
    while t < time_limit:
        steps.append(Step(round(t, 3), "start", plan(name, rng, nodes, interval)))
        if t + interval < time_limit:
            steps.append(Step(round(t + interval, 3), "stop"))
        t += 2 * interval
    return steps


# ------------------------------------------------------------------------------------------------ runtime


@dataclass
class Context:
    net: Net
    cluster: Cluster
    recorder: Any  # jepsen.driver.Recorder
    log: Callable[[str], None] = print
    probes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def nodes(self) -> list[int]:
        return [n.i for n in self.cluster.nodes]

    def probe(self, why: str) -> dict[str, Any]:
        """Probe the connectivity matrix, record it, and abort the run when it is not what the grudge says."""
        try:
            res = self.net.probe(RAFT_PORT_PROBE)
        except NetError as e:
            raise NemesisAbort(f"probing the network after {why} failed: {e}") from e
        value = {"why": why, **res.to_json()}
        self.probes.append(value)
        self.recorder.nemesis("probe", value)
        if not res.ok:
            lines = "\n  ".join(format_matrix(res.actual))
            want = "\n  ".join(format_matrix(res.expected))
            raise NemesisAbort(
                f"the network is not as the nemesis set it after {why}: expected\n  {want}\n"
                f"got\n  {lines}\ncontrol (root namespace -> node): {res.control}"
            )
        return value

    def leader(self, wait: float = 5.0) -> int | None:
        deadline = time.monotonic() + wait
        while True:
            node = self.cluster.leader()
            if node is not None or time.monotonic() >= deadline:
                return node.i if node is not None else None
            time.sleep(0.2)  # waiting for an election, bounded


class Nemesis(ABC):
    """One kind of fault. start() applies it and returns what it did (JSON); stop() heals it."""

    name = "?"
    network = False  # True: the runner probes the connectivity matrix after each start and stop

    @abstractmethod
    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def stop(self, ctx: Context) -> dict[str, Any]: ...


class Partition(Nemesis):
    network = True

    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        ctx.net.apply_grudge(_grudge(params["grudge"]))
        return dict(params)

    def stop(self, ctx: Context) -> dict[str, Any]:
        ctx.net.heal()
        return {"healed": "network"}


class IsolateLeader(Nemesis):
    name = "isolate-leader"
    network = True

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        leader = ctx.leader()
        if leader is None:
            return {"skipped": "no leader known"}
        g = isolate(leader, ctx.nodes)
        ctx.net.apply_grudge(g)
        return {"leader": ctx.cluster.node(leader).name, "isolated": leader, "grudge": _jsonable(g)}

    def stop(self, ctx: Context) -> dict[str, Any]:
        ctx.net.heal()
        return {"healed": "network"}


class PauseIsolatedLeader(IsolateLeader):
    """SIGSTOP the current leader and cut it off from its peers. On stop, SIGCONT it first and heal the network
    HOLD_S later: for that while it runs again without its peers' messages (a newer leader's), like a process
    whose peers' packets are late, and answers the requests that waited in its sockets during the pause. Built
    for lease reads: a lease that outlives the pause (the old tick-counted one) answers them stale."""

    name = "pause-isolated-leader"
    HOLD_S = 2.0

    def __init__(self) -> None:
        self.paused: int | None = None

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        done = super().start(ctx, params)
        leader = done.get("isolated")
        if leader is not None and ctx.cluster.pause(leader):
            self.paused = leader
        return {**done, "paused": self.paused is not None}

    def stop(self, ctx: Context) -> dict[str, Any]:
        resumed = self.paused is not None and ctx.cluster.resume(self.paused)
        self.paused = None
        time.sleep(self.HOLD_S)  # the fault itself: resumed but still cut off for HOLD_S
        return {**super().stop(ctx), "resumed": resumed, "held_s": self.HOLD_S}


class Kill(Nemesis):
    """SIGKILL a subset; restart it on stop. With `crash`, also drop what the WAL had not fsynced."""

    def __init__(self, crash: bool) -> None:
        self.crash = crash
        self.name = "crash-random-nodes" if crash else "kill-random-processes"
        self.down: list[int] = []

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        rng = random.Random(params.get("seed", 0))
        done: dict[str, Any] = {}
        for i in params["nodes"]:
            name = ctx.cluster.node(i).name
            if self.crash:
                done[name] = ctx.cluster.crash(i, rng, torn=bool(params["torn"].get(str(i))))
            else:
                done[name] = {"killed": ctx.cluster.kill(i)}
            self.down.append(i)
        return {"nodes": params["nodes"], "done": done}

    def stop(self, ctx: Context) -> dict[str, Any]:
        restarted = []
        for i in self.down:
            ctx.cluster.start(i)
            restarted.append(ctx.cluster.node(i).name)
        self.down = []
        return {"restarted": restarted}


class Pause(Nemesis):
    """SIGSTOP nodes (hammer-time: random ones; pause-leader: the leader); SIGCONT on stop."""

    def __init__(self, leader: bool) -> None:
        self.leader = leader
        self.name = "pause-leader" if leader else "hammer-time"
        self.paused: list[int] = []

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        if self.leader:
            leader = ctx.leader()
            if leader is None:
                return {"skipped": "no leader known"}
            targets = [leader]
        else:
            targets = list(params["nodes"])
        for i in targets:
            if ctx.cluster.pause(i):
                self.paused.append(i)
        return {
            "nodes": targets,
            "paused": [ctx.cluster.node(i).name for i in self.paused],
            **({"leader": ctx.cluster.node(targets[0]).name} if self.leader else {}),
        }

    def stop(self, ctx: Context) -> dict[str, Any]:
        resumed = [ctx.cluster.node(i).name for i in self.paused if ctx.cluster.resume(i)]
        self.paused = []
        return {"resumed": resumed}


class ClockSkew(Nemesis):
    """Moves nodes' clocks under libfaketime: `bump` jumps them (both wall and monotonic), `rate` makes them run
    fast or slow, `strobe` jumps them back and forth by `delta` every `period` seconds. Stop resets every clock
    to real time, which is itself a jump: a node whose monotonic clock was ahead sees it go back, and its
    timers wait that much longer. That is why bumps are bounded by MAX_BUMP_S, below the recovery budget."""

    name = "clock-skew"

    def __init__(self) -> None:
        self._strobe: threading.Thread | None = None
        self._stop_strobe = threading.Event()
        self.touched: set[int] = set()
        self.strobes = 0

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        mode, victims = params["mode"], list(params["nodes"])
        specs: dict[str, str | None] = {}
        for i in victims:
            self.touched.add(i)
            if mode == "bump":
                specs[ctx.cluster.node(i).name] = ctx.cluster.set_clock(i, jump=params["bumps"][str(i)])
            elif mode == "rate":
                specs[ctx.cluster.node(i).name] = ctx.cluster.set_clock(i, rate=params["rates"][str(i)])
        if mode == "strobe":
            self._stop_strobe.clear()
            self._strobe = threading.Thread(
                target=self._run_strobe,
                args=(ctx, victims, params["delta"], params["period"]),
                name="clock-strobe",
                daemon=True,
            )
            self._strobe.start()
        return {**params, "specs": specs, "skews": ctx.cluster.skews()}

    def _run_strobe(self, ctx: Context, victims: list[int], delta: float, period: float) -> None:
        sign = 1.0
        while not self._stop_strobe.is_set():
            for i in victims:
                ctx.cluster.set_clock(i, jump=sign * delta)
            self.strobes += 1
            sign = -sign
            self._stop_strobe.wait(period)

    def stop(self, ctx: Context) -> dict[str, Any]:
        self._stop_strobe.set()
        if self._strobe is not None:
            self._strobe.join()
            self._strobe = None
        before = ctx.cluster.skews()
        for i in sorted(self.touched):
            ctx.cluster.set_clock(i, reset=True)
        self.touched.clear()
        return {"reset": True, "skews_before_reset": before, "strobes": self.strobes}


class SnapshotStorm(Nemesis):
    """Snapshots on every node every `period` seconds, and one follower wiped and restarted, so that it can
    only catch up by InstallSnapshot while snapshots keep replacing each other.

    A node keeps `jRaftSnapshotTrailingLogs` entries below its newest snapshot for lagging followers (the
    harness sets 100), which a short run may not have written yet; so before each wipe the nemesis writes
    that many plus `BURST_PAST_MARGIN` entries of its own (KV namespace `jepsen-storm`, never read by the
    workload) and snapshots every node: the leader's log then starts past index 1 and the wiped follower
    cannot catch up from it. The burst runs while the follower is down, so the
    fault window starts at the kill. `stop` reports, per wiped node, how many snapshots it installed from the
    leader (its log's "installed snapshot" lines since its restart)."""

    name = "snapshot-storm"
    BURST_PAST_MARGIN = 200
    NAMESPACE = "jepsen-storm"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self.taken = 0
        self.failed = 0
        self.written = 0
        self.burst_writes = 0
        self.first_index: int | None = None
        self.wiped: list[int] = []

    def _snapshot_all(self, ctx: Context) -> None:
        for node in ctx.cluster.nodes:
            if not ctx.cluster.alive(node.i) or node.paused:
                continue
            try:
                ctx.cluster.admin(node.i, "POST", "/api/v1/raft/snapshot", timeout=5.0)
                self.taken += 1
            except (httpx.HTTPError, DBError):
                self.failed += 1

    def _burst(self, ctx: Context, n: int, deadline: float) -> int:
        """Write n entries through the leader with a few concurrent clients; returns how many succeeded."""
        done = 0
        lock = threading.Lock()
        base = self.written

        found = ctx.cluster.leader()
        leader = [found.http if found else None]

        def writer(k: int) -> None:
            nonlocal done
            i = k
            while i < n and time.monotonic() < deadline:
                if leader[0] is None:
                    node = ctx.cluster.leader()
                    if node is None:
                        time.sleep(0.1)  # no leader yet; bounded by the deadline
                        continue
                    leader[0] = node.http
                url = f"http://{leader[0]}/api/v1/kv/{self.NAMESPACE}/b{base + i}"
                try:
                    if ctx.cluster.http.put(url, json={"value": "x" * 64}, timeout=3.0).json().get("code") == 0:
                        with lock:
                            done += 1
                        i += 8
                        continue
                except (httpx.HTTPError, ValueError):
                    pass
                leader[0] = None

        threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.written += n
        return done

    def _storm(self, ctx: Context, victim: int, period: float) -> None:
        try:
            n = ctx.cluster.opts.trailing_logs + self.BURST_PAST_MARGIN
            self.burst_writes += self._burst(ctx, n, time.monotonic() + 20.0)
            self._snapshot_all(ctx)  # compact the logs: the wiped follower cannot catch up from them
            leader = ctx.cluster.leader()
            st = ctx.cluster.status(leader.i) if leader else None
            self.first_index = st.get("firstLogIndex") if st else None
        finally:
            ctx.cluster.start(victim)
        while not self._halt.wait(period):
            self._snapshot_all(ctx)

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        """Kill and wipe a follower now; the storm thread then writes the burst, snapshots every node, restarts
        the follower (empty: it needs InstallSnapshot) and keeps snapshotting until stop."""
        leader = ctx.leader()
        followers = [i for i in ctx.nodes if i != leader]
        victim = followers[params["victim_rank"] % len(followers)]
        ctx.cluster.kill(victim)
        ctx.cluster.wipe(victim)
        self.wiped.append(victim)
        self.taken = self.failed = self.burst_writes = 0
        self.first_index = None
        self._halt.clear()
        self._thread = threading.Thread(
            target=self._storm, args=(ctx, victim, params["period"]), name="snapshot-storm", daemon=True
        )
        self._thread.start()
        return {
            **params,
            "leader": ctx.cluster.node(leader).name if leader else None,
            "wiped": ctx.cluster.node(victim).name,
        }

    def stop(self, ctx: Context) -> dict[str, Any]:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        installs: dict[str, int] = {}
        deadline = time.monotonic() + 10.0
        for i in self.wiped:  # the install may still be under way: give it a few seconds
            while (n := ctx.cluster.log_count(i, "installed snapshot")) == 0 and time.monotonic() < deadline:
                time.sleep(0.2)  # polling a node's log with a deadline
            installs[ctx.cluster.node(i).name] = n
        self.wiped = []
        return {
            "snapshots_taken": self.taken,
            "snapshots_failed": self.failed,
            "burst_writes": self.burst_writes,
            "leader_first_log_index": self.first_index,
            "installed_snapshots": installs,
        }


class Membership(Nemesis):
    """Membership changes through the leader's HTTP API (DELETE / POST /api/v1/raft/peers), one mode per fault:

    * `remove`: remove a node and add it back on stop. With `wipe` the removed node is also killed and wiped,
      and rejoins empty, as an operator replaces a server; without, it keeps running and rejoins with its log.
    * `add-new`: start two spare servers (brand-new: empty data directory, an id the group has never seen,
      named in no member's config file) and add them back to back; on stop remove them and retire them.
    * `shrink`: remove voters one at a time until the leader is the only voter; on stop add them all back.
    """

    name = "membership"

    def __init__(self) -> None:
        self.removed: list[tuple[int, bool]] = []
        self.joined: list[int] = []  # spares added by `add-new`, removed and retired on stop

    def start(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        mode = params.get("mode", "remove")
        if mode == "add-new":
            return {**params, **self._add_new(ctx)}
        if mode == "shrink":
            return {**params, **self._shrink(ctx)}
        i, wipe = params["node"], params["wipe"]
        node = ctx.cluster.node(i)
        ok, detail = change_membership(ctx, "remove", i)
        if ok:
            self.removed.append((i, wipe))
            if wipe:
                ctx.cluster.kill(i)
                ctx.cluster.wipe(i)
        return {**params, "removed": node.name if ok else None, "detail": detail}

    def _add_new(self, ctx: Context) -> dict[str, Any]:
        c = ctx.cluster
        spares = [n for n in c.nodes if n.spare][:2]
        leader = ctx.leader(wait=15.0)
        members = voters(ctx, leader) if leader is not None else None
        if not spares or leader is None or not members:
            return {"added": [], "detail": "no spare server" if not spares else "no leader"}
        for s in spares:
            c.join_spare(s.i, members)
            self.joined.append(s.i)
        added, failed = [], {}
        for s in spares:  # back to back: the second add starts as soon as the first one is committed
            ok, detail = change_membership(ctx, "add", s.i, wait=45.0)
            if ok:
                added.append(f"{s.name} ({s.raft})")
            else:
                failed[s.name] = detail
        out: dict[str, Any] = {"added": added, "failed": failed, "seeds": members}
        if not failed:
            out.update(self._lead_from_an_old_member(ctx, leader, spares))
        return out

    def _lead_from_an_old_member(self, ctx: Context, leader: int, spares: list[Node]) -> dict[str, Any]:
        """Hand leadership to a member whose config file names neither new server: it can only reach them
        through the addresses in their CONF entries. It must replicate to both, or the run is aborted."""
        c = ctx.cluster
        target = next((n for n in c.bootstrap if n.i != leader and c.alive(n.i)), None)
        if target is None:
            return {"transfer": "no other old member"}
        try:
            env = c.admin(leader, "POST", "/api/v1/raft/transfer-leader", {"to": target.raft}, timeout=10.0)
        except (httpx.HTTPError, DBError) as e:
            return {"transfer": f"to {target.name} failed: {e}"}
        if env.get("code") != 0:
            return {"transfer": f"to {target.name} refused: {env.get('remark')}"}
        deadline = time.monotonic() + 15.0
        rows: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                body = c.admin(target.i, "GET", "/api/v1/raft/peers", timeout=2.0).get("body") or {}
            except (httpx.HTTPError, DBError):
                body = {}
            rows = {p["id"]: p for p in body.get("peers", [])}
            if all(_replicating(rows.get(s.raft)) for s in spares):
                return {
                    "transfer": f"to {target.name}",
                    "reached": {s.name: rows[s.raft]["matchIndex"] for s in spares},
                }
            time.sleep(0.2)  # polling the new leader's view with a deadline
        raise NemesisAbort(
            f"{target.name} leads but never caught up the new servers {[s.name for s in spares]} (its view: {rows})"
        )

    def _shrink(self, ctx: Context) -> dict[str, Any]:
        leader = ctx.leader(wait=15.0)
        members = voters(ctx, leader) if leader is not None else None
        if leader is None or not members:
            return {"removed": [], "detail": "no leader"}
        keep = ctx.cluster.node(leader)
        removed, failed = [], {}
        for raft in members:
            node = ctx.cluster.by_raft_id(raft)
            if node is None or node is keep:
                continue
            ok, detail = change_membership(ctx, "remove", node.i)
            if ok:
                self.removed.append((node.i, False))
                removed.append(node.name)
            else:
                failed[node.name] = detail
        now = ctx.leader(wait=5.0)
        left = voters(ctx, now) if now is not None else None
        return {"kept": keep.name, "removed": removed, "failed": failed, "voters_left": left}

    def stop(self, ctx: Context) -> dict[str, Any]:
        added, failed = [], {}
        for i, wipe in self.removed:
            if wipe:
                ctx.cluster.start(i)
            ok, detail = change_membership(ctx, "add", i)
            if ok:
                added.append(ctx.cluster.node(i).name)
            else:
                failed[ctx.cluster.node(i).name] = detail
        self.removed = [(i, w) for i, w in self.removed if ctx.cluster.node(i).name in failed]
        retired = []
        for i in list(self.joined):
            name = ctx.cluster.node(i).name
            ok, detail = change_membership(ctx, "remove", i)
            if ok:
                ctx.cluster.retire(i)
                self.joined.remove(i)
                retired.append(name)
            else:
                failed[name] = detail
        return {"added": added, "retired": retired, "failed": failed}


def _replicating(row: dict[str, Any] | None) -> bool:
    """A leader's /raft/peers row of a member it replicates to: heard within an election timeout, a few entries
    behind at most (writes go on meanwhile)."""
    if not row or row.get("matchIndex") is None or row.get("lastContactMs") is None:
        return False
    return row["matchIndex"] > 0 and row["lastContactMs"] <= 1000 and row["lagEntries"] <= 100


def voters(ctx: Context, leader: int) -> list[str] | None:
    st = ctx.cluster.status(leader)
    if st is None:
        return None
    return [p["id"] for p in st.get("peers", []) if p.get("voter")]


def change_membership(ctx: Context, op: str, i: int, wait: float = 15.0) -> tuple[bool, str]:
    """Remove or add node i through the current leader, retrying until `wait` runs out. (done, detail)."""
    node = ctx.cluster.node(i)
    deadline = time.monotonic() + wait
    detail = "no leader"
    while time.monotonic() < deadline:
        leader = ctx.leader(wait=max(0.0, min(5.0, deadline - time.monotonic())))
        if leader is None:
            detail = "no leader"
            continue
        vs = voters(ctx, leader)
        if vs is not None and ((op == "remove" and node.raft not in vs) or (op == "add" and node.raft in vs)):
            return (
                True,
                f"{node.raft} {'is not' if op == 'remove' else 'is'} a voter (leader {ctx.cluster.node(leader).name})",
            )
        try:
            if op == "remove":
                env = ctx.cluster.admin(leader, "DELETE", f"/api/v1/raft/peers/{node.raft}", timeout=10.0)
            else:
                env = ctx.cluster.admin(
                    leader,
                    "POST",
                    "/api/v1/raft/peers",
                    {
                        "id": node.raft,
                        "raftAddress": node.raft,
                        "httpAddress": node.http,
                        "remotingAddress": remoting_of(node.http),
                    },
                    timeout=min(30.0, max(1.0, deadline - time.monotonic())),
                )
            if env.get("code") == 0:
                return True, f"{op} of {node.raft} committed by {ctx.cluster.node(leader).name}"
            detail = f"code {env.get('code')} {env.get('remark')}"
        except (httpx.HTTPError, DBError) as e:
            detail = str(e)
        time.sleep(0.5)  # retry pacing against a busy or changing leader
    return False, detail


def make_nemesis(name: str) -> Nemesis:
    if name in PARTITIONS:
        return Partition(name)
    return {
        "isolate-leader": IsolateLeader,
        "kill-random-processes": lambda: Kill(crash=False),
        "crash-random-nodes": lambda: Kill(crash=True),
        "hammer-time": lambda: Pause(leader=False),
        "pause-leader": lambda: Pause(leader=True),
        "pause-isolated-leader": PauseIsolatedLeader,
        "clock-skew": ClockSkew,
        "snapshot-storm": SnapshotStorm,
        "membership": Membership,
    }[name]()


class Runner:
    """Plays a schedule in a thread against the run's clock; `finish()` heals everything."""

    def __init__(self, ctx: Context, nemesis: Nemesis, steps: list[Step], t0: float) -> None:
        self.ctx = ctx
        self.nemesis = nemesis
        self.steps = steps
        self.t0 = t0  # time.monotonic() of the workload's start
        self.active = False
        self.error: BaseException | None = None
        self.error_text: str | None = None
        self.applied = 0
        self.halt = threading.Event()
        self.failed = threading.Event()  # set when the run must abort
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            for step in self.steps:
                if self.halt.wait(max(0.0, self.t0 + step.at - time.monotonic())):
                    return
                with self._lock:
                    if self.halt.is_set():
                        return
                    self._do(step)
        except BaseException as e:  # noqa: BLE001 - reported by the run
            self.error = e
            self.error_text = "".join(traceback.format_exception(e))
            self.ctx.log(f"nemesis: {e}")
            self.failed.set()

    def _do(self, step: Step) -> None:
        name = self.nemesis.name
        if step.f == "start":
            value = self.nemesis.start(self.ctx, step.params)
            self.active = True
            self.applied += 1
            self.ctx.recorder.nemesis("start", {"nemesis": name, **value})
            self.ctx.log(f"nemesis start {name}: {_short(value)}")
        else:
            value = self.nemesis.stop(self.ctx)
            self.active = False
            self.ctx.recorder.nemesis("stop", {"nemesis": name, **value})
            self.ctx.log(f"nemesis stop {name}: {_short(value)}")
        if self.nemesis.network:
            self.ctx.probe(f"{step.f} of {name}")

    def abandon(self) -> None:
        """Stop the schedule without healing, when the run is being torn down (Ctrl-C, an abort): the thread
        is gone before the nodes and the network are, so no fault lands on a namespace being removed."""
        self.halt.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=120)

    def finish(self) -> dict[str, Any]:
        """Stop the schedule and heal everything. Returns what the final heal found and did."""
        self.halt.set()
        self._thread.join(timeout=120)
        with self._lock:
            out: dict[str, Any] = {}
            if self.active:
                try:
                    value = self.nemesis.stop(self.ctx)
                    self.ctx.recorder.nemesis("stop", {"nemesis": self.nemesis.name, "final": True, **value})
                except Exception as e:  # noqa: BLE001 - heal_all below still runs
                    out["stop_error"] = f"{type(e).__name__}: {e}"
                self.active = False
            out.update(heal_all(self.ctx))
            return out


def heal_all(ctx: Context) -> dict[str, Any]:
    """Whatever any nemesis did, undo it: network, paused and dead processes, clocks, membership."""
    c = ctx.cluster
    done: dict[str, Any] = {}
    ctx.net.heal()
    resumed = [n.name for n in c.nodes if n.paused and c.resume(n.i)]
    started = []
    for n in c.members():  # spares stay down unless a nemesis joined them
        if not c.alive(n.i):
            c.start(n.i)
            started.append(n.name)
    if c.opts.faketime:
        for n in c.nodes:
            c.set_clock(n.i, reset=True)
    done.update(resumed=resumed, restarted=started)
    leader = ctx.leader(wait=15.0)
    if leader is not None:
        vs = voters(ctx, leader) or []
        missing = [n.i for n in c.members() if n.raft not in vs]
        readded = {}
        for i in missing:
            ok, detail = change_membership(ctx, "add", i, wait=30.0)
            readded[c.node(i).name] = detail if not ok else "added"
        if readded:
            done["readded"] = readded
    else:
        done["leader"] = None
    ctx.recorder.nemesis("heal", {"nemesis": "final-heal", **done})
    done["probe"] = ctx.probe("the final heal")["ok"]
    return done


def _short(value: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in value.items() if k != "grudge")
    return text if len(text) < 200 else text[:197] + "..."

"""python -m tools.bench.failover_rocketmq [--kills N] [--no-freeze] [--json FILE] [--dir D] [--keep]

Failover with REAL RocketMQ brokers (cli/rocketmq.py) against our 3-node controller group (tools/cluster.py),
on loopback: one broker set `broker-a` of three RocketMQ brokers in controller mode (controllerHeartBeatTimeoutMills
4000, brokerHeartbeatInterval 1000, syncControllerMetadataPeriod 2000), our scanNotActiveBrokerInterval 1000.

* broker kill (N rounds): kill -9 the master; seconds from the kill until our leader's /ui/api/state shows a
  master at a higher epoch (polled every 50 ms); the killed broker is started again and the set waited for
  (a master and 3 alive in-sync replicas) before the next round;
* broker freeze (N rounds, unless --no-freeze): SIGSTOP the master, the same time to a new master, SIGCONT, the
  thawed broker waited for as a slave back in the SyncStateSet;
* controller failover (N rounds): kill -9 our raft leader while the brokers heartbeat; (a) seconds until every
  live node names the same new leader, (b) seconds until every broker's last heartbeat, as the new leader
  shows it, is later than the kill, (c) the largest heartbeat gap (ms) of each broker over the failover
  (the leader's view sampled every 50 ms), and whether any master was re-elected (it must not be: "spurious");
  the killed node is started again and the group waited ready before the next round.

Every wait has a deadline; a round that takes longer than --round-timeout seconds aborts the run with a
message naming it. Every process is stopped however the run ends. The machine may be shared: the load
averages at start and end, and the 1-minute one before each round, are in the JSON."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from cli import rocketmq
from cli.rocketmq import Broker, Deployment, ha_race_stuck, port_triples, store_marks
from tools.cluster import ControllerdCluster

T = TypeVar("T")

HB_TIMEOUT_MS = 4000  # the brokers' controllerHeartBeatTimeoutMills
SCAN_MS = 1000  # our scanNotActiveBrokerInterval
# The brokers' syncControllerMetadataPeriod: 1000 as tests/interop/test_interop.py, whose comment says why (with
# 2000 a broker's heartbeat gap across a controller failover reached 4.7 s on a busy 2-core machine, past the 4 s
# timeout: a correct controller then re-elects a master that was only late, which the smoke counts as spurious)
META_SYNC_MS = 1000
ELECTION_MS = 1000  # our jRaftElectionTimeoutMs
SET = "broker-a"
PERIOD = 0.05  # poll period of every timed wait
BUDGET_S = (HB_TIMEOUT_MS + SCAN_MS) / 1000 + 1  # what a broker election should stay under


class RoundTimeout(Exception):
    pass


class Round:
    """The deadline of one round: every wait in it gets what is left."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RoundTimeout(f"{self.what}: round exceeded {self.seconds:.0f}s")
        return left


def poll(what: str, check: Callable[[], T | None], rnd: Round, period: float = PERIOD) -> T:
    """`check()` every `period` seconds until it returns a value (not None/False) within what is left of the
    round; errors count as not yet."""
    try:
        return rocketmq.wait_until(what, check, rnd.deadline - time.monotonic(), period)
    except AssertionError as e:
        raise RoundTimeout(f"{rnd.what}: {e}") from None


def settle_past_ha_race(
    settled: Callable[[Round], T],
    brokers: list[Broker],
    victim: Broker,
    marks: dict[str, int],
    rnd: Round,
    sample: dict[str, Any],
) -> T:
    """`settled(...)` within 45 s of the round; past that, a slave caught in RocketMQ's HA race (cli/rocketmq.py
    ha_race_stuck) is restarted, named in `sample`, and the set waited for again within what is left."""
    try:
        return settled(Round(f"{rnd.what}: settle", min(45.0, rnd.left())))
    except RoundTimeout:
        stuck = ha_race_stuck(brokers, victim, marks)
        if not stuck:
            raise
        sample["ha_race_restarts"] = [b.name for b in stuck]
        for b in stuck:
            b.stop()
            b.start()
            b.wait_line(r"The broker\[.*boot success", rnd.left())
        return settled(rnd)


def record_abort(out: dict[str, Any], samples: list[dict[str, Any]], e: BaseException, who: str = "") -> None:
    """A round that missed its deadline ends the run: what it measured (the exception's `partial_sample`) is
    kept, and `out["aborted"]` says why."""
    partial = getattr(e, "partial_sample", None)
    if partial is not None:
        samples.append(partial)
    out["aborted"] = str(e)
    print(f"{who}ABORTED: {e}", file=sys.stderr)


class Ours:
    """Our group through its HTTP API (one client per thread)."""

    def __init__(self, cluster: ControllerdCluster) -> None:
        self.cluster = cluster
        self.local = threading.local()

    @property
    def client(self) -> httpx.Client:
        c = getattr(self.local, "client", None)
        if c is None:
            c = self.local.client = httpx.Client(timeout=2)
        return c

    def live(self) -> list[int]:
        return [i for i, p in self.cluster.procs.items() if p.poll() is None]

    def leader_ids(self) -> dict[int, str | None]:
        out: dict[int, str | None] = {}
        for i in self.live():
            try:
                out[i] = self.client.get(self.cluster.url(i, "/api/v1/raft/status")).json()["body"].get("leaderId")
            except (httpx.HTTPError, ValueError, KeyError):
                out[i] = None
        return out

    def leader(self) -> int | None:
        """The index of a live leader some live node names, None if none."""
        for lid in self.leader_ids().values():
            if lid:
                j = self.cluster.index_of(lid)
                if self.cluster.procs[j].poll() is None:
                    return j
        return None

    def agreed_leader(self) -> int | None:
        """The leader every live node names (and that is live), None until they agree."""
        ids = set(self.leader_ids().values())
        if len(ids) != 1 or None in ids:
            return None
        j = self.cluster.index_of(str(ids.pop()))
        return j if self.cluster.procs[j].poll() is None else None

    def state(self) -> dict[str, Any] | None:
        i = self.leader()
        if i is None:
            return None
        r = self.client.get(self.cluster.url(i, "/ui/api/state")).json()
        return r if r.get("view") == "leader" else None

    def broker_set(self, name: str = SET) -> dict[str, Any] | None:
        st = self.state()
        if st is None:
            return None
        return next((s for s in st["brokerSets"] if s["brokerName"] == name), None)

    def settled(self, rnd: Round, size: int = 3) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            s = self.broker_set()
            return s if rocketmq.settled(s, size) else None

        return poll(f"{SET}: a master and {size} alive in-sync replicas", check, rnd, 0.2)

    def new_master(self, epoch: int, old_id: int, rnd: Round) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            s = self.broker_set()
            if s is None or s["masterBrokerId"] is None or s["masterEpoch"] <= epoch:
                return None
            return s

        s = poll(f"{SET}: a new master after epoch {epoch}", check, rnd)
        if s["masterBrokerId"] == old_id:
            raise AssertionError(f"{SET}: the old master {old_id} was re-elected at epoch {s['masterEpoch']}")
        return s


class HeartbeatWatch:
    """Samples the leader's view of each broker's last heartbeat (generatedAt - lastHeartbeatMsAgo) every 50 ms;
    the largest gap between two successive heartbeat timestamps of each broker."""

    def __init__(self, ours: Ours) -> None:
        self.ours = ours
        self.last: dict[int, float] = {}
        self.gap: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.wait(PERIOD):
            try:
                st = self.ours.state()
            except Exception:  # noqa: BLE001  # no leader during the failover: nothing to sample
                continue
            if st is None:
                continue
            now_ms = st["generatedAt"] * 1000
            for s in st["brokerSets"]:
                if s["brokerName"] != SET:
                    continue
                for r in s["replicas"]:
                    if r["lastHeartbeatMsAgo"] is None:
                        continue
                    key, at = r["brokerId"], now_ms - r["lastHeartbeatMsAgo"]
                    prev = self.last.get(key)
                    if prev is not None and at > prev + 1:
                        self.gap[key] = max(self.gap.get(key, 0.0), at - prev)
                    self.last[key] = at if prev is None else max(prev, at)

    def stop(self) -> dict[int, float]:
        self.done.set()
        self.thread.join(10)
        return dict(self.gap)


def load1() -> float:
    return os.getloadavg()[0]


def broker_of(brokers: list[Broker], broker_id: int) -> Broker:
    return next(b for b in brokers if b.identity() == broker_id)


def broker_round(ours: Ours, brokers: list[Broker], how: str, k: int, round_s: float) -> dict[str, Any]:
    rnd = Round(f"broker {how} round {k}", round_s)
    s = ours.settled(rnd)
    victim = broker_of(brokers, s["masterBrokerId"])
    old_id, epoch = s["masterBrokerId"], s["masterEpoch"]
    load = load1()
    mark = victim.log_mark()
    marks = store_marks(brokers)
    t0 = time.monotonic()
    if how == "kill":
        victim.kill()
    else:
        victim.pause()
    try:
        new = ours.new_master(epoch, old_id, rnd)
        took = time.monotonic() - t0
    finally:
        if how == "freeze":
            victim.resume()
    t1 = time.monotonic()
    sample: dict[str, Any] = {
        "kind": f"broker_{how}",
        "round": k,
        "load1": load,
        "old_master": old_id,
        "old_epoch": epoch,
        "new_master": new["masterBrokerId"],
        "new_epoch": new["masterEpoch"],
        "new_master_elected": new["masterBrokerId"] != old_id and new["masterEpoch"] > epoch,
        "election_s": round(took, 4),
        "over_budget": took > BUDGET_S,
        "settled": False,
    }
    try:
        if how == "kill":
            victim.start()
            victim.wait_line(r"The broker\[.*boot success", rnd.left())
        else:  # it learns the newer epoch and turns slave
            victim.wait_log(r"Change broker \[id:\d+\].* to SLAVE", mark, rnd.left())
        back = settle_past_ha_race(ours.settled, brokers, victim, marks, rnd, sample)
        if back["masterBrokerId"] != new["masterBrokerId"]:
            raise AssertionError(f"{SET}: master changed again while {victim.name} came back: {back}")
    except (RoundTimeout, AssertionError) as e:
        setattr(e, "partial_sample", sample)  # noqa: B010  # the election was measured: keep it
        raise
    sample["settled"] = True
    sample["settle_s"] = round(time.monotonic() - t1, 2)
    return sample


def controller_round(ours: Ours, k: int, round_s: float) -> dict[str, Any]:
    cluster = ours.cluster
    rnd = Round(f"controller round {k}", round_s)
    before = ours.settled(rnd)
    watch = HeartbeatWatch(ours)
    try:
        poll("heartbeats sampled", lambda: len(watch.last) >= 3, rnd)
        old = poll("a leader", ours.leader, rnd)
        load = load1()
        t_kill = time.time()
        t0 = time.monotonic()
        cluster.kill(old)
        new = poll("a new leader all live nodes agree on", lambda: (j := ours.agreed_leader()) != old and j, rnd)
        elected_s = time.monotonic() - t0
        assert isinstance(new, int)

        def all_heard() -> bool:
            st = ours.state()
            if st is None:
                return False
            now_ms = st["generatedAt"] * 1000
            s = next((x for x in st["brokerSets"] if x["brokerName"] == SET), None)
            rows = s["replicas"] if s else []
            return len(rows) == 3 and all(
                r["lastHeartbeatMsAgo"] is not None and now_ms - r["lastHeartbeatMsAgo"] > t_kill * 1000 for r in rows
            )

        poll("every broker heartbeats to the new leader", all_heard, rnd)
        heard_s = time.monotonic() - t0
        # a few scan rounds on the new leader: nothing may expire, no master be re-elected
        changes: list[dict[str, Any]] = []
        end = time.monotonic() + 3 * SCAN_MS / 1000 + 1
        while time.monotonic() < end:
            rnd.left()
            s = ours.broker_set()
            if s is not None and (
                s["masterBrokerId"] != before["masterBrokerId"] or s["masterEpoch"] != before["masterEpoch"]
            ):
                changes.append(s)
            time.sleep(0.2)
    finally:
        gaps = watch.stop()
    spurious = 1 if changes else 0
    cluster.start(old)
    cluster.wait_ready(timeout=rnd.left())
    return {
        "kind": "controller_kill",
        "round": k,
        "load1": load,
        "old_leader": old,
        "new_leader": new,
        "leader_elected_s": round(elected_s, 4),
        "all_brokers_heard_s": round(heard_s, 4),
        "max_heartbeat_gap_ms": {str(b): round(g) for b, g in sorted(gaps.items())},
        "max_heartbeat_gap_ms_any": round(max(gaps.values(), default=0.0)),
        "master_epoch_before": before["masterEpoch"],
        "spurious_reelections": spurious,
        "changes": changes[:1],
    }


def summarize(name: str, unit: str, values: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "unit": unit,
        "runs": len(values),
        "p50": statistics.median(values) if values else None,
        "max": max(values) if values else None,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"

    table = [(r["name"], str(r["runs"]), f(r["p50"]), f(r["max"]), r["unit"]) for r in rows]
    head = ("figure", "runs", "p50", "max", "unit")
    widths = [max(len(h), *(len(t[k]) for t in table)) for k, h in enumerate(head)]
    print("  ".join(f"{h:<{w}}" if k == 0 else f"{h:>{w}}" for k, (h, w) in enumerate(zip(head, widths, strict=True))))
    for t in table:
        print("  ".join(f"{c:<{w}}" if k == 0 else f"{c:>{w}}" for k, (c, w) in enumerate(zip(t, widths, strict=True))))


def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    rocketmq.require()
    settings = {
        "kills": args.kills,
        "freeze": args.freeze,
        "round_timeout_s": args.round_timeout,
        "controllerHeartBeatTimeoutMills": HB_TIMEOUT_MS,
        "scanNotActiveBrokerInterval": SCAN_MS,
        "syncControllerMetadataPeriod": META_SYNC_MS,
        "brokerHeartbeatInterval": 1000,
        "jRaftElectionTimeoutMs": ELECTION_MS,
        "poll_period_s": PERIOD,
        "broker_election_budget_s": BUDGET_S,
        "brokers": 3,
        "controllers": 3,
    }
    out: dict[str, Any] = {
        "benchmark": "failover_rocketmq",
        "rocketmq_version": rocketmq.version(),
        "loadavg_start": list(os.getloadavg()),
        "settings": settings,
        "samples": [],
    }
    cluster = ControllerdCluster(
        os.path.join(root, "ours"), election_ms=ELECTION_MS, extra=f"scanNotActiveBrokerInterval={SCAN_MS}\n"
    )
    ours = Ours(cluster)
    samples: list[dict[str, Any]] = out["samples"]
    try:
        with Deployment(os.path.join(root, "rmq")) as rmq:
            t = time.monotonic()
            cluster.start_all()
            cluster.wait_ready()
            rmq.namesrv()
            ports = port_triples(3)
            brokers = [
                rmq.broker(SET, ports[i], cluster.remotings, index=i, syncControllerMetadataPeriod=META_SYNC_MS)
                for i in range(3)
            ]
            for b in brokers:
                b.start()
            for b in brokers:
                b.wait_line(r"The broker\[.*boot success", 180)
            ours.settled(Round("start-up", 180))
            out["startup_s"] = round(time.monotonic() - t, 1)
            print(f"started in {out['startup_s']}s; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
            kinds = ["kill", "freeze"] if args.freeze else ["kill"]
            for how in kinds:
                for k in range(args.kills):
                    r = broker_round(ours, brokers, how, k, args.round_timeout)
                    samples.append(r)
                    print(f"broker {how} {k}: new master in {r['election_s']:.2f}s", file=sys.stderr)
            for k in range(args.kills):
                r = controller_round(ours, k, args.round_timeout)
                samples.append(r)
                print(
                    f"controller kill {k}: leader {r['leader_elected_s']:.2f}s, brokers heard "
                    f"{r['all_brokers_heard_s']:.2f}s, gap {r['max_heartbeat_gap_ms_any']} ms, "
                    f"spurious {r['spurious_reelections']}",
                    file=sys.stderr,
                )
    except (RoundTimeout, AssertionError) as e:
        record_abort(out, samples, e)
    finally:
        cluster.stop_all()
        out["loadavg_end"] = list(os.getloadavg())
    return out


def rows_of(out: dict[str, Any]) -> list[dict[str, Any]]:
    s = out["samples"]
    rows = []
    for how in ("kill", "freeze"):
        v = [x["election_s"] for x in s if x["kind"] == f"broker_{how}"]
        if v:
            rows.append(summarize(f"broker {how}: new master", "s", v))
    c = [x for x in s if x["kind"] == "controller_kill"]
    if c:
        rows.append(summarize("controller kill: new leader agreed", "s", [x["leader_elected_s"] for x in c]))
        rows.append(summarize("controller kill: all brokers heard", "s", [x["all_brokers_heard_s"] for x in c]))
        rows.append(
            summarize("controller kill: max heartbeat gap", "ms", [float(x["max_heartbeat_gap_ms_any"]) for x in c])
        )
        rows.append(
            {
                "name": "controller kill: spurious re-elections",
                "unit": "count",
                "runs": len(c),
                "p50": None,
                "max": float(sum(x["spurious_reelections"] for x in c)),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench.failover_rocketmq",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kills", type=int, default=10, help="rounds of each kind (default 10)")
    p.add_argument("--freeze", action=argparse.BooleanOptionalAction, default=True, help="also SIGSTOP rounds")
    p.add_argument("--json", dest="json_path", help="write every sample as JSON here")
    p.add_argument("--round-timeout", type=float, default=120, help="abort when a round takes longer (s)")
    p.add_argument("--dir", help="work here (default: a temp dir, removed at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the logs and stores")
    args = p.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="failover-rocketmq-")
    try:
        out = run(args, root)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    rows = rows_of(out)
    out["summary"] = rows
    print(f"RocketMQ {out['rocketmq_version']} brokers against our controller; ", end="")
    print(f"load average start {out['loadavg_start']} end {out['loadavg_end']}")
    print_table(rows)
    over = [x for x in out["samples"] if x.get("over_budget")]
    if over:
        print(f"{len(over)} broker election(s) over {BUDGET_S:.0f}s (heartbeat timeout + scan + 1 s)")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(out, f, indent=1)
    if "aborted" in out:
        print(f"aborted: {out['aborted']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m tools.bench.broker_failover_peers [--systems ours,jraft,dledger] [--kills N] [--json FILE] [--dir D]
                                             [--keep]

Broker failover with REAL RocketMQ brokers (issue 25, row "broker failover"), the same for three controller
groups, one after the other, never two at once: ours (`controllerd`, tools/cluster.py), RocketMQ's
JRaftController (`controllerType=jRaft`) and its DLedgerController (`controllerType=DLedger`), each 3 nodes on
loopback (cli/rocketmq.py; RocketMQ's with the peers' heap, HEAP["peer"]).

Per system: a NameServer, one broker set `broker-a` of three RocketMQ brokers in controller mode
(controllerHeartBeatTimeoutMills 4000, brokerHeartbeatInterval 1000, syncControllerMetadataPeriod 2000,
allAckInSyncStateSet; no controller fails over here, so the metadata period that tools/bench/failover_rocketmq.py
shortened to 1000 does not matter), the same scanNotActiveBrokerInterval (1000)
given to every controller group, and interop.Producer sending one message every 100 ms to a topic on that set
(its `timeline` mode: a stdout line per send with its start and end, wall clock). Per kill: kill -9 the master
and measure, from the kill,

* (a) `master_s`: until the controller leader's GET_REPLICA_INFO (1004, RocketMQ remoting, polled every 50 ms:
  the same request for every system, never our HTTP API) names a former slave as master at a higher epoch;
* (b) `route_s`: until the NameServer's route of the topic (GET_ROUTEINFO_BY_TOPIC 105, polled every 50 ms with
  (a)) names another broker than the killed one as broker 0 of the set: the new master has registered, and the
  producer can learn it;
* (c) `send_s`: until the end of the producer's first acknowledged send that started after the kill. The producer
  asks the NameServer for routes every second (`pollNameServerInterval` 1000), so (c) is (b) plus a wait of 0-1 s
  that depends only on where the producer's timer was at the kill, plus the send;

then start the killed broker again and wait until the set is whole (1004: a master and a SyncStateSet of 3)
before the next kill. Every wait has a deadline; every process is stopped however the run ends.

The bound checked is on (a): `controllerHeartBeatTimeoutMills + scanNotActiveBrokerInterval + 1 s` (6 s), the
latest a controller may elect when it learns of the death only by the heartbeats stopping: the last heartbeat
came at most one interval before the kill, it expires 4 s after it, the next scan finds it within one scan
interval, and the election is one log entry. A kill -9 also closes the broker's connections, which every
controller here may act on sooner (close-channel); the bound holds whichever path it takes."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient
from cli import rocketmq
from cli.rocketmq import Broker, Deployment, port_triples, store_marks
from statemachine import codes as C
from tools.bench.failover_rocketmq import Round, RoundTimeout, poll, record_abort, settle_past_ha_race
from tools.cluster import ControllerdCluster

SYSTEMS = ("ours", "jraft", "dledger")
HB_TIMEOUT_MS = 4000  # the brokers' controllerHeartBeatTimeoutMills (sent in every 904)
HEARTBEAT_MS = 1000  # the brokers' brokerHeartbeatInterval
META_SYNC_MS = 2000  # the brokers' syncControllerMetadataPeriod
SCAN_MS = 1000  # scanNotActiveBrokerInterval, the same for every controller group
ELECTION_MS = 1000  # jRaftElectionTimeoutMs of ours and of RocketMQ's JRaftController
MARGIN_S = 1.0
BOUND_S = (HB_TIMEOUT_MS + SCAN_MS) / 1000 + MARGIN_S
BOUND_NAME = "controllerHeartBeatTimeoutMills + scanNotActiveBrokerInterval + 1 s"
SEND_EVERY_MS = 100  # the producer's cadence
BROKERS = 3
SET = "broker-a"
TOPIC = "BrokerFailover"
GET_ROUTEINFO_BY_TOPIC = 105  # RocketMQ's RequestCode, answered by the NameServer
PERIOD = 0.05  # poll period of the timed waits
ROUND_S = 150.0  # a kill round's deadline (kill, election, restart, settle)
STARTUP_S = 240.0


# ---- pure parts (tests/tools/test_broker_failover_peers.py) -------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) of `values`, linearly interpolated between the closest ranks (numpy's default
    'linear'); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Send:
    """One line of interop.Producer's timeline mode."""

    ok: bool
    start_ms: int
    end_ms: int
    seq: int
    detail: str


SEND_LINE = re.compile(r"^send (ok|fail) (\d+) (\d+) (\d+) ?(.*)$")


def parse_send(line: str) -> Send | None:
    """`send ok START END seq brokerName queueId queueOffset` or `send fail START END seq reason`; None for any
    other line."""
    m = SEND_LINE.match(line.strip())
    if m is None:
        return None
    return Send(m.group(1) == "ok", int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5))


def route_master(body: bytes, broker_name: str) -> str | None:
    """Broker 0's address of `broker_name` in a TopicRouteData body, None when it has none. The NameServer writes
    the map's Long keys bare (`"brokerAddrs":{0:"127.0.0.1:10911"}`), which is not JSON: they are quoted first."""
    text = re.sub(r'([{,])(-?\d+):"', r'\1"\2":"', body.decode())
    for data in json.loads(text).get("brokerDatas") or ():
        if data.get("brokerName") == broker_name:
            addr = (data.get("brokerAddrs") or {}).get("0")
            return addr if isinstance(addr, str) else None
    return None


def first_ok_after(sends: list[Send], t_ms: int) -> tuple[Send | None, int]:
    """The first acknowledged send that started at or after `t_ms`, and how many sends that started then failed
    before it (all of them when none succeeded)."""
    failed = 0
    for s in sends:
        if s.start_ms < t_ms:
            continue
        if s.ok:
            return s, failed
        failed += 1
    return None, failed


def bound_check(master_s: list[float], bound_s: float = BOUND_S) -> dict[str, Any]:
    """Whether every time to a new master stayed within `bound_s`."""
    over = [round(x, 3) for x in master_s if x > bound_s]
    return {"name": BOUND_NAME, "seconds": bound_s, "held": bool(master_s) and not over, "over": over}


def summary(values: list[float]) -> dict[str, Any]:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return {
        "runs": len(values),
        "p50": None if p50 is None else round(p50, 3),
        "p99": None if p99 is None else round(p99, 3),
        "max": round(max(values), 3) if values else None,
    }


# ---- the controller leader through RocketMQ remoting --------------------------------------------------------


@dataclass(frozen=True)
class ReplicaInfo:
    master_id: int | None
    master_addr: str | None
    epoch: int
    sync_state_set: tuple[int, ...]


def replica_info_of(resp_code: int, ext: dict[str, str], body: bytes | None) -> ReplicaInfo | None:
    """A 1004 answer as ReplicaInfo; None when it is no SUCCESS."""
    if resp_code != C.SUCCESS:
        return None
    mid = ext.get("masterBrokerId")
    master = int(mid) if mid not in (None, "", "-1") else None
    ids: tuple[int, ...] = ()
    if body:
        ids = tuple(sorted(int(x) for x in json.loads(body).get("syncStateSet") or ()))
    return ReplicaInfo(master, ext.get("masterAddress") or None, int(ext.get("masterEpoch") or 0), ids)


class Probe:
    """Asks the controller leader, as mqadmin -a LEADER does: the leader found with 1005 (isLeader), then 1004
    to it; one connection per controller address, JSON serialization as a Java client's default. Its own event
    loop, called from one thread."""

    def __init__(self, remotings: list[str]) -> None:
        self.remotings = remotings
        self.loop = asyncio.new_event_loop()
        self.conns: dict[str, RemotingClient] = {}
        self.leader = ""

    async def _ask(self, addr: str, code: int, ext: dict[str, str] | None = None) -> Any:
        c = self.conns.get(addr)
        if c is None or c.closed.done():
            host, port = addr.rsplit(":", 1)
            c = self.conns[addr] = await asyncio.wait_for(RemotingClient.connect(host, int(port), codec.JSON), 1)
        try:
            return await c.request(code, ext, timeout=1.5)
        except (TimeoutError, OSError, ConnectionError):
            c.close()
            self.conns.pop(addr, None)
            raise

    async def _replica_info(self) -> ReplicaInfo | None:
        if not self.leader:
            for a in self.remotings:
                try:
                    r = await self._ask(a, H.GET_METADATA_INFO)
                except (TimeoutError, OSError, ConnectionError):
                    continue
                if r.ext_fields.get("isLeader") == "true":
                    self.leader = a
                    break
            else:
                return None
        try:
            r = await self._ask(self.leader, C.GET_REPLICA_INFO, {"brokerName": SET})
        except (TimeoutError, OSError, ConnectionError):
            self.leader = ""
            return None
        if r.code == C.CONTROLLER_NOT_LEADER:
            self.leader = ""
            return None
        return replica_info_of(r.code, r.ext_fields, r.body)

    async def _route_master(self, namesrv: str) -> str | None:
        try:
            r = await self._ask(namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        except (TimeoutError, OSError, ConnectionError):
            return None
        return route_master(r.body, SET) if r.code == 0 and r.body else None

    def route_master(self, namesrv: str) -> str | None:
        """The address the NameServer gives as broker 0 (the master) of the set in the topic's route; None when it
        gives none or does not answer."""
        return self.loop.run_until_complete(self._route_master(namesrv))

    def replica_info(self) -> ReplicaInfo | None:
        """The leader's 1004 of the set; None while there is no leader or it does not answer."""
        return self.loop.run_until_complete(self._replica_info())

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


# ---- the run --------------------------------------------------------------------------------------------------


@contextmanager
def controllers(system: str, root: str, rmq: Deployment) -> Iterator[list[str]]:
    """A running 3-node controller group of `system`: its remoting addresses (the brokers' controllerAddr)."""
    if system == "ours":
        cluster = ControllerdCluster(
            os.path.join(root, "ours"), election_ms=ELECTION_MS, extra=f"scanNotActiveBrokerInterval={SCAN_MS}\n"
        )
        try:
            cluster.start_all()
            cluster.wait_ready(timeout=120)
            yield cluster.remotings
        finally:
            cluster.stop_all()
        return
    if system == "jraft":
        g: rocketmq.JRaftControllers | rocketmq.DLedgerControllers = rmq.jraft_controllers(
            3, election_ms=ELECTION_MS, kind="peer", scanNotActiveBrokerInterval=SCAN_MS
        )
    elif system == "dledger":
        g = rmq.dledger_controllers(3, kind="peer", scanNotActiveBrokerInterval=SCAN_MS)
    else:
        raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")
    g.start()
    yield g.remotings  # Deployment stops them


def whole(info: ReplicaInfo | None, brokers: list[Broker]) -> ReplicaInfo | None:
    """The set's 1004 when it is whole: a master that runs, every broker running, all in the SyncStateSet."""
    if info is None or info.master_id is None or len(info.sync_state_set) != len(brokers):
        return None
    if not all(b.running() for b in brokers) or info.master_id not in info.sync_state_set:
        return None
    return info if any(b.identity() == info.master_id for b in brokers) else None


class Run:
    def __init__(self, probe: Probe, brokers: list[Broker], producer: rocketmq.JavaProcess, namesrv: str) -> None:
        self.probe, self.brokers, self.producer, self.namesrv = probe, brokers, producer, namesrv
        self._sends: list[Send] = []
        self._read = 0  # producer lines parsed so far

    def sends(self) -> list[Send]:
        """The producer's sends so far (its stdout lines parsed once each)."""
        lines = self.producer.lines[self._read :]
        self._read += len(lines)
        self._sends += [s for line in lines if (s := parse_send(line)) is not None]
        return self._sends

    def settled(self, rnd: Round) -> ReplicaInfo:
        return poll(
            f"{SET}: a master and {len(self.brokers)} in sync",
            lambda: whole(self.probe.replica_info(), self.brokers),
            rnd,
            0.2,
        )

    def kill_round(self, k: int) -> dict[str, Any]:
        rnd = Round(f"kill {k}", ROUND_S)
        before = self.settled(rnd)
        t_ok = int(time.time() * 1000)
        poll("the producer sends", lambda: first_ok_after(self.sends(), t_ok)[0], rnd)
        victim = next(b for b in self.brokers if b.identity() == before.master_id)
        marks = store_marks(self.brokers)
        load = os.getloadavg()[0]
        t_kill_ms = int(time.time() * 1000)
        t0 = time.monotonic()
        victim.kill()

        def new_master() -> ReplicaInfo | None:
            i = self.probe.replica_info()
            ok = i is not None and i.master_id is not None and i.master_id != before.master_id
            return i if ok and i is not None and i.epoch > before.epoch else None

        seen: dict[str, Any] = {}

        def both() -> bool:  # (a) and (b) in one poll, each timed when its answer came
            if "master" not in seen and (i := new_master()) is not None:
                seen["master"], seen["master_s"] = i, time.monotonic() - t0
            if "route_s" not in seen and self.probe.route_master(self.namesrv) not in (None, victim.addr):
                seen["route_s"] = time.monotonic() - t0
            return "master" in seen and "route_s" in seen

        poll(f"{SET}: a new master after epoch {before.epoch}, and in the NameServer's route", both, rnd)
        new, master_s = seen["master"], seen["master_s"]
        poll("the producer's next acknowledged send", lambda: first_ok_after(self.sends(), t_kill_ms)[0], rnd)
        sent, failed = first_ok_after(self.sends(), t_kill_ms)
        assert sent is not None
        sample: dict[str, Any] = {
            "kill": k,
            "load1": load,
            "old_master": before.master_id,
            "old_epoch": before.epoch,
            "new_master": new.master_id,
            "new_epoch": new.epoch,
            "new_master_was_in_sync": new.master_id in before.sync_state_set,
            "master_s": round(master_s, 3),
            "route_s": round(seen["route_s"], 3),
            "send_s": round((sent.end_ms - t_kill_ms) / 1000, 3),
            "failed_sends": failed,
            "within_bound": master_s <= BOUND_S,
        }
        t1 = time.monotonic()
        try:
            victim.start()
            victim.wait_line(r"The broker\[.*boot success", rnd.left())
            back = settle_past_ha_race(self.settled, self.brokers, victim, marks, rnd, sample)
            if back.master_id != new.master_id:
                raise AssertionError(f"{SET}: the master changed again while {victim.name} came back: {back}")
        except (RoundTimeout, AssertionError) as e:
            setattr(e, "partial_sample", sample)  # noqa: B010  # the failover was measured: keep it
            raise
        sample["settle_s"] = round(time.monotonic() - t1, 2)
        return sample


def topics_json(b: Broker) -> str:
    try:
        with open(os.path.join(b.home, "store", "config", "topics.json")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def broker_failover(system: str, root: str, kills: int) -> dict[str, Any]:
    """`kills` rounds of kill -9 of the master of one set of three real brokers against the 3-node controller
    group of `system` ("ours", "jraft", "dledger"), working under `root` (left there). Per kill: `master_s`,
    `send_s` (module docstring), the victim, the old and new master and epoch, failed sends between; then
    `master_s` and `send_s` summarised (runs, p50, p99, max) and `bound` (the one checked, whether it held). A
    round that misses a deadline ends the run: what was measured is returned, with `aborted` saying why;
    failing to start raises."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")
    rocketmq.require()
    root = os.path.join(root, system)
    out: dict[str, Any] = {
        "benchmark": "broker_failover_peers",
        "system": system,
        "rocketmq_version": rocketmq.version(),
        "loadavg_start": list(os.getloadavg()),
        "settings": {
            "brokers": BROKERS,
            "controllers": 3,
            "kills": kills,
            "controllerHeartBeatTimeoutMills": HB_TIMEOUT_MS,
            "brokerHeartbeatInterval": HEARTBEAT_MS,
            "syncControllerMetadataPeriod": META_SYNC_MS,
            "scanNotActiveBrokerInterval": SCAN_MS,
            "jRaftElectionTimeoutMs": ELECTION_MS if system != "dledger" else None,
            "allAckInSyncStateSet": True,
            "producer_send_every_ms": SEND_EVERY_MS,
            "poll_period_s": PERIOD,
        },
        "samples": [],
    }
    samples: list[dict[str, Any]] = out["samples"]
    t = time.monotonic()
    with Deployment(os.path.join(root, "rmq")) as rmq, controllers(system, root, rmq) as remotings:
        probe = Probe(remotings)
        try:
            rmq.namesrv()
            ports = port_triples(BROKERS)
            brokers = [
                rmq.broker(
                    SET,
                    ports[i],
                    remotings,
                    index=i,
                    controllerHeartBeatTimeoutMills=HB_TIMEOUT_MS,
                    brokerHeartbeatInterval=HEARTBEAT_MS,
                    syncControllerMetadataPeriod=META_SYNC_MS,
                )
                for i in range(BROKERS)
            ]
            for b in brokers:
                b.start()
            for b in brokers:
                b.wait_line(r"The broker\[.*boot success", STARTUP_S)
            up = Round("start-up", STARTUP_S)
            first = poll(
                f"{SET}: a master and {BROKERS} in sync", lambda: whole(probe.replica_info(), brokers), up, 0.2
            )
            created = rmq.mqadmin("updateTopic", "-b", str(first.master_addr), "-t", TOPIC, "-r", "4", "-w", "4")
            if "success" not in created.lower():
                raise AssertionError(f"updateTopic {TOPIC}: {created}")
            for b in brokers:  # the slaves copy the topic config from the master before either is promoted
                poll(f"{b.name} has {TOPIC}", lambda b=b: TOPIC in topics_json(b), up, 0.2)  # type: ignore[misc]
            pdir = os.path.join(root, "producer")
            os.makedirs(pdir, exist_ok=True)
            producer = rmq.java_client(
                "interop.Producer",
                rmq.namesrv_addr,
                TOPIC,
                os.path.join(pdir, "acks"),
                os.path.join(pdir, "stop"),
                "36000",
                str(SEND_EVERY_MS),
                "timeline",
                name="producer",
            ).start()
            run = Run(probe, brokers, producer, rmq.namesrv_addr)
            poll("the producer's first acknowledged send", lambda: first_ok_after(run.sends(), 0)[0], up)
            out["startup_s"] = round(time.monotonic() - t, 1)
            print(f"{system}: started in {out['startup_s']}s; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
            for k in range(kills):
                try:
                    r = run.kill_round(k)
                except (RoundTimeout, AssertionError) as e:
                    record_abort(out, samples, e, f"{system}: ")
                    break
                samples.append(r)
                print(
                    f"{system} kill {k}: master {r['old_master']} -> {r['new_master']} in {r['master_s']:.2f}s, "
                    f"in the route {r['route_s']:.2f}s, "
                    f"next send ok {r['send_s']:.2f}s ({r['failed_sends']} failed); whole again in {r['settle_s']}s",
                    file=sys.stderr,
                )
            open(os.path.join(pdir, "stop"), "w").close()
        finally:
            probe.close()
    master = [s["master_s"] for s in samples]
    out["master_s"] = summary(master)
    out["route_s"] = summary([s["route_s"] for s in samples])
    out["send_s"] = summary([s["send_s"] for s in samples])
    out["bound"] = bound_check(master)
    out["loadavg_end"] = list(os.getloadavg())
    return out


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def table(results: list[dict[str, Any]]) -> list[str]:
    head: tuple[str, ...] = ("system", "kills", "master p50", "master p99", "route p50", "route p99", "send p50")
    head += ("send p99", f"bound {BOUND_S:.0f}s", "note")
    rows = [head]
    for r in results:
        m, rt, s = r.get("master_s") or {}, r.get("route_s") or {}, r.get("send_s") or {}
        bound = r.get("bound") or {}
        rows.append(
            (
                r["system"],
                str(m.get("runs", 0)),
                fmt(m.get("p50")),
                fmt(m.get("p99")),
                fmt(rt.get("p50")),
                fmt(rt.get("p99")),
                fmt(s.get("p50")),
                fmt(s.get("p99")),
                "held" if bound.get("held") else "NOT held" if bound else "-",
                r.get("aborted") or r.get("error") or "",
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(head))]
    return [
        "  ".join(
            c.ljust(w) if k in (0, len(head) - 1) else c.rjust(w)
            for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench.broker_failover_peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--systems", default=",".join(SYSTEMS), help="which, in this order (default all three)")
    p.add_argument("--kills", type=int, default=10, help="kills per system (default 10)")
    p.add_argument("--json", dest="json_path", help="write every system's result here")
    p.add_argument("--dir", help="work here (default: a temp dir, removed at the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the logs and stores")
    a = p.parse_args(argv)
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        print(f"broker_failover_peers: unknown systems {unknown}; known: {', '.join(SYSTEMS)}", file=sys.stderr)
        return 2
    root = a.dir or tempfile.mkdtemp(prefix="broker-failover-peers-")
    results: list[dict[str, Any]] = []
    try:
        for j, system in enumerate(systems):
            try:  # a directory per position: `--systems ours,jraft,ours,jraft` alternates without sharing data
                results.append(broker_failover(system, os.path.join(root, str(j)), a.kills))
            except Exception as e:  # noqa: BLE001  # one system failing must not hide the others' figures
                results.append({"system": system, "error": repr(e)})
                print(f"{system}: FAILED {e!r}", file=sys.stderr)
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"RocketMQ {rocketmq.version()}: {BROKERS} brokers, kill -9 of the master; seconds from the kill to a new "
        f"master (1004 of the controller leader) and to the producer's next acknowledged send"
    )
    for line in table(results):
        print(line)
    if a.json_path:
        with open(a.json_path, "w") as f:
            json.dump({"benchmark": "broker_failover_peers", "results": results}, f, indent=1)
    return 1 if any("aborted" in r or "error" in r for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

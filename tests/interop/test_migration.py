"""Adopting a live RocketMQ cluster from RocketMQ's own JRaftController (docs/migration.md), with real brokers.

RocketMQ's 3-node JRaftController runs two broker sets of two brokers under a producer. `rmqctl migrate export`
reads it, `import` builds our bootstrap snapshot, our 3-node group starts from it, `verify` finds no
difference; the old controllers stop and every broker is switched live with `mqadmin updateBrokerConfig -k
controllerAddr` (a broker re-reads controllerAddr every 120 s, ReplicasManager.updateControllerAddr, RocketMQ
5.5.0). Then a master is killed (-9): our group elects its slave at an epoch above the one the old controller
gave, the slave turns master, the producer resumes, and a consumer reads every acknowledged message. The same
from DLedgerController, with the rollback (test_migration_dledger.py, its own file so that the two long
adoptions can run on both pytest-xdist workers at once). The tests print their timeline (each step, and how long each broker
had no reachable controller leader)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from cli import rocketmq
from cli.rmqctl import RmqctlError
from cli.rmqctl.migrate import read_controller
from cli.rocketmq import Broker, Deployment, port_triples, wait_until
from tests.interop.test_interop import Producer, _topics_json, consume_all
from tools.cluster import ROOT, ControllerdCluster

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]

SWITCH_S = 150  # a broker re-reads controllerAddr every 120 s (ReplicasManager.updateControllerAddr)


class Timeline:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.rows: list[tuple[float, str]] = []

    def step(self, what: str) -> None:
        self.rows.append((time.monotonic() - self.t0, what))

    def text(self) -> str:
        return "\n".join(f"  {t:7.1f}s  {what}" for t, what in self.rows)


def rmqctl(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.rmqctl", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def view(addrs: list[str], namesrv: str) -> dict[str, dict[str, Any]] | None:
    """The controller's broker sets by name (as `migrate export` reads them), None while it cannot answer."""
    try:
        doc, _ = read_controller(addrs, namesrv, 5)
    except RmqctlError:
        return None
    return {s["brokerName"]: s for s in doc["brokerSets"]}


def our_sets(ours: ControllerdCluster) -> dict[str, dict[str, Any]]:
    for i, p in ours.procs.items():
        if p.poll() is None:
            r = httpx.get(ours.url(i, "/ui/api/state"), timeout=5).json()
            if r.get("view") == "leader":
                return {s["brokerName"]: s for s in r["brokerSets"]}
    return {}


class Migration:
    """One migration's world: RocketMQ's NameServer, the old controller group (`kind` jraft or dledger), broker
    sets of two brokers under it with a producer, and our group (not started until `adopt`)."""

    def __init__(self, root: str, d: Deployment, kind: str, sets: tuple[str, ...]) -> None:
        self.root, self.d, self.sets, self.tl = root, d, sets, Timeline()
        self.ours = ControllerdCluster(
            os.path.join(root, "ours"), election_ms=1000, extra="scanNotActiveBrokerInterval=1000\n"
        )
        d.namesrv()
        self.old = d.jraft_controllers(3) if kind == "jraft" else d.dledger_controllers(3)
        ports = iter(port_triples(2 * len(sets)))
        self.brokers = {
            n: [
                d.broker(n, next(ports), self.old.remotings, index=i, syncControllerMetadataPeriod=2000)
                for i in range(2)
            ]
            for n in sets
        }
        self.all = [b for bs in self.brokers.values() for b in bs]
        # Brokers first: each re-reads controllerAddr 120 s after it started, so the clock starts now.
        for b in self.all:
            b.start()
        self.old.start()
        for b in self.all:
            b.wait_line(r"The broker\[.*boot success", 180)
        self.tl.step(f"NameServer, RocketMQ's 3-node {kind} controller and {len(self.all)} brokers up")
        self.before = wait_until(
            f"the sets settled under RocketMQ's {kind} controller", lambda: self.settled(self.old.remotings), 120
        )
        self.tl.step("every set has a master and 2 in sync")
        self.masters = {
            n: next(b for b in self.brokers[n] if b.identity() == self.before[n]["masterBrokerId"]) for n in sets
        }
        for n in sets:
            out = d.mqadmin("updateTopic", "-b", self.masters[n].addr, "-t", "MigrateT", "-r", "2", "-w", "2")
            assert "success" in out.lower(), out
        self.world = SimpleNamespace(rmq=d, root=root, sets=self.brokers)
        # 50 ms between sends: about 15 a second through every step of the adoption (a few thousand in all). At
        # 5 ms (a few hundred a second, until 2026-11-30) the producer, its masters and their slaves kept a core
        # busy through the brokers' 120 s waits, which the rest of the suite on two cores paid for.
        self.producer = Producer(self.world, "MigrateT", 600, pause_ms=50)  # type: ignore[arg-type]
        self.windows: list[str] = []

    def settled(self, addrs: list[str]) -> dict[str, dict[str, Any]] | None:
        sets = view(addrs, self.d.namesrv_addr)
        ok = sets is not None and all(
            n in sets and sets[n]["masterBrokerId"] is not None and len(sets[n]["syncStateSet"]) == 2 for n in self.sets
        )
        return sets if ok else None

    def adopt(self) -> dict[str, dict[str, Any]]:
        """Export, import, start our group from the snapshot, verify: the exported sets by name."""
        exported = os.path.join(self.root, "export.json")
        old = ";".join(self.old.remotings)
        r = rmqctl("migrate", "export", "--from", old, "--namesrv", self.d.namesrv_addr, "-f", exported, "-o", "json")
        assert r.returncode == 0, r.stderr
        with open(exported) as f:
            sets = {s["brokerName"]: s for s in json.load(f)["brokerSets"]}
        assert sorted(sets) == sorted(self.sets)
        for n in self.sets:
            assert sets[n]["masterBrokerId"] == self.before[n]["masterBrokerId"]
            assert sets[n]["masterEpoch"] == self.before[n]["masterEpoch"] >= 1
            assert sorted(b["brokerId"] for b in sets[n]["brokers"]) == sorted(
                b.identity() or 0 for b in self.brokers[n]
            )
        self.tl.step(
            "exported: "
            + ", ".join(f"{n} master {sets[n]['masterBrokerId']} epoch {sets[n]['masterEpoch']}" for n in self.sets)
        )
        voters = [a for v in self.ours.rafts for a in ("--voter", v)]
        r = rmqctl("migrate", "import", exported, *voters, "--write-snapshot", os.path.join(self.root, "boot"))
        assert r.returncode == 0, r.stderr
        (snap,) = [e for e in os.listdir(os.path.join(self.root, "boot")) if e.startswith("snapshot_")]
        for i in range(3):
            shutil.copytree(
                os.path.join(self.root, "boot", snap), os.path.join(self.root, "ours", f"n{i}", "snapshot", snap)
            )
        self.ours.start_all()
        self.ours.wait_ready()
        self.tl.step("imported; our group started from the snapshot and has a leader")
        new = ";".join(self.ours.remotings)
        same = rmqctl("migrate", "verify", "--from", old, "--to", new, "--namesrv", self.d.namesrv_addr, "-o", "json")
        assert same.returncode == 0, same.stdout + same.stderr
        self.tl.step("verify: no difference between the old controller and ours")
        self.exported = sets
        return sets

    def stop_old(self) -> float:
        """Stop RocketMQ's controllers (SIGTERM) before the switch: a broker re-reads controllerAddr on its own
        120 s tick, so the brokers of one set switch at different times, and a running old controller expires a
        broker that switched and re-elects its set behind the new group's back (docs/migration.md, "Why the old
        controller stops first"). From here until a broker follows the new leader it has no controller leader."""
        for p in self.old.nodes:
            p.stop()
        self.tl.step("RocketMQ's controllers stopped (SIGTERM): from here no controller can elect")
        return time.monotonic()

    def switch(self, to: list[str], label: str, since: float) -> None:
        """`mqadmin updateBrokerConfig -k controllerAddr` on every broker, then wait until each follows the leader
        of `to` (its broker.log says so). Records each broker's time without a reachable controller leader: from
        `since` (its controller stopped) to following the new leader."""
        marks = {b.name: b.log_mark() for b in self.all}
        # -c CLUSTER -a true: every broker of the cluster, slaves included (UpdateBrokerConfigSubCommand, 5.5.0).
        out = self.d.mqadmin(
            "updateBrokerConfig", "-c", "DefaultCluster", "-a", "true", "-k", "controllerAddr", "-v", ";".join(to)
        )
        for b in self.all:
            assert f"update broker config success, {b.addr}" in out, out
        self.tl.step(f"mqadmin updateBrokerConfig -k controllerAddr (-> {label}) sent to {len(self.all)} brokers")
        switched: set[str] = set()

        def all_switched() -> bool:
            for b in self.all:
                text = b.log_since(marks[b.name])
                if b.name not in switched and any(f"Update controller leader address to {a}" in text for a in to):
                    switched.add(b.name)
                    self.windows.append(f"{b.name} -> {label}: {time.monotonic() - since:.1f}s")
                    self.tl.step(f"{b.name} follows the {label} leader")
            return len(switched) == len(self.all)

        wait_until(f"every broker follows the {label} leader", all_switched, SWITCH_S)

    def heartbeating_ours(self) -> dict[str, dict[str, Any]]:
        def check() -> dict[str, dict[str, Any]] | None:
            s = our_sets(self.ours)
            ok = all(
                r["epoch"] is not None and r["epoch"] >= 1 for n in self.sets for r in s.get(n, {}).get("replicas", [])
            )
            return s if ok and len(s) == len(self.sets) else None

        return wait_until("every broker heartbeats our group", check, 30)

    def unchanged(self, sets: dict[str, dict[str, Any]]) -> None:
        """Nobody lost a role: every set's master at its exported epoch, every replica alive."""
        for n in self.sets:
            assert (sets[n]["masterBrokerId"], sets[n]["masterEpoch"]) == (
                self.exported[n]["masterBrokerId"],
                self.exported[n]["masterEpoch"],
            ), (n, sets[n])
            assert all(r["alive"] for r in sets[n].get("replicas", sets[n].get("brokers", []))), sets[n]

    def finish(self, title: str) -> None:
        """Stop the producer, consume, print the timeline; every acknowledged message must be read."""
        acked = self.producer.stop()
        consumed = consume_all(self.world, "MigrateT")  # type: ignore[arg-type]
        lost = set(acked) - consumed
        self.tl.step(f"consumer: {len(consumed)} read, {len(acked)} acknowledged, {len(lost)} lost")
        windows = ", ".join(self.windows)
        print(f"\n{title}:\n{self.tl.text()}\n  without a reachable controller leader: {windows}")
        assert len(acked) > 100 and not lost, sorted(lost)[:20]


def test_adopt_a_live_cluster_from_rocketmq_jraft_controller(tmp_path: Any) -> None:
    rocketmq.require()
    with Deployment(os.path.join(str(tmp_path), "rmq")) as d:
        m = Migration(str(tmp_path), d, "jraft", ("mig-a", "mig-b"))
        try:
            m.producer.wait_acked(100)
            m.tl.step("producer: 100 acknowledged")
            sets = m.adopt()
            m.switch(m.ours.remotings, "our group's", m.stop_old())
            m.unchanged(m.heartbeating_ours())
            m.tl.step("every broker heartbeats our group; masters and epochs unchanged")
            acked = len(m.producer.acked())
            m.producer.wait_acked(acked + 50, 60)
            m.tl.step("producer still acknowledged (+50)")

            # A failover under our group: above the epoch the old controller gave, and the broker takes it.
            victim = m.masters["mig-a"]
            old_epoch = sets["mig-a"]["masterEpoch"]
            slave = next(b for b in m.brokers["mig-a"] if b is not victim)
            wait_until(f"{slave.name} has MigrateT", lambda: "MigrateT" in _topics_json(slave), 60)
            mark = slave.log_mark()
            acked = len(m.producer.acked())
            victim.kill()
            m.tl.step(f"kill -9 {victim.name}, master of mig-a at epoch {old_epoch}")
            seen: list[Any] = [None]

            def elected() -> dict[str, Any] | None:
                s = seen[0] = our_sets(m.ours).get("mig-a")
                return s if s and s["masterBrokerId"] == slave.identity() and s["masterEpoch"] > old_epoch else None

            try:
                new = wait_until("our group elects mig-a's slave", elected, 30)
            except AssertionError as e:
                raise AssertionError(f"{e}; our view of mig-a: {seen[0]}") from None
            m.tl.step(
                f"our group elected {slave.name} at epoch {new['masterEpoch']} (the old controller's: {old_epoch})"
            )
            slave.wait_log(
                rf"Change broker \[id:\d+\].* to SYNC_MASTER, .*newMasterEpoch:{new['masterEpoch']},", mark, 60
            )
            m.tl.step(f"{slave.name} turned master")
            m.producer.wait_acked(acked + 100, 90)
            m.tl.step("producer resumed (+100 acknowledged)")
            m.finish("migration timeline (JRaftController -> ours)")
        finally:
            if m.producer.proc.running():
                m.producer.stop()
            m.ours.stop_all()


def commit_log_max_offset(d: Deployment, b: Broker) -> int | None:
    """`mqadmin brokerStatus`'s commitLogMaxOffset of `b` (RunningStats), None while it does not answer."""
    m = re.search(r"^commitLogMaxOffset\s*:\s*(\d+)", d.mqadmin("brokerStatus", "-b", b.addr), re.M)
    return int(m.group(1)) if m else None


def test_a_master_slave_pair_upgraded_in_place_keeps_its_master_and_every_message(tmp_path: Any) -> None:
    """RocketMQ's deployment guide, with our group as the controller: a classic master-slave pair (brokerId 0 and
    1, no controller) takes messages; once the slave's commit log is aligned with the master's, both stop; each
    restarts with enableControllerMode=true, controllerAddr at our group and brokerId -1 (the controller assigns
    ids), the old master first. Our group elects the old master, the slave joins its SyncStateSet, and a consumer
    reads every message acknowledged before the upgrade."""
    rocketmq.require()
    root = str(tmp_path)
    ours = ControllerdCluster(os.path.join(root, "ours"), election_ms=1000, extra="scanNotActiveBrokerInterval=1000\n")
    with Deployment(os.path.join(root, "rmq")) as d:
        try:
            ours.start_all()
            d.namesrv()
            ours.wait_ready()
            port_m, port_s = port_triples(2)
            classic = {"enableControllerMode": False, "controllerAddr": ""}
            master = d.broker("ms", port_m, [], 0, (), brokerId=0, brokerRole="ASYNC_MASTER", **classic)
            slave = d.broker("ms", port_s, [], 1, (), brokerId=1, brokerRole="SLAVE", **classic)
            master.start_and_wait()
            slave.start_and_wait()
            out = d.mqadmin("updateTopic", "-b", master.addr, "-t", "UpgradeT", "-r", "2", "-w", "2")
            assert "success" in out.lower(), out
            world = SimpleNamespace(rmq=d, root=root, sets={"ms": [master, slave]})
            producer = Producer(world, "UpgradeT", 120)  # type: ignore[arg-type]
            try:
                producer.wait_acked(300)
            finally:
                acked = producer.stop()

            def aligned() -> int | None:
                m, s = commit_log_max_offset(d, master), commit_log_max_offset(d, slave)
                return m if m is not None and m > 0 and m == s else None

            offset = wait_until("the slave's commit log aligned with the master's", aligned, 60)
            slave.stop()
            master.stop()
            # The same homes and stores, in controller mode.
            up_master = d.broker("ms", port_m, ours.remotings, index=0)
            up_slave = d.broker("ms", port_s, ours.remotings, index=1)
            assert up_master.conf["storePathRootDir"] == master.conf["storePathRootDir"]
            up_master.start_and_wait()

            def elected() -> dict[str, Any] | None:
                s = our_sets(ours).get("ms")
                return (
                    s if s and s["masterBrokerId"] is not None and s["masterBrokerId"] == up_master.identity() else None
                )

            wait_until("our group elects the old master", elected, 60)
            up_slave.start_and_wait()

            def both_in_sync() -> dict[str, Any] | None:
                s = our_sets(ours).get("ms")
                ok = s and [r["brokerId"] for r in s["replicas"] if r["inSync"] and r["alive"]] == sorted(
                    [up_master.identity() or 0, up_slave.identity() or 0]
                )
                return s if ok else None

            s = wait_until("the old slave joins the SyncStateSet", both_in_sync, 90)
            assert s["masterBrokerId"] == up_master.identity()
            assert (commit_log_max_offset(d, up_master) or 0) >= offset
            consumed = consume_all(world, "UpgradeT")  # type: ignore[arg-type]
            lost = set(acked) - consumed
            print(f"\nmaster-slave upgrade: {len(acked)} acknowledged before, {len(lost)} lost; commit log at {offset}")
            assert len(acked) >= 300 and not lost, sorted(lost)[:20]
        finally:
            ours.stop_all()

"""The audit's `broker.epoch` check on real RocketMQ 5.5.0 brokers' epoch files (docs/audit.md,
docs/broker-epoch-file.md): our 3 controllerd nodes, a NameServer and one set of two brokers in controller
mode; messages written, the master killed (-9), the other elected at the next epoch, the old master back as
a slave. Everything stopped, the audit reads the controllers' data and the brokers' store dirs: every
epoch a broker wrote at is one the controller's log gave it (0 findings). A copy of one epoch file then
claims one more epoch (RocketMQ's own format, CRC right): that broker, epoch and file are named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli import rocketmq
from cli.rocketmq import Broker, Deployment, port_triples, settle_past_ha_race, store_marks, wait_until
from tools.audit.epochs import encode_epoch_file, parse_epoch_file
from tools.cluster import ROOT, ControllerdCluster

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]

NAME = "broker-a"
BOOTED = r"The broker\[.*boot success"


def broker_set(ours: ControllerdCluster) -> dict[str, Any] | None:
    for i, p in ours.procs.items():
        if p.poll() is None:
            try:
                r = httpx.get(ours.url(i, "/ui/api/state"), timeout=2).json()
            except httpx.HTTPError:
                continue
            if r.get("view") == "leader":
                return next((s for s in r["brokerSets"] if s["brokerName"] == NAME), None)
    return None


def set_if_settled(ours: ControllerdCluster) -> dict[str, Any] | None:
    """broker-a if it has an alive master and both brokers alive in its SyncStateSet."""
    s = broker_set(ours)
    return s if rocketmq.settled(s, 2) else None


def settled(ours: ControllerdCluster, timeout: float = 120) -> dict[str, Any]:
    return wait_until(f"{NAME}: a master and 2 in-sync replicas", lambda: set_if_settled(ours), timeout)


def produce(rmq: Deployment, root: str, topic: str, n: int) -> None:
    """interop.Producer until `n` sends are acknowledged (each line of `acks` is one)."""
    d = os.path.join(root, "producer")
    os.makedirs(d, exist_ok=True)
    acks, stop = os.path.join(d, "acks"), os.path.join(d, "stop")
    for f in (acks, stop):
        if os.path.exists(f):
            os.unlink(f)
    p = rmq.java_client("interop.Producer", rmq.namesrv_addr, topic, acks, stop, "120", name="producer").start()

    def acked() -> int:
        try:
            with open(acks) as f:
                return sum(1 for line in f if line.endswith("\n"))
        except FileNotFoundError:
            return 0

    wait_until(f"producer: {n} acknowledged", lambda: acked() >= n or None, 90)
    open(stop, "w").close()
    p.wait_line("producer done", 60)
    p.wait(30)


def audit(out: Path, *args: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run(
        [sys.executable, "-m", "tools.audit", "--master", "local[2]", "--no-plots", "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    assert summary, r.stderr[-3000:]
    return r.returncode, summary, summary.get("topFindings", [])


def test_real_brokers_epoch_files_agree_with_the_controller_log(tmp_path: Path) -> None:
    rocketmq.require()
    root = str(tmp_path)
    ours = ControllerdCluster(os.path.join(root, "ours"), election_ms=1000, extra="scanNotActiveBrokerInterval=1000\n")
    rmq_root = os.path.join(root, "rmq")
    with Deployment(rmq_root) as rmq:
        brokers: list[Broker] = []
        victim: Broker | None = None
        try:
            ours.start_all()
            ours.wait_ready()
            rmq.namesrv()
            ports = iter(port_triples(2))
            brokers = [
                rmq.broker(NAME, next(ports), ours.remotings, index=i, syncControllerMetadataPeriod=2000)
                for i in range(2)
            ]
            for b in brokers:
                b.start()
            for b in brokers:
                b.wait_line(BOOTED, 180)
            s = settled(ours)
            out = rmq.mqadmin("updateTopic", "-b", s["masterAddress"], "-t", "AuditEpochs", "-r", "2", "-w", "2")
            assert "success" in out.lower(), out
            produce(rmq, root, "AuditEpochs", 50)
            victim = next(b for b in brokers if b.identity() == s["masterBrokerId"])
            marks = store_marks(brokers)
            victim.kill()

            def elected() -> dict[str, Any] | None:
                now = broker_set(ours)
                ok = now is not None and now["masterEpoch"] > s["masterEpoch"] and now["masterBrokerId"] is not None
                return now if ok else None

            new = wait_until(f"{NAME}: a new master after epoch {s['masterEpoch']}", elected, 60)
            victim.start_and_wait()
            what = f"{NAME}: a master and 2 in-sync replicas, the old master back"  # past RocketMQ's HA race
            settle_past_ha_race(what, lambda: set_if_settled(ours), brokers, victim, marks)
            produce(rmq, root, "AuditEpochs", 20)  # data of the new epoch, copied to the old master (a slave)
            final = settled(ours)
            assert final["masterBrokerId"] == new["masterBrokerId"], final
        finally:  # the slave first: a master stopped first would have the controller elect the slave again
            for b in sorted(brokers, key=lambda b: b is not victim):
                b.stop()
            ours.stop_all()

    # --- the audit, on everything as the processes left it -----------------------------------------------
    code, summary, findings = audit(tmp_path / "audit", "--broker-epochs", rmq_root, ours.root)
    assert (code, findings) == (0, []), findings
    checks = {c["check"]: c["status"] for c in summary["checks"]}
    assert checks["broker.epoch"] == checks["broker.epoch_file"] == "ok"
    files = {f["broker"].split("@")[0]: f for f in summary["brokerEpochFiles"]}
    new_master = f"{NAME}/{new['masterBrokerId']}"
    assert new["masterEpoch"] in [e for e, _ in files[new_master]["entries"]], files  # it wrote as master there
    # The old master wrote as master at epoch s, or at an earlier epoch of its own: RocketMQ records a new epoch
    # only past the last entry's start offset (EpochFileCache.appendEntry, docs/broker-epoch-file.md), so a master
    # elected again before writing anything (a slow broker's first heartbeat late, then re-elected) keeps its entry.
    old_master = f"{NAME}/{s['masterBrokerId']}"
    assert [e for e, _ in files[old_master]["entries"] if e <= s["masterEpoch"]], files

    # --- a copy of the old master's file (a slave since the failover): its copy of the new master's epoch
    # starts one byte later, and it claims an epoch the controller never gave ------------------------------
    tampered = tmp_path / "tampered"
    for f in summary["brokerEpochFiles"]:
        src = Path(f["path"]).parent
        dst = tampered / src.parent.name / src.name
        dst.mkdir(parents=True)
        for name in ("epochFileCheckpoint", "brokerIdentity"):
            shutil.copy(src / name, dst / name)
    path = tampered / Path(files[old_master]["path"]).parent.parent.name / "store" / "epochFileCheckpoint"
    entries = [(e.epoch, e.start_offset) for e in parse_epoch_file(path.read_bytes(), str(path))]
    # its copy of the new master's last entry (a re-election of the same master may have raised the epoch)
    assert new["masterEpoch"] <= entries[-1][0] <= final["masterEpoch"], (entries, new, final)
    copied = entries[-1][0]
    moved, claimed = entries[-1][1] + 1, entries[-1][0] + 50
    path.write_bytes(encode_epoch_file([*entries[:-1], (entries[-1][0], moved), (claimed, moved + 100)]))
    code, summary, findings = audit(tmp_path / "audit2", "--broker-epochs", str(tampered), ours.root)
    assert (
        code == 1
        and [(f["check"], f["severity"], f["path"]) for f in findings] == [("broker.epoch", "error", str(path))] * 2
    ), findings
    assert {f["node"].split("@")[0] for f in findings} == {old_master}
    got = {json.loads(f["snapshot_value"])["epoch"]: f for f in findings}
    assert set(got) == {copied, claimed}
    assert f"gave epoch {copied} to {new_master}" in got[copied]["detail"]
    assert json.loads(got[copied]["replayed_value"])["brokerId"] == new["masterBrokerId"]
    assert f"never gave a master of {NAME}" in got[claimed]["detail"]

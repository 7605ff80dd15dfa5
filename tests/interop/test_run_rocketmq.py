"""`make run BROKERS=rocketmq`: `controllerd local-cluster --brokers rocketmq` as a real process on free ports.
Its NameServer and two sets of two real brokers come up against the 3 nodes, each set gets a master and both
replicas in its SyncStateSet; SIGINT then stops the supervisor and every JVM it started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli import rocketmq
from cli.localcluster import REMOTING_OFFSET
from raft.testing.cluster import free_port_base
from tests.processes import naming

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]

ROOT = Path(__file__).resolve().parents[2]
SETS = ("broker-a", "broker-b")
SETTLE_S = 150.0  # two sets of cold JVMs on 2 busy cores, one set at a time


def jvms(data: str) -> dict[int, str]:
    """Every java process whose command line names `data`: pid -> command line."""
    return {pid: " ".join(argv) for pid, argv in naming(data).items() if os.path.basename(argv[0]) == "java"}


def settled(http: str) -> dict[str, Any] | None:
    """The broker sets when each of SETS has an alive master and 2 alive in-sync replicas, else None."""
    try:
        sets = {s["brokerName"]: s for s in httpx.get(f"http://{http}/ui/api/state", timeout=2).json()["brokerSets"]}
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return sets if all(rocketmq.settled(sets.get(name), 2) for name in SETS) else None


def test_local_cluster_with_real_brokers_settles_and_stops_every_jvm(tmp_path: Path) -> None:
    rocketmq.require()
    data = str(tmp_path / "data")
    base = free_port_base((0, 1, 2, 10, 11, 12, 10 + REMOTING_OFFSET, 11 + REMOTING_OFFSET, 12 + REMOTING_OFFSET))
    http = f"127.0.0.1:{base + 10}"
    out_path = tmp_path / "local-cluster.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.controllerd", "local-cluster", "--data", data]
            + ["--raft-port", str(base), "--http-port", str(base + 10), "--brokers", "rocketmq"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + SETTLE_S
        sets = None
        while sets is None:
            assert proc.poll() is None, f"local-cluster exited ({proc.returncode}):\n{out_path.read_text()}"
            assert time.monotonic() < deadline, f"not settled within {SETTLE_S:g}s:\n{out_path.read_text()}"
            sets = settled(http)
            if sets is None:
                threading.Event().wait(0.5)  # polling the controller with a deadline
        text = out_path.read_text()
        running = jvms(data)
        assert len(running) == 5, running  # the NameServer and 4 brokers
        # one line per broker: its name, listen address, PID and RocketMQ's broker.log
        printed = {}
        for name in SETS:
            for i in range(2):
                m = re.search(rf"^  {name}-{i}\s+(127\.0\.0\.1:\d+)  pid (\d+)  log (\S+broker\.log)$", text, re.M)
                assert m, (name, i, text)
                printed[int(m.group(2))] = m.group(1)
                assert m.group(3) == os.path.join(data, "rocketmq", f"{name}-{i}", "logs", "rocketmqlogs", "broker.log")
        assert set(printed) < set(running), (printed, running)
        for name in SETS:
            assert re.search(rf"{name}: master id \d .* SyncStateSet \[", text), text
            assert sets[name]["masterAddress"] in printed.values()
        assert "RocketMQ 5" in text and " is running: NameServer 127.0.0.1:" in text, text

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, out_path.read_text()
        text = out_path.read_text()
        assert "RocketMQ stopped (5 JVMs" in text and "stopped." in text, text
        assert jvms(data) == {}
    finally:
        if proc.poll() is None:
            proc.terminate()  # the supervisor stops its JVMs and nodes
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for pid in jvms(data):  # whatever a failed run left
            os.kill(pid, signal.SIGKILL)

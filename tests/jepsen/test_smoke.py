"""The CI smoke of the Jepsen suite: real `controllerd` processes in network namespaces, the register workload
under partition-random-halves, kill-random-processes and hammer-time on 3 nodes (29 s of workload each: three
5 s faults, each after 5 s of quiet), the negative control (unsafe local reads, which must come out invalid),
and a run stopped with SIGTERM that must leave nothing behind. About 3 minutes in all.

Each run must end with a valid verdict, and the faults must really have happened: nemesis events in the
history, probes of the connectivity matrix that found every partition in effect.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jepsen.net import list_namespaces
from jepsen.run import RunConfig, run_one

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jepsen-smoke")]
REPO = Path(__file__).resolve().parents[2]


def smoke(out: Path, nemesis: str, seed: int, **kw: Any) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    cfg = RunConfig(
        workload="register",
        nemesis=nemesis,
        time_limit=29,
        nodes=3,
        rate=20,
        concurrency=5,
        seed=seed,
        interval=5,
        recovery=30,
        snapshot_threshold=200,
        keep_data=False,
        budget=60,
    )
    cfg = dataclasses.replace(cfg, **kw)
    code = run_one(cfg, out)
    # This run's namespaces (named in each node's generated config) are gone; other runs may share the machine.
    header = (out / "nodes" / "n1.conf").read_text().splitlines()[0]
    prefix = header.rsplit("(namespace ", 1)[1].rstrip(")")[: -len("n1")]
    assert not [ns for ns in list_namespaces() if ns.startswith(prefix)], "the run left namespaces behind"
    results = json.loads((out / "results.json").read_text())
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    return code, results, history


def assert_valid(code: int, results: dict[str, Any], out: Path) -> None:
    assert code == 0 and results["verdict"] == "valid", (out / "summary.txt").read_text()
    assert results["checkers"]["linearizability"]["verdict"] == "valid"
    assert results["recovery"]["verdict"] == "valid"
    assert results["counts"]["ops"] > 300, "too few operations to say anything"
    for name in (
        "history.jsonl",
        "schedule.json",
        "params.json",
        "latency.png",
        "rate.png",
        "summary.txt",
        "nodes/n1.conf",
        "nodes/n1.log",
    ):
        assert (out / name).exists(), name


def nemesis_events(history: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    return [r["value"] for r in history if r["process"] == "nemesis" and r["f"] == f]


def test_register_under_partition_random_halves(tmp_path: Path) -> None:
    code, results, history = smoke(tmp_path, "partition-random-halves", seed=11)
    assert_valid(code, results, tmp_path)
    starts = nemesis_events(history, "start")
    stops = nemesis_events(history, "stop")
    assert len(starts) == 3 and len(stops) == 3 and stops[-1].get("final") is True  # the last heal is the final one
    assert all(s["nemesis"] == "partition-random-halves" and s["grudge"] for s in starts)
    probes = nemesis_events(history, "probe")
    cut = [p for p in probes if p["grudge"]]
    assert len(cut) == 3 and all(p["ok"] and p["actual"] == p["expected"] for p in probes)
    assert all(0 in sum(p["actual"], []) for p in cut), "a partition must cut some link"
    assert results["run"]["final_heal"]["probe"] is True


def test_register_under_kill_random_processes(tmp_path: Path) -> None:
    code, results, history = smoke(tmp_path, "kill-random-processes", seed=12)
    assert_valid(code, results, tmp_path)
    starts = nemesis_events(history, "start")
    assert len(starts) == 3 and all(any(d["killed"] for d in s["done"].values()) for s in starts)
    assert all(s["restarted"] for s in nemesis_events(history, "stop"))
    assert nemesis_events(history, "probe"), "the connectivity matrix is probed at setup and after the final heal"
    logs = (tmp_path / "nodes").glob("n*.log")
    assert sum(log.read_text().count('"jepsen: killed"') for log in logs) >= 3


def test_register_under_hammer_time(tmp_path: Path) -> None:
    code, results, history = smoke(tmp_path, "hammer-time", seed=13)
    assert_valid(code, results, tmp_path)
    starts = nemesis_events(history, "start")
    assert len(starts) == 3 and all(s["paused"] for s in starts)
    assert all(s["resumed"] for s in nemesis_events(history, "stop"))


def test_the_negative_control_is_caught(tmp_path: Path) -> None:
    """Reads answered from local state without ReadIndex (`--read-mode local`) under partition-random-node: the
    cut-off replica serves values that the majority has overwritten, and the checker must say invalid. This is
    what makes every valid verdict above mean something."""
    code, results, history = smoke(
        tmp_path, "partition-random-node", seed=21, time_limit=24, interval=5, read_mode="local"
    )
    assert code == 1 and results["verdict"] == "invalid", (tmp_path / "summary.txt").read_text()
    lin = results["checkers"]["linearizability"]
    assert lin["verdict"] == "invalid" and lin["failures"]
    assert any(f["op"]["f"] == "read" for f in lin["failures"]), "a stale read is what goes wrong here"
    assert results["recovery"]["verdict"] == "valid"  # the nodes themselves were fine
    assert "negative control" in (tmp_path / "summary.txt").read_text()
    assert (tmp_path / "data").exists(), "a run that did not pass keeps the data directories"


def test_sigterm_stops_the_run_and_cleans_up(tmp_path: Path) -> None:
    code = "import sys; from jepsen.run import run; sys.exit(run.main(sys.argv[1:], standalone_mode=False))"
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "--nemesis",
            "partition-random-node",
            "--nodes",
            "3",
            "--time-limit",
            "60",
            "--interval",
            "2",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stderr is not None
    tag = None
    deadline = time.monotonic() + 90
    for line in p.stderr:  # the harness reports each phase on stderr
        if "namespaces jp" in line:
            tag = line.split("namespaces ", 1)[1].split("n1..")[0]
        if "nemesis start" in line or time.monotonic() > deadline:
            break
    assert tag is not None
    assert any(ns.startswith(tag) for ns in list_namespaces())
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, err
    assert not any(ns.startswith(tag) for ns in list_namespaces())
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "aborted" and results["abort"] == "interrupted"
    assert not os.path.exists(f"/run/jepsen-net/{tag[2:]}.json")

"""A rolling upgrade from the previous release to this tree, and one node rolled back (docs/operations.md,
"Upgrades and versions").

The previous release's tree (`PREVIOUS`, kept in the repository as releases/PREVIOUS.tar.xz, tools/release.py) is
extracted into a temporary directory and its nodes run with this interpreter and its pinned dependencies. A 3-node group of it runs two simulated
broker sets of three (tools/brokersim) that keep writing; the nodes are replaced one at a time by this tree
(same config, same data dir), then one goes back to the previous release: the feature level cannot be raised
then, and the refusal names it. It goes forward again, and the operator's upgrade raises the level to the highest (2) on every
node (docs/operations.md, "Upgrades and versions"). Throughout: no broker changes role,
every set keeps its master at its epoch, acknowledged writes keep growing; afterwards no master lacks an
acknowledged write, and the audit (tools/audit, on the three data dirs, each with a snapshot taken at the end)
finds nothing: every node, whichever release, applied the log to the same state."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from statemachine.features import MAX_LEVEL
from tests.daemon.cluster import ROOT, ControllerdCluster
from tests.daemon.demo import FAST, SCAN_INTERVAL_MS, Demo
from tools import release

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("controllerd")]

PREVIOUS = "v0.3.0"  # the release before this tree; with each release: tag, `python -m tools.release pack`, bump
# RocketMQ's brokers' heartbeat timeout in the interop tests (4 s), not the failover tests' 1 s: a node restart
# moves the leadership, and the brokers must not be expired while they find the new leader on a loaded machine.
LOAD = dataclasses.replace(FAST, heartbeat_timeout_ms=4000)


def previous_release(dst: Path) -> str:
    """The kept archive of PREVIOUS (releases/, tools/release.py) extracted into `dst`: a CI checkout may have
    neither the release's tag nor its commits."""
    return str(release.extract(PREVIOUS, dst))


def features(cluster: ControllerdCluster, i: int) -> dict[str, Any]:
    r = httpx.get(cluster.url(i, "/api/v1/raft/features"), headers=cluster.headers, timeout=10)
    assert r.status_code == 200, (i, r.status_code, r.text)
    return dict(r.json()["body"])


def rmqctl_features(cluster: ControllerdCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`rmqctl -o json raft features ARGS` against every node's HTTP address."""
    return subprocess.run(
        [sys.executable, "-m", "cli.rmqctl", "-o", "json", "-a", ",".join(cluster.https), "raft", "features", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def roles(demo: Demo) -> dict[str, tuple[int | None, int]]:
    """Each set's master id and epoch, as its brokers hold them (None until every replica is in sync)."""

    def read(_sim: Any) -> dict[str, tuple[int | None, int]] | None:
        out = {}
        for name in ("broker-a", "broker-b"):
            m = demo.settled(name)
            if m is None:
                return None
            out[name] = (m.id, m.master_epoch)
        return out

    return demo.wait("both sets settled", lambda: read(None), 60)


def test_rolling_upgrade_from_the_previous_release_and_one_node_back(tmp_path: Path) -> None:
    old = previous_release(tmp_path / PREVIOUS)
    # controllerFeatureLevelAuto=false (v0.3.0 warns about a key it does not know): the runbook's way, so that
    # only the operator's `features --upgrade` at the end raises the level and the way back stays open.
    extra = f"scanNotActiveBrokerInterval={SCAN_INTERVAL_MS}\ncontrollerFeatureLevelAuto=false\n"
    cluster = ControllerdCluster(str(tmp_path / "group"), election_ms=500, extra=extra)
    for i in range(3):
        cluster.start(i, tree=old)
    demo = None
    try:
        cluster.wait_ready()
        demo = Demo(cluster, 2, cfg=LOAD)
        demo.runner.start()
        before = roles(demo)
        role_events = len([e for e in demo.events if e["event"] == "role"])

        sim = demo.sim

        def acked() -> int:  # on the simulator's loop (Demo.wait runs its predicate there)
            return sum(len(g.acked) for g in sim.sets.values())

        def step(i: int, tree: str, label: str) -> None:
            cluster.terminate(i)
            cluster.start(i, tree=tree)
            cluster.wait_ready()
            n: int = demo.runner.call(lambda _sim: acked())

            def grew(n: int = n) -> bool:
                return acked() >= n + 20

            demo.wait(f"writes acknowledged after node {i} runs {label}", grew, 30)
            assert roles(demo) == before, f"after node {i} went to {label}"

        for i in range(3):
            step(i, ROOT, "this tree")
        step(1, old, PREVIOUS)
        # Node 1 runs v0.3.0 (no feature levels): the level cannot be raised, and the refusal names it.
        cluster.lead_on(0)
        shown = rmqctl_features(cluster)
        assert shown.returncode == 0, shown.stderr
        rows = {row["node"]: (row["level"], row["maxLevel"]) for row in map(json.loads, shown.stdout.splitlines())}
        assert rows == {
            cluster.https[0]: (0, MAX_LEVEL),
            cluster.https[1]: (None, 0),
            cluster.https[2]: (0, MAX_LEVEL),
        }, rows
        refused = rmqctl_features(cluster, "--upgrade")
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert "CONTROLLER_INVALID_REQUEST" in refused.stderr and f"{cluster.rafts[1]} reads 0" in refused.stderr
        assert [features(cluster, i)["level"] for i in (0, 2)] == [0, 0]
        step(1, ROOT, "this tree again")
        cluster.lead_on(0)
        raised = rmqctl_features(cluster, "--upgrade")
        assert raised.returncode == 0, raised.stderr
        assert [json.loads(line)["level"] for line in raised.stdout.splitlines()] == [MAX_LEVEL] * 3, raised.stdout
        index = httpx.get(cluster.url(0, "/api/v1/raft/status"), headers=cluster.headers).json()["body"]["commitIndex"]
        for i in range(3):
            assert cluster.wait_applied(i, index), i
            assert features(cluster, i)["level"] == MAX_LEVEL, i
        n: int = demo.runner.call(lambda _sim: acked())
        demo.wait(f"writes acknowledged at level {MAX_LEVEL}", lambda: acked() >= n + 20, 30)
        assert roles(demo) == before, "after the level was raised"
        # A snapshot on every node, old and new alike: the audit compares each with the replay of the log, so
        # a node that applied the log differently (a command it could not read answers 2015 and changes
        # nothing) shows even where no broker's role depended on it.
        for i in range(3):
            r = httpx.post(cluster.url(i, "/api/v1/raft/snapshot"), headers=cluster.headers, timeout=30)
            assert r.status_code == 200 and r.json()["code"] == 0, (i, r.text)
        changed = [e for e in demo.events if e["event"] == "role"][role_events:]
        assert changed == [], changed
        lost = demo.runner.call(lambda sim: {n: g.lost() for n, g in sim.sets.items()})
        assert all(not v for v in lost.values()), lost
        total = demo.runner.call(lambda _sim: acked())
        print(f"\nrolling upgrade {PREVIOUS} -> this tree -> node 1 back: {total} acknowledged writes, none lost")
    finally:
        if demo is not None and demo.runner.thread.is_alive():
            demo.runner.stop()
        cluster.stop_all()
    out = tmp_path / "audit"
    audit = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.audit",
            "--out",
            str(out),
            *(str(tmp_path / "group" / f"n{i}") for i in range(3)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]

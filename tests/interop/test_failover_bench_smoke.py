"""A smoke run of tools/bench/failover_rocketmq.py: one broker kill and one controller kill, real RocketMQ
brokers against our group. Checks what happened, never how fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import rocketmq
from tools.bench import failover_rocketmq

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]


def test_failover_bench_one_round_each(tmp_path: Path) -> None:
    rocketmq.require()
    out = tmp_path / "failover.json"
    code = failover_rocketmq.main(["--kills", "1", "--no-freeze", "--json", str(out), "--dir", str(tmp_path / "w")])
    data = json.loads(out.read_text())
    assert code == 0 and "aborted" not in data, data.get("aborted")
    kills = [s for s in data["samples"] if s["kind"] == "broker_kill"]
    ctrl = [s for s in data["samples"] if s["kind"] == "controller_kill"]
    assert len(kills) == 1 and kills[0]["new_master_elected"], kills
    assert kills[0]["new_master"] != kills[0]["old_master"] and kills[0]["new_epoch"] > kills[0]["old_epoch"]
    assert len(ctrl) == 1 and ctrl[0]["new_leader"] != ctrl[0]["old_leader"], ctrl
    assert ctrl[0]["spurious_reelections"] == 0, ctrl
    assert data["rocketmq_version"] == rocketmq.version()
    assert data["loadavg_start"] and data["loadavg_end"]

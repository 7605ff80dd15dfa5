"""A smoke run of tools/bench/broker_failover_peers.py: one kill -9 of the master of three real RocketMQ brokers
against our group. Checks that the figures are there and make sense (a former slave took over, the producer
resumed after it, the set came back whole), never how fast beyond the bound the benchmark itself checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import rocketmq
from tools.bench import broker_failover_peers as bfp

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]


def test_broker_failover_ours_one_kill(tmp_path: Path) -> None:
    rocketmq.require()
    out = bfp.broker_failover("ours", str(tmp_path), 1)
    assert "aborted" not in out, out.get("aborted")
    assert out["system"] == "ours" and out["rocketmq_version"] == rocketmq.version()
    assert out["settings"]["brokers"] == 3 and out["settings"]["scanNotActiveBrokerInterval"] == bfp.SCAN_MS
    [s] = out["samples"]
    assert s["new_master"] != s["old_master"] and s["new_epoch"] > s["old_epoch"], s
    assert s["new_master_was_in_sync"], s
    assert 0 < s["master_s"] <= bfp.BOUND_S and s["within_bound"], s
    assert 0 < s["send_s"] < 60 and s["failed_sends"] >= 0, s
    assert 0 < s["route_s"] < 60, s  # the NameServer's route named another broker as the set's master
    assert s["settle_s"] > 0, s
    for key in ("master_s", "route_s", "send_s"):
        assert out[key]["runs"] == 1 and out[key]["p50"] == out[key]["p99"] == s[key], out[key]
    assert out["bound"]["held"] and out["bound"]["seconds"] == bfp.BOUND_S, out["bound"]
    assert len(out["loadavg_start"]) == 3 and len(out["loadavg_end"]) == 3

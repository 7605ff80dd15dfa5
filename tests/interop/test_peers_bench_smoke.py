"""A smoke run of tools/bench/peers.py on tiny input (`--quick`): ours, RocketMQ's JRaftController and its
DLedgerController, one after the other. Checks that every system produced every row and that the counts are
what was asked (every broker got an id, no id given twice), never how fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import rocketmq
from tools.bench import peers

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]


def test_peers_bench_quick(tmp_path: Path) -> None:
    rocketmq.require()
    out = tmp_path / "peers.json"
    code = peers.main(["--quick", "--json", str(out), "--dir", str(tmp_path / "w")])
    data = json.loads(out.read_text())
    assert code == 0 and not data["errors"], data["errors"]
    a = peers.parse(["--quick"])
    assert [r["system"] for r in data["rounds"]] == list(peers.SYSTEMS)
    for r in data["rounds"]:
        for key, n in (("register", a.storm), ("heartbeat_register", a.hb_brokers)):
            reg = r[key]
            assert reg["registered"] == reg["brokers"] == n, (r["system"], key, reg)
            assert reg["duplicate_ids"] == 0 and reg["errors"] == 0, (r["system"], key, reg)
            assert reg["cpu_s"] >= 0
        hb, steady = r["heartbeat"], r["steady"]
        assert hb["inflight"] == a.inflight and hb["brokers"] == a.hb_brokers and hb["acknowledged"] > 0, hb
        assert hb["errors"] == 0 and hb["p50_ms"] is not None and hb["p99_ms"] >= hb["p50_ms"], hb
        assert steady["brokers"] == a.brokers and steady["acknowledged"] > 0 and steady["errors"] == 0, steady
        for x in (hb, steady):
            assert x["sent"] == x["acknowledged"] + x["errors"] + x["unanswered"] and x["unanswered"] == 0, x
        assert r["memory"]["leader_rss_bytes"] > 0 and all(b > 0 for b in r["disk"]["bytes_per_node"]), r
        # the curve: every size registered on top of the last, then heartbeating at 1/s, all answered
        assert [c["brokers"] for c in r["curve"]] == sorted({*a.sizes, a.brokers, a.fo_brokers}), r["curve"]
        for c in r["curve"]:  # each step registers the brokers the previous one had not
            reg = c["register"]
            assert reg["total"] == c["brokers"] and reg["registered"] == reg["brokers"], c
            assert reg["duplicate_ids"] == 0 and reg["errors"] == 0, c
            st = c["steady"]
            assert st["brokers"] == c["brokers"] and st["acknowledged"] > 0 and st["unanswered"] == 0, c
            if r["system"] == "ours":  # each node's slow log writes and loop turns over the step, from /metrics
                assert all(len(ns) == 3 and all(n >= 0 for n in ns) for ns in c["over_50ms"].values()), c
                assert all(ms > 0 for ms in c["slowest_ms"]["log_write"] + c["slowest_ms"]["loop_lag"]), c
            else:
                assert "over_50ms" not in c, c  # no such figure from a JVM controller
        # every kill: a different node took over and served, and the killed node came back and caught up
        assert len(r["failovers"]) == a.kills, r["failovers"]
        for fo in r["failovers"]:
            assert fo["new_leader"] and fo["new_leader"] != fo["old_leader"] and fo["serving_s"] is not None, fo
            assert fo["acknowledged_before_kill"] > 0 and fo["killed_node_caught_up_s"] is not None, fo
        # the heartbeats before the disk and restart rows reached --million, and the restarted node caught up
        assert r["million_disk"]["heartbeats"] >= a.million, r["million_disk"]
        assert r["restart"]["caught_up_s"] > 0, r["restart"]
    names = {row["name"] for row in data["rows"]}
    legacy = {"controller failover: 1004 + 904 answered"}  # one kill at 300 brokers: runs before 2026-11-28
    every = {name for name, *_ in peers.row_defs(a.sizes, a.brokers)}
    assert a.broker_kills == 0  # real brokers: tests/interop/test_broker_failover_peers_smoke.py
    assert names == every - legacy - {name for name in every if name.startswith("broker failover")}
    for row in data["rows"]:
        assert set(row["systems"]) == set(peers.SYSTEMS), row
        jraft = row["systems"]["jraft"]
        assert jraft["vs_jraft"] == (1.0 if jraft["median"] else None), row
    assert data["notes"] == {"dledger": peers.NOTES["dledger"]}
    assert len(data["loadavg_before"]) == 3 and len(data["loadavg_after"]) == 3

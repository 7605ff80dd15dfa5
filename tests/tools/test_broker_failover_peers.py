"""The pure parts of tools/bench/broker_failover_peers.py: percentiles, the bound check, the producer's timeline
lines and the 1004 answer as the module reads them. No process is started."""

from __future__ import annotations

import json

import pytest

from statemachine import codes as C
from tools.bench import broker_failover_peers as bfp


def test_percentile_interpolates_between_the_closest_ranks() -> None:
    assert bfp.percentile([], 50) is None
    assert bfp.percentile([3.0], 99) == 3.0
    assert bfp.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    xs = [float(x) for x in range(1, 11)]  # 1..10
    assert bfp.percentile(xs, 0) == 1.0 and bfp.percentile(xs, 100) == 10.0
    assert bfp.percentile(xs, 99) == pytest.approx(9.91)
    assert bfp.percentile(xs, 50) == 5.5


def test_summary_of_no_values_and_of_some() -> None:
    assert bfp.summary([]) == {"runs": 0, "p50": None, "p99": None, "max": None}
    s = bfp.summary([0.4, 0.5, 0.6])
    assert s == {"runs": 3, "p50": 0.5, "p99": pytest.approx(0.598), "max": 0.6}


def test_bound_is_heartbeat_timeout_plus_scan_plus_margin() -> None:
    assert bfp.BOUND_S == (bfp.HB_TIMEOUT_MS + bfp.SCAN_MS) / 1000 + bfp.MARGIN_S == 6.0
    ok = bfp.bound_check([0.4, 5.9, 6.0])
    assert ok["held"] and ok["over"] == [] and ok["seconds"] == 6.0 and "scanNotActiveBrokerInterval" in ok["name"]
    bad = bfp.bound_check([0.4, 6.01])
    assert not bad["held"] and bad["over"] == [6.01]
    assert not bfp.bound_check([])["held"]  # nothing measured proves nothing


def test_parse_send_reads_both_kinds_and_ignores_other_lines() -> None:
    ok = bfp.parse_send("send ok 1700000000123 1700000000130 42 broker-a 3 17")
    assert ok == bfp.Send(True, 1700000000123, 1700000000130, 42, "broker-a 3 17")
    fail = bfp.parse_send("send fail 1700000000200 1700000003201 43 RemotingTooMuchRequestException: timeout\n")
    assert fail == bfp.Send(False, 1700000000200, 1700000003201, 43, "RemotingTooMuchRequestException: timeout")
    for other in ("acked 50 failed 0", "producer done acked 3 failed 1", "failed 7 MQClientException: x", ""):
        assert bfp.parse_send(other) is None


def test_first_ok_after_skips_sends_started_before_the_kill() -> None:
    sends = [
        bfp.Send(True, 900, 950, 0, ""),
        bfp.Send(True, 990, 1010, 1, ""),  # started before the kill at 1000, ended after: the old master's
        bfp.Send(False, 1100, 1101, 2, "x"),
        bfp.Send(False, 1200, 1201, 3, "x"),
        bfp.Send(True, 1300, 1420, 4, ""),
        bfp.Send(True, 1400, 1410, 5, ""),
    ]
    assert bfp.first_ok_after(sends, 1000) == (sends[4], 2)
    assert bfp.first_ok_after(sends[:4], 1000) == (None, 2)
    assert bfp.first_ok_after(sends, 0) == (sends[0], 0)


def test_replica_info_of_a_1004_answer() -> None:
    body = json.dumps({"syncStateSet": [3, 1, 2], "syncStateSetEpoch": 4}).encode()
    ext = {"masterBrokerId": "2", "masterAddress": "127.0.0.1:10911", "masterEpoch": "3"}
    assert bfp.replica_info_of(C.SUCCESS, ext, body) == bfp.ReplicaInfo(2, "127.0.0.1:10911", 3, (1, 2, 3))
    none = bfp.replica_info_of(C.SUCCESS, {"masterEpoch": "3"}, json.dumps({"syncStateSet": []}).encode())
    assert none == bfp.ReplicaInfo(None, None, 3, ())
    assert bfp.replica_info_of(C.CONTROLLER_NOT_LEADER, ext, body) is None


def test_table_names_each_system_and_whether_the_bound_held() -> None:
    done = {
        "system": "ours",
        "master_s": bfp.summary([0.4]),
        "route_s": bfp.summary([0.5]),
        "send_s": bfp.summary([1.2]),
        "bound": bfp.bound_check([0.4]),
    }
    older = {k: v for k, v in done.items() if k != "route_s"}  # a run from before the route column
    lines = bfp.table([done, {"system": "jraft", "error": "RuntimeError('x')"}, older])
    assert lines[0].split()[0] == "system" and len(lines) == 4
    assert lines[1].split()[:9] == ["ours", "1", "0.40", "0.40", "0.50", "0.50", "1.20", "1.20", "held"]
    assert lines[3].split()[:9] == ["ours", "1", "0.40", "0.40", "-", "-", "1.20", "1.20", "held"]
    assert lines[2].startswith("jraft") and "RuntimeError('x')" in lines[2]

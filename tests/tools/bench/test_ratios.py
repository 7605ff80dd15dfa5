"""Issue 25's rows as ratios to references measured in the same run (tools/bench/machine.py, bare_remoting.py,
all.py): the pure parts (ratio, verdict, the targets), the machine references on a tiny size (sane numbers, never
a timing), the bare remoting echo server's answer to every code RocketMQ's ControllerLoad sends, over a real
socket, and the `remoting` section of `python -m tools.bench all --quick`."""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient, envelope
from raft.testing.cluster import free_ports
from statemachine import codes as C
from tests.tools.bench.conftest import RunBench
from tools.bench import all as all_bench
from tools.bench import bare_remoting, machine

# --- the pure parts -------------------------------------------------------------------------------------------


def test_ratio_is_ours_over_the_reference_and_zero_without_one() -> None:
    assert machine.ratio(30.0, 10.0) == 3.0
    assert machine.ratio(5.0, 0.0) == 0.0 and machine.ratio(5.0, -1.0) == 0.0


@pytest.mark.parametrize(
    ("value", "op", "threshold", "met"),
    [(3.0, "<=", 3.0, True), (3.01, "<=", 3.0, False), (60.0, ">=", 60.0, True), (59.9, ">=", 60.0, False)],
)
def test_verdict_meets_the_bound_inclusively(value: float, op: str, threshold: float, met: bool) -> None:
    assert machine.verdict(value, op, threshold) is met


def test_verdict_refuses_an_unknown_comparison() -> None:
    with pytest.raises(ValueError, match="<"):
        machine.verdict(1.0, "<", 2.0)


def test_the_targets_are_the_issues_goals() -> None:
    assert all_bench.RATIO_TARGETS == {
        "raft_vs_pysyncobj": (">=", 5.5),
        "serial_vs_fdatasync": ("<=", 3.0),
        "http_vs_lean": (">=", 60.0),
        "remoting_vs_echo": (">=", 60.0),
        "install_vs_disk": (">=", 50.0),
    }
    assert "remoting" in all_bench.SECTIONS and set(all_bench.SECTIONS) == set(all_bench.RUNNERS)


def test_a_row_of_repetitions_gives_the_median_its_range_and_the_verdict() -> None:
    rep = all_bench.Report()
    rep.row("ratio", [2.0, 4.0, 3.5], "x", *all_bench.RATIO_TARGETS["serial_vs_fdatasync"])
    rep.row("reference", 0.25, "ms")
    ratio, ref = rep.rows
    assert ratio["value"] == 3.5 and ratio["range"] == [2.0, 4.0] and ratio["target"] == "<= 3" and not ratio["met"]
    assert ref["target"] is None and ref["met"] is None and ref["runs"] == 1


def test_percentile_is_nearest_rank() -> None:
    vals = [float(i) for i in range(1, 101)]
    assert machine.percentile(vals, 0.5) in (50.0, 51.0) and machine.percentile(vals, 0.99) == 99.0
    assert machine.percentile([7.0], 0.99) == 7.0
    with pytest.raises(ValueError):
        machine.percentile([], 0.5)


# --- the machine references on a tiny size --------------------------------------------------------------------


def test_fdatasync_reference_gives_sane_numbers_and_leaves_nothing(tmp_path: Path) -> None:
    r = machine.fdatasync_latency(str(tmp_path), n=20)
    assert r["writes"] == 20 and r["bytes"] == 256
    assert 0 < r["p50_ms"] <= r["p99_ms"] and r["mean_ms"] > 0
    assert list(tmp_path.iterdir()) == []


def test_the_disks_own_stalls_are_counted_over_the_bound_and_leave_nothing(tmp_path: Path) -> None:
    r = machine.fdatasync_stalls(0.2, 0.05, str(tmp_path))
    assert r["seconds"] == 0.2 and r["writes"] > 0 and r["over_ms"] == 50
    assert 0 < r["p50_ms"] <= r["max_ms"] and 0 <= r["over"] <= r["writes"]
    assert (r["over"] > 0) == (r["max_ms"] > 50)  # the slowest is over the bound exactly when one was counted
    # a bound below every write's time counts them all
    low = machine.fdatasync_stalls(0.1, 1e-9, str(tmp_path))
    assert low["over"] == low["writes"] > 0
    assert list(tmp_path.iterdir()) == []


def test_write_bandwidth_reference_gives_sane_numbers_and_leaves_nothing(tmp_path: Path) -> None:
    r = machine.write_bandwidth(str(tmp_path), total=4 * machine.MiB)
    assert r["bytes"] == 4 * machine.MiB and r["seconds"] > 0 and r["mib_s"] > 0
    assert math.isclose(r["mib_s"], 4 / r["seconds"], rel_tol=0.01)
    assert list(tmp_path.iterdir()) == []


def test_the_machine_is_described_as_this_process_sees_it(monkeypatch: pytest.MonkeyPatch) -> None:
    d = machine.describe()
    assert d["cpus"] == os.cpu_count() and d["python"] == platform.python_version() and d["cpu_model"]
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: "'--enable-optimizations' '--with-lto'")
    assert machine.describe()["python_optimized"] is True and machine.describe()["python_shared"] is False
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: "'--enable-shared'")
    assert machine.describe()["python_optimized"] is False and machine.describe()["python_shared"] is True


def test_the_references_use_the_bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_DIR", str(tmp_path))
    assert machine.bench_dir() == str(tmp_path)
    monkeypatch.delenv("BENCH_DIR")
    assert os.path.isdir(machine.bench_dir())


def test_a_reference_refuses_sizes_that_measure_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        machine.fdatasync_latency(str(tmp_path), n=0)
    with pytest.raises(ValueError):
        machine.fdatasync_stalls(0, 0.05, str(tmp_path))
    with pytest.raises(ValueError):
        machine.write_bandwidth(str(tmp_path), total=1024, block=machine.MiB)


# --- the bare remoting echo server ----------------------------------------------------------------------------

CLUSTER, SET = "PeersCluster", "peers-00001"


async def _exchange(lean: bool, serialize_type: int) -> tuple[str, list[tuple[int, codec.RemotingCommand]]]:
    """ControllerLoad's sequence against a fresh echo server: 1005, 1012, 1013, 1012 again, 1003, 904, and a
    1012 of another set."""
    server = await bare_remoting.start(0, lean)
    client = await RemotingClient.connect("127.0.0.1", server.port, serialize_type)
    try:
        out = []
        for code, ext in (
            (H.GET_METADATA_INFO, None),
            (C.GET_NEXT_BROKER_ID, {"clusterName": CLUSTER, "brokerName": SET}),
            (
                C.APPLY_BROKER_ID,
                {"clusterName": CLUSTER, "brokerName": SET, "appliedBrokerId": 1, "registerCheckCode": "a:1;1"},
            ),
            (C.GET_NEXT_BROKER_ID, {"clusterName": CLUSTER, "brokerName": SET}),
            (C.REGISTER_BROKER, {"clusterName": CLUSTER, "brokerName": SET, "brokerId": 1, "brokerAddress": "a:1"}),
            (
                H.BROKER_HEARTBEAT,
                {"clusterName": CLUSTER, "brokerName": SET, "brokerAddr": "a:1", "brokerId": 1, "epoch": 0},
            ),
            (C.GET_NEXT_BROKER_ID, {"clusterName": CLUSTER, "brokerName": "other"}),
        ):
            out.append((code, await client.request(code, ext, timeout=10)))
        return f"127.0.0.1:{server.port}", out
    finally:
        client.close()
        await server.stop()


@pytest.mark.parametrize("lean", [False, True], ids=["stack", "lean"])
@pytest.mark.parametrize("serialize_type", [codec.ROCKETMQ, codec.JSON], ids=["rocketmq", "json"])
def test_echo_server_answers_every_code_the_load_generator_sends(lean: bool, serialize_type: int) -> None:
    address, answers = asyncio.run(_exchange(lean, serialize_type))
    (c1005, meta), (c1012, nxt), (c1013, apply), (_, nxt2), (c1003, reg), (c904, hb), (_, other) = answers
    assert [c for c, _ in answers] == [1005, 1012, 1013, 1012, 1003, 904, 1012]
    for code, resp in answers:
        assert resp.code == C.SUCCESS and resp.is_response, (code, resp)
        assert resp.serialize_type == serialize_type, code
    # 1005: GetMetaDataResponseHeader saying this server leads (ControllerLoad.findLeader decodes isLeader)
    assert meta.ext_fields == {
        "group": "bare-remoting",
        "controllerLeaderId": "bare",
        "controllerLeaderAddress": address,
        "isLeader": "true",
        "peers": f"{address};",
    }
    # 1012 / 1013: GetNextBrokerIdResponseHeader, ApplyBrokerIdResponseHeader; an id is offered once per set
    assert nxt.ext_fields == {"clusterName": CLUSTER, "brokerName": SET, "nextBrokerId": "1"}
    assert apply.ext_fields == {"clusterName": CLUSTER, "brokerName": SET}
    assert nxt2.ext_fields["nextBrokerId"] == "2"
    assert other.ext_fields == {"clusterName": CLUSTER, "brokerName": "other", "nextBrokerId": "1"}
    # 1003: RegisterBrokerToControllerResponseHeader before any election (no master), the SyncStateSet body
    assert envelope(c1003, reg) == {
        "code": 0,
        "codeName": "SUCCESS",
        "remark": None,
        "header": {
            "clusterName": CLUSTER,
            "brokerName": SET,
            "masterBrokerId": None,
            "masterAddress": None,
            "masterEpoch": None,
            "syncStateSetEpoch": None,
        },
        "body": {"syncStateSet": [], "syncStateSetEpoch": 0},
    }
    # 904: what the controller's state machine answers every heartbeat
    assert hb.remark == "Heart beat success" and hb.ext_fields == {} and hb.body is None
    for code, resp in ((c1005, meta), (c1012, nxt), (c1013, apply)):  # every field is one the Java header declares
        assert set(resp.ext_fields) <= {name for name, _, _ in H.RESPONSE[code]}, code


def test_echo_server_runs_as_a_process() -> None:
    (port,) = free_ports(1)
    proc = subprocess.Popen([sys.executable, "-m", "tools.bench.bare_remoting", str(port), "--lean"])
    try:
        all_bench.wait_port("127.0.0.1", port, 30, proc)

        async def ask() -> codec.RemotingCommand:
            client = await RemotingClient.connect("127.0.0.1", port)
            try:
                return await client.request(H.GET_METADATA_INFO, timeout=10)
            finally:
                client.close()

        assert asyncio.run(ask()).ext_fields["isLeader"] == "true"
    finally:
        proc.terminate()
        proc.wait(30)


def test_echo_server_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.bench.bare_remoting"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "usage" in proc.stderr


# --- the section in `python -m tools.bench all` ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.xdist_group("interop")
@pytest.mark.timeout(300)
def test_remoting_section_runs_on_tiny_input(run_bench: RunBench) -> None:
    """Ours and the echo server each get every broker registered and every heartbeat answered; no timing."""
    from cli import rocketmq

    rocketmq.require()
    proc, report = run_bench("all", "--quick", "--only", "remoting", timeout=280)
    assert report["errors"] == {}, report["errors"]
    (run,) = report["details"]["remoting"]
    for who in ("ours", "echo"):
        reg, hb = run[f"{who}_register"], run[who]
        assert reg["registered"] == reg["brokers"] == 30 and reg["duplicate_ids"] == 0 and reg["errors"] == 0, reg
        assert hb["acknowledged"] > 0 and hb["errors"] == 0 and hb["unanswered"] == 0, (who, hb)
    rows = {r["name"].strip(): r for r in report["rows"]}
    ratio = rows["same, % of the bare remoting echo server"]
    assert ratio["target"] == ">= 60" and isinstance(ratio["met"], bool)
    assert any(name.startswith("reference: bare remoting echo server") for name in rows)
    assert "reference: bare remoting echo server" in proc.stdout
    json.dumps(report)  # well-formed

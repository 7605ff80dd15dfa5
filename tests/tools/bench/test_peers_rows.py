"""The peers benchmark's bookkeeping, offline: how a RocketMQ controller's applied index is read from its log,
the quantiles over the kills, the rows of the realistic-load curve. Never a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.bench import broker_failover_peers as bfp
from tools.bench import peers

JRAFT = (
    "2026-11-28 07:51:38 INFO JRaft-FSMCaller-Disruptor-0 - process event: term 2, index {i}, request code 904\n"
    "2026-11-28 07:51:38 INFO JRaft-FSMCaller-Disruptor-0 - process event: term 2, index {i}, request code 904 "
    "success with result ControllerResult{{events=[]}}\n"
)
DLEDGER = "2026-11-28 07:51:38 INFO pool-3-thread-1 - Apply 3 events index from {a} to {b} on controller n1\n"


def test_the_applied_index_is_the_highest_logged_after_the_mark(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    assert peers.last_applied(str(log)) is None  # no log yet
    log.write_text("boot\n" + "".join(JRAFT.format(i=i) for i in (7, 9, 8)))
    assert peers.last_applied(str(log)) == 9
    mark = log.stat().st_size
    assert peers.last_applied(str(log), since=mark) is None  # the previous start's lines do not count
    with log.open("a") as f:
        f.write(JRAFT.format(i=3) + DLEDGER.format(a=4, b=6))
    assert peers.last_applied(str(log), since=mark) == 6
    log.write_text(JRAFT.format(i=2))  # rolled over: shorter than the mark, read from its start
    assert peers.last_applied(str(log), since=mark) == 2


def test_the_tail_first_then_further_back(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    log.write_text(JRAFT.format(i=100) + "x" * 5000 + "\n" + JRAFT.format(i=5))
    assert peers.last_applied(str(log), tail=1000) == 5  # the last one found in the tail
    assert peers.last_applied(str(log)) == 100
    # other lines after the last applied entry, far more than the tail: it is still found
    noise = "".join(f"INFO new broker registered, broker-{k}\n" for k in range(20000))
    log.write_text(DLEDGER.format(a=1, b=7) + noise)
    assert peers.last_applied(str(log), tail=1000) == 7
    mark = len(DLEDGER.format(a=1, b=7))
    assert peers.last_applied(str(log), since=mark, tail=1000) is None  # but never before the mark


def test_nearest_rank_over_twenty_kills() -> None:
    took = [float(k) for k in range(20, 0, -1)]
    assert peers.nearest_rank(took, 0.50) == 10.0
    assert peers.nearest_rank(took, 0.99) == 20.0  # of 20 values, p99 is the largest
    assert peers.nearest_rank([3.0], 0.99) == peers.nearest_rank([3.0], 0.5) == 3.0


def test_the_curve_adds_rows_for_every_size_but_the_realistic_one() -> None:
    names = [name for name, *_ in peers.row_defs([1000, 10000, 30000], brokers=10000)]
    assert names[: len(peers.ROWS)] != names  # rows were added
    curve = [n for n in names if n.startswith("realistic load at")]
    assert curve == [
        "realistic load at 1,000 brokers: leader CPU",
        "realistic load at 1,000 brokers: leader CPU per acknowledged heartbeat",
        "realistic load at 1,000 brokers: heartbeat p99",
        "realistic load at 1,000 brokers: unanswered or failed",
        "realistic load at 30,000 brokers: leader CPU",
        "realistic load at 30,000 brokers: leader CPU per acknowledged heartbeat",
        "realistic load at 30,000 brokers: heartbeat p99",
        "realistic load at 30,000 brokers: unanswered or failed",
    ]
    k = names.index(peers.CURVE_AFTER)
    assert names[k + 1 : k + 9] == curve  # right after the 10,000-broker rows
    assert [n for n, *_ in peers.row_defs(None)] == [n for n, *_ in peers.ROWS]


def a_round(per_s: float = 400.0) -> dict[str, Any]:
    """A round as one_round saves it, with only the figures derive reads."""
    return {
        "memory": {"leader_rss_bytes": 100 << 20, "leader_cpu_pct": 20.0},
        "disk": {"bytes_per_node": [4096, 2048, 1024], "empty_bytes_per_node": [0, 0, 0]},
        "heartbeat": {"total_acknowledged": 4},
        "steady": {"unanswered": 2, "errors": 3, "per_s": per_s},
        "curve": [
            {
                "brokers": 1000,
                "leader_cpu_pct": 5.0,
                "leader_rss_bytes": 1 << 20,
                "steady": {"p99_ms": 2.0, "per_s": 1000.0, "unanswered": 0, "errors": 0},
            },
            {
                "brokers": 30000,
                "leader_cpu_pct": 90.0,
                "leader_rss_bytes": 1 << 20,
                "steady": {"p99_ms": None, "per_s": 0.0, "unanswered": 0, "errors": 7},
            },
        ],
        "failovers": [{"serving_s": s} for s in (0.3, 0.1, 0.2)],
        "million_disk": {"bytes_per_node": [2048, 10240, 0], "allocated_bytes_per_node": [4096, 12288, 0]},
    }


def test_a_round_derives_the_kills_quantiles_and_the_curve() -> None:
    r = a_round()
    r["disk"]["allocated_bytes_per_node"] = [8192, 0, 0]
    peers.derive(r)
    assert r["failover_kills"] == {"kills": 3, "p50_s": 0.2, "p99_s": 0.3, "max_s": 0.3}
    assert r["curve_by_size"]["1000"]["p99_ms"] == 2.0 and r["curve_by_size"]["1000"]["leader_rss_mib"] == 1.0
    assert r["million_disk"]["max_kib"] == 10.0 and r["million_disk"]["allocated_max_kib"] == 12.0
    assert r["disk"]["per_heartbeat"] == 1024.0
    assert peers.get(r, "curve_by_size.1000.leader_cpu_pct") == 5.0
    assert peers.get(r, "failover_kills.p99_s") == 0.3
    assert r["steady"]["unanswered_or_failed"] == 5
    # 20 % of a core over 400 acknowledged/s is 500 us each; 5 % over 1,000/s is 50 us
    assert r["memory"]["leader_cpu_us_per_ack"] == 500.0
    assert r["curve_by_size"]["1000"]["leader_cpu_us_per_ack"] == 50.0
    # a size where every heartbeat failed has CPU but no CPU per acknowledged heartbeat
    assert r["curve_by_size"]["30000"]["leader_cpu_pct"] == 90.0
    assert r["curve_by_size"]["30000"]["leader_cpu_us_per_ack"] is None


def test_a_saved_run_gains_the_rows_derived_since_and_an_old_one_keeps_its_own() -> None:
    rounds = []
    for k, (system, per_s) in enumerate((("ours", 400.0), ("jraft", 100.0), ("ours", 800.0))):
        r = a_round(per_s)
        r["disk"]["allocated_bytes_per_node"] = [8192, 0, 0]
        r.update(system=system, round=k)
        rounds.append(r)
    doc: dict[str, Any] = {"settings": {"sizes": [1000, 10000, 30000], "brokers": 10000}, "rounds": rounds, "rows": []}
    peers.rederive(doc, ["ours", "jraft"])
    row = next(r for r in doc["rows"] if r["name"] == "realistic load: leader CPU per acknowledged heartbeat")
    # ours: 500 and 250 us (20 % over 400/s and 800/s), median 375; jraft: 20 % over 100/s, 2,000 us
    assert row["systems"]["ours"]["median"] == 375.0 and row["systems"]["ours"]["range"] == [250.0, 500.0]
    assert row["systems"]["jraft"]["median"] == 2000.0 and row["systems"]["ours"]["vs_jraft"] == 0.188
    # nobody acknowledged a heartbeat at 30,000: no figure, so no row, while the CPU row is there
    names = [r["name"] for r in doc["rows"]]
    assert "realistic load at 30,000 brokers: leader CPU" in names
    assert not [n for n in names if n.startswith("realistic load at 30,000 brokers: leader CPU per")]
    old = {"rounds": [{"system": "ours", "memory": {}}], "rows": [{"name": "saved", "systems": {}}]}
    peers.rederive(old, ["ours"])  # a run before the curve: its saved rows stay
    assert old["rows"] == [{"name": "saved", "systems": {}}]


def test_each_group_of_a_round_works_in_its_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--systems ours,ours --keep` once started the second group on the first one's data, which it refused
    seen: list[str] = []

    def fake_round(system: str, where: str, a: object) -> dict[str, object]:
        assert where not in seen, f"{where} is already another group's"
        seen.append(where)
        raise RuntimeError("not started: only its directory is looked at")

    monkeypatch.setattr(peers.rocketmq, "require", lambda: None)
    monkeypatch.setattr(peers.rocketmq, "version", lambda: "test")
    monkeypatch.setattr(peers, "one_round", fake_round)
    a = peers.parse(["--systems", "ours,ours", "--rounds", "2", "--keep", "--dir", str(tmp_path), "--json", ""])
    doc = peers.run(a, ["ours", "ours"])
    assert len(seen) == 4 and len(set(seen)) == 4
    assert [e["system"] for e in doc["errors"]] == ["ours"] * 4


def test_broker_failover_alternates_systems_in_directories_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    roots: list[str] = []

    def fake_failover(system: str, root: str, kills: int) -> dict[str, Any]:
        assert root not in roots, f"{root} is already another run's"
        roots.append(root)
        return {"system": system, "error": "not started: only its directory is looked at"}

    monkeypatch.setattr(bfp, "broker_failover", fake_failover)
    monkeypatch.setattr(bfp.rocketmq, "version", lambda: "test")
    assert bfp.main(["--systems", "ours,jraft,ours,jraft", "--kills", "1", "--dir", str(tmp_path)]) == 1
    assert len(set(roots)) == 4
    assert capsys.readouterr().out.count("not started") == 4


def test_run_queue_wait_of_three_spinners_sharing_one_cpu() -> None:
    # three busy processes pinned to one CPU: each runs a third of the time and waits for it two thirds
    cpu = min(os.sched_getaffinity(0))
    spin = (
        "import os, sys, time; os.sched_setaffinity(0, {%d}); print('on', flush=True)\n"
        "if sys.argv[1] == 'timed':\n"
        "    sys.stdin.readline(); t = time.process_time()\n"
        "    while time.process_time() - t < 0.2: pass\n"
        "    print('ran', flush=True)\n"
        "while True: pass"
    )
    roles = ["timed", "plain", "plain"]
    procs = [
        subprocess.Popen([sys.executable, "-c", spin % cpu, r], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for r in roles
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == b"on\n"  # pinned from here on
        first = procs[0]
        assert first.stdin is not None and first.stdout is not None
        wait0, cpu0 = peers.runq_wait_s(first.pid), peers.cpu_s(first.pid)
        first.stdin.write(b"go\n")
        first.stdin.flush()
        assert first.stdout.readline() == b"ran\n"  # it has run 0.2 s more: the other two ran meanwhile
        waited, ran = peers.runq_wait_s(first.pid) - wait0, peers.cpu_s(first.pid) - cpu0
        assert waited > 1.5 * ran, (waited, ran)  # about 2x; anything else on that CPU only adds to it
    finally:
        for p in procs:
            p.kill()
            p.wait()
    with pytest.raises(FileNotFoundError):
        peers.runq_wait_s(procs[0].pid)  # gone


def test_broker_zero_of_a_set_in_the_name_servers_route() -> None:
    # the NameServer writes the Long keys of brokerAddrs bare, as fastjson does: not JSON until quoted
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{1:"127.0.0.1:10921",0:"127.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"c"},{"brokerAddrs":{1:"127.0.0.1:10931"},"brokerName":"broker-b","cluster":"c"}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4}]}'
    )
    assert bfp.route_master(body, "broker-a") == "127.0.0.1:10911"
    assert bfp.route_master(body, "broker-b") is None  # slaves only: no master to route to
    assert bfp.route_master(body, "broker-c") is None
    quoted = b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a"}]}'
    assert bfp.route_master(quoted, "broker-a") == "127.0.0.1:10911"


def test_slow_log_writes_are_read_from_two_cumulative_histograms() -> None:
    inf = float("inf")
    before = {0.001: 90.0, 0.025: 98.0, 0.05: 99.0, 0.1: 100.0, inf: 100.0}
    # 10 more writes: 5 under 1 ms, 2 in (25, 50] ms, 3 in (50, 100] ms
    after = {0.001: 95.0, 0.025: 103.0, 0.05: 106.0, 0.1: 110.0, inf: 110.0}
    assert peers.slow_count(before, after, 0.05) == 3
    assert peers.slow_count(before, after, 0.025) == 5
    assert peers.slowest_ms(before, after) == 100.0  # the lowest bound that holds all 10
    past = after | {0.1: 110.0, inf: 111.0}  # one write past the last bound
    assert peers.slowest_ms(before, past) == "+Inf" and peers.slow_count(before, past, 0.05) == 4
    assert json.loads(json.dumps(peers.slowest_ms(before, past), allow_nan=False)) == "+Inf"  # strict JSON
    assert peers.slowest_ms(before, before) is None  # no write in between
    assert peers.slow_count(None, after, 0.05) is None and peers.slowest_ms(before, None) is None


def test_the_slow_lines_name_each_step_of_ours_and_nothing_of_the_jvms() -> None:
    step = {
        "brokers": 10000,
        "steady": {"p99_ms": 30.5},
        "over_50ms": {"log_write": [1, 1, 1], "commit": [0, 0, 4], "loop_lag": [0, 0, 0]},
        "slowest_ms": {"log_write": [100.0] * 3, "commit": [None, None, 250.0], "loop_lag": [5.0, 5.0, 10.0]},
    }
    doc = {"rounds": [{"system": "ours", "round": 0, "curve": [step]}, {"system": "jraft", "round": 0, "curve": [{}]}]}
    [line] = peers.slow_lines(doc)
    assert line.startswith("ours round 0, 10,000 brokers, p99 30.5 ms; over 50 ms per node: log_write [1, 1, 1]")
    assert "commit [0, 0, 4] (slowest up to [None, None, 250.0] ms)" in line and "loop_lag [0, 0, 0]" in line

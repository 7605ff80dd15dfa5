"""Nemeses: grudges for 3 and 5 nodes, seeded schedules, faketime clocks, WAL crash cuts, the runner's probes."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from cli.config import parse_config, to_node_options
from jepsen import nemesis as N
from jepsen.db import Cluster, ClusterOptions, FakeClock, lose_unsynced
from jepsen.net import Net, ProbeResult, expected_matrix

SEEDS = range(200)


def majority(n: int) -> int:
    return n // 2 + 1


def views(g: N.Grudge, n: int) -> dict[int, set[int]]:
    return N.sees(g, list(range(1, n + 1)))


def symmetric(g: N.Grudge) -> bool:
    return all(a in g.get(b, set()) for a, bs in g.items() for b in bs)


@pytest.mark.parametrize("n", [3, 5])
def test_partition_random_node_isolates_exactly_one_node(n: int) -> None:
    for seed in SEEDS:
        plan = N.grudge_for("partition-random-node", random.Random(seed), range(1, n + 1))
        g = N._grudge(plan["grudge"])
        v = views(g, n)
        lone = plan["isolated"]
        assert v[lone] == {lone}
        assert all(v[a] == set(range(1, n + 1)) - {lone} for a in v if a != lone)
        assert symmetric(g)


@pytest.mark.parametrize("n", [3, 5])
def test_random_halves_are_a_majority_and_a_minority(n: int) -> None:
    seen = set()
    for seed in SEEDS:
        plan = N.grudge_for("partition-random-halves", random.Random(seed), range(1, n + 1))
        small, large = plan["components"]
        assert len(small) == n // 2 and len(large) == n - n // 2 and set(small) | set(large) == set(range(1, n + 1))
        v = views(N._grudge(plan["grudge"]), n)
        assert all(v[a] == set(small) for a in small) and all(v[b] == set(large) for b in large)
        seen.add(tuple(small))
    assert len(seen) == len(list(combinations(range(1, n + 1), n // 2)))  # every cut happens


def test_majorities_ring_every_node_sees_a_distinct_majority() -> None:
    for seed in SEEDS:
        plan = N.grudge_for("partition-majorities-ring", random.Random(seed), range(1, 6))
        g = N._grudge(plan["grudge"])
        v = views(g, 5)
        assert all(len(v[a]) == majority(5) for a in v), v
        assert len({frozenset(s) for s in v.values()}) == 5, "two nodes see the same majority"
        ring = plan["ring"]
        for pos, a in enumerate(ring):
            assert v[a] == {a, ring[pos - 1], ring[(pos + 1) % 5]}
        assert symmetric(g)
        m = expected_matrix(5, g)
        assert all(sum(row) == 3 for row in m)


def test_majorities_ring_needs_five_nodes_and_three_use_bridge() -> None:
    with pytest.raises(ValueError):
        N.majorities_ring([1, 2, 3])
    name, note = N.effective_nemesis("partition-majorities-ring", 3)
    assert name == "bridge" and note and "bridge" in note
    assert N.effective_nemesis("partition-majorities-ring", 5) == ("partition-majorities-ring", None)
    for seed in SEEDS[:20]:  # 7 nodes: still every view a majority, all distinct
        ring = list(range(1, 8))
        random.Random(seed).shuffle(ring)
        v = views(N.majorities_ring(ring), 7)
        assert all(len(s) >= majority(7) for s in v.values()) and len({frozenset(s) for s in v.values()}) == 7


@pytest.mark.parametrize("n", [3, 5])
def test_bridge_node_sees_everyone_and_the_halves_do_not_meet(n: int) -> None:
    for seed in SEEDS:
        plan = N.grudge_for("bridge", random.Random(seed), range(1, n + 1))
        small, large = plan["components"]
        b = plan["bridge"]
        assert b in large
        v = views(N._grudge(plan["grudge"]), n)
        assert v[b] == set(range(1, n + 1))
        assert all(v[a] == set(small) | {b} for a in small)
        assert all(v[x] == set(large) for x in large if x != b)
        # the bridge sees a majority; the large side is a majority; the small side plus the bridge is not
        assert len(v[b]) >= majority(n) and len(set(large)) >= majority(n)


def test_complete_grudge_and_isolate() -> None:
    assert N.complete_grudge([[1], [2, 3]]) == {1: {2, 3}, 2: {1}, 3: {1}}
    assert N.isolate(2, [1, 2, 3]) == {2: {1, 3}, 1: {2}, 3: {2}}
    assert N.complete_grudge([[1, 2, 3]]) == {1: set(), 2: set(), 3: set()}


@pytest.mark.parametrize("n", [3, 5])
def test_mostly_small_subsets_are_non_empty_and_biased_small(n: int) -> None:
    sizes = Counter(len(N.mostly_small_subset(random.Random(s), range(1, n + 1))) for s in range(2000))
    assert set(sizes) <= set(range(1, n + 1)) and min(sizes) == 1
    assert sizes[1] > sizes[n]
    assert sizes[n] > 0, "killing every node must happen sometimes"


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("name", N.NEMESES)
def test_schedules_are_deterministic_by_seed_and_alternate(name: str, n: int) -> None:
    name, _ = N.effective_nemesis(name, n)
    a = N.make_schedule(name, n, 7, 60, 10)
    assert a == N.make_schedule(name, n, 7, 60, 10)
    assert [s.f for s in a] == ["start", "stop", "start", "stop", "start"]
    assert [s.at for s in a] == [10, 20, 30, 40, 50]
    assert all(s.at < 60 for s in a)
    for s in a:
        if s.f == "start" and "grudge" in s.params:
            assert all(1 <= int(k) <= n and set(v) <= set(range(1, n + 1)) for k, v in s.params["grudge"].items())
        if "nodes" in s.params:
            assert set(s.params["nodes"]) <= set(range(1, n + 1)) and s.params["nodes"]
    if name not in ("isolate-leader", "pause-leader", "pause-isolated-leader"):  # those choose at run time
        others = [N.make_schedule(name, n, seed, 60, 10) for seed in range(8)]
        assert any(o != a for o in others), "the seed changes nothing"


def test_schedule_refuses_unknown_nemesis_and_bad_interval() -> None:
    with pytest.raises(ValueError):
        N.make_schedule("partition-everything", 5, 1, 60, 10)
    with pytest.raises(ValueError):
        N.make_schedule("bridge", 5, 1, 60, 0)
    assert N.make_schedule("bridge", 5, 1, 5, 10) == []  # shorter than one quiet period: no fault


def test_clock_skew_plans_bounded_moves() -> None:
    for seed in SEEDS:
        p = N.plan("clock-skew", random.Random(seed), [1, 2, 3, 4, 5], 10)
        if p["mode"] == "bump":
            assert all(0.05 <= abs(d) <= N.MAX_BUMP_S for d in p["bumps"].values())
        elif p["mode"] == "rate":
            assert all(0.5 <= r <= 1.5 for r in p["rates"].values())
        else:
            assert 0 < p["delta"] <= 2 and 0 < p["period"] <= 1


def test_fake_clock_changes_rate_without_jumping() -> None:
    c = FakeClock(start=1000.0)
    assert c.fake(1010.0) == 1010.0 and c.spec() == "+0.000000 x1.000000"
    c.retarget(1010.0, rate=2.0)
    assert c.fake(1010.0) == pytest.approx(1010.0)  # continuous at the change
    assert c.fake(1011.0) == pytest.approx(1012.0)  # then twice as fast
    c.retarget(1011.0, jump=5.0)
    assert c.fake(1011.0) == pytest.approx(1017.0) and c.rate == 2.0
    c.retarget(1012.0, rate=1.0)
    assert c.fake(1012.0) == pytest.approx(1019.0) and c.skew(1013.0) == pytest.approx(7.0)
    c.reset()
    assert c.skew(2000.0) == 0.0


def wal(tmp_path: Path, sizes: dict[str, int], sidecar: str | None) -> Path:
    d = tmp_path / "log"
    d.mkdir()
    for name, size in sizes.items():
        (d / name).write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    if sidecar is not None:
        (d / "FSYNCED").write_text(sidecar.ljust(79) + "\n")
    return d


SEG1 = "00000000000000000001-0000000000000001.wal"
SEG2 = "00000000000000000900-0000000000000002.wal"
SEG3 = "00000000000000000950-0000000000000003.wal"


def test_crash_cuts_the_wal_back_to_the_fsynced_offset(tmp_path: Path) -> None:
    d = wal(tmp_path, {SEG1: 5000, SEG2: 3000, SEG3: 40}, f"{SEG2} 1200")
    out = lose_unsynced(d, random.Random(1), torn=False)
    assert (d / SEG1).stat().st_size == 5000  # earlier segments are durable
    assert (d / SEG2).stat().st_size == 1200
    assert not (d / SEG3).exists() and out["deleted_segments"] == [SEG3]
    assert out["truncated_bytes"] == 1800 and out["torn_bytes"] == 0


def test_a_torn_write_keeps_a_few_unsynced_bytes_never_fewer_than_durable(tmp_path: Path) -> None:
    for seed in range(50):
        (tmp_path / str(seed)).mkdir()
        d = wal(tmp_path / str(seed), {SEG1: 3000}, f"{SEG1} 1200")
        before = (d / SEG1).read_bytes()
        out = lose_unsynced(d, random.Random(seed), torn=True)
        after = (d / SEG1).read_bytes()
        assert 1200 < len(after) <= 1200 + 64 and after == before[: len(after)]
        assert out["torn_bytes"] == len(after) - 1200


def test_a_torn_write_at_the_end_of_the_file_appends_junk(tmp_path: Path) -> None:
    d = wal(tmp_path, {SEG1: 1200}, f"{SEG1} 1200")
    out = lose_unsynced(d, random.Random(3), torn=True)
    assert 1200 < (d / SEG1).stat().st_size <= 1264 and out["torn_bytes"] == (d / SEG1).stat().st_size - 1200


def test_no_sidecar_means_nothing_is_cut(tmp_path: Path) -> None:
    d = wal(tmp_path, {SEG1: 500}, None)
    assert lose_unsynced(d, random.Random(1), torn=True)["sidecar"] is None
    assert (d / SEG1).stat().st_size == 500


# ------------------------------------------------------------------------------------------------ runner


class FakeRecorder:
    def __init__(self) -> None:
        self.records: list[tuple[str, Any]] = []

    def nemesis(self, f: str, value: Any) -> None:
        self.records.append((f, value))


class FakeNet:
    """Applies nothing; `works` says whether the probe finds the grudge in effect."""

    def __init__(self, works: bool) -> None:
        self.works = works
        self.grudge: dict[int, set[int]] = {}
        self.applied: list[dict[int, set[int]]] = []

    def apply_grudge(self, g: dict[int, set[int]]) -> None:
        self.grudge = {a: set(b) for a, b in g.items() if b}
        self.applied.append(self.grudge)

    def heal(self) -> None:
        self.apply_grudge({})

    def probe(self, port: int) -> ProbeResult:
        want = expected_matrix(3, self.grudge)
        got = want if self.works else [[1] * 3 for _ in range(3)]
        return ProbeResult(want, got, [1, 1, 1], 1, {str(k): sorted(v) for k, v in self.grudge.items()})


def run_steps(works: bool) -> tuple[N.Runner, FakeRecorder, FakeNet]:
    rec, net = FakeRecorder(), FakeNet(works)
    ctx = N.Context(net, None, rec, log=lambda _m: None)  # type: ignore[arg-type]
    steps = [
        N.Step(0.0, "start", N.grudge_for("partition-random-halves", random.Random(1), [1, 2, 3])),
        N.Step(0.0, "stop"),
    ]
    runner = N.Runner(ctx, N.make_nemesis("partition-random-halves"), steps, t0=0.0)
    runner.start()
    runner._thread.join()
    return runner, rec, net


def test_runner_records_faults_and_probes_after_each() -> None:
    runner, rec, net = run_steps(works=True)
    assert runner.error is None and runner.applied == 1 and not runner.failed.is_set()
    assert [f for f, _ in rec.records] == ["start", "probe", "stop", "probe"]
    start = rec.records[0][1]
    assert start["nemesis"] == "partition-random-halves" and start["grudge"] and start["components"]
    assert rec.records[1][1]["ok"] and rec.records[1][1]["grudge"] == start["grudge"]
    assert net.applied[-1] == {}


def test_runner_aborts_when_the_partition_is_not_in_effect() -> None:
    runner, rec, _ = run_steps(works=False)
    assert runner.failed.is_set() and isinstance(runner.error, N.NemesisAbort)
    assert "not as the nemesis set it" in str(runner.error)
    assert [f for f, _ in rec.records] == ["start", "probe"] and rec.records[1][1]["ok"] is False


# ------------------------------------------------------------------------------------------- run options


def test_nemesis_option_takes_one_a_list_or_all() -> None:
    import click

    from jepsen.run import _nemeses

    assert _nemeses("all") == list(N.NEMESES)
    assert _nemeses("bridge, hammer-time") == ["bridge", "hammer-time"]
    with pytest.raises(click.BadParameter, match="partition-everything"):
        _nemeses("bridge,partition-everything")


def test_recovery_verdict_tells_bugs_from_interference() -> None:
    from jepsen.run import recovery_verdict

    ok = {"recovery": {"not_ready": [], "seconds": 1.0, "final_reads": "all done"}, "unexpected_exits": []}
    assert recovery_verdict(ok)["verdict"] == "valid"
    stuck = {**ok, "recovery": {"not_ready": ["n2"], "seconds": 30.0, "final_reads": {"unread_keys": ["k1"]}}}
    r = recovery_verdict(stuck)
    assert r["verdict"] == "invalid" and len(r["problems"]) == 2
    died = {**ok, "unexpected_exits": [{"node": "n3", "returncode": 1, "start": 2}]}
    assert recovery_verdict(died)["verdict"] == "invalid"
    signalled = {**ok, "unexpected_exits": [{"node": "n3", "returncode": 0, "start": 1}]}
    assert recovery_verdict(signalled)["verdict"] == "unknown"


def test_the_harness_configs_are_valid_controller_confs(tmp_path: Path) -> None:
    """The generated controller.conf files parse without warnings (a misspelt key would silently keep its
    default) and give the nodes the small trailing log that makes lagging nodes need InstallSnapshot."""
    net = Net(3, tag="t0001")
    net.prefix = "10.250.7"  # as setup() would choose; nothing is created
    cluster = Cluster(net, tmp_path, ClusterOptions(snapshot_threshold=300, trailing_logs=40))
    try:
        for node in cluster.nodes:
            cfg, warnings = parse_config(cluster.config_text(node), str(node.conf))
            assert warnings == []
            opts = to_node_options(cfg)
            assert opts.node_id == node.raft and len(opts.peers) == 3
            assert (opts.snapshot.threshold_entries, opts.snapshot.log_margin) == (300, 40)
    finally:
        cluster.http.close()


def test_an_abandoned_runner_applies_nothing_more() -> None:
    """Ctrl-C mid-run: the schedule thread stops before the network is torn down, so no later step runs
    against removed namespaces."""
    rec, net = FakeRecorder(), FakeNet(works=True)
    ctx = N.Context(net, None, rec, log=lambda _m: None)  # type: ignore[arg-type]
    steps = [N.Step(3600.0, "start", N.grudge_for("partition-random-halves", random.Random(1), [1, 2, 3]))]
    runner = N.Runner(ctx, N.make_nemesis("partition-random-halves"), steps, t0=time.monotonic())
    runner.start()
    runner.abandon()
    assert not runner._thread.is_alive()
    assert rec.records == [] and net.applied == [] and runner.applied == 0
    N.Runner(ctx, N.make_nemesis("bridge"), [], t0=0.0).abandon()  # never started: nothing to join


def test_only_the_negative_control_turns_on_unsafe_reads(tmp_path: Path) -> None:
    net = Net(3, tag="t0002")
    net.prefix = "10.250.8"
    for unsafe in (False, True):
        cluster = Cluster(net, tmp_path, ClusterOptions(unsafe_local_reads=unsafe))
        try:
            cmd = cluster.command(cluster.node(1))
            assert ("CONTROLLERD_UNSAFE_LOCAL_READS=1" in cmd) is unsafe
            assert "CONTROLLERD_FSYNC_SIDECAR=1" in cmd and cmd[:4] == ["ip", "netns", "exec", net.ns(1)]
        finally:
            cluster.http.close()


def test_lease_read_modes_configure_the_lease_and_only_the_control_uses_the_tick_lease(tmp_path: Path) -> None:
    from jepsen.run import RunConfig

    net = Net(3, tag="t0003")
    net.prefix = "10.250.9"
    for lease, tick in ((False, False), (True, False), (False, True)):
        cluster = Cluster(net, tmp_path, ClusterOptions(lease_read=lease, unsafe_tick_lease=tick))
        try:
            text = cluster.config_text(cluster.node(1))
            assert ("jRaftReadOnlyOption=ReadOnlyLeaseBased" in text) is (lease or tick)
            assert ("jRaftMaxClockDriftPercent=50" in text) is (lease or tick)
            assert ("CONTROLLERD_UNSAFE_TICK_LEASE=1" in cluster.command(cluster.node(1))) is tick
        finally:
            cluster.http.close()
    cfg = dict(
        workload="register",
        nemesis="pause-leader",
        time_limit=1,
        nodes=3,
        rate=1,
        concurrency=1,
        seed=1,
        interval=1,
        recovery=1,
        snapshot_threshold=0,
        keep_data=False,
        budget=1,
    )
    assert RunConfig(**cfg, read_mode="tick-lease").negative_control  # type: ignore[arg-type]
    assert RunConfig(**cfg, read_mode="lease").negative_control is None  # type: ignore[arg-type]
    assert not RunConfig(**cfg, read_mode="tick-lease").unsafe_reads  # type: ignore[arg-type]
    assert RunConfig(**cfg, read_mode="lease").spread_reads and not RunConfig(**cfg).spread_reads  # type: ignore[arg-type]


def test_the_combined_results_line_carries_each_checkers_verdict(tmp_path: Path) -> None:
    from jepsen.run import run_summary

    (tmp_path / "results.json").write_text(
        json.dumps(
            {
                "verdict": "valid",
                "exit_code": 0,
                "recovery": {"verdict": "valid"},
                "run": {"ops": 1200, "faults_applied": 15, "recovery": {"seconds": 2.5}},
                "checkers": {
                    "linearizability": {"verdict": "valid", "counts": {"keys": 3}},
                    "set": {"verdict": "valid", "counts": {"lost": 0}},
                },
            }
        )
    )
    line = run_summary("bridge", tmp_path, 0)
    assert line["checkers"] == {"linearizability": "valid", "set": "valid"}
    assert (line["ops"], line["faults_applied"], line["recovery_s"], line["recovery"]) == (1200, 15, 2.5, "valid")
    assert line["counts"]["set"] == {"lost": 0} and line["abort"] is None


def test_the_combined_table_has_a_row_per_nemesis_and_a_column_per_checker() -> None:
    from jepsen.run import combined_table

    rows = combined_table(
        [
            {
                "nemesis": "bridge",
                "verdict": "valid",
                "exit_code": 0,
                "ops": 18000,
                "faults_applied": 15,
                "recovery_s": 2.5,
                "checkers": {"set": "valid", "linearizability": "valid"},
            },
            {"nemesis": "hammer-time", "verdict": "aborted", "exit_code": 4, "checkers": {}},
        ]
    )
    assert rows[0].split() == ["nemesis", "verdict", "exit", "ops", "faults", "recovery", "linearizability", "set"]
    assert rows[1].split() == ["bridge", "valid", "0", "18000", "15", "2.5", "s", "valid", "valid"]
    assert rows[2].split() == ["hammer-time", "aborted", "4", "0", "0", "-", "-", "-"]


def test_spare_servers_are_in_no_config_file_until_they_join_and_come_back_with_new_ids(tmp_path: Path) -> None:
    """The membership nemesis's brand-new servers (issue 12): the group's config files never name a spare; a
    joining spare's names the members it was told of and itself; a retired spare rejoins under a new id."""
    net = Net(5, tag="t0003")
    net.prefix = "10.250.9"  # as setup() would choose; nothing is created
    cluster = Cluster(net, tmp_path, ClusterOptions(spares=N.spare_nodes("membership")))
    try:
        assert [n.name for n in cluster.members()] == ["n1", "n2", "n3"] and cluster.node(4).spare
        spare_ids = {cluster.node(4).raft, cluster.node(5).raft}
        for node in cluster.members():
            cfg, _ = parse_config(cluster.config_text(node), str(node.conf))
            assert not spare_ids & set(cfg.init_conf) and len(cfg.init_conf) == 3
        spare = cluster.node(4)
        spare.seeds = [cluster.node(1).raft, cluster.node(3).raft]
        cfg, warnings = parse_config(cluster.config_text(spare), str(spare.conf))
        assert warnings == [] and cfg.init_conf == (*spare.seeds, spare.raft)
        assert cfg.http_addrs == (cluster.node(1).http, cluster.node(3).http, spare.http)
        first = spare.raft
        spare.spare = False  # as join_spare leaves it, without starting a process
        cluster.retire(4)
        assert spare.spare and spare.raft != first and spare.raft.rsplit(":", 1)[0] == first.rsplit(":", 1)[0]
    finally:
        cluster.http.close()


def test_membership_faults_remove_add_brand_new_servers_and_shrink_to_one() -> None:
    modes = {
        s.params["mode"] for seed in range(20) for s in N.make_schedule("membership", 3, seed, 60, 10) if s.f == "start"
    }
    assert modes == set(N.MEMBERSHIP_MODES) == {"remove", "add-new", "shrink"}
    assert N.spare_nodes("membership") == 2 and N.spare_nodes("partition-random-node") == 0

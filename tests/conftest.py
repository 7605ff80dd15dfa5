"""The offline suite's order on two workers.

`make test` runs the offline suite with `--dist loadgroup`. pytest-xdist 3.8 marks a test's group on
`item._nodeid`, which pytest 9 no longer reads, so every test is its own unit of work, handed out in collection
order to whichever worker is free. Collected alphabetically, the audit's standalone-cluster test (one test: a Spark
cluster with HDFS, one audit per damaged dataset, about 7 minutes) started halfway through and ended alone, and
the suite ended on tests/tools/torture's 30-40 s sweeps. So the files are put longest first, by the seconds their
tests took in a `make test` on 2 cores (`--durations=0`, 2026-11-29, two workers), and the rest keep their order
after them: the last tests handed out are short ones, and the two workers end close together
(longest-processing-time-first scheduling, as tests/interop/conftest.py does for the interop suite).

Every RocketMQ JVM a test starts (cli/rocketmq.py: brokers, NameServers, RocketMQ's controllers, the Java clients)
gets `JAVA_OPT_EXT` (RocketMQ's own scripts' name for extra JVM options), here `-XX:TieredStopAtLevel=1` unless the
environment sets it: C1 only, as mqadmin and the Spark JVMs of the audit tests already run. A suite of tests starts
dozens of JVMs on two cores and measures none of them; C2's compiler threads were a share of each start.
Benchmarks run outside pytest and keep the JIT RocketMQ ships with.
"""

import os

os.environ.setdefault("JAVA_OPT_EXT", "-XX:TieredStopAtLevel=1")

SECONDS = {
    "tests/tools/audit/test_cluster.py": 416,
    "tests/jepsen/test_smoke.py": 215,
    "tests/raft/testing/test_sim.py": 140,
    "tests/tools/bench/test_all_smoke.py": 110,
    "tests/tools/torture/test_sweeps.py": 95,
    "tests/tools/audit/test_audit.py": 82,
    "tests/tools/torture/test_hostile_http.py": 52,
    "tests/tools/audit/test_loopback.py": 47,
    "tests/tools/audit/test_cli.py": 40,
    "tests/daemon/test_upgrade.py": 38,
    "tests/tools/bench/test_audit_smoke.py": 36,
    "tests/deploy/test_prometheus.py": 35,
    "tests/raft/node/test_install_processes.py": 34,
    "tests/daemon/test_demo.py": 31,
    "tests/daemon/test_controllerd_processes.py": 29,
    "tests/tools/torture/test_disk_faults.py": 25,
    "tests/tools/bench/test_bench_smoke.py": 24,
    "tests/tools/audit/test_make_run_data.py": 23,
    "tests/tools/audit/test_epochs.py": 22,
    "tests/cli/test_localcluster.py": 20,
    "tests/tools/torture/test_membership_crash.py": 16,
    "tests/tools/torture/test_disk_full.py": 14,
    "tests/tools/bench/test_snapshot_smoke.py": 14,
}


def pytest_collection_modifyitems(config, items):
    # Stable: tests inside a file keep their order, and files without a figure keep theirs, after the rest.
    items.sort(key=lambda item: -SECONDS.get(item.nodeid.split("::", 1)[0], 0))

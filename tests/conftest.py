"""The suite's order.

`make test` runs the offline files on three workers (`--dist loadgroup`: pytest-xdist 3.8 marks a test's group on
`item._nodeid`, which pytest 9 no longer reads, so every test is its own unit of work, handed out in collection
order), then the real-RocketMQ interop files on two (`--dist loadfile --no-loadscope-reorder`: each file whole to
one worker, as its module-scoped world of brokers and controllers needs, in collection order); the Makefile's
ALONGSIDE file, which mostly waits on RocketMQ's fixed periods, runs beside the offline files instead. Here the
files are put longest first, by the seconds each took on 2 cores (`--durations`, fresh clones of 2026-11-29 and
2026-11-30), so that the workers end close together (longest-processing-time-first scheduling): the last ones
handed out are short. A file without a figure runs after those with one, in collection order;
tests/interop/test_schedule.py fails until every interop file has a figure.

Every RocketMQ JVM a test starts (cli/rocketmq.py: brokers, NameServers, RocketMQ's controllers, the Java clients)
gets `JAVA_OPT_EXT` (RocketMQ's own scripts' name for extra JVM options), here, unless the environment sets it:
- `-XX:TieredStopAtLevel=1`: C1 only, as mqadmin and the Spark JVMs of the audit tests already run. A suite of tests
  starts dozens of JVMs on two cores and measures none of them; C2's compiler threads were a share of each start.
- `-Dtls.server.mode=disabled`: RocketMQ's default, permissive, has every remoting server (NameServer, broker,
  controller) make a self-signed RSA certificate at start (tls.test.mode.enable, Netty's SelfSignedCertificate
  through BouncyCastle). Measured on 2 cores (2026-11-30, C1 only): a NameServer's start 4.0 CPU-s with it and 1.1
  without, a controller 4.3 and 1.8, a broker 8.5 and 3.7. No test but tests/interop/test_security.py speaks TLS to
  a RocketMQ server, and its JVMs set permissive again.
Measured and not done: a class-data archive per kind of RocketMQ JVM, as the audit's Spark JVMs map one. On 2 cores
under load (2026-12-01): a broker's start 3.7-4.4 CPU-s without and 2.4-2.8 with, a controller 2.1-2.6 and 1.4-1.8,
a NameServer 1.4-1.6 and 0.9-1.0, about 75 CPU-s over the suite's ~40 broker, ~20 controller and ~10 NameServer
starts. Building the archives (a JVM of each kind run and stopped cleanly; the broker's needs a NameServer, a
controller and a producer's messages) took 133 s and ~40 CPU-s, so the suite would gain ~35 CPU-s for a build step.
mqadmin's and the Java clients' JVMs cannot use one at all: the interop classes are a directory on their classpath
("Cannot have non-empty directory in paths").
Benchmarks run outside pytest and keep the JIT and TLS mode RocketMQ ships with. Likewise every local Spark JVM
the audit starts maps the class-data archive of tools/audit/cds.py when `make test` built it (about half of each
start).
"""

import os

os.environ.setdefault("JAVA_OPT_EXT", "-XX:TieredStopAtLevel=1 -Dtls.server.mode=disabled")


def _spark_cds_archive() -> str:
    """The audit's class-data archive that `make test` builds first (make audit-env, tools/audit/cds.py), if it is
    there: every local Spark JVM of the suite maps it instead of loading Spark's classes from the jars again."""
    from tools.audit import cds

    try:
        path = str(cds.archive())
    except ImportError:  # no PySpark: nothing in this run starts Spark
        return ""
    return path if os.path.isfile(path) else ""


if archive := _spark_cds_archive():
    os.environ.setdefault("RMQ_AUDIT_CDS_ARCHIVE", archive)

SECONDS = {
    # the real-RocketMQ interop files (2026-11-30: `-m interop` on two workers, 743 s)
    "tests/interop/test_migration.py": 288,
    "tests/interop/test_migration_dledger.py": 280,
    "tests/interop/test_interop.py": 250,
    "tests/interop/test_peers_bench_smoke.py": 176,
    "tests/interop/test_audit_epochs.py": 121,
    "tests/interop/test_broker_failover_peers_smoke.py": 69,
    "tests/interop/test_run_rocketmq.py": 61,
    "tests/interop/test_failover_bench_smoke.py": 59,
    "tests/interop/test_security.py": 57,
    "tests/interop/test_realistic_ab_smoke.py": 38,
    "tests/interop/test_differential.py": 30,
    "tests/tools/bench/test_ratios.py": 19,
    "tests/interop/test_mqadmin_shell.py": 15,
    # the rest (fresh clone of 2026-11-30, two workers)
    "tests/tools/audit/test_cluster.py": 445,
    "tests/jepsen/test_smoke.py": 215,
    "tests/raft/testing/test_sim.py": 105,  # 150 seeds since 2026-12-01
    "tests/tools/torture/test_sweeps.py": 157,
    "tests/tools/bench/test_all_smoke.py": 110,
    "tests/tools/audit/test_audit.py": 82,
    "tests/daemon/test_upgrade.py": 75,
    "tests/tools/torture/test_hostile_http.py": 60,
    "tests/tools/audit/test_cli.py": 52,
    "tests/tools/audit/test_cds.py": 50,
    "tests/tools/audit/test_loopback.py": 47,
    "tests/tools/bench/test_audit_smoke.py": 44,
    "tests/tools/torture/test_disk_faults.py": 42,
    "tests/deploy/test_prometheus.py": 35,
    "tests/raft/node/test_install_processes.py": 34,
    "tests/daemon/test_demo.py": 31,
    "tests/daemon/test_controllerd_processes.py": 29,
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

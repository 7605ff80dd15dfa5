"""The interop suite's order on two workers.

`make test` runs this suite with `--dist loadfile --no-loadscope-reorder`: each file goes whole to one worker, and
the files are handed out in collection order. Left alone, that order is alphabetical (or, with xdist's default
reorder, by number of tests), and one worker could end minutes after the other. Here the files are put longest
first, by the seconds each took in a fresh-clone `make test` on 2 cores (2026-11-29, 16:18 UTC, `--durations`), so
that the two workers end close together (longest-processing-time-first scheduling).

A file missing from the table is run last; tests/interop/test_schedule.py fails until it has a figure.
"""

SECONDS = {
    "tests/interop/test_interop.py": 352,
    "tests/interop/test_migration_dledger.py": 289,
    "tests/interop/test_migration.py": 278,
    "tests/interop/test_peers_bench_smoke.py": 122,
    "tests/interop/test_audit_epochs.py": 100,
    "tests/interop/test_broker_failover_peers_smoke.py": 62,
    "tests/interop/test_run_rocketmq.py": 61,
    "tests/interop/test_failover_bench_smoke.py": 56,
    "tests/interop/test_security.py": 53,
    "tests/interop/test_realistic_ab_smoke.py": 20,
    "tests/interop/test_mqadmin_shell.py": 20,
    "tests/tools/bench/test_ratios.py": 17,
    "tests/interop/test_differential.py": 16,
}


def pytest_collection_modifyitems(config, items):
    # Stable: tests inside a file keep their order, and files without a figure keep theirs, after the rest.
    items.sort(key=lambda item: -SECONDS.get(item.nodeid.split("::", 1)[0], 0))

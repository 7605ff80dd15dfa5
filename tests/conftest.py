"""The offline suite's order on two workers.

`make test` runs the offline suite with `--dist loadgroup`, which hands tests out in collection order. The audit's
standalone-cluster test (one test: a Spark cluster with HDFS, one audit per damaged dataset) takes about 7.5 of the
suite's 15 minutes on 2 cores (`--durations=0`, 2026-11-29, two workers). Collected alphabetically it started about
halfway through and ended alone, the other worker idle. Put first, it runs while the other worker takes the rest.
"""

FIRST = ("tests/tools/audit/test_cluster.py",)


def pytest_collection_modifyitems(config, items):
    # Stable: every other test keeps its order.
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in FIRST)

"""controllerd's start-failure advice (cli.controllerd.corruption_fix): every way a store can be damaged beyond a
start gets the same fix, naming the store and the member to rebuild; any other failure gets none."""

from __future__ import annotations

import pytest

from cli.controllerd import corruption_fix
from raft.node.snapshots import StoreNotRebuildableError
from raft.storage.meta import MetaCorruptionError
from raft.storage.segment import LogCorruptionError
from snapshot.errors import SnapshotFormatError

STORE = "/data/n1"
ME = "127.0.0.1:9880"


def _chained(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as e:
            raise RuntimeError("the controller failed to start") from e
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    "error",
    [
        LogCorruptionError("/data/n1/log/1.wal", 0, "segment header CRC mismatch"),
        MetaCorruptionError("/data/n1/meta/raft_meta", 16, "CRC mismatch over bytes [0, 16)"),
        SnapshotFormatError("/data/n1/snapshot/snapshot_43/data", 132, "truncated file"),
        # the sweep of 2026-11-30 (fresh clone 47): the only snapshot damaged, the log compacted past it
        StoreNotRebuildableError("/data/n1: no snapshot loads and the log starts at index 44 ..."),
    ],
    ids=["wal", "raft_meta", "snapshot", "not-rebuildable"],
)
def test_a_damaged_store_gets_the_rebuild_advice(error: BaseException) -> None:
    for e in (error, _chained(error)):
        fix = corruption_fix(e, ME, STORE)
        assert fix.startswith(". Fix: keep a copy of /data/n1 for analysis"), fix
        assert f"DELETE /api/v1/raft/peers/{ME}" in fix and f'{{"id": "{ME}"}}' in fix


def test_any_other_failure_gets_no_advice() -> None:
    assert corruption_fix(RuntimeError("address already in use"), ME, STORE) == ""
    assert corruption_fix(_chained(OSError("permission denied")), ME, STORE) == ""

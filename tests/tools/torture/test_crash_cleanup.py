"""The crash sweep (tools/torture/crash.py) stops its group when the group never gets ready: in a fresh clone on a
starved machine (fresh 52, 2026-12-01) the first wait failed and the three nodes went on electing leaders for the
16 minutes the rest of the suite took, on its two cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import naming
from tools.cluster import ControllerdCluster
from tools.torture import crash


def test_a_group_that_never_gets_ready_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[ControllerdCluster] = []
    real_start = ControllerdCluster.start

    def start(self: ControllerdCluster, *args: object, **kwargs: object) -> object:
        started.append(self)
        return real_start(self, *args, **kwargs)  # type: ignore[arg-type]

    def never_ready(self: ControllerdCluster, *args: object, **kwargs: object) -> str:
        raise AssertionError("not ready within 60s: timed out")

    monkeypatch.setattr(ControllerdCluster, "start", start)
    monkeypatch.setattr(ControllerdCluster, "wait_ready", never_ready)
    root = tmp_path / "crash"
    try:
        with pytest.raises(AssertionError, match="not ready"):
            crash.run(str(root), points=("wal.fsync",), max_hit=1, budget_s=5, echo=lambda _: None)
        assert len(started) == 3  # the three nodes were started ...
        assert all(p.poll() is not None for p in started[0].procs.values())  # ... and every one has ended
        assert naming(str(root)) == {}
    finally:  # checked above; this only keeps a regression from leaking them into the rest of the suite
        for c in {id(c): c for c in started}.values():
            c.stop_all()

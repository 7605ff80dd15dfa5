"""The crash sweep (tools/torture/crash.py) stops its group when the group never gets ready: in a fresh clone on a
starved machine (fresh 52, 2026-12-01) the first wait failed and the three nodes went on electing leaders for the
16 minutes the rest of the suite took, on its two cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.cluster import ControllerdCluster
from tools.torture import crash


def running_under(root: Path) -> list[str]:
    """The command lines of the processes whose arguments name `root`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in cmd and int(pid) != os.getpid():
            out.append(cmd)
    return out


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
        assert running_under(root) == []
    finally:  # checked above; this only keeps a regression from leaking them into the rest of the suite
        for c in {id(c): c for c in started}.values():
            c.stop_all()

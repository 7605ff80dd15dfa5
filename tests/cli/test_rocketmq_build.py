"""cli/rocketmq.py refuses to start RocketMQ's JVMs from a stale build: a Java source changed after
`make rocketmq` last compiled would otherwise run the old class (or none), and fail far from the cause."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli import rocketmq


def _tree(root: Path) -> Path:
    (root / "src" / "interop").mkdir(parents=True)
    for f in ("pom.xml", "build.sh", "src/interop/Load.java"):
        (root / f).write_text("x")
    (root / "build").mkdir()
    (root / "build" / ".stamp").write_text("")
    t = os.stat(root / "build" / ".stamp").st_mtime
    for f in ("pom.xml", "build.sh", "src/interop/Load.java"):
        os.utime(root / f, (t - 10, t - 10))
    return root


def test_a_build_newer_than_every_source_is_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocketmq, "INTEROP", str(_tree(tmp_path)))
    assert rocketmq.newer_than_build() is None


@pytest.mark.parametrize("changed", ["pom.xml", "build.sh", "src/interop/Load.java"])
def test_a_source_changed_after_the_build_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: str
) -> None:
    root = _tree(tmp_path)
    monkeypatch.setattr(rocketmq, "INTEROP", str(root))
    t = os.stat(root / "build" / ".stamp").st_mtime
    os.utime(root / changed, (t + 5, t + 5))
    assert rocketmq.newer_than_build() == str(root / changed)


def test_no_stamp_means_never_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    (root / "build" / ".stamp").unlink()
    monkeypatch.setattr(rocketmq, "INTEROP", str(root))
    assert rocketmq.newer_than_build() == str(root / "build" / ".stamp")

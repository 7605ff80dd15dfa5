"""SnapshotManager: triggers, one save at a time, RIP-59 load order with quarantine and skips."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from raft.options import SnapshotOptions
from snapshot.errors import SnapshotFormatError
from snapshot.format import META_FILE
from snapshot.manager import SnapshotBusyError, SnapshotManager, should_load
from snapshot.rw import SnapshotWriter
from snapshot.storage import FileSnapshotStorage


def triggers(threshold_entries: int = 0, threshold_log_bytes: int = 0, interval_s: float = 0.0) -> SnapshotOptions:
    """The node's SnapshotOptions with only the given triggers on."""
    return SnapshotOptions(
        threshold_entries=threshold_entries, threshold_log_bytes=threshold_log_bytes, interval_s=interval_s
    )


def manager(tmp_path: Path, **kw: float) -> SnapshotManager:
    return SnapshotManager(FileSnapshotStorage(tmp_path / "snap"), triggers(**kw), rng=random.Random(7))  # type: ignore[arg-type]


def fill(body: bytes):  # noqa: ANN201
    return lambda w: w.add_section(1, body)


def test_should_load_compares_term_first_then_index() -> None:
    assert should_load(3, 10, 2, 50)  # newer term wins over a bigger applied index
    assert not should_load(2, 60, 3, 10)
    assert should_load(3, 11, 3, 10)
    assert not should_load(3, 10, 3, 10)  # the very same state: nothing to do


def test_entry_and_byte_thresholds(tmp_path: Path) -> None:
    m = manager(tmp_path, threshold_entries=10, threshold_log_bytes=1000, interval_s=0)
    m.on_applied(9, 100)
    assert m.due(0.0) is None
    m.on_applied(1, 0)
    assert "10 entries" in (m.due(0.0) or "")
    m.save(5, 1, ("a",), (), fill(b"x"), now=0.0, created_at=0.0).result(10)
    assert m.due(0.0) is None  # counters restart at the save
    m.on_applied(1, 1000)
    assert "1000 bytes" in (m.due(0.0) or "")
    m.close()


def test_interval_first_firing_is_jittered_and_waits_for_new_entries(tmp_path: Path) -> None:
    firsts = set()
    for seed in range(20):
        m = SnapshotManager(FileSnapshotStorage(tmp_path / f"s{seed}"), triggers(0, 0, 100.0), rng=random.Random(seed))
        m.start_clock(1000.0)
        m.on_applied(1, 1)
        t = next(t for t in range(1000, 1101) if m.due(float(t)) is not None)
        assert 1050 <= t <= 1100
        firsts.add(t)
        m.close()
    assert len(firsts) > 5  # replicas started together do not all save together
    m = manager(tmp_path / "idle", threshold_entries=0, threshold_log_bytes=0, interval_s=10.0)
    m.start_clock(0.0)
    assert m.due(11.0) is None  # nothing applied: no snapshot, and the period restarts
    m.on_applied(1, 1)
    assert m.due(15.0) is None and m.due(21.0) is not None
    m.close()


def test_never_two_saves_at_once(tmp_path: Path) -> None:
    m = manager(tmp_path)
    gate = threading.Event()

    class SlowWriter:
        def __call__(self, w: SnapshotWriter) -> None:
            def produce():  # noqa: ANN202 - runs on the save thread; blocks until released
                gate.wait(10)
                yield b"\x90"

            w.add_section_lazy(1, produce)

    fut = m.save(1, 1, ("a",), (), SlowWriter(), now=0.0, created_at=0.0)
    assert m.saving and m.due(0.0) is None
    with pytest.raises(SnapshotBusyError):
        m.save(2, 1, ("a",), (), fill(b"y"), now=0.0, created_at=0.0)
    gate.set()
    assert fut.result(10).last_included_index == 1
    assert not m.saving and m.stats.saves == 1
    m.save(2, 1, ("a",), (), fill(b"y"), now=0.0, created_at=0.0).result(10)
    m.close()


def test_failed_fill_leaves_nothing_and_allows_the_next_save(tmp_path: Path) -> None:
    m = manager(tmp_path)

    def broken(w: SnapshotWriter) -> None:
        raise RuntimeError("encode failed")

    with pytest.raises(RuntimeError):
        m.save(1, 1, ("a",), (), broken, now=0.0, created_at=0.0)
    assert m.storage.list() == [] and not m.saving and m.stats.failures == 1
    m.save(1, 1, ("a",), (), fill(b"z"), now=0.0, created_at=0.0).result(10)
    assert m.storage.list() == [1]
    m.close()


def test_load_quarantines_damaged_skips_unusable_and_falls_back(tmp_path: Path) -> None:
    m = SnapshotManager(FileSnapshotStorage(tmp_path / "snap", max_reserved=4), None, rng=random.Random(7))
    for i in (10, 20, 30, 40):
        m.save(i, 1, ("a",), (), fill(f"state-{i}".encode()), now=0.0, created_at=0.0).result(10)
    meta = m.storage.path(40) / META_FILE  # 40: its meta is damaged; 30: its data; 20: its loader refuses it
    meta.write_bytes(meta.read_bytes()[:-1])
    data = m.storage.path(30) / "data"
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 1
    data.write_bytes(bytes(raw))
    loaded_bodies: list[bytes] = []

    def loader(snap) -> None:  # noqa: ANN001
        body = snap.section(1)
        if body == b"state-20":
            raise SnapshotFormatError(snap.path, 0, "the state machine cannot decode it")
        loaded_bodies.append(body)

    res = m.load(loader, usable=lambda meta: None)
    assert res.meta is not None and res.meta.last_included_index == 10 and loaded_bodies == [b"state-10"]
    assert [i for i, _ in res.quarantined] == [40, 30, 20]
    assert isinstance(m.storage, FileSnapshotStorage)
    assert len(m.storage.quarantined()) == 3 and m.base_index == 10
    res.snapshot.close()  # type: ignore[union-attr]

    m2 = manager(tmp_path / "b")
    for i in (10, 20):
        m2.save(i, 1, ("a",), (), fill(b"s"), now=0.0, created_at=0.0).result(10)
    res = m2.load(lambda s: None, usable=lambda meta: "log gap" if meta.last_included_index == 20 else None)
    assert res.meta is not None and res.meta.last_included_index == 10 and res.skipped == ((20, "log gap"),)
    assert m2.storage.list() == [20, 10]  # skipped, not quarantined
    res.snapshot.close()  # type: ignore[union-attr]
    res = m2.load(lambda s: None, applied=(1, 20))
    assert res.snapshot is None and res.skipped[0][0] == 20  # not ahead of the applied state
    m.close()
    m2.close()


def test_load_verifies_the_older_snapshots_it_would_fall_back_to(tmp_path: Path) -> None:
    """The corruption sweep found a damaged older snapshot silent at start (only the newest was read)."""
    m = manager(tmp_path)
    for i in (10, 20, 30):
        m.save(i, 1, ("a",), (), fill(f"state-{i}".encode()), now=0.0, created_at=0.0).result(10)
    data = m.storage.path(20) / "data"
    raw = bytearray(data.read_bytes())
    raw[8] ^= 1
    data.write_bytes(bytes(raw))
    res = m.load(lambda s: None, usable=lambda meta: None)
    assert res.meta is not None and res.meta.last_included_index == 30
    assert [i for i, _ in res.quarantined] == [20] and m.storage.list() == [30, 10]
    res.snapshot.close()  # type: ignore[union-attr]
    m.close()

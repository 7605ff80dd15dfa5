"""FileSnapshotStorage: commit, list, open and verify, retention with references, leftovers, quarantine with
fallback, and a crash at every step of a save (reopen must find the old snapshots or the new one, whole)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from snapshot import (
    DATA_FILE,
    META_FILE,
    FileSnapshotStorage,
    SnapshotError,
    SnapshotExistsError,
    SnapshotFormatError,
    SnapshotNotFoundError,
    StoredSnapshot,
    load_managers,
)
from snapshot.format import META_HEAD_SIZE, table_end
from snapshot.storage import CRASH_POINTS, TEMP_DIR, SimulatedCrash, snapshot_dir_name

NAMES = {1: "replicas", 2: "liveness"}
VOTERS = ["n1", "n2", "n3"]


@pytest.fixture
def root() -> Iterator[Path]:
    """tmpfs when available: every commit fsyncs several times, and what is under test is the protocol."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix="snapshot-storage-", dir=base))
    yield d / "snapshots"
    shutil.rmtree(d, ignore_errors=True)


def body(index: int) -> bytes:
    return msgpack.packb({"index": index, "brokers": [f"broker-{i}" for i in range(index % 7 + 1)]})


def save(st: FileSnapshotStorage, index: int, term: int = 1, **kw: Any) -> None:
    with st.create(index, term, VOTERS, ["n4"], created_at=1000.0 + index, **kw) as p:
        w = p.writer(known_types=NAMES)
        w.add_section(1, body(index))
        w.add_section(2, b"liveness-%d" % index)
        w.finish()
        p.commit()


def check_loads(st: FileSnapshotStorage, index: int) -> None:
    with st.open(index) as snap:
        assert snap.meta.last_included_index == index
        assert snap.section(1) == body(index) and snap.section(2) == b"liveness-%d" % index


def damage(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x40
    path.write_bytes(data)


def test_commit_list_open(root: Path) -> None:
    st = FileSnapshotStorage(root, known_types=NAMES)
    assert st.list() == [] and (root).is_dir()
    save(st, 7, term=3, user_meta={"by": "test"})
    save(st, 12, term=4)
    assert st.list() == [12, 7]
    assert sorted(os.listdir(root)) == [snapshot_dir_name(7), snapshot_dir_name(12), TEMP_DIR]
    assert snapshot_dir_name(12) == "snapshot_00000000000000000012"
    assert os.listdir(root / TEMP_DIR) == []
    with st.open(7) as snap:
        assert isinstance(snap, StoredSnapshot)
        m = snap.meta
        assert (m.last_included_index, m.last_included_term, m.voters, m.learners) == (
            7,
            3,
            ("n1", "n2", "n3"),
            ("n4",),
        )
        assert (m.created_at, dict(m.user_meta)) == (1007.0, {"by": "test"})
        data = (root / snapshot_dir_name(7) / DATA_FILE).read_bytes()
        assert [f.name for f in m.files] == [DATA_FILE] and m.file(DATA_FILE).size == len(data)
        assert snap.section_types() == [1, 2] and snap.section(1) == body(7)
        assert snap.file_path(DATA_FILE) == root / snapshot_dir_name(7) / DATA_FILE
        assert st.refcount(7) == 1
    assert st.refcount(7) == 0
    assert st.read_meta(12).last_included_term == 4
    # a second handle on the same directory sees the same snapshots
    assert FileSnapshotStorage(root).list() == [12, 7]


def test_snapshots_are_never_replaced(root: Path) -> None:
    st = FileSnapshotStorage(root)
    save(st, 5)
    with pytest.raises(SnapshotExistsError):
        st.create(5, 1, VOTERS, created_at=0.0)
    p = st.create(6, 1, VOTERS, created_at=0.0)
    with pytest.raises(SnapshotExistsError):
        st.create(6, 1, VOTERS, created_at=0.0)  # already being written
    p.abort()
    assert not p.path.exists()
    save(st, 6)
    assert st.list() == [6, 5]


def test_pending_snapshot_rules(root: Path) -> None:
    st = FileSnapshotStorage(root)
    with st.create(1, 1, VOTERS, created_at=0.0) as p:
        w = p.writer()
        w.add_section(1, b"x")
        with pytest.raises(SnapshotError, match="has not finished"):
            p.commit()
    assert st.list() == [] and not p.path.exists()  # a failed commit removes the temp dir
    with st.create(1, 1, VOTERS, created_at=0.0) as p:
        (p.path / "stray").write_bytes(b"?")
        w = p.writer()
        w.finish()
        with pytest.raises(SnapshotError, match="not added"):
            p.commit()
    with st.create(1, 1, VOTERS, created_at=0.0) as p:
        for bad in ("", "..", "a/b", META_FILE):
            with pytest.raises(ValueError):
                p.add_file(bad)
        with pytest.raises(SnapshotError, match="no 'data' file"):
            p.commit()
    with st.create(1, 1, VOTERS, created_at=0.0) as p:  # extra files copied in by the caller
        (p.path / "extra.bin").write_bytes(b"payload")
        p.add_file("extra.bin")
        w = p.writer()
        w.add_section(1, b"x")
        w.finish()
        meta = p.commit()
    assert w.result is not None
    assert [(f.name, f.size) for f in meta.files] == [("extra.bin", 7), (DATA_FILE, w.result.size)]
    with st.open(1) as snap:
        assert snap.file_path("extra.bin").read_bytes() == b"payload"
    with pytest.raises(TypeError):
        st.create(2, 1, "n1", created_at=0.0)


def test_finish_and_commit_on_a_writer_thread(root: Path) -> None:
    st = FileSnapshotStorage(root)
    p = st.create(9, 2, VOTERS, created_at=0.0)
    w = p.writer()
    w.add_section(1, body(9))  # apply thread: cheap
    w.add_section(2, b"liveness-9")
    errors: list[BaseException] = []

    def persist() -> None:  # writer thread: compress, CRC, write, fsync, rename
        try:
            w.finish()
            p.commit()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=persist)
    t.start()
    t.join()
    assert errors == [] and st.list() == [9]
    check_loads(st, 9)


# --- retention and references -------------------------------------------------------------------------------


def test_retention_keeps_the_newest(root: Path) -> None:
    st = FileSnapshotStorage(root)
    for i in range(1, 7):
        save(st, i * 10)
        assert st.list() == [i * 10 for i in range(i, max(0, i - 3), -1)]
    assert sorted(p.name for p in root.iterdir()) == [snapshot_dir_name(i) for i in (40, 50, 60)] + [TEMP_DIR]
    st1 = FileSnapshotStorage(root, max_reserved=1)  # a smaller setting applies at open
    assert st1.list() == [60]
    with pytest.raises(ValueError):
        FileSnapshotStorage(root, max_reserved=0)


def test_a_referenced_snapshot_survives_retention_until_unref(root: Path) -> None:
    st = FileSnapshotStorage(root)
    for i in (1, 2, 3):
        save(st, i)
    st.ref(1)
    snap = st.open(2)  # an open snapshot holds a reference too
    with st.reference(2):
        save(st, 4)
        save(st, 5)
        assert st.list() == [5, 4, 3, 2, 1]
    assert st.list() == [5, 4, 3, 2, 1] and st.refcount(2) == 1
    assert snap.section(1) == body(2)
    snap.close()
    snap.close()  # idempotent: releases its reference once
    assert st.list() == [5, 4, 3, 1]
    st.unref(1)
    assert st.list() == [5, 4, 3]
    with pytest.raises(SnapshotError):
        st.unref(1)
    with pytest.raises(SnapshotNotFoundError):
        st.ref(1)


def test_leftovers_are_removed_at_open(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    half = st.create(2, 1, VOTERS, created_at=0.0)
    (half.path / DATA_FILE).write_bytes(b"RMQSNAP\x00half")  # the process died here
    (root / TEMP_DIR / "junk").write_bytes(b"")
    deleting = root / (snapshot_dir_name(0) + ".deleting")
    deleting.mkdir()
    (deleting / DATA_FILE).write_bytes(b"x")
    assert FileSnapshotStorage(root, read_only=True).list() == [1] and half.path.exists()  # read-only touches nothing
    with caplog.at_level(logging.WARNING, logger="snapshot.storage"):
        st2 = FileSnapshotStorage(root)
    assert os.listdir(root / TEMP_DIR) == [] and not deleting.exists()
    assert "unfinished snapshot" in caplog.text
    assert st2.list() == [1]
    save(st2, 2)
    assert st2.list() == [2, 1]


def test_listing_ignores_foreign_names(root: Path) -> None:
    st = FileSnapshotStorage(root)
    save(st, 3)
    (root / "snapshot_3").mkdir()  # not 20 digits
    (root / snapshot_dir_name(4)).write_bytes(b"a file, not a directory")
    (root / (snapshot_dir_name(5) + ".corrupt-1")).mkdir()
    (root / "raft_meta").write_bytes(b"")
    assert st.list() == [3]


# --- verification, quarantine, fallback --------------------------------------------------------------------


def test_open_names_the_damage(root: Path) -> None:
    st = FileSnapshotStorage(root, known_types=NAMES)
    save(st, 1)
    sdir = root / snapshot_dir_name(1)
    data = sdir / DATA_FILE
    pristine = data.read_bytes()

    damage(data, len(pristine) - 3)  # inside the last section's body
    with pytest.raises(SnapshotFormatError) as info:
        st.open(1)
    e = info.value
    assert e.path == str(data) and e.section == 2 and e.section_name == "liveness" and "bad section CRC" in e.reason
    st.open(1, verify=False).close()  # without verify only structure and sizes are checked
    assert st.refcount(1) == 0  # failed opens release their reference

    data.write_bytes(pristine[:-1])
    with pytest.raises(SnapshotFormatError, match="truncated") as info:
        st.open(1, verify=False)
    assert info.value.offset == len(pristine) - 1 and info.value.section == 2

    data.write_bytes(pristine)
    damage(sdir / META_FILE, 20)
    with pytest.raises(SnapshotFormatError, match="bad meta CRC") as info:
        st.open(1)
    assert info.value.path == str(sdir / META_FILE)

    (sdir / META_FILE).unlink()
    with pytest.raises(SnapshotFormatError, match="missing meta file"):
        st.open(1)
    with pytest.raises(SnapshotNotFoundError):
        st.open(99)
    assert st.refcount(1) == 0


def test_size_and_crc_are_checked_against_the_meta(root: Path) -> None:
    st = FileSnapshotStorage(root)
    with st.create(1, 1, VOTERS, created_at=0.0) as p:
        (p.path / "extra").write_bytes(b"0123456789")
        p.add_file("extra")
        w = p.writer()
        w.add_section(1, b"x")
        w.finish()
        p.commit()
    extra = root / snapshot_dir_name(1) / "extra"
    extra.write_bytes(b"0123456789!")
    with pytest.raises(SnapshotFormatError, match="trailing garbage: 11 bytes, the meta says 10") as info:
        st.open(1)
    assert info.value.path == str(extra) and info.value.offset == 10
    extra.write_bytes(b"0123X56789")
    with pytest.raises(SnapshotFormatError, match="bad file CRC"):
        st.open(1)
    st.open(1, verify=False).close()
    extra.unlink()
    with pytest.raises(SnapshotFormatError, match="missing file"):
        st.open(1, verify=False)


def test_meta_index_must_match_the_directory(root: Path) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    save(st, 2)
    shutil.copy(root / snapshot_dir_name(1) / META_FILE, root / snapshot_dir_name(2) / META_FILE)
    with pytest.raises(SnapshotFormatError, match="the meta says index 1") as info:
        st.open(2)
    assert info.value.offset == META_HEAD_SIZE


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda d: damage(d / DATA_FILE, table_end(2) + 2),  # a body byte
        lambda d: damage(d / DATA_FILE, 3),  # the magic
        lambda d: (d / DATA_FILE).write_bytes((d / DATA_FILE).read_bytes()[:-5]),  # cut short
        lambda d: damage(d / META_FILE, 30),  # the meta
        lambda d: (d / META_FILE).unlink(),
        lambda d: (d / DATA_FILE).unlink(),
    ],
    ids=["body", "magic", "truncated", "meta", "no-meta", "no-data"],
)
def test_corrupt_newest_is_quarantined_and_the_previous_loads(root: Path, corrupt, caplog) -> None:
    st = FileSnapshotStorage(root, known_types=NAMES)
    for i in (1, 2, 3):
        save(st, i)
    newest = root / snapshot_dir_name(3)
    corrupt(newest)
    before = sorted(p.name for p in newest.iterdir())
    with caplog.at_level(logging.ERROR, logger="snapshot.storage"):
        meta, snap, quarantined = st.load_newest()
    assert meta is not None and snap is not None and meta.last_included_index == 2
    assert snap.section(1) == body(2)
    snap.close()
    moved = root / (snapshot_dir_name(3) + ".corrupt-1")
    assert [(q.index, q.moved_to) for q in quarantined] == [(3, moved)]
    assert moved.is_dir() and sorted(p.name for p in moved.iterdir()) == before  # kept, untouched
    assert st.list() == [2, 1] and st.quarantined() == [moved]
    assert "quarantined snapshot 3" in caplog.text and quarantined[0].reason in caplog.text
    # the next save at the same index works, and a second quarantine of it gets a new suffix
    save(st, 3)
    damage(newest / DATA_FILE, 0)
    assert st.load_newest().quarantined[0].moved_to == root / (snapshot_dir_name(3) + ".corrupt-2")
    assert moved.is_dir()


def test_fallback_goes_as_far_as_it_must(root: Path) -> None:
    st = FileSnapshotStorage(root)
    for i in (1, 2, 3):
        save(st, i)
    damage(root / snapshot_dir_name(3) / DATA_FILE, 0)
    damage(root / snapshot_dir_name(2) / META_FILE, 0)
    meta, snap, q = st.load_newest()
    assert meta is not None and snap is not None
    assert meta.last_included_index == 1 and [x.index for x in q] == [3, 2]
    snap.close()
    damage(root / snapshot_dir_name(1) / DATA_FILE, 0)
    meta, snap, q = st.load_newest()
    assert (meta, snap, [x.index for x in q]) == (None, None, [1])


def test_all_bad_returns_none_and_reports(root: Path) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    save(st, 2)
    damage(root / snapshot_dir_name(2) / DATA_FILE, 0)
    damage(root / snapshot_dir_name(1) / DATA_FILE, 0)
    meta, snap, q = st.load_newest()
    assert meta is None and snap is None and [x.index for x in q] == [2, 1]
    assert st.list() == [] and len(st.quarantined()) == 2
    assert FileSnapshotStorage(root).load_newest() == (None, None, [])


def test_a_section_the_state_machine_cannot_decode_falls_back(root: Path) -> None:
    class Replicas:
        rows: object = None

        def section_type(self) -> int:
            return 1

        def encode_snapshot(self) -> bytes:
            return msgpack.packb(self.rows)

        def load_snapshot(self, raw: bytes) -> None:
            self.rows = msgpack.unpackb(raw)

    st = FileSnapshotStorage(root)
    save(st, 1)
    with st.create(2, 1, VOTERS, created_at=0.0) as p:
        w = p.writer()
        w.add_section(1, body(2) + b"\x00")  # CRCs fine, msgpack has extra data: a bug or a version skew
        w.finish()
        p.commit()
    m = Replicas()
    meta, snap, q = st.load_newest(loader=lambda s: load_managers(s, [m]))
    assert meta is not None and snap is not None
    assert meta.last_included_index == 1 and m.rows == msgpack.unpackb(body(1))
    assert q[0].index == 2 and "load_snapshot cannot decode" in q[0].reason
    snap.close()

    def buggy(_: StoredSnapshot) -> None:
        raise RuntimeError("a bug is not corruption")

    with pytest.raises(RuntimeError):
        st.load_newest(loader=buggy)
    assert st.list() == [1] and st.refcount(1) == 0


def test_read_only_storage_reports_without_renaming(root: Path) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    save(st, 2)
    damage(root / snapshot_dir_name(2) / DATA_FILE, 0)
    ro = FileSnapshotStorage(root, read_only=True)
    meta, snap, q = ro.load_newest()
    assert meta is not None and snap is not None
    assert meta.last_included_index == 1 and q[0].index == 2 and q[0].moved_to is None
    snap.close()
    assert ro.list() == [2, 1]
    for call in (lambda: ro.create(3, 1, VOTERS, created_at=0.0), lambda: ro.quarantine(2, "x"), ro.reap):
        with pytest.raises(SnapshotError, match="read-only"):
            call()


# --- crash consistency --------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_every_step_of_a_save(root: Path, point: str) -> None:
    st = FileSnapshotStorage(root)
    for i in (10, 20, 30):
        save(st, i)
    st._fail_at = point
    p = st.create(40, 1, VOTERS, ["n4"], created_at=1040.0)  # no `with`: a dead process cleans nothing up
    w = p.writer()
    w.add_section(1, body(40))
    w.add_section(2, b"liveness-40")
    w.finish()
    with pytest.raises(SimulatedCrash):
        p.commit()
    committed = point in ("after_rename", "before_reap", "during_reap")
    assert p.path.exists() != committed  # the temp dir is left behind exactly when the rename did not happen
    if point == "during_reap":
        assert (root / (snapshot_dir_name(10) + ".deleting")).is_dir()
    # the process is gone; a new one opens the directory
    st2 = FileSnapshotStorage(root)
    assert st2.list() == ([40, 30, 20] if committed else [30, 20, 10])
    for i in st2.list():
        check_loads(st2, i)
    assert os.listdir(root / TEMP_DIR) == []
    assert sorted(p.name for p in root.iterdir()) == sorted([snapshot_dir_name(i) for i in st2.list()] + [TEMP_DIR])
    meta, snap, q = st2.load_newest()
    assert meta is not None and snap is not None
    assert q == [] and meta.last_included_index == st2.list()[0]
    snap.close()
    save(st2, 50)  # and life goes on
    assert st2.list() == [50, 40, 30] if committed else [50, 30, 20]


def test_crash_while_writing_the_data_file(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    p = st.create(2, 1, VOTERS, created_at=0.0)
    w = p.writer()
    w.add_section(1, os.urandom(1 << 16), codec=0)
    w.add_section(2, b"second")
    calls = []

    def dying_write(fd: int, data: bytes) -> None:
        calls.append(len(data))
        if len(calls) == 2:
            os.write(fd, data[: len(data) // 2])
            raise SimulatedCrash("power cut in the middle of a write")
        os.write(fd, data)

    monkeypatch.setattr("snapshot.rw._write_all", dying_write)
    with pytest.raises(SimulatedCrash):
        w.finish()
    monkeypatch.undo()
    assert (p.path / DATA_FILE).read_bytes()[:8] == bytes(8)  # left behind, and no header: it is written last
    st2 = FileSnapshotStorage(root)
    assert st2.list() == [1] and os.listdir(root / TEMP_DIR) == []
    check_loads(st2, 1)


@pytest.mark.parametrize("victim", ["rename", "fsync", "write"])
def test_io_errors_during_commit_leave_the_storage_as_it_was(
    root: Path, monkeypatch: pytest.MonkeyPatch, victim: str
) -> None:
    st = FileSnapshotStorage(root)
    save(st, 1)
    p = st.create(2, 1, VOTERS, created_at=0.0)
    w = p.writer()
    w.add_section(1, body(2))
    w.finish()

    def enospc(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(f"snapshot.storage.os.{victim}", enospc)
    with pytest.raises(OSError, match="No space left"):
        p.commit()
    monkeypatch.undo()
    assert st.list() == [1] and not p.path.exists()
    check_loads(st, 1)
    save(st, 2)
    assert st.list() == [2, 1]


@pytest.mark.parametrize("name", [META_FILE, DATA_FILE])
def test_a_damaged_older_snapshot_is_found_at_load_not_when_it_is_needed(root: Path, name, caplog) -> None:
    """The corruption sweep found older retained snapshots unchecked at start: their damage stayed silent until
    the newest failed and the fallback was needed. They are verified (and quarantined) when the newest loads."""
    st = FileSnapshotStorage(root, known_types=NAMES)
    for i in (1, 2, 3):
        save(st, i)
    damage(root / snapshot_dir_name(2) / name, 20)
    with caplog.at_level(logging.ERROR, logger="snapshot.storage"):
        meta, snap, quarantined = st.load_newest()
    assert meta is not None and meta.last_included_index == 3 and snap is not None
    snap.close()
    assert [q.index for q in quarantined] == [2] and st.list() == [3, 1]
    assert snapshot_dir_name(2) in caplog.text and name in caplog.text

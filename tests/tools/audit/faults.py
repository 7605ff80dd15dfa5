"""The faults test_audit.py injects, one function each, applied to a copy of the clean data: the cluster
tests audit one of each kind of file an executor reads (ON_CLUSTER) on a real cluster and compare with local[2]
(test_cluster.py)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from raft.core.messages import Entry
from raft.storage import SegmentLog
from raft.storage.identity import IDENTITY_FILE
from snapshot.format import META_FILE, decode_meta, encode_meta
from snapshot.storage import FileSnapshotStorage
from statemachine import ControllerStateMachine
from statemachine.sections import SECTION_NAMES
from tests.tools.audit.test_audit import entries_of, frame_of, log_of

Marks = dict[str, int]


def flipped_bit(root: Path, marks: Marks) -> None:
    path, off, size = frame_of(root / "n1", marks["first"] + 3)
    raw = bytearray(path.read_bytes())
    raw[off + size - 2] ^= 0x10
    path.write_bytes(bytes(raw))


def dropped_entry(root: Path, marks: Marks) -> None:
    path, off, size = frame_of(root / "n2", marks["second"] - 5)
    raw = path.read_bytes()
    path.write_bytes(raw[:off] + raw[off + size :])


def snapshot_wrong_value(root: Path, marks: Marks) -> None:
    index = marks["second"]
    st = FileSnapshotStorage(root / "n0" / "snapshot", read_only=True, known_types=SECTION_NAMES)
    sm = ControllerStateMachine()
    with st.open(index) as snap:
        sm.on_snapshot_load(snap)
        meta = snap.meta
    sm.kv.table["ns1"]["key-3"] = "tampered"
    out = FileSnapshotStorage(root.parent / f"{root.name}-rewritten", known_types=SECTION_NAMES)
    pending = out.create(index, meta.last_included_term, meta.voters, meta.learners, created_at=meta.created_at)
    writer = pending.writer()
    sm.on_snapshot_save(writer)
    writer.finish()
    pending.commit()
    shutil.rmtree(st.path(index))
    shutil.copytree(out.path(index), st.path(index))


def damaged_snapshot_copy(root: Path, marks: Marks) -> None:
    path = root / "n0" / "snapshot" / f"snapshot_{marks['first']:020d}" / "data"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x04
    path.write_bytes(bytes(raw))


def diverging_log(root: Path, marks: Marks) -> None:
    keep = marks["second"] + 4
    entries = entries_of(root / "n2")
    shutil.rmtree(root / "n2" / "log")
    with SegmentLog(root / "n2" / "log") as log:
        log.append(entries[:keep])
        log.append([Entry(e.term + 7, e.index, e.type, e.data) for e in entries[keep:]])


def meta_lies_about_term(root: Path, marks: Marks) -> None:
    meta_path = root / "n1" / "snapshot" / f"snapshot_{marks['first']:020d}" / META_FILE
    meta = decode_meta(meta_path.read_bytes(), str(meta_path))
    meta_path.write_bytes(encode_meta(dataclasses.replace(meta, term=meta.term + 1)))


def torn_tail(root: Path, marks: Marks) -> None:
    path, off, size = frame_of(root / "n0", marks["last"])
    end = log_of(root / "n0")[0][0].valid_end
    raw = path.read_bytes()
    torn = raw[off : off + size - 3]
    path.write_bytes(raw[:end] + torn + raw[end + len(torn) :])


def compacted_logs(root: Path, marks: Marks) -> None:
    for n in ("n0", "n1", "n2"):
        with SegmentLog(root / n / "log") as log:
            log.truncate_prefix(marks["first"] + 1)


def renamed_dirs(root: Path, marks: Marks) -> None:
    (root / "n0").rename(root / "tmp")
    (root / "n1").rename(root / "n0")
    (root / "tmp").rename(root / "n1")
    (root / "n2").rename(root / "copy-of-something")


def no_identity(root: Path, marks: Marks) -> None:
    for d in ("n0", "n1", "n2"):
        (root / d / IDENTITY_FILE).unlink()


def damaged_identity(root: Path, marks: Marks) -> None:
    path = root / "n2" / IDENTITY_FILE
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x01
    path.write_bytes(bytes(raw))


FAULTS: dict[str, Callable[[Path, Marks], None]] = {
    f.__name__: f
    for f in (
        flipped_bit,
        dropped_entry,
        snapshot_wrong_value,
        damaged_snapshot_copy,
        diverging_log,
        meta_lies_about_term,
        torn_tail,
        compacted_logs,
        renamed_dirs,
        no_identity,
        damaged_identity,
    )
}


# One fault per kind of file an executor reads, and the directory layout: a segment's bytes, the logs of the
# nodes against each other, a snapshot's values, the meta file, renamed node directories, an identity file. The
# other five are the same readers again; test_audit.py audits all eleven on local[2]. (All eleven on the cluster
# and again on local[2], before 2026-11-30: 24 audits, a fifth of the offline suite's CPU on two cores.)
ON_CLUSTER = (
    "flipped_bit",
    "diverging_log",
    "snapshot_wrong_value",
    "meta_lies_about_term",
    "renamed_dirs",
    "damaged_identity",
)


def make_datasets(clean: Path, marks: Marks, root: Path, names: tuple[str, ...] = tuple(FAULTS)) -> dict[str, Path]:
    """`clean` and one copy per fault of `names` under `root`: name -> data root."""
    out = {"clean": root / "clean"}
    shutil.copytree(clean, out["clean"])
    for name in names:
        inject = FAULTS[name]
        out[name] = root / name
        shutil.copytree(clean, out[name])
        inject(out[name], marks)
    return out

"""Preallocated segments (LogStorageOptions.preallocate, docs/log-format.md): a new segment is extended to
segment_bytes with zeros, appends overwrite inside the file (so their fdatasync has no size to persist), the
zero tail reads as unused space, and only the last segment may have one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raft.options import LogStorageOptions
from raft.storage import LogCorruptionError, SegmentLog
from raft.storage.segment import HEADER_SIZE
from raft.storage.wal import wal_files
from raft.storage.walscan import data_extent, read_extent, scan_directory
from tests.raft.helpers import dump, ents, expect

SEG = 64 * 1024


def valid_end(d: Path) -> int:
    return scan_directory(d).scans[-1].valid_end


def five_entries(d: Path) -> tuple[Path, int]:
    """A log of entries 1..5 in one preallocated segment: (the segment, its valid end)."""
    with SegmentLog(d, LogStorageOptions(segment_bytes=SEG)) as log:
        log.append(ents(1, 5))
    (seg,) = wal_files(d)
    return seg, valid_end(d)


def test_a_new_segment_is_preallocated_and_appends_do_not_grow_it(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, LogStorageOptions(segment_bytes=SEG)) as log:
        log.append(ents(1, 1))
        (seg,) = wal_files(tmp_path)
        assert seg.stat().st_size == SEG
        for i in range(2, 21):
            log.append(ents(i, i))
            assert seg.stat().st_size == SEG
    end = valid_end(tmp_path)
    data = seg.read_bytes()
    assert HEADER_SIZE < end < SEG and data[end:] == bytes(SEG - end)
    scan = scan_directory(tmp_path).scans[-1]
    assert scan.torn_bytes == 0 and scan.size == SEG  # unused space, not a torn write
    with SegmentLog(tmp_path, LogStorageOptions(segment_bytes=SEG)) as log:
        assert dump(log) == expect(ents(1, 20))
    assert seg.read_bytes() == data  # a clean reopen changes nothing


def test_off_the_file_ends_at_its_last_commit_frame(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, LogStorageOptions(segment_bytes=SEG, preallocate=False)) as log:
        log.append(ents(1, 5))
    (seg,) = wal_files(tmp_path)
    assert seg.stat().st_size == valid_end(tmp_path)


def test_the_unused_tail_is_a_hole_that_the_scan_never_reads(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, LogStorageOptions(segment_bytes=8 << 20)) as log:
        log.append(ents(1, 3))
    (seg,) = wal_files(tmp_path)
    with open(seg, "rb") as f:
        extent = data_extent(f.fileno(), os.fstat(f.fileno()).st_size)
    # The data ends in the first file system block or so; the rest of the 8 MiB is a hole (SEEK_HOLE).
    assert valid_end(tmp_path) <= extent < 1 << 20
    with open(seg, "rb") as f:
        f.read(10)
        data_extent(f.fileno(), 8 << 20)
        assert f.read(10) == seg.read_bytes()[10:20]  # the file offset is where it was
    assert read_extent(str(seg)) == seg.read_bytes()[:extent]  # what the audit reads


def test_a_copy_that_wrote_the_zeros_out_is_read_only_up_to_its_data(tmp_path: Path) -> None:
    """cp without --sparse, or a restore from a backup, fills the hole with real zeros."""
    with SegmentLog(tmp_path / "a", LogStorageOptions(segment_bytes=8 << 20)) as log:
        log.append(ents(1, 3))
    (seg,) = wal_files(tmp_path / "a")
    copy = tmp_path / "b"
    copy.mkdir()
    (copy / seg.name).write_bytes(seg.read_bytes())  # 8 MiB, every byte written
    with open(copy / seg.name, "rb") as f:
        extent = data_extent(f.fileno(), os.fstat(f.fileno()).st_size)
    assert valid_end(copy) < extent <= valid_end(copy) + 4096
    with SegmentLog(copy, LogStorageOptions(segment_bytes=8 << 20)) as log:
        assert dump(log) == expect(ents(1, 3))


def test_a_log_cut_to_its_valid_end_is_preallocated_again_on_open(tmp_path: Path) -> None:
    """The Jepsen power-cut nemesis cuts the active segment at its durable offset."""
    opts = LogStorageOptions(segment_bytes=SEG)
    seg, end = five_entries(tmp_path)
    os.truncate(seg, end)
    with SegmentLog(tmp_path, opts) as log:
        assert seg.stat().st_size == SEG
        log.append(ents(6, 8))
        assert seg.stat().st_size == SEG
    with SegmentLog(tmp_path, opts) as log:
        assert dump(log) == expect(ents(1, 8))


def test_torn_bytes_in_the_preallocated_space_are_zeroed(tmp_path: Path) -> None:
    opts = LogStorageOptions(segment_bytes=SEG)
    seg, end = five_entries(tmp_path)
    with open(seg, "r+b") as f:  # half of a batch that was never fsynced
        f.seek(end)
        f.write(b"\x07" * 50)
    assert scan_directory(tmp_path).scans[-1].torn_bytes == 50
    with SegmentLog(tmp_path, opts) as log:
        assert dump(log) == expect(ents(1, 5))
    data = seg.read_bytes()
    assert len(data) == SEG and data[end:] == bytes(SEG - end)
    assert scan_directory(tmp_path).scans[-1].torn_bytes == 0


def test_a_segment_left_preallocated_is_cut_back_before_the_next_one_exists(tmp_path: Path) -> None:
    """segment_bytes made smaller across a restart: the last segment is full by the new size but still has
    its zero tail; it must end at its last commit frame before a later segment exists, or the next open
    would find a sealed segment that does not parse to its end."""
    with SegmentLog(tmp_path, LogStorageOptions(segment_bytes=SEG)) as log:
        log.append(ents(1, 10))
    first = wal_files(tmp_path)[0]
    end = valid_end(tmp_path)
    small = LogStorageOptions(segment_bytes=200)
    with SegmentLog(tmp_path, small) as log:
        log.append(ents(11, 12))
    assert len(wal_files(tmp_path)) == 2 and first.stat().st_size == end
    with SegmentLog(tmp_path, small) as log:
        assert dump(log) == expect(ents(1, 12))


def test_zeros_in_a_sealed_segment_are_still_damage(tmp_path: Path) -> None:
    opts = LogStorageOptions(segment_bytes=200)
    with SegmentLog(tmp_path, opts) as log:
        log.append(ents(1, 10))
        log.append(ents(11, 12))
    first = wal_files(tmp_path)[0]
    with open(first, "ab") as f:  # a zero tail where only the last segment may have one
        f.write(bytes(4096))
    with pytest.raises(LogCorruptionError, match="non-last"):
        SegmentLog(tmp_path, opts)

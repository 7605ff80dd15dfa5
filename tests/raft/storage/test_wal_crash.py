"""Torn writes and corruption: cut or damage the WAL at every byte of the last batch, then recover.

A crash can leave any prefix of the last (un-fsynced) batch on disk, and page writeback can even leave
holes. Recovery must keep every earlier batch, drop the torn one whole, cut the file back, and never
return a damaged record; damage that cannot be a torn write must raise LogCorruptionError precisely.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from google_crc32c import value as crc32c

from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage import LogCorruptionError, SegmentLog
from raft.storage.segment import COMMIT_SIZE, HEADER_SIZE, TRUNCATE_SIZE
from raft.storage.wal import wal_files
from raft.storage.walscan import scan_directory
from tests.raft.helpers import dump, ents, expect


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A tmpfs directory when there is one: these loops reopen the log hundreds of times, and on a busy
    disk each fsync/unlink costs milliseconds. What is under test is the format, not the disk."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix="raft-wal-crash-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


BIG = LogStorageOptions(segment_bytes=1 << 20)
SMALL = LogStorageOptions(segment_bytes=100)


def valid_ends(d: Path) -> dict[Path, int]:
    """Each segment's valid end (its last commit frame); a preallocated segment's file is longer."""
    return {Path(s.path): s.valid_end for s in scan_directory(d).scans}


def build(d: Path, opts: LogStorageOptions, batches: list[list[Entry]]) -> tuple[Path, int, int]:
    """Write the batches; return (file of the last batch, its start offset, its end offset)."""
    with SegmentLog(d, opts) as log:
        for b in batches[:-1]:
            log.append(b)
        ends = valid_ends(d)
        log.append(batches[-1])
    last = wal_files(d)[-1]
    return last, ends.get(last, 0), valid_ends(d)[last]


def torn(raw: bytes, cut: int) -> bytes:
    """What a crash can leave of a preallocated segment: the bytes before `cut`, zeros after (the file
    keeps its preallocated size; a segment still being created may be shorter than its header)."""
    return raw[:cut] + bytes(len(raw) - cut) if cut > HEADER_SIZE else raw[:cut]


def assert_cut_back(path: Path, start: int, what: str) -> None:
    """Recovery left nothing after `start`: the file ends there, or holds only zeros from there on."""
    if path.exists():
        data = path.read_bytes()
        assert data[start:] == bytes(len(data) - start), f"tail not cut back {what}"


def recover(pristine: Path, work: Path, opts: LogStorageOptions, victim: str, data: bytes) -> SegmentLog:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    (work / victim).write_bytes(data)
    return SegmentLog(work, opts)


BEFORE = [ents(1, 3), ents(4, 4), ents(5, 7)]


@pytest.mark.parametrize(
    ("opts", "last_batch", "survivors"),
    [
        (BIG, ents(8, 10, term=2), ents(1, 7)),  # plain append in the same segment
        (BIG, ents(6, 9, term=2), ents(1, 7)),  # truncating append: the truncation must not half-happen
        (SMALL, ents(8, 9, term=2), ents(1, 7)),  # last batch opened a new segment (header torn too)
    ],
    ids=["append", "truncating-append", "new-segment"],
)
def test_cut_at_every_byte_of_the_last_batch(
    tmp_path: Path, opts: LogStorageOptions, last_batch: list[Entry], survivors: list[Entry]
) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    victim, start, end = build(pristine, opts, [*BEFORE, last_batch])
    raw = victim.read_bytes()
    full = survivors[: last_batch[0].index - 1] + last_batch
    for cut in range(start, end + 1):
        with recover(pristine, work, opts, victim.name, torn(raw, cut)) as log:
            got = dump(log)
            if raw[cut:end] == bytes(end - cut):  # the batch's last bytes are zeros: the padding restores them
                assert got == expect(full)
                continue
            assert got == expect(survivors), f"cut at {cut}"
            assert_cut_back(work / victim.name, max(start, HEADER_SIZE), f"at {cut}")
            log.append(ents(8, 8, term=5))  # the log stays writable after recovery
        with SegmentLog(work, opts) as log:
            assert dump(log) == expect(survivors + ents(8, 8, term=5))


@pytest.mark.parametrize("truncating", [False, True])
def test_flip_every_byte_of_the_last_record_drops_the_torn_batch(tmp_path: Path, truncating: bool) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    last_batch = ents(6, 8, term=2) if truncating else ents(8, 10, term=2)
    victim, start, end = build(pristine, BIG, [*BEFORE, last_batch])
    assert end - start == sum(26 + len(e.data) for e in last_batch) + COMMIT_SIZE + truncating * TRUNCATE_SIZE
    raw = victim.read_bytes()
    last_record = end - COMMIT_SIZE - (26 + len(last_batch[-1].data))
    for pos in range(last_record, end):  # the last entry frame and the commit frame
        damaged = bytearray(raw)
        damaged[pos] ^= 0x40
        with recover(pristine, work, BIG, victim.name, bytes(damaged)) as log:
            assert dump(log) == expect(ents(1, 7)), f"flip at {pos}"
        assert_cut_back(work / victim.name, start, f"after a flip at {pos}")


def test_flip_in_an_earlier_batch_raises_with_file_and_offset(tmp_path: Path) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    victim, _start, _ = build(pristine, BIG, [*BEFORE, ents(8, 9)])
    raw = victim.read_bytes()
    frame = HEADER_SIZE  # the first entry frame of the first batch; later batches are committed after it
    for pos in range(frame, frame + 26 + len(b"1/1")):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x01
        with pytest.raises(LogCorruptionError) as info:
            recover(pristine, work, BIG, victim.name, bytes(damaged))
        assert info.value.path.endswith(victim.name) and info.value.offset == frame, f"flip at {pos}"
        assert "followed by a valid commit frame" in str(info.value)
        assert f"byte offset {frame}" in str(info.value)
        assert (work / victim.name).read_bytes() == bytes(damaged)  # nothing was "repaired" away


def test_hole_in_the_last_batch_with_its_commit_frame_present_is_a_torn_write(tmp_path: Path) -> None:
    """Writeback can persist the batch's last page (with the commit frame) but not a middle one."""
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    victim, start, _end = build(pristine, BIG, [*BEFORE, ents(8, 40, term=2)])
    raw = bytearray(victim.read_bytes())
    raw[start + 100 : start + 300] = bytes(200)
    with recover(pristine, work, BIG, victim.name, bytes(raw)) as log:
        assert dump(log) == expect(ents(1, 7))
    assert_cut_back(work / victim.name, start, "after a hole")


def test_damage_in_a_sealed_segment_raises(tmp_path: Path) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    build(pristine, SMALL, [ents(1, 10), ents(11, 20), ents(21, 30)])
    first = wal_files(pristine)[0]
    raw = first.read_bytes()
    for pos in (HEADER_SIZE + 3, len(raw) - 1):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x80
        with pytest.raises(LogCorruptionError, match=r"non-last\) segment") as info:
            recover(pristine, work, SMALL, first.name, bytes(damaged))
        assert info.value.path.endswith(first.name)
    with pytest.raises(LogCorruptionError, match="uncommitted frames at end"):
        recover(pristine, work, SMALL, first.name, raw[:-COMMIT_SIZE])


def test_damaged_header_of_a_segment_with_data_raises(tmp_path: Path) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    victim, _, _ = build(pristine, BIG, [ents(1, 3)])
    raw = victim.read_bytes()
    for pos in range(HEADER_SIZE):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x10
        with pytest.raises(LogCorruptionError, match=r"byte offset 0: (segment header CRC|bad segment)"):
            recover(pristine, work, BIG, victim.name, bytes(damaged))


def test_torn_segment_creation_is_discarded(tmp_path: Path) -> None:
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    victim, _, _ = build(pristine, SMALL, [ents(1, 10), ents(11, 12)])
    raw = victim.read_bytes()
    for cut in range(HEADER_SIZE):
        with recover(pristine, work, SMALL, victim.name, raw[:cut]) as log:
            assert dump(log) == expect(ents(1, 10))
        assert not (work / victim.name).exists()


def test_corrupt_wal_meta_raises(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, BIG) as log:
        log.append(ents(1, 5))
        log.truncate_prefix(3)
    meta = tmp_path / "wal_meta"
    raw = meta.read_bytes()
    meta.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    with pytest.raises(LogCorruptionError, match=r"wal_meta: corrupt log at byte offset 0"):
        SegmentLog(tmp_path, BIG)


def test_bytes_on_disk_match_docs_log_format(tmp_path: Path) -> None:
    """Pins segment format version 1 and wal_meta version 2 exactly as docs/log-format.md describes it; a change here is a format change."""
    with SegmentLog(tmp_path, BIG) as log:
        log.append([Entry(7, 1, 2, b"hello")])
        log.append([Entry(8, 1, 0, b"")])  # truncating append
    (path,) = wal_files(tmp_path)
    assert path.name == "00000000000000000001-0000000000000001.wal"

    def frame(body: bytes) -> bytes:
        length = struct.pack("<I", len(body))
        return struct.pack("<I", crc32c(length + body)) + length + body

    header = b"RAFTWAL\x00" + struct.pack("<IIQQI", 1, 0, 1, 1, 0)
    header += struct.pack("<I", crc32c(header))
    batch1 = frame(struct.pack("<BBQQ", 1, 2, 7, 1) + b"hello")
    batch1 += frame(struct.pack("<BIQ", 2, 1, 40))
    start2 = 40 + len(batch1)
    batch2 = frame(struct.pack("<BQ", 3, 1)) + frame(struct.pack("<BBQQ", 1, 0, 8, 1))
    batch2 += frame(struct.pack("<BIQ", 2, 2, start2))
    # A new segment is extended to segment_bytes with zeros (preallocated) once its header is durable.
    assert path.read_bytes() == (header + batch1 + batch2).ljust(BIG.segment_bytes, b"\0")

    with SegmentLog(tmp_path, BIG) as log:
        log.truncate_prefix(2)  # past the last entry: no start hint
    meta = b"RWAL" + struct.pack("<HHQQQQ", 2, 0, 2, 0, 0, 0)
    assert (tmp_path / "wal_meta").read_bytes() == meta + struct.pack("<I", crc32c(meta))
    with SegmentLog(tmp_path, BIG) as log:
        log.append([Entry(8, 2, 0, b"a"), Entry(8, 3, 0, b"b")])
        log.truncate_prefix(3)
    # The first truncation deleted the segment (all below 2): entries 2, 3 went to a new segment 1, so entry
    # 3's frame follows its 40-byte header and entry 2's 27-byte frame.
    meta = b"RWAL" + struct.pack("<HHQQQQ", 2, 0, 3, 0, 1, 40 + 27)
    assert (tmp_path / "wal_meta").read_bytes() == meta + struct.pack("<I", crc32c(meta))

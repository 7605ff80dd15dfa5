"""The on-disk format of one WAL segment: header, frames, batch encoding and the recovery scan.

Byte-level layout is specified in docs/log-format.md; this module is its only implementation. The rules for
a whole directory (which segments count, torn tails, replay) are in raft/storage/walscan.py, built on
`read_header` and `scan_segment`.

Frame = crc:u32 | length:u32 | body[length], little endian, unaligned (no padding, so every byte of a frame
is covered by its CRC). crc = CRC32C(length bytes + body). body[0] is the frame type.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

from google_crc32c import extend as _crc_extend
from google_crc32c import value as _crc

from raft.core.messages import Entry
from raft.leaf import failpoint
from raft.status import RaftBaseError

FORMAT_VERSION = 1
SEGMENT_MAGIC = b"RAFTWAL\x00"

# Segment header: magic[8] version:u32 flags:u32 first_index:u64 seg_id:u64 reserved:u32 crc:u32 -> 40 bytes.
_HEADER = struct.Struct("<8sIIQQI")
_HEADER_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size + _HEADER_CRC.size

FRAME_ENTRY = 1
FRAME_COMMIT = 2
FRAME_TRUNCATE = 3

_PREFIX = struct.Struct("<II")  # crc, length
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# Entry: length | type=1 | entry_type:u8 | term:u64 | index:u64 | data. Packed once, CRC'd, then prefixed.
_ENTRY_HEAD = struct.Struct("<IBBQQ")
_ENTRY_FIELDS = struct.Struct("<BQQ")  # entry_type, term, index (read at frame offset ENTRY_TYPE_AT)
ENTRY_TYPE_AT = _PREFIX.size + 1  # 9: crc, length, frame type, then the entry_type byte
ENTRY_OVERHEAD = 4 + _ENTRY_HEAD.size  # 26 bytes before the data
_ENTRY_BODY_MIN = _ENTRY_HEAD.size - 4  # type + entry_type + term + index = 18
# Commit: length=13 | type=2 | count:u32 | batch_start:u64  (batch_start = offset of the batch's first frame).
_COMMIT_HEAD = struct.Struct("<IBIQ")
_COMMIT_BODY = struct.Struct("<IQ")
COMMIT_SIZE = 4 + _COMMIT_HEAD.size
_COMMIT_SIGNATURE = _COMMIT_HEAD.pack(13, FRAME_COMMIT, 0, 0)[:5]  # length + type: how commit frames are found
# Truncate: length=9 | type=3 | from_index:u64. Entries >= from_index written earlier are void.
_TRUNC_HEAD = struct.Struct("<IBQ")
TRUNCATE_SIZE = 4 + _TRUNC_HEAD.size

_MAX_DATA = 0xFFFFFFFF - _ENTRY_BODY_MIN

# What the scan reads: a segment's bytes, or the segment mapped (recovery maps it rather than reading it).
Bytes = bytes | mmap.mmap

SEGMENT_NAME = re.compile(r"^(\d{20})-([0-9a-f]{16})\.wal$")

# wal_meta v2: magic[4] version:u16 reserved:u16 first_index:u64 min_seg_id:u64 start_seg_id:u64
# start_offset:u64 crc:u32 -> 44 bytes. Version 1 (28 bytes: no start_seg_id/start_offset) is still read.
WAL_META_FILE = "wal_meta"
_WAL_META_MAGIC = b"RWAL"
_WAL_META_V1 = struct.Struct("<4sHHQQ")
_WAL_META = struct.Struct("<4sHHQQQQ")


class LogCorruptionError(RaftBaseError):
    """Durable log data is damaged in a way that cannot be a torn write. The node must stop."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt log at byte offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class SegmentFile:
    """One open segment file: where the valid data ends, and the highest entry index ever written to it."""

    __slots__ = ("fd", "first_index", "max_index", "path", "seg_id", "size")

    def __init__(self, path: str, seg_id: int, first_index: int, fd: int, size: int) -> None:
        self.path = path
        self.seg_id = seg_id
        self.first_index = first_index
        self.fd = fd
        self.size = size  # bytes of valid (committed) data, header included
        self.max_index = 0  # highest entry index in any frame, live or stale; decides prefix deletion

    def write_sync(self, data: bytes) -> None:
        """Append at the valid end with one pwrite (looped only on short writes) and one fdatasync."""
        view, pos = memoryview(data), self.size
        while view:
            n = os.pwrite(self.fd, view, pos)
            view, pos = view[n:], pos + n
        failpoint.hit("wal.append.before_fsync")
        failpoint.hit("wal.fsync")
        os.fdatasync(self.fd)
        self.size = pos


@dataclass(frozen=True, slots=True)
class WalMeta:
    """The truncation meta. `start_seg_id`/`start_offset`: where the frame of entry `first_index` was when
    the prefix was truncated (0/0: not recorded), so that recovery scans that segment from there instead of
    walking the compacted records before it; a hint only, checked before it is used."""

    first_index: int
    min_seg_id: int
    start_seg_id: int = 0
    start_offset: int = 0


def encode_wal_meta(first_index: int, min_seg_id: int, start_seg_id: int = 0, start_offset: int = 0) -> bytes:
    body = _WAL_META.pack(_WAL_META_MAGIC, 2, 0, first_index, min_seg_id, start_seg_id, start_offset)
    return body + _U32.pack(_crc(body))


def decode_wal_meta(data: bytes, path: str) -> WalMeta:
    """Raises LogCorruptionError naming the file if it is damaged."""
    layout = {_WAL_META.size + 4: _WAL_META, _WAL_META_V1.size + 4: _WAL_META_V1}.get(len(data))
    if layout is None or _crc(data[: layout.size]) != _U32.unpack_from(data, layout.size)[0]:
        raise LogCorruptionError(path, 0, "WAL meta file has a bad length or CRC")
    magic, version, _, *fields = layout.unpack_from(data)
    if magic != _WAL_META_MAGIC or version != (2 if layout is _WAL_META else 1):
        raise LogCorruptionError(path, 0, f"WAL meta file has magic {magic!r} version {version}")
    return WalMeta(*fields)


def segment_name(first_index: int, seg_id: int) -> str:
    return f"{first_index:020d}-{seg_id:016x}.wal"


def encode_header(first_index: int, seg_id: int) -> bytes:
    head = _HEADER.pack(SEGMENT_MAGIC, FORMAT_VERSION, 0, first_index, seg_id, 0)
    return head + _HEADER_CRC.pack(_crc(head))


def read_header(data: Bytes, path: str) -> tuple[int, int]:
    """(first_index, seg_id) of a segment; raises LogCorruptionError if the header is damaged."""
    if len(data) < HEADER_SIZE:
        raise LogCorruptionError(path, 0, f"segment header is {len(data)} bytes, expected {HEADER_SIZE}")
    head = data[: _HEADER.size]
    (crc,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
    if _crc(head) != crc:
        raise LogCorruptionError(path, 0, "segment header CRC mismatch")
    magic, version, _flags, first_index, seg_id, _ = _HEADER.unpack(head)
    if magic != SEGMENT_MAGIC:
        raise LogCorruptionError(path, 0, f"bad segment magic {magic!r}")
    if version != FORMAT_VERSION:
        raise LogCorruptionError(path, 0, f"unsupported segment format version {version}")
    return first_index, seg_id


@dataclass(slots=True)
class EncodedBatch:
    """One append's bytes plus where each entry landed (offset and frame size, for the read index)."""

    data: bytes
    terms: array[int]
    offsets: array[int]
    sizes: array[int]


def encode_batch(entries: Sequence[Entry], start: int, truncate_from: int | None) -> EncodedBatch:
    """Encode [truncate frame] + entry frames + commit frame for a batch starting at file offset `start`.

    Raises ValueError if the entries' indexes are not contiguous. Hot path: one struct pack and two CRC
    calls per entry, pieces joined once at the end.
    """
    parts: list[bytes] = []
    put = parts.append
    sizes: array[int] = array("I")
    put_size = sizes.append
    first_entry = start
    if truncate_from is not None:
        body = _TRUNC_HEAD.pack(9, FRAME_TRUNCATE, truncate_from)
        put(_U32.pack(_crc(body)))
        put(body)
        first_entry += TRUNCATE_SIZE
    expect = entries[0].index
    head_pack, u32_pack, crc, crc_extend = _ENTRY_HEAD.pack, _U32.pack, _crc, _crc_extend
    for e in entries:
        if e.index != expect:
            raise ValueError(f"entries not contiguous: expected index {expect}, got {e.index}")
        data = e.data
        if type(data) is not bytes:  # the C CRC only accepts bytes; bytearray/memoryview get copied once
            data = bytes(data)
        n = len(data)
        if n > _MAX_DATA:
            raise ValueError(f"entry {e.index}: data of {n} bytes exceeds the frame limit")
        head = head_pack(_ENTRY_BODY_MIN + n, FRAME_ENTRY, e.type, e.term, e.index)
        put(u32_pack(crc_extend(crc(head), data)))
        put(head)
        put(data)
        put_size(ENTRY_OVERHEAD + n)
        expect += 1
    offsets = array("q", accumulate(sizes, initial=first_entry))
    offsets.pop()  # accumulate yields one offset too many: where the commit frame goes
    commit = _COMMIT_HEAD.pack(13, FRAME_COMMIT, len(entries) + (truncate_from is not None), start)
    put(_U32.pack(_crc(commit)))
    put(commit)
    return EncodedBatch(b"".join(parts), array("q", [e.term for e in entries]), offsets, sizes)


def decode_entry(buf: Bytes, off: int, path: str, file_offset: int, verify: bool = True) -> Entry:
    """Decode (and CRC-check if verify) the entry frame at buf[off:]; file_offset is for the error message."""
    if off + ENTRY_OVERHEAD > len(buf):
        raise LogCorruptionError(path, file_offset, "entry frame extends past the end of the file")
    crc, length = _PREFIX.unpack_from(buf, off)
    stop = off + 8 + length
    if stop > len(buf) or length < _ENTRY_BODY_MIN or buf[off + 8] != FRAME_ENTRY:
        raise LogCorruptionError(path, file_offset, "not an entry frame")
    if verify and _crc(buf[off + 4 : stop]) != crc:
        raise LogCorruptionError(path, file_offset, "entry frame CRC mismatch")
    etype, term, index = _ENTRY_FIELDS.unpack_from(buf, off + ENTRY_TYPE_AT)
    return Entry(term, index, etype, buf[off + ENTRY_OVERHEAD : stop])


@dataclass(slots=True)
class Batch:
    """One committed batch as found by the scan: entries first_index, first_index + 1, ... (contiguous)."""

    truncate_from: int | None  # from a leading truncate frame
    first_index: int  # of the first entry; meaningless when there are none
    terms: array[int]
    offsets: array[int]
    sizes: array[int]


@dataclass(slots=True)
class ScanResult:
    batches: list[Batch]
    valid_end: int  # offset just past the last valid commit frame (or the header)
    torn: bool  # True if bytes after valid_end were discarded (only ever for the last segment)


def scan_segment(
    data: Bytes, path: str, is_last: bool, skip_below: int = 0, segment_first: int = 0, start: int = HEADER_SIZE
) -> ScanResult:
    """Parse every frame after the header (or from `start`) into committed batches.

    Entry frames below `skip_below` (compacted: below the log's first index, never read again) are walked
    by their headers only, without the CRC over their payload, so that recovery after a snapshot does not
    pay for the dead records of the surviving segment (`segment_first`: the segment's first index, from its
    header). One
    is skipped only where its index is exactly the next one in sequence (the segment's first index, the
    previous entry's + 1, or a truncate frame's), so a damaged index field is CRC-checked and caught like
    any other damage; a damaged length still derails the walk into a bad frame or a commit frame whose
    frame count and start offset do not match.

    `start` past the header (recovery, from wal_meta's hint: the checked frame of the first live entry)
    begins the walk there, possibly inside a batch: that batch's commit frame then covers frames before
    `start` too (`batch_start` below it, a count above the frames seen), and the batch found holds only
    the frames from `start` on.

    An invalid frame or uncommitted frames at the end are a torn write only if this is the last segment
    and no valid commit frame of a *later* batch follows (a later batch is only written after this one's
    fsync, so its presence proves the damaged bytes were once durable). Anything else raises.
    """
    batches: list[Batch] = []
    end = len(data)
    off = committed = start
    # The open batch, flattened into locals: this loop is the replay hot path.
    terms, offsets, sizes = array("q"), array("q"), array("I")
    add_term, add_offset, add_size = terms.append, offsets.append, sizes.append
    truncate_from: int | None = None
    first_index = frames = 0
    expect = -1  # next entry index in the open batch; -1 before its first entry
    # The next index in sequence, where skipping (from a hinted start every frame is live and checked).
    follows = segment_first if skip_below > segment_first and start == HEADER_SIZE else -1
    unpack_prefix, unpack_fields, crc = _PREFIX.unpack_from, _ENTRY_FIELDS.unpack_from, _crc
    while off < end:
        if off + 9 > end:
            return _bad_tail(data, path, is_last, off, committed, batches, "truncated frame")
        frame_crc, length = unpack_prefix(data, off)
        stop = off + 8 + length
        if length == 0 or stop > end:
            return _bad_tail(data, path, is_last, off, committed, batches, "invalid frame (CRC or length)")
        kind = data[off + 8]
        if kind == FRAME_ENTRY and length >= _ENTRY_BODY_MIN:
            _etype, term, index = unpack_fields(data, off + 9)
            if (index != follows or index >= skip_below) and crc(data[off + 4 : stop]) != frame_crc:
                return _bad_tail(data, path, is_last, off, committed, batches, "invalid frame (CRC or length)")
            follows = index + 1 if index == follows else -1
            if expect < 0:
                first_index = index
            elif index != expect:
                raise LogCorruptionError(path, off, f"entry {index} where the batch expects {expect}")
            expect = index + 1
            add_term(term)
            add_offset(off)
            add_size(8 + length)
            frames += 1
        elif crc(data[off + 4 : stop]) != frame_crc:
            return _bad_tail(data, path, is_last, off, committed, batches, "invalid frame (CRC or length)")
        elif kind == FRAME_TRUNCATE and length == 9:
            if frames:
                raise LogCorruptionError(path, off, "truncate frame in the middle of a batch")
            (truncate_from,) = _U64.unpack_from(data, off + 9)
            follows = truncate_from if follows >= 0 else -1
            first_index = expect = truncate_from
            frames = 1
        elif kind == FRAME_COMMIT and length == 13:
            n, batch_start = _COMMIT_BODY.unpack_from(data, off + 9)
            inside = committed == start > HEADER_SIZE and HEADER_SIZE <= batch_start < start and n > frames
            if not inside and (n != frames or batch_start != committed):
                raise LogCorruptionError(
                    path, off, f"commit frame covers {n} frames from {batch_start}, found {frames} from {committed}"
                )
            batches.append(Batch(truncate_from, first_index, terms, offsets, sizes))
            terms, offsets, sizes = array("q"), array("q"), array("I")
            add_term, add_offset, add_size = terms.append, offsets.append, sizes.append
            truncate_from, first_index, frames, expect = None, 0, 0, -1
            committed = stop
        else:
            raise LogCorruptionError(path, off, f"frame of unknown type {kind} or bad length {length}")
        off = stop
    if committed != end:
        return _bad_tail(data, path, is_last, committed, committed, batches, "uncommitted frames at end")
    return ScanResult(batches, committed, False)


def frame_starts(data: Bytes, start: int = HEADER_SIZE) -> Iterator[int]:
    """The offset of every frame from `start` on, walked by the length prefixes alone (no CRC, no type check):
    where a frame begins, for tools that aim at frame boundaries (the corruption sweep, tools/torture). The walk
    ends at a zero prefix, where a preallocated segment's unused space begins (no frame starts with zeros)."""
    off = start
    while off + _PREFIX.size <= len(data):
        yield off
        if data[off : off + _PREFIX.size] == bytes(_PREFIX.size):
            return
        off += _PREFIX.size + _PREFIX.unpack_from(data, off)[1]


def check_skipped(data: Bytes, path: str, end: int) -> LogCorruptionError | None:
    """The frames recovery skipped by wal_meta's start hint, checked after the fact: from the header, every
    frame's CRC, and the frames must chain exactly to `end` (the hinted frame). They are compacted records,
    never read again, so damage there costs nothing; it is still damage on the disk, worth a loud word."""
    off = HEADER_SIZE
    while off < end:
        if off + 9 > end:
            return LogCorruptionError(path, off, "the compacted frames before the first live entry do not chain to it")
        crc, length = _PREFIX.unpack_from(data, off)
        stop = off + 8 + length
        if length == 0 or stop > end or _crc(data[off + 4 : stop]) != crc:
            return LogCorruptionError(path, off, "a compacted frame before the first live entry is damaged")
        off = stop
    return None


def _bad_tail(
    data: Bytes, path: str, is_last: bool, bad: int, committed: int, batches: list[Batch], reason: str
) -> ScanResult:
    if not is_last:
        raise LogCorruptionError(path, bad, f"{reason} in a sealed (non-last) segment")
    later = _later_commit(data, bad, committed)
    if later is not None:
        raise LogCorruptionError(path, bad, f"{reason}, followed by a valid commit frame at offset {later}")
    return ScanResult(batches, committed, True)


def _later_commit(data: Bytes, pos: int, committed: int) -> int | None:
    """Offset of a valid commit frame at/after pos that closes a batch starting after `committed`."""
    while True:
        hit = data.find(_COMMIT_SIGNATURE, pos)
        if hit < 0:
            return None
        frame = hit - 4
        pos = hit + 1
        if frame < committed or frame + COMMIT_SIZE > len(data):
            continue
        frame_crc, _ = _PREFIX.unpack_from(data, frame)
        if _crc(data[frame + 4 : frame + COMMIT_SIZE]) != frame_crc:
            continue
        _, batch_start = _COMMIT_BODY.unpack_from(data, frame + 9)
        if batch_start > committed:  # == committed is the torn batch's own commit frame
            return frame

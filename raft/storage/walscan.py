"""The one reader of a WAL directory's recovery rules: a pure, read-only scan that *reports* what the
directory holds (segments, torn tails, live index ranges, gaps, damage with file and byte offset) and never
writes. Everyone who needs to know what a WAL directory holds reads it through here
(docs/log-format.md, *Replay*; docs/layout.md):

* `SegmentLog` (raft/storage/wal.py) applies the verdict when it opens: it refuses `WalScan.fatal`, deletes
  void segments and a crashed segment creation, cuts a torn tail and builds its index from `live_index`;
* `rmqctl log info|dump|replay` (cli/rmqctl/walread.py) prints the same verdict, changing nothing;
* the Spark audit (tools/audit) runs the per-segment pieces on its executors, over bytes read through
  Hadoop, and merges them on the driver, keeping going past the first problem.

The bytes-level pieces open no file (callers pass names, sizes and bytes); `list_directory` and
`scan_directory` do the reading for a local directory.

    listing = list_segments(names_and_sizes, wal_meta_bytes)
    scans = [scan_segment_bytes(read(s.name), s) for s in listing.segments]
    live = merge_scans(listing, scans)            # runs of live entries, gaps, first/last index, fatal
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from raft.storage.segment import (
    ENTRY_OVERHEAD,
    FRAME_ENTRY,
    FRAME_TRUNCATE,
    HEADER_SIZE,
    SEGMENT_NAME,
    TRUNCATE_SIZE,
    WAL_META_FILE,
    Batch,
    Bytes,
    LogCorruptionError,
    WalMeta,
    decode_entry,
    decode_wal_meta,
    read_header,
    scan_segment,
)

_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class SegmentListing:
    name: str
    seg_id: int
    first_index: int  # from the name
    size: int
    status: str  # "live" | "void" (below wal_meta's min_seg_id: a node start deletes it unread)
    is_last: bool  # the last live segment: the only one that may end in a torn batch


@dataclass(frozen=True, slots=True)
class WalListing:
    wal_first: int  # wal_meta's first_index (1 without the file)
    min_seg_id: int
    segments: tuple[SegmentListing, ...]  # by seg_id
    start_seg_id: int = 0  # wal_meta's hint: entry wal_first's frame is at start_offset of this segment
    start_offset: int = 0  # (0/0: none; recovery checks it before it trusts it)


def list_segments(files: Iterable[tuple[str, int]], wal_meta: bytes | None, meta_path: str = "wal_meta") -> WalListing:
    """Classify a directory's segment files from (name, size) pairs (other names are ignored) and the
    bytes of its wal_meta file (None if absent). Raises LogCorruptionError for a damaged wal_meta."""
    meta = decode_wal_meta(wal_meta, meta_path) if wal_meta is not None else WalMeta(1, 0)
    wal_first, min_seg_id = meta.first_index, meta.min_seg_id
    found = sorted((int(m.group(2), 16), int(m.group(1)), n, size) for n, size in files if (m := SEGMENT_NAME.match(n)))
    live = [f for f in found if f[0] >= min_seg_id]
    out = tuple(
        SegmentListing(
            name,
            seg_id,
            first,
            size,
            "live" if seg_id >= min_seg_id else "void",
            bool(live) and (seg_id, first, name, size) == live[-1],
        )
        for seg_id, first, name, size in found
    )
    return WalListing(wal_first, min_seg_id, out, meta.start_seg_id, meta.start_offset)


@dataclass(slots=True)
class Damage:
    """Bytes that are not a valid log: where (file, byte offset), why, and the first index they cost."""

    path: str
    offset: int
    reason: str
    index: int | None  # the first entry index lost at `offset`, when the bytes before it tell


@dataclass(frozen=True, slots=True)
class Span:
    """A committed batch without its arrays: enough to apply the replay rules."""

    truncate_from: int | None
    first_index: int
    count: int
    offset: int  # of its first entry frame (or of the batch, when it has none)


@dataclass(slots=True)
class SegmentScan:
    """One segment, scanned: its committed batches (with each entry's frame CRC), a torn tail, damage."""

    path: str
    seg_id: int
    first_index: int
    size: int
    status: str  # "live" | "void" | "crashed creation" | "damaged"
    batches: list[Batch] = field(default_factory=list)
    crcs: list[array[int]] = field(default_factory=list)  # per batch: each entry frame's CRC32C
    valid_end: int = 0
    torn_bytes: int = 0  # bytes after the last commit frame of the last segment (a torn write)
    damage: Damage | None = None
    spans: list[Span] = field(default_factory=list)  # one per batch
    start: int = HEADER_SIZE  # where the walk began: past the header, or at wal_meta's checked hint

    @property
    def max_index(self) -> int:
        """The highest entry index in any committed batch, live or voided (0 without entries): a segment is
        deleted by a prefix truncation only once this is below the new first index."""
        return max((b.first_index + b.count - 1 for b in self.spans if b.count), default=0)


def scan_segment_bytes(
    data: Bytes,
    seg: SegmentListing,
    path: str | None = None,
    *,
    crcs: bool = True,
    skip_below: int = 0,
    start: int = HEADER_SIZE,
) -> SegmentScan:
    """Scan one segment's bytes with the WAL's own rules; damage is recorded (with the batches before it)
    instead of raised. `crcs`: keep each entry frame's CRC (the audit's log matching; recovery needs none).
    `skip_below`: entries below this index (compacted) are walked by header only (`scan_segment`).
    `start`: wal_meta's hint that entry `skip_below`'s frame is at this offset; used only if the frame there
    is exactly that (an entry frame, that index, its CRC), so the compacted records before it are not read
    at all; otherwise the walk starts after the header. A void segment's bytes are not looked at (pass b"")."""
    path = path or seg.name
    out = SegmentScan(path, seg.seg_id, seg.first_index, max(seg.size, len(data)), seg.status)
    if seg.status == "void":
        return out
    if seg.is_last and _crashed_creation(data, path):
        out.status = "crashed creation"
        return out
    try:
        header = read_header(data, path)
        if header != (seg.first_index, seg.seg_id):
            raise LogCorruptionError(path, 0, f"header (first_index, seg_id) {header} contradicts the name")
        if start != HEADER_SIZE and not _entry_frame_at(data, start, skip_below):
            start = HEADER_SIZE
        out.start = start
        scan = scan_segment(data, path, seg.is_last, skip_below, seg.first_index, start)
    except LogCorruptionError as e:
        out.status = "damaged"
        out.damage = Damage(path, e.offset, e.reason, None)
        if e.offset < HEADER_SIZE:
            out.damage.index = seg.first_index
            return out
        try:  # the committed batches before the damage are intact
            scan = scan_segment(data[: e.offset], path, True, skip_below, seg.first_index, start)
        except LogCorruptionError:
            return out
        first = skip_below if start != HEADER_SIZE else seg.first_index
        out.damage.index = _lost_index(data, path, scan.batches, scan.valid_end, e.offset, first)
        scan.torn = False
    out.batches = scan.batches
    out.spans = [
        Span(b.truncate_from, b.first_index, len(b.terms), b.offsets[0] if len(b.offsets) else 0) for b in scan.batches
    ]
    if crcs:
        out.crcs = [array("I", [_U32.unpack_from(data, o)[0] for o in b.offsets]) for b in scan.batches]
    out.valid_end = scan.valid_end
    out.torn_bytes = _used_end(data, scan.valid_end) - scan.valid_end if scan.torn else 0
    return out


_ZEROS = bytes(1 << 20)


def _used_end(data: Bytes, start: int) -> int:
    """The end of the last non-zero byte at or after `start` (`start` if none): the zeros after it are the
    unused, preallocated end of the last segment, not part of a torn write. (No frame is all zeros: the
    CRC32C of a zero length is not zero.)"""
    return _nonzero_end(lambda lo, hi: data[lo:hi], start, len(data))


def _nonzero_end(read: Callable[[int, int], bytes], start: int, end: int) -> int:
    """After the last non-zero byte of [start, end), read backwards a MiB at a time by read(lo, hi); `start` if
    all zero. Each chunk is compared whole first (memcmp); rstrip, which walks byte by byte, only on the last."""
    while end > start:
        lo = max(start, end - len(_ZEROS))
        chunk = read(lo, end)
        if chunk != _ZEROS[: len(chunk)]:
            return lo + len(chunk.rstrip(b"\0"))
        end = lo
    return start


def data_extent(fd: int, size: int) -> int:
    """Where a file's data ends: after its last non-zero byte, with a few KiB to spare (the zeros a valid frame
    may end with), less the unused zeros of a preallocated segment. A trailing hole is skipped with
    SEEK_DATA/SEEK_HOLE, so that it is never read or even mapped; zeros written out in full (a copy that
    filled the hole) are read backwards once with pread, not through a mapping. A file system without
    SEEK_HOLE reports the whole file as data."""
    end = pos = 0
    offset = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        while pos < size:
            pos = os.lseek(fd, os.lseek(fd, pos, os.SEEK_DATA), os.SEEK_HOLE)
            end = pos
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no data after pos
            end = size
    finally:
        os.lseek(fd, offset, os.SEEK_SET)  # the seeks moved the file offset; a caller may read next
    end = _nonzero_end(lambda lo, hi: os.pread(fd, hi - lo, lo), 0, min(end, size))
    # A longer file is never taken for a crashed segment creation (at most a header), even if all zeros.
    return max(min(end + _SPARE, size), min(size, HEADER_SIZE + 1))


_SPARE = 4096  # > the zeros a commit frame can end with (its batch_start is > 0: at most 7)


def read_extent(path: str) -> bytes:
    """A segment file's bytes up to data_extent (the audit's and tools' read; recovery maps the same range)."""
    with open(path, "rb") as f:
        return f.read(data_extent(f.fileno(), os.fstat(f.fileno()).st_size))


def _entry_frame_at(data: Bytes, offset: int, index: int) -> bool:
    """Whether a whole entry frame of entry `index`, its CRC intact, is at `offset` past the header."""
    if not HEADER_SIZE < offset <= len(data) - ENTRY_OVERHEAD:
        return False
    try:
        return decode_entry(data, offset, "", offset).index == index
    except LogCorruptionError:
        return False


def _crashed_creation(data: Bytes, path: str) -> bool:
    """A last segment of at most a header whose header is not whole and valid: the node crashed while creating
    it (before its header was durable), so nothing was ever appended to it and recovery deletes it."""
    if len(data) > HEADER_SIZE:
        return False
    try:
        read_header(data, path)
    except LogCorruptionError:
        return True
    return False


def _lost_index(data: Bytes, path: str, batches: list[Batch], committed: int, bad: int, first: int) -> int:
    """The index the damage at `bad` costs: the first index not where the frames before it say it must be."""
    expect = first
    for b in reversed(batches):
        if len(b.terms):
            expect = b.first_index + len(b.terms)
            break
    off = committed
    while off < bad:  # the uncommitted frames of the damaged batch: valid, but their batch never closed
        if data[off + 8] == FRAME_TRUNCATE:
            (expect,) = struct.unpack_from("<Q", data, off + 9)
            off += TRUNCATE_SIZE
            continue
        if data[off + 8] != FRAME_ENTRY:
            break
        e = decode_entry(data, off, path, off)
        if e.index != expect:
            return expect
        expect += 1
        off += ENTRY_OVERHEAD + len(e.data)
    return expect


@dataclass(frozen=True, slots=True)
class LiveRun:
    """Live entries lo..hi, which are entries [skip, skip + hi - lo] of batch `batch` of segment `seg`."""

    seg: int  # position in the scans list
    batch: int
    skip: int
    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class Gap:
    """Entries lo..hi are missing from the log: the next entry found (at path/offset) skips them."""

    lo: int
    hi: int
    path: str
    offset: int
    after_damage: bool  # the previous segment ended in damage, which already accounts for it


@dataclass
class LiveLog:
    first: int
    runs: list[LiveRun]
    gaps: list[Gap]
    overlaps: list[Damage]  # a batch that restarts below the end without a truncate frame
    fatal: Damage | None = None  # the first problem in recovery order: where SegmentLog refuses to open

    @property
    def last(self) -> int:
        return self.runs[-1].hi if self.runs else self.first - 1

    def indexes(self) -> int:
        return sum(r.hi - r.lo + 1 for r in self.runs)


def merge_scans(listing: WalListing, scans: list[SegmentScan]) -> LiveLog:
    """Apply the recovery's replay rules across segments, in seg_id order: a truncate frame voids the
    suffix, entries below wal_first are compacted, the first entry kept must be exactly last + 1. Where
    SegmentLog stops (damage, a missing index, an overlap), this records it (the first one as `fatal`) and
    carries on with what follows. A segment's damage comes before its batches: recovery scans a segment
    whole before it replays it."""
    live = LiveLog(listing.wal_first, [], [], [])
    runs = live.runs
    damaged = False
    before = ""  # the last segment holding entries (live or compacted) before the one being merged
    previous = ""  # the segment just before it, entries or not
    for k, scan in enumerate(scans):
        if scan.status in ("void", "crashed creation"):
            continue
        live.fatal = live.fatal or scan.damage
        if scan.start != HEADER_SIZE:  # recovery from wal_meta's hint: every live entry is at or after it, so
            runs.clear()  # what came before is compacted, or voided by a truncate frame the hint skipped
        seen_here = False
        for b, batch in enumerate(scan.spans):
            if batch.truncate_from is not None:
                _cut(runs, batch.truncate_from)
            n = batch.count
            if not n:
                continue
            seen_here, seen_before = True, seen_here
            lo = batch.first_index
            skip = min(max(live.first - lo, 0), n)
            if skip == n:
                continue
            start, expected = lo + skip, live.last + 1
            if start != expected:
                offset = scan.batches[b].offsets[skip] if scan.batches else batch.offset
                reason = f"entry {start} found where index {expected} was expected"
                if seen_before:  # the entries before it are in this segment
                    pass
                elif before:  # name the segment the entries before it end in, and an empty one after it
                    between = f"; {previous}, after it, holds none" if previous != before else ""
                    reason += f" (the entries before it end in {before}{between})"
                elif previous:
                    reason += f" (the segment before it, {previous}, holds no entries)"
                found = Damage(scan.path, offset, reason, expected)
                live.fatal = live.fatal or found
                if start < expected:
                    live.overlaps.append(found)
                    continue
                live.gaps.append(Gap(expected, start - 1, scan.path, batch.offset, damaged))
            damaged = False
            runs.append(LiveRun(k, b, skip, start, lo + n - 1))
        damaged = scan.damage is not None
        if any(sp.count for sp in scan.spans):
            before = scan.path
        previous = scan.path
    return live


def _cut(runs: list[LiveRun], from_index: int) -> None:
    while runs and runs[-1].lo >= from_index:
        runs.pop()
    if runs and runs[-1].hi >= from_index:
        r = runs[-1]
        runs[-1] = LiveRun(r.seg, r.batch, r.skip, r.lo, from_index - 1)


def run_arrays(
    scans: Sequence[SegmentScan] | Mapping[int, SegmentScan], run: LiveRun
) -> tuple[array[int], array[int], array[int], array[int]]:
    """(terms, crcs, offsets, sizes) of the run's entries."""
    batch = scans[run.seg].batches[run.batch]
    a, z = run.skip, run.skip + run.hi - run.lo + 1
    return batch.terms[a:z], scans[run.seg].crcs[run.batch][a:z], batch.offsets[a:z], batch.sizes[a:z]


def entry_payloads(data: bytes, offsets: Iterable[int], sizes: Iterable[int]) -> Iterator[bytes]:
    """The data of entry frames already CRC-checked by a scan of `data` (no second check)."""
    for off, size in zip(offsets, sizes, strict=True):
        yield data[off + ENTRY_OVERHEAD : off + size]


@dataclass(slots=True)
class LiveIndex:
    """Per live entry, first..last in order: term, frame offset, frame size, the seg_id of its segment."""

    first: int
    terms: array[int]
    offsets: array[int]
    sizes: array[int]
    seg_ids: array[int]


def live_index(scans: Sequence[SegmentScan], live: LiveLog) -> LiveIndex:
    """The live entries' index arrays (what SegmentLog keeps in memory; scans must hold their batches)."""
    out = LiveIndex(live.first, array("q"), array("q"), array("I"), array("Q"))
    for run in live.runs:
        batch, a, z = scans[run.seg].batches[run.batch], run.skip, run.skip + run.hi - run.lo + 1
        out.terms.extend(batch.terms[a:z])
        out.offsets.extend(batch.offsets[a:z])
        out.sizes.extend(batch.sizes[a:z])
        out.seg_ids.extend(array("Q", [scans[run.seg].seg_id]) * (z - a))
    return out


@dataclass
class WalScan:
    """What a local WAL directory holds, by the recovery rules: `fatal` None means SegmentLog opens it."""

    directory: str
    listing: WalListing
    scans: list[SegmentScan]
    live: LiveLog

    @property
    def fatal(self) -> Damage | None:
        return self.live.fatal

    def error(self) -> LogCorruptionError | None:
        """The error SegmentLog raises for this directory (file, byte offset, reason), if any."""
        d = self.live.fatal
        return None if d is None else LogCorruptionError(d.path, d.offset, d.reason)

    def index(self) -> LiveIndex:
        return live_index(self.scans, self.live)


def list_directory(directory: str | os.PathLike[str]) -> WalListing:
    """list_segments over a local directory (sizes from stat, wal_meta read if present)."""
    directory = os.fspath(directory)
    files = [(e.name, e.stat().st_size) for e in os.scandir(directory) if SEGMENT_NAME.match(e.name)]
    meta_path = os.path.join(directory, WAL_META_FILE)
    try:
        with open(meta_path, "rb") as f:
            meta: bytes | None = f.read()
    except FileNotFoundError:
        meta = None
    return list_segments(files, meta, meta_path)


def scan_directory(
    directory: str | os.PathLike[str],
    listing: WalListing | None = None,
    *,
    crcs: bool = False,
    advance: Callable[[int], None] | None = None,
    skip_compacted: bool = False,
) -> WalScan:
    """Read and scan every segment of a local WAL directory; writes nothing. `advance(bytes)` reports
    progress. `skip_compacted`: entries below wal_meta's first index are not CRC-checked, and the segment
    wal_meta's hint names is scanned from the first live entry's frame (recovery: compacted entries are
    never read again; rmqctl and the audit check every byte). Raises LogCorruptionError only for a damaged
    wal_meta (nothing can be placed without it)."""
    directory = os.fspath(directory)
    listing = listing or list_directory(directory)
    scans: list[SegmentScan] = []
    for seg in listing.segments:
        path = os.path.join(directory, seg.name)
        skip = listing.wal_first if skip_compacted else 0
        hinted = skip_compacted and listing.start_seg_id and seg.seg_id == listing.start_seg_id
        start = listing.start_offset if hinted else HEADER_SIZE
        if seg.status == "void" or seg.size == 0:
            scans.append(scan_segment_bytes(b"", seg, path, crcs=crcs, skip_below=skip, start=start))
        else:  # mapped, not read: a hinted start touches only the pages from the hint on, up to the data's end
            with open(path, "rb") as f:
                extent = data_extent(f.fileno(), os.fstat(f.fileno()).st_size)
                with mmap.mmap(f.fileno(), extent, access=mmap.ACCESS_READ) as data:
                    scans.append(scan_segment_bytes(data, seg, path, crcs=crcs, skip_below=skip, start=start))
        if advance is not None:
            advance(seg.size)
    return WalScan(directory, listing, scans, merge_scans(listing, scans))

"""A read-only view of a WAL directory, for the offline verbs.

`raft.storage.SegmentLog` cannot be used: opening it *recovers*, which truncates a torn tail, deletes
segments and rewrites nothing less than the live node's files. This view applies the same rules as its
recovery (docs/log-format.md, *Replay*) with the same building blocks (`read_header`, `scan_segment`,
`decode_entry`), and only reports what recovery would change: a torn tail, void segments, a crashed
segment creation. Real damage raises the same LogCorruptionError (file and byte offset).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from raft.core.messages import Entry
from raft.storage.segment import (
    HEADER_SIZE,
    SEGMENT_NAME,
    WAL_META_FILE,
    Batch,
    LogCorruptionError,
    decode_entry,
    decode_wal_meta,
    read_header,
    scan_segment,
)


@dataclass
class SegmentReport:
    path: Path
    seg_id: int
    first_index: int  # from the name (= the header's)
    size: int  # file size
    status: str = "live"  # live | void (below wal_meta's min_seg_id) | crashed creation (deleted on start)
    torn_bytes: int = 0  # bytes after the last commit frame that a node start would cut (last segment only)
    entries: int = 0  # live entries read from this segment

    def row(self, show: Callable[[str], str]) -> dict[str, object]:
        return {
            "file": show(str(self.path)),
            "segId": self.seg_id,
            "firstIndex": self.first_index,
            "bytes": self.size,
            "entries": self.entries,
            "tornBytes": self.torn_bytes,
            "status": self.status,
        }


class LogView:
    """The live entries [first_index, last_index] of a WAL directory, read-only. A missing directory is
    an empty log starting at 1 (a node that has not written yet)."""

    def __init__(self, directory: Path | None, advance: Callable[[int], None] | None = None) -> None:
        self.directory = directory
        self.wal_first, self.min_seg_id = 1, 0
        self.segments: list[SegmentReport] = []
        self._first = 1
        self._terms: array[int] = array("q")
        self._offsets: array[int] = array("q")
        self._sizes: array[int] = array("I")
        self._segs: array[int] = array("I")  # index into self.segments
        if directory is not None and directory.is_dir():
            self._scan(directory, advance or (lambda n: None))

    @staticmethod
    def total_bytes(directory: Path | None) -> int:
        """Bytes a scan reads (for a progress bar)."""
        if directory is None or not directory.is_dir():
            return 0
        return sum((directory / n).stat().st_size for n in os.listdir(directory) if SEGMENT_NAME.match(n))

    # --- queries ------------------------------------------------------------------------------------------

    def first_index(self) -> int:
        return self._first

    def last_index(self) -> int:
        return self._first + len(self._terms) - 1

    def __len__(self) -> int:
        return len(self._terms)

    def term(self, index: int) -> int:
        k = index - self._first
        if not 0 <= k < len(self._terms):
            raise IndexError(f"index {index} is not in the log [{self._first}, {self.last_index()}]")
        return self._terms[k]

    def frame_bytes(self) -> int:
        """Bytes of the live entry frames (headers included)."""
        return sum(self._sizes)

    def entries(self, lo: int, hi: int) -> Iterator[Entry]:
        """Entries lo..hi inclusive, read segment by segment and CRC-checked again."""
        lo, hi = max(lo, self._first), min(hi, self.last_index())
        i, end = lo - self._first, hi - self._first + 1
        offsets, sizes, segs = self._offsets, self._sizes, self._segs
        while i < end:
            sid, j = segs[i], i + 1
            while j < end and segs[j] == sid and j - i < 4096:  # bounded reads: a dump streams
                j += 1
            path = str(self.segments[sid].path)
            start, stop = offsets[i], offsets[j - 1] + sizes[j - 1]
            with open(path, "rb") as f:
                f.seek(start)
                buf = f.read(stop - start)
            if len(buf) != stop - start:
                raise LogCorruptionError(path, start + len(buf), "file is shorter than when it was scanned")
            for k in range(i, j):
                yield decode_entry(buf, offsets[k] - start, path, offsets[k])
            i = j

    # --- the recovery rules, without writing ------------------------------------------------------------

    def _scan(self, directory: Path, advance: Callable[[int], None]) -> None:
        meta = directory / WAL_META_FILE
        if meta.exists():
            self.wal_first, self.min_seg_id = decode_wal_meta(meta.read_bytes(), str(meta))
        self._first = self.wal_first
        found = sorted(
            (int(m.group(2), 16), int(m.group(1)), n) for n in os.listdir(directory) if (m := SEGMENT_NAME.match(n))
        )
        live = [f for f in found if f[0] >= self.min_seg_id]
        for seg_id, first_index, name in found:
            path = directory / name
            report = SegmentReport(path, seg_id, first_index, path.stat().st_size)
            self.segments.append(report)
            if seg_id < self.min_seg_id:  # a reset's leftovers: a node start deletes them unread
                report.status = "void"
                advance(report.size)
                continue
            data = path.read_bytes()
            advance(len(data))
            is_last = (seg_id, first_index, name) == live[-1]
            if is_last and len(data) <= HEADER_SIZE and not _header_ok(data, str(path)):
                report.status = "crashed creation"
                continue
            header = read_header(data, str(path))
            if header != (first_index, seg_id):
                raise LogCorruptionError(str(path), 0, f"header (first_index, seg_id) {header} contradicts the name")
            scan = scan_segment(data, str(path), is_last)
            report.torn_bytes = len(data) - scan.valid_end if scan.torn else 0
            for batch in scan.batches:
                self._replay(len(self.segments) - 1, batch)
        for sid in self._segs:
            self.segments[sid].entries += 1

    def _replay(self, sid: int, batch: Batch) -> None:
        """SegmentLog._replay: a truncate frame voids the suffix; entries below first_index are compacted;
        the first entry kept must be exactly last_index + 1."""
        if batch.truncate_from is not None and batch.truncate_from <= self.last_index():
            k = max(batch.truncate_from - self._first, 0)
            del self._terms[k:], self._offsets[k:], self._sizes[k:], self._segs[k:]
        n = len(batch.terms)
        lo = batch.first_index
        skip = min(max(self._first - lo, 0), n)
        if skip == n:
            return
        expected = self.last_index() + 1
        if lo + skip != expected:
            path = str(self.segments[sid].path)
            raise LogCorruptionError(
                path, batch.offsets[skip], f"entry {lo + skip} found where index {expected} was expected"
            )
        self._terms.extend(batch.terms[skip:])
        self._offsets.extend(batch.offsets[skip:])
        self._sizes.extend(batch.sizes[skip:])
        self._segs.extend(array("I", [sid]) * (n - skip))


def _header_ok(data: bytes, path: str) -> bool:
    try:
        read_header(data, path)
    except LogCorruptionError:
        return False
    return len(data) == HEADER_SIZE

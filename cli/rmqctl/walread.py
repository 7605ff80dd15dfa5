"""A read-only view of a WAL directory, for the offline verbs: the verdict of raft.storage.walscan (the
WAL's own recovery rules, the very code `SegmentLog` applies when it opens), printed instead of applied.

`raft.storage.SegmentLog` cannot be used: opening it *recovers*, which truncates a torn tail and deletes
segments in the live node's files. This view only reports what recovery would change (a torn tail, void
segments, a crashed segment creation); damage that stops recovery raises the same LogCorruptionError
(file and byte offset).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from raft.core.messages import Entry
from raft.storage.segment import LogCorruptionError, decode_entry
from raft.storage.walscan import list_directory, scan_directory


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
            self._read(directory, advance)

    @staticmethod
    def total_bytes(directory: Path | None) -> int:
        """Bytes a scan reads (for a progress bar)."""
        if directory is None or not directory.is_dir():
            return 0
        return sum(s.size for s in list_directory(directory).segments)

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

    # --- the scanner's verdict ------------------------------------------------------------------------------

    def _read(self, directory: Path, advance: Callable[[int], None] | None) -> None:
        verdict = scan_directory(directory, advance=advance)
        error = verdict.error()
        if error is not None:
            raise error
        self.wal_first, self.min_seg_id = verdict.listing.wal_first, verdict.listing.min_seg_id
        position: dict[int, int] = {}
        for k, scan in enumerate(verdict.scans):
            position[scan.seg_id] = k
            self.segments.append(
                SegmentReport(Path(scan.path), scan.seg_id, scan.first_index, scan.size, scan.status, scan.torn_bytes)
            )
        index = verdict.index()
        self._first, self._terms, self._offsets, self._sizes = index.first, index.terms, index.offsets, index.sizes
        self._segs = array("I", [position[sid] for sid in index.seg_ids])
        for k in self._segs:
            self.segments[k].entries += 1

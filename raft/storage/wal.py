"""SegmentLog: the durable Raft log as a directory of append-only segment files (hashicorp raft-wal style).

Design (format details in docs/log-format.md):
* Each append is one batch = [truncate frame] + entry frames + commit frame, written with ONE pwrite and
  ONE fdatasync into the active segment. A batch never spans segments; the active segment is sealed once
  it reaches `segment_bytes` and the next append creates a new one.
* Suffix truncation is never done in place: the batch that replaces the suffix starts with a truncate
  frame, so truncation and the new entries become durable atomically (one commit frame) and stale
  frames can never be resurrected — replay applies the truncate frame after them.
* Prefix truncation and reset are recorded first in the small `wal_meta` file (first_index, min_seg_id),
  replaced atomically, and only then are segments unlinked; replay ignores entries below first_index and
  segments below min_seg_id, so a crash between the two steps changes nothing.
* Reads use an in-memory index (term, offset, frame size, segment id per live entry: 28 bytes/entry)
  and os.pread; entry data is not cached.

Threading: mutators (append, truncate_prefix, reset, close) serialize on one lock and may run on a
writer thread while other threads read; readers only wait for in-memory index updates, never for fsync.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from raft.core.messages import Entry, HardState
from raft.latency import LatencyHistogram
from raft.leaf import failpoint
from raft.leaf.durable import atomic_write, ensure_dir, fsync_dir
from raft.options import LogStorageOptions
from raft.status import RaftBaseError
from raft.storage.protocols import LogStorage, MetaStorage
from raft.storage.segment import (
    HEADER_SIZE,
    WAL_META_FILE,
    LogCorruptionError,
    SegmentFile,
    check_skipped,
    decode_entry,
    encode_batch,
    encode_header,
    encode_wal_meta,
    segment_name,
)
from raft.storage.walscan import list_segments, scan_directory

logger = logging.getLogger(__name__)


class LogStorageFailedError(RaftBaseError, RuntimeError):
    """A write or fsync failed earlier; the on-disk state is unknown, so every later mutation is refused."""


FSYNCED_FILE = "FSYNCED"
SIDECAR_WIDTH = 79  # the sidecar line is space-padded to a fixed width, so a shorter line overwrites a longer one


class SegmentLog:
    """LogStorage over `directory`. Opening recovers: see _recover for the rules."""

    def __init__(self, directory: str | os.PathLike[str], options: LogStorageOptions | None = None) -> None:
        self.options = options or LogStorageOptions()
        self.directory = ensure_dir(directory)
        self._mutex = threading.Lock()  # serializes mutators
        self._lock = threading.Lock()  # guards the index and segment table for readers
        self._segments: dict[int, SegmentFile] = {}  # by seg_id, ascending
        self._active: SegmentFile | None = None
        self._next_seg_id = 1
        self._min_seg_id = 0
        self._first = 1
        self._terms: array[int] = array("q")
        self._offsets: array[int] = array("q")
        self._sizes: array[int] = array("I")
        self._segs: array[int] = array("Q")
        self._failed: BaseException | None = None
        self._closed = False
        self.skipped: tuple[str, int] | None = None  # (segment, offset) recovery started at, by the start hint
        self.fsyncs = 0  # data + directory fsyncs issued
        self.bytes_written = 0
        self._sidecar = (
            os.open(os.path.join(self.directory, FSYNCED_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
            if self.options.fsync_sidecar
            else -1
        )
        try:
            self._recover()
        except BaseException:
            for seg in self._segments.values():
                os.close(seg.fd)
            raise

    # ---- queries -------------------------------------------------------------------------------------

    def check_skipped(self) -> LogCorruptionError | None:
        """Check the compacted frames recovery skipped by wal_meta's start hint (`skipped`: the segment and
        the hinted offset); meant for a background thread after start. None if intact or since deleted."""
        if self.skipped is None:
            return None
        path, end = self.skipped
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return check_skipped(data, path, min(end, len(data)))
        except (FileNotFoundError, ValueError):  # deleted by a prefix truncation since, or emptied
            return None

    def first_index(self) -> int:
        with self._lock:
            return self._first

    def last_index(self) -> int:
        with self._lock:
            return self._first + len(self._terms) - 1

    def term(self, index: int) -> int:
        with self._lock:
            k = index - self._first
            if not 0 <= k < len(self._terms):
                raise IndexError(f"index {index} not in log [{self._first}, {self._first + len(self._terms) - 1}]")
            return self._terms[k]

    def entries(self, lo: int, hi: int) -> list[Entry]:
        if lo > hi:
            raise ValueError(f"entries({lo}, {hi}): lo > hi")
        out: list[Entry] = []
        with self._lock:
            self._check_open()
            first, n = self._first, len(self._terms)
            if lo == hi:
                return out
            if lo < first or hi > first + n:
                raise IndexError(f"entries [{lo}, {hi}) not in log [{first}, {first + n - 1}]")
            offsets, sizes, segs, verify = self._offsets, self._sizes, self._segs, self.options.verify_reads
            i, end = lo - first, hi - first
            while i < end:
                sid, j = segs[i], i + 1
                while j < end and segs[j] == sid:
                    j += 1
                seg = self._segments[sid]
                start, stop = offsets[i], offsets[j - 1] + sizes[j - 1]
                buf = os.pread(seg.fd, stop - start, start)
                if len(buf) != stop - start:
                    raise LogCorruptionError(seg.path, start + len(buf), "file is shorter than its index")
                for k in range(i, j):
                    out.append(decode_entry(buf, offsets[k] - start, seg.path, offsets[k], verify))
                i = j
        return out

    # ---- mutators ------------------------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        with self._mutex:
            self._check_writable()
            x = entries[0].index
            first, last = self._first, self._first + len(self._terms) - 1
            if x < first:
                raise ValueError(f"append at index {x} is below the first index {first} (compacted)")
            if x > last + 1:
                raise ValueError(f"append at index {x} leaves a gap after the last index {last}")
            seg = self._active
            batch = encode_batch(entries, seg.size if seg else HEADER_SIZE, x if x <= last else None)
            try:
                if seg is None:
                    seg = self._create_segment(x)
                failpoint.hit("wal.append.before_write")
                seg.write_sync(batch.data)
                failpoint.hit("wal.append.after_fsync")
            except OSError as e:
                self._failed = e
                raise
            self.fsyncs += 1
            self.bytes_written += len(batch.data)
            if self._sidecar >= 0:  # what a power cut would keep: for the crash nemesis, not for recovery
                line = f"{os.path.basename(seg.path)} {seg.size}".ljust(SIDECAR_WIDTH) + "\n"
                os.pwrite(self._sidecar, line.encode(), 0)
            with self._lock:
                if x <= last:
                    self._cut_from(x)
                self._terms.extend(batch.terms)
                self._offsets.extend(batch.offsets)
                self._sizes.extend(batch.sizes)
                self._segs.extend(array("Q", [seg.seg_id]) * len(entries))
                seg.max_index = max(seg.max_index, entries[-1].index)
            if seg.size >= self.options.segment_bytes:
                self._active = None  # sealed; the next append opens a segment named after its first index

    def truncate_prefix(self, first_index: int) -> None:
        with self._mutex:
            self._check_writable()
            if first_index <= self._first:
                return
            k = first_index - self._first  # where entry first_index's frame is, if the log holds it
            hint = (int(self._segs[k]), int(self._offsets[k])) if k < len(self._terms) else (0, 0)
            self._guard(lambda: self._write_meta(first_index, self._min_seg_id, *hint))
            with self._lock:
                self._drop_below(first_index)
                dead: list[SegmentFile] = []
                for seg in self._segments.values():  # only a prefix: a later segment may void an earlier one
                    if seg.max_index >= first_index:
                        break
                    dead.append(seg)
                self._forget(dead)
            self._guard(lambda: failpoint.hit("wal.truncate_prefix.before_unlink"))
            self._guard(lambda: self._unlink(dead))

    def reset(self, next_index: int) -> None:
        """Drop every entry; the log becomes empty with first_index() == next_index (snapshot installed)."""
        if next_index < 1:
            raise ValueError(f"reset to index {next_index}: indexes start at 1")
        with self._mutex:
            self._check_writable()
            min_seg_id = self._next_seg_id
            self._guard(lambda: self._write_meta(next_index, min_seg_id))
            self._min_seg_id = min_seg_id
            with self._lock:
                self._first = next_index
                del self._terms[:], self._offsets[:], self._sizes[:], self._segs[:]
                dead = list(self._segments.values())
                self._forget(dead)
            self._guard(lambda: failpoint.hit("wal.reset.before_unlink"))
            self._guard(lambda: self._unlink(dead))

    def close(self) -> None:
        with self._mutex, self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in self._segments.values():
                os.close(seg.fd)
            self._segments.clear()
            self._active = None
            if self._sidecar >= 0:
                os.close(self._sidecar)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- index helpers (caller holds self._lock) -----------------------------------------------------

    def _cut_from(self, index: int) -> None:
        k = max(index - self._first, 0)
        del self._terms[k:], self._offsets[k:], self._sizes[k:], self._segs[k:]

    def _drop_below(self, index: int) -> None:
        k = min(index - self._first, len(self._terms))
        del self._terms[:k], self._offsets[:k], self._sizes[:k], self._segs[:k]
        self._first = index

    def _forget(self, dead: list[SegmentFile]) -> None:
        for seg in dead:
            del self._segments[seg.seg_id]
            os.close(seg.fd)
            if seg is self._active:
                self._active = None

    # ---- files ---------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self.directory} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._failed is not None:
            raise LogStorageFailedError(f"log {self.directory} failed earlier: {self._failed!r}") from self._failed

    def _guard(self, op: Callable[[], None]) -> None:
        """Run a durable step; an OSError leaves the disk state unknown, so poison the log (fsyncgate)."""
        try:
            op()
        except OSError as e:
            self._failed = e
            raise

    def _create_segment(self, first_index: int) -> SegmentFile:
        self._seal_last()
        seg_id = self._next_seg_id
        path = str(self.directory / segment_name(first_index, seg_id))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        seg = SegmentFile(path, seg_id, first_index, fd, 0)
        try:
            failpoint.hit("wal.roll.before_header")
            seg.write_sync(encode_header(first_index, seg_id))
            self._preallocate(fd)
            os.fsync(fd)  # the new file's metadata too (its size), not just its data
            failpoint.hit("wal.roll.before_dir_fsync")
            fsync_dir(self.directory)
        except OSError:
            os.close(fd)
            raise
        self.fsyncs += 2
        self._next_seg_id += 1
        with self._lock:
            self._segments[seg_id] = seg
        self._active = seg
        return seg

    def _preallocate(self, fd: int) -> bool:
        """Extend a segment to segment_bytes with zeros (sparse), so that appends do not grow the file; whether
        it did (the new size is then for the caller to fsync)."""
        if self.options.preallocate and os.fstat(fd).st_size < self.options.segment_bytes:
            os.ftruncate(fd, self.options.segment_bytes)
            return True
        return False

    def _seal_last(self) -> None:
        """Before a later segment exists, cut the newest one back to its valid end: only the last segment may
        hold anything after its last commit frame. A segment sealed by size has no unused tail; one that was
        still preallocated when the next segment starts (segment_bytes made smaller across a restart) has."""
        if not self._segments:
            return
        last = next(reversed(self._segments.values()))
        if os.fstat(last.fd).st_size > last.size:
            os.ftruncate(last.fd, last.size)
            os.fsync(last.fd)
            self.fsyncs += 1

    def _unlink(self, dead: list[SegmentFile]) -> None:
        if not dead:
            return
        for seg in dead:  # oldest first, so a crash midway still leaves a suffix of the segment list
            os.unlink(seg.path)
        fsync_dir(self.directory)
        self.fsyncs += 1

    def _write_meta(self, first_index: int, min_seg_id: int, start_seg_id: int = 0, start_offset: int = 0) -> None:
        failpoint.hit("wal.meta.before_write")
        atomic_write(
            self.directory, WAL_META_FILE, encode_wal_meta(first_index, min_seg_id, start_seg_id, start_offset)
        )
        self.fsyncs += 2

    # ---- recovery ------------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Rebuild the index from disk by applying the verdict of raft.storage.walscan (the one reader of
        the recovery rules, docs/log-format.md *Replay*).

        Every segment is CRC-checked in full. Only the last segment may end in a torn batch; it is cut
        back to its last commit frame and fsynced. A header-only-or-shorter last segment with a bad
        header is a crashed segment creation and is deleted, as are segments below wal_meta's min_seg_id.
        Anything else that fails to parse raises LogCorruptionError with the file and byte offset, before
        any file is changed.
        """
        verdict = scan_directory(self.directory, skip_compacted=True)
        error = verdict.error()
        if error is not None:
            raise error
        self._first, self._min_seg_id = verdict.listing.wal_first, verdict.listing.min_seg_id
        self._next_seg_id = max([self._min_seg_id, 1] + [s.seg_id + 1 for s in verdict.listing.segments])
        dirty = False
        for listed, scan in zip(verdict.listing.segments, verdict.scans, strict=True):
            if scan.status in ("void", "crashed creation"):  # a reset's leftovers; a segment never written
                os.unlink(scan.path)
                dirty = True
                continue
            fd = os.open(scan.path, os.O_RDWR if listed.is_last else os.O_RDONLY)
            seg = SegmentFile(scan.path, scan.seg_id, scan.first_index, fd, scan.valid_end)
            seg.max_index = scan.max_index
            self._segments[scan.seg_id] = seg
            changed = bool(scan.torn_bytes)
            if changed:
                logger.warning(
                    "%s: torn write at the end (a crash mid-append): cut back from %d to %d bytes, the last "
                    "committed batch",
                    scan.path,
                    scan.size,
                    scan.valid_end,
                )
                os.ftruncate(fd, scan.valid_end)  # and, preallocated again below, zeros from there on
            if listed.is_last and seg.size < self.options.segment_bytes:
                self._active = seg
                changed = self._preallocate(fd) or changed
            if changed:
                os.fsync(fd)
        index = verdict.index()
        self._terms, self._offsets, self._sizes, self._segs = index.terms, index.offsets, index.sizes, index.seg_ids
        self.skipped = next(((x.path, x.start) for x in verdict.scans if x.start != HEADER_SIZE), None)
        if dirty:
            fsync_dir(self.directory)
        self._collect_below_first()

    def _collect_below_first(self) -> None:
        """Finish a truncate_prefix that crashed after writing wal_meta but before unlinking."""
        dead: list[SegmentFile] = []
        for seg in self._segments.values():
            if seg.max_index >= self._first:
                break
            dead.append(seg)
        self._forget(dead)
        self._unlink(dead)


def wal_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Segment files of a WAL directory in seg_id order (for tooling and tests)."""
    return [Path(directory) / s.name for s in list_segments(((n, 0) for n in os.listdir(directory)), None).segments]


# ---- group commit ------------------------------------------------------------------------------------

Callback = Callable[[BaseException | None], object]


class LogWriterError(RaftBaseError, RuntimeError):
    """The writer stopped after a failed write; nothing more can be made durable through it."""


@dataclass(frozen=True, slots=True)
class LogWriterStats:
    submissions: int  # accepted by submit()
    batches: int  # drained groups that wrote something
    fsyncs: int  # durable writes issued: one per hard-state save, one per log append (each >= 1 fsync)
    entries: int  # entries written (after merging overlapping submissions)
    bytes: int  # entry payload bytes written

    @property
    def mean_batch_size(self) -> float:
        """Entries per batch."""
        return self.entries / self.batches if self.batches else 0.0


class _Submission:
    __slots__ = ("before", "callback", "entries", "hs")

    def __init__(
        self,
        hs: HardState | None,
        entries: Sequence[Entry],
        callback: Callback,
        before: Callable[[], None] | None = None,
    ) -> None:
        self.hs = hs
        self.entries = entries
        self.callback = callback
        self.before = before  # a storage operation that must run after every earlier submission


class LogWriter:
    """A long-lived thread that persists (hard state, entries) submissions with group commit.

    Each round drains every queued submission, saves the newest hard state (one meta fsync), appends all
    their entries as ONE batch (one log fsync), then calls each callback in submission order with None
    or the error. Callbacks run ON THE WRITER THREAD: an asyncio caller must hop back with
    `loop.call_soon_threadsafe` (or use `submit_future`, which does). A failed write stops the writer for
    good: the error is recorded, every pending callback gets it, and later submits raise LogWriterError.
    """

    def __init__(self, storage: LogStorage, meta_storage: MetaStorage, name: str = "raft-log-writer") -> None:
        self.storage = storage
        self.meta_storage = meta_storage
        self._cond = threading.Condition()
        self._queue: list[_Submission] = []
        self._closing = False
        self._error: BaseException | None = None
        self._submissions = self._batches = self._fsyncs = self._entries = self._bytes = 0
        self.fsync_latency = LatencyHistogram()  # one observation per appended batch: write + fdatasync
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def submit(
        self,
        hs: HardState | None,
        entries: Sequence[Entry],
        callback: Callback,
        *,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Queue a write; thread-safe and non-blocking, so it may be called from the event loop thread.

        `before`, if given, is a storage operation (a reset after InstallSnapshot, a prefix truncation after
        a snapshot) run on the writer thread after every earlier submission and before this one's writes,
        so it is ordered exactly where the caller put it. A failing `before` stops the writer like a failed
        write."""
        with self._cond:
            if self._error is not None:
                raise LogWriterError(f"log writer stopped after: {self._error!r}") from self._error
            if self._closing:
                raise LogWriterError("log writer is closed")
            self._queue.append(_Submission(hs, entries, callback, before))
            self._submissions += 1
            self._cond.notify()

    def submit_future(self, hs: HardState | None, entries: Sequence[Entry]) -> asyncio.Future[None]:
        """submit() for coroutines: the future completes on the calling loop once the write is durable."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.submit(hs, entries, lambda err: loop.call_soon_threadsafe(_settle, fut, err))
        return fut

    def stats(self) -> LogWriterStats:
        with self._cond:
            return LogWriterStats(self._submissions, self._batches, self._fsyncs, self._entries, self._bytes)

    def close(self) -> None:
        """Finish every queued submission, then stop the thread. Does not close the storages."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                subs, self._queue = self._queue, []
            if not subs:
                return
            # Group commit within the runs between ordered operations.
            start = 0
            for k in range(1, len(subs) + 1):
                if k == len(subs) or subs[k].before is not None:
                    self._process(subs[start:k])
                    start = k
                    if self._error is not None:
                        for sub in subs[k:]:
                            _call(sub.callback, self._error)
                        break
            if self._error is not None:
                with self._cond:
                    rest, self._queue = self._queue, []
                for sub in rest:
                    _call(sub.callback, self._error)
                return

    def _process(self, subs: list[_Submission]) -> None:
        results: list[BaseException | None] = [None] * len(subs)
        merged: list[Entry] = []
        try:
            if subs[0].before is not None:
                subs[0].before()
            hs, merged = self._merge(subs, results)
            if hs is not None:
                self.meta_storage.save(hs)
                with self._cond:
                    self._fsyncs += 1
            if merged:
                t0 = time.perf_counter()
                self.storage.append(merged)
                self.fsync_latency.observe(time.perf_counter() - t0)
                with self._cond:
                    self._fsyncs += 1
        except Exception as e:  # any failure leaves durability unknown: stop loudly, for good
            logger.critical("raft log writer stopped: write failed: %r", e, exc_info=e)
            with self._cond:
                self._error = e
            results = [e] * len(subs)
        else:
            if hs is not None or merged:
                size = sum(len(e.data) for e in merged)
                with self._cond:
                    self._batches += 1
                    self._entries += len(merged)
                    self._bytes += size
        for sub, result in zip(subs, results, strict=True):
            _call(sub.callback, result)

    def _merge(
        self, subs: list[_Submission], results: list[BaseException | None]
    ) -> tuple[HardState | None, list[Entry]]:
        """Fold the drained submissions into one hard state and one contiguous run of entries.

        A submission starting at or below the end of what is already merged replaces that suffix (the
        leader changed in between); one that would leave a gap or reach below first_index is rejected
        on its own (callback gets ValueError) without affecting the others.
        """
        first, last = self.storage.first_index(), self.storage.last_index()
        hs: HardState | None = None
        merged: list[Entry] = []
        for k, sub in enumerate(subs):
            ents = sub.entries
            if ents:
                x = ents[0].index
                end = merged[-1].index if merged else last
                bad = next((e.index for i, e in enumerate(ents) if e.index != x + i), None)
                if bad is not None:
                    results[k] = ValueError(f"submitted entries are not contiguous: index {bad} after {x}..")
                    continue
                if x < first or x > end + 1:
                    results[k] = ValueError(f"submission starting at index {x} does not fit the log [{first}, {end}]")
                    continue
                if merged and x <= end:
                    del merged[max(x - merged[0].index, 0) :]
                merged.extend(ents)
            if sub.hs is not None:
                hs = sub.hs
        return hs, merged


def _call(callback: Callback, result: BaseException | None) -> None:
    try:
        callback(result)
    except Exception:  # a broken callback must not take the writer down with it
        logger.exception("raft log writer: callback failed")


def _settle(fut: asyncio.Future[None], err: BaseException | None) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(err)

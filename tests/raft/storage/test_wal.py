"""SegmentLog: round trips, rolling, truncation durability, reopen, and a model-based property test."""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from google_crc32c import value as crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raft.core.messages import Entry, EntryType, HardState
from raft.options import LogStorageOptions
from raft.storage import (
    FileMetaStorage,
    LogCorruptionError,
    LogStorageFailedError,
    LogWriter,
    LogWriterError,
    MemoryLogStorage,
    MemoryMetaStorage,
    SegmentLog,
)
from raft.storage.segment import (
    COMMIT_SIZE,
    ENTRY_TYPE_AT,
    HEADER_SIZE,
    SEGMENT_NAME,
    TRUNCATE_SIZE,
    decode_entry,
    encode_batch,
    encode_header,
    encode_wal_meta,
    frame_starts,
)
from raft.storage.wal import wal_files
from raft.storage.walscan import scan_directory
from tests.raft.helpers import dump, expect

TINY = LogStorageOptions(segment_bytes=200)


def ents(lo: int, hi: int, term: int = 1, size: int = 8) -> list[Entry]:
    """Entries lo..hi inclusive whose data encodes (term, index), so stale data is recognisable."""
    return [Entry(term, i, EntryType.NORMAL, f"{term}:{i}:".encode().ljust(size, b".")) for i in range(lo, hi + 1)]


def test_empty_log(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        assert (log.first_index(), log.last_index()) == (1, 0)
        assert log.entries(1, 1) == []
        log.append([])
    assert wal_files(tmp_path) == []


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    batch = [Entry(1, 1, EntryType.NOOP, b""), Entry(1, 2, EntryType.CONF, b"conf"), Entry(3, 3, 0, b"x" * 5000)]
    with SegmentLog(tmp_path) as log:
        log.append(batch)
        log.append(ents(4, 10, term=3))
        assert dump(log) == expect(batch + ents(4, 10, term=3))
        assert log.term(2) == 1 and log.term(10) == 3
        assert expect(log.entries(3, 5)) == expect(batch[2:] + ents(4, 4, term=3))
    with SegmentLog(tmp_path) as log:
        assert (log.first_index(), log.last_index()) == (1, 10)
        assert dump(log) == expect(batch + ents(4, 10, term=3))


def test_bytearray_and_memoryview_data_are_accepted(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        log.append([Entry(1, 1, 0, bytearray(b"ab")), Entry(1, 2, 0, memoryview(b"cd"))])  # type: ignore[arg-type]
        assert [e.data for e in log.entries(1, 3)] == [b"ab", b"cd"]


def test_contiguity_errors(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        with pytest.raises(ValueError, match="gap after the last index 0"):
            log.append(ents(2, 3))
        log.append(ents(1, 3))
        with pytest.raises(ValueError, match="not contiguous: expected index 5, got 6"):
            log.append([*ents(4, 4), *ents(6, 6)])
        log.truncate_prefix(3)
        with pytest.raises(ValueError, match="below the first index 3"):
            log.append(ents(2, 4))
        assert dump(log) == expect(ents(3, 3))
        with pytest.raises(IndexError, match=r"entries \[2, 4\) not in log \[3, 3\]"):
            log.entries(2, 4)
        with pytest.raises(IndexError):
            log.term(4)


def test_segments_roll_and_are_named_by_first_index(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        for lo in range(1, 60, 3):
            log.append(ents(lo, lo + 2))
        assert dump(log) == expect(ents(1, 60))
    files = wal_files(tmp_path)
    assert len(files) > 5
    firsts = []
    for f in files:
        m = SEGMENT_NAME.match(f.name)
        assert m is not None
        firsts.append(int(m.group(1)))
        assert f.stat().st_size < TINY.segment_bytes + 200  # exceeds the limit by at most one batch
    assert firsts == sorted(firsts) and firsts[0] == 1
    with SegmentLog(tmp_path, TINY) as log:
        assert dump(log) == expect(ents(1, 60))
        log.append(ents(61, 61))  # continues in the (sealed) last segment's successor
        assert dump(log) == expect(ents(1, 61))


def test_suffix_truncation_survives_crash_and_never_resurrects(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path, TINY)
    log.append(ents(1, 10))
    log.append(ents(11, 20))
    log.append(ents(21, 30))
    log.append(ents(8, 12, term=2))  # truncates into the first segment
    assert dump(log) == expect(ents(1, 7) + ents(8, 12, term=2))
    # "crash": no close, the object is simply abandoned (close() writes nothing anyway)
    with SegmentLog(tmp_path, TINY) as log2:
        assert dump(log2) == expect(ents(1, 7) + ents(8, 12, term=2))
        log2.append(ents(13, 14, term=2))
        log2.append(ents(10, 10, term=3))  # truncate again inside the newest segment
    with SegmentLog(tmp_path, TINY) as log3:
        assert dump(log3) == expect(ents(1, 7) + ents(8, 9, term=2) + ents(10, 10, term=3))
    log.close()


def test_truncate_everything_after_first(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        log.append(ents(1, 5))
        log.append(ents(1, 2, term=2))
    with SegmentLog(tmp_path) as log:
        assert dump(log) == expect(ents(1, 2, term=2))


def test_prefix_truncation_deletes_whole_segments_and_reopens(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        for lo in range(1, 40, 4):
            log.append(ents(lo, lo + 3))
        before = len(wal_files(tmp_path))
        log.truncate_prefix(17)
        assert (log.first_index(), log.last_index()) == (17, 40)
        assert dump(log) == expect(ents(17, 40))
        assert len(wal_files(tmp_path)) < before
        log.truncate_prefix(10)  # no-op: already compacted past it
        assert log.first_index() == 17
    with SegmentLog(tmp_path, TINY) as log:
        assert (log.first_index(), log.last_index()) == (17, 40)
        assert dump(log) == expect(ents(17, 40))


def test_prefix_truncation_past_the_end_leaves_an_empty_log_at_that_index(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        log.append(ents(1, 10))
        log.truncate_prefix(51)
        assert (log.first_index(), log.last_index()) == (51, 50)
        assert wal_files(tmp_path) == []
        with pytest.raises(ValueError):
            log.append(ents(50, 52))
    with SegmentLog(tmp_path, TINY) as log:
        assert (log.first_index(), log.last_index()) == (51, 50)
        log.append(ents(51, 53, term=4))
    with SegmentLog(tmp_path, TINY) as log:
        assert dump(log) == expect(ents(51, 53, term=4))


def test_prefix_truncation_keeps_segments_whose_truncate_frames_void_older_ones(tmp_path: Path) -> None:
    """Stale frames in old segments are voided by truncate frames in newer ones; deleting only the newer
    segment (all of whose entries are compacted) would resurrect them, so deletion is prefix-only."""
    with SegmentLog(tmp_path, TINY) as log:
        log.append(ents(1, 10))
        log.append(ents(11, 20))
        log.append(ents(5, 7, term=2))
        log.truncate_prefix(8)  # empty at 8; entries 8..20 still sit in the two oldest segments
        assert (log.first_index(), log.last_index()) == (8, 7)
    with SegmentLog(tmp_path, TINY) as log:
        assert (log.first_index(), log.last_index()) == (8, 7)
        log.append(ents(8, 9, term=3))
    with SegmentLog(tmp_path, TINY) as log:
        assert dump(log) == expect(ents(8, 9, term=3))


def test_reset_drops_everything(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        log.append(ents(1, 30))
        log.reset(5)  # lower than the old last index: none of the old entries may survive
        assert (log.first_index(), log.last_index()) == (5, 4)
        assert wal_files(tmp_path) == []
        log.append(ents(5, 6, term=9))
    with SegmentLog(tmp_path, TINY) as log:
        assert dump(log) == expect(ents(5, 6, term=9))
        log.reset(1000)
    with SegmentLog(tmp_path, TINY) as log:
        assert (log.first_index(), log.last_index()) == (1000, 999)


def test_crash_between_meta_and_unlink_is_finished_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentLog(tmp_path, TINY)
    log.append(ents(1, 30))
    log.append(ents(31, 40))
    monkeypatch.setattr(SegmentLog, "_unlink", lambda self, dead: None)  # the crash: meta written, no unlink
    log.truncate_prefix(31)
    log.reset(7)
    monkeypatch.undo()
    log.close()
    assert wal_files(tmp_path)  # stale files still there
    with SegmentLog(tmp_path, TINY) as log:
        assert (log.first_index(), log.last_index()) == (7, 6)
        assert wal_files(tmp_path) == []


def test_crash_between_prefix_meta_and_unlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        log.append(ents(1, 30))
        log.append(ents(31, 40))
        monkeypatch.setattr(SegmentLog, "_unlink", lambda self, dead: None)
        log.truncate_prefix(31)
        monkeypatch.undo()
    n = len(wal_files(tmp_path))
    with SegmentLog(tmp_path, TINY) as log:
        assert dump(log) == expect(ents(31, 40))
        assert len(wal_files(tmp_path)) < n


def test_reads_verify_crc(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        log.append(ents(1, 3, size=32))
        path = wal_files(tmp_path)[0]
        raw = bytearray(path.read_bytes())
        raw[raw.index(b"1:2:") + 1] ^= 0xFF  # damage entry 2 behind the log's back
        path.write_bytes(raw)
        assert expect(log.entries(1, 2)) == expect(ents(1, 1, size=32))
        with pytest.raises(LogCorruptionError, match=r"\.wal: corrupt log at byte offset \d+: entry frame CRC"):
            log.entries(1, 3)


def test_failed_fsync_poisons_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SegmentLog(tmp_path) as log:
        log.append(ents(1, 2))

        def fail(fd: int) -> None:
            raise OSError(5, "EIO")

        monkeypatch.setattr(os, "fdatasync", fail)
        with pytest.raises(OSError, match="EIO"):
            log.append(ents(3, 4))
        monkeypatch.undo()
        with pytest.raises(LogStorageFailedError, match="failed earlier"):
            log.append(ents(3, 4))
        with pytest.raises(LogStorageFailedError):
            log.truncate_prefix(2)
        assert dump(log) == expect(ents(1, 2))  # reads of durable data still work
    with SegmentLog(tmp_path) as log:
        assert log.last_index() in (2, 4)  # the failed batch may or may not have reached the disk


def test_other_files_in_the_directory_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "raft_meta").write_bytes(b"not ours")
    (tmp_path / "notes.txt").write_text("hello")
    with SegmentLog(tmp_path) as log:
        log.append(ents(1, 1))
    with SegmentLog(tmp_path) as log:
        assert log.last_index() == 1


def test_a_missing_middle_segment_is_detected(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, TINY) as log:
        for lo in range(1, 30, 3):
            log.append(ents(lo, lo + 2))
    victim = wal_files(tmp_path)[2]
    victim.unlink()
    with pytest.raises(LogCorruptionError, match=r"where index \d+ was expected"):
        SegmentLog(tmp_path, TINY)


# ---- property test against a model -------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(-6, 1), st.integers(1, 6)),  # start offset from last+1, count
        st.tuples(st.just("prefix"), st.integers(-3, 8), st.just(0)),  # offset from first
        st.tuples(st.just("reset"), st.integers(0, 10), st.just(0)),  # offset from last+1
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.sampled_from([120, 400, 10_000]))
def test_matches_model(script: list[tuple[str, int, int]], segment_bytes: int) -> None:
    opts = LogStorageOptions(segment_bytes=segment_bytes)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=shm) as d:  # tmpfs if possible: many fsyncs, the disk is not under test
        log = SegmentLog(d, opts)
        first, model = 1, list[Entry]()  # model: entries first..first+len-1
        term = 1
        try:
            for op, a, b in script:
                last = first + len(model) - 1
                if op == "append":
                    lo = max(last + 1 + a, first)  # a == 1 tries to leave a gap
                    term += 1
                    batch = ents(lo, lo + b - 1, term=term, size=term % 13)
                    if lo > last + 1:
                        with pytest.raises(ValueError, match="gap"):
                            log.append(batch)
                    else:
                        log.append(batch)
                        model = model[: lo - first] + batch
                elif op == "prefix":
                    f = first + a
                    log.truncate_prefix(f)
                    if f > first:
                        model = model[f - first :]
                        first = f
                elif op == "reset":
                    first, model = max(last + 1 + a, 1), []
                    log.reset(first)
                else:
                    log.close()
                    log = SegmentLog(d, opts)
                assert (log.first_index(), log.last_index()) == (first, first + len(model) - 1)
                assert dump(log) == expect(model)
            log.close()
            log = SegmentLog(d, opts)
            assert (log.first_index(), log.last_index()) == (first, first + len(model) - 1)
            assert dump(log) == expect(model)
        finally:
            log.close()


# ---- LogWriter -----------------------------------------------------------------------------------------


class GatedLog(MemoryLogStorage):
    """Blocks inside the first append until released, so submissions pile up behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[tuple[int, int]] = []

    def append(self, entries: Sequence[Entry]) -> None:
        self.entered.set()
        assert self.release.wait(10), "test never released the writer"
        self.calls.append((entries[0].index, entries[-1].index))
        super().append(entries)


def recorders(n: int) -> tuple[list[tuple[int, BaseException | None]], list[Callable[[BaseException | None], None]]]:
    """n callbacks that record (position, error) in call order."""
    results: list[tuple[int, BaseException | None]] = []

    def make(k: int) -> Callable[[BaseException | None], None]:
        return lambda err: results.append((k, err))

    return results, [make(k) for k in range(n)]


def test_writer_groups_queued_submissions() -> None:
    log, meta = GatedLog(), MemoryMetaStorage()
    writer = LogWriter(log, meta)
    results, cbs = recorders(51)
    writer.submit(HardState(1, "a"), ents(1, 1), cbs[0])
    assert log.entered.wait(10)  # the writer thread is now inside append() with submission 0
    for k in range(1, 51):
        writer.submit(HardState(2, "b") if k == 25 else None, ents(k + 1, k + 1), cbs[k])
    log.release.set()
    writer.close()
    assert [k for k, _ in results] == list(range(51)) and all(err is None for _, err in results)
    assert log.calls == [(1, 1), (2, 51)]
    assert meta.load() == HardState(2, "b")
    stats = writer.stats()
    assert stats.submissions == 51 and stats.batches == 2 and stats.entries == 51
    assert stats.fsyncs == 4 < stats.submissions  # two meta saves + two appends
    assert stats.mean_batch_size == 25.5 and stats.bytes == 51 * 8


def test_writer_merges_overlapping_submissions_later_wins() -> None:
    gated = GatedLog()
    writer = LogWriter(gated, MemoryMetaStorage())
    results, cbs = recorders(6)
    writer.submit(None, ents(1, 1), cbs[0])
    assert gated.entered.wait(10)
    writer.submit(None, ents(2, 6, term=2), cbs[1])
    writer.submit(None, ents(4, 5, term=3), cbs[2])  # replaces 4..6 of the previous one
    writer.submit(None, ents(9, 9, term=3), cbs[3])  # gap: rejected alone
    writer.submit(None, [*ents(6, 6, term=3), *ents(8, 8, term=3)], cbs[4])  # non-contiguous: rejected alone
    writer.submit(None, ents(6, 7, term=4), cbs[5])
    gated.release.set()
    writer.close()
    assert [k for k, _ in results] == list(range(6))
    errors = {k: err for k, err in results}
    assert errors[0] is None and errors[1] is None and errors[2] is None and errors[5] is None
    assert isinstance(errors[3], ValueError) and "does not fit" in str(errors[3])
    assert isinstance(errors[4], ValueError) and "not contiguous" in str(errors[4])
    assert gated.calls == [(1, 1), (2, 7)]
    assert expect(gated.entries(1, 8)) == expect(ents(1, 1) + ents(2, 3, term=2) + ents(4, 5, term=3) + ents(6, 7, 4))


def test_writer_on_segment_log_and_file_meta(tmp_path: Path) -> None:
    log, meta = SegmentLog(tmp_path / "log", TINY), FileMetaStorage(tmp_path / "meta")
    writer = LogWriter(log, meta)
    results, cbs = recorders(20)
    for k in range(20):
        writer.submit(HardState(k // 5, ""), ents(k * 2 + 1, k * 2 + 2), cbs[k])
    writer.close()
    assert [err for _, err in results] == [None] * 20
    log.close()
    with SegmentLog(tmp_path / "log", TINY) as log2:
        assert dump(log2) == expect(ents(1, 40))
    assert FileMetaStorage(tmp_path / "meta").load() == HardState(3, "")
    assert writer.stats().fsyncs <= 40


def queue_behind_the_gate(writer: LogWriter, log: GatedLog, cbs: list[Callable[[BaseException | None], None]]) -> None:
    """Submission 0 enters the gated log; submission 1 (with a hard state) queues behind it; the gate opens."""
    writer.submit(None, ents(1, 1), cbs[0])
    assert log.entered.wait(10)
    writer.submit(HardState(1, "x"), ents(2, 2), cbs[1])
    log.release.set()


def test_writer_stops_loudly_on_write_error() -> None:
    class FailingLog(GatedLog):
        def append(self, entries: Sequence[Entry]) -> None:
            self.entered.set()
            assert self.release.wait(10)
            raise OSError(28, "ENOSPC")

    log = FailingLog()
    writer = LogWriter(log, MemoryMetaStorage())
    results, cbs = recorders(3)
    queue_behind_the_gate(writer, log, cbs)
    writer.close()
    assert [k for k, _ in results] == [0, 1]
    assert all(isinstance(err, OSError) for _, err in results)
    assert isinstance(writer.error, OSError)
    with pytest.raises(LogWriterError, match="ENOSPC"):
        writer.submit(None, ents(1, 1), cbs[2])
    assert writer.stats().batches == 0


def test_writer_fails_submissions_queued_behind_the_failure() -> None:
    class FailingMeta(MemoryMetaStorage):
        def save(self, hs: HardState) -> None:
            raise OSError(5, "EIO")

    log = GatedLog()
    writer = LogWriter(log, FailingMeta())
    results, cbs = recorders(3)
    queue_behind_the_gate(writer, log, cbs)
    # Submission 2 may be queued before or after the failure is recorded: either its callback gets the
    # error or submit() raises it. Both are loud.
    try:
        writer.submit(None, ents(3, 3), cbs[2])
    except LogWriterError:
        results.append((2, OSError("refused")))
    writer.close()
    assert results[0] == (0, None)
    assert [k for k, _ in results] == [0, 1, 2]
    assert all(isinstance(err, OSError) for _, err in results[1:])
    assert log.calls == [(1, 1)]


def test_writer_callback_exceptions_do_not_kill_it() -> None:
    writer = LogWriter(MemoryLogStorage(), MemoryMetaStorage())
    seen: list[BaseException | None] = []

    def bad(err: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    writer.submit(None, ents(1, 1), bad)
    writer.submit(None, ents(2, 2), seen.append)
    writer.close()
    assert seen == [None] and writer.error is None
    with pytest.raises(LogWriterError, match="closed"):
        writer.submit(None, ents(3, 3), seen.append)


def test_writer_submit_future_from_asyncio() -> None:
    log = MemoryLogStorage()
    writer = LogWriter(log, MemoryMetaStorage())

    async def main() -> None:
        futs = [writer.submit_future(None, ents(k, k)) for k in range(1, 11)]
        await asyncio.gather(*futs)
        assert log.last_index() == 10
        with pytest.raises(ValueError, match="does not fit"):
            await writer.submit_future(None, ents(20, 20))

    asyncio.run(main())
    writer.close()


def test_writer_reports_a_closed_storage_to_callbacks(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path)
    log.close()
    writer = LogWriter(log, MemoryMetaStorage())
    seen: list[BaseException | None] = []
    writer.submit(None, ents(1, 1), seen.append)
    writer.close()
    assert len(seen) == 1 and isinstance(seen[0], ValueError) and "closed" in str(seen[0])


def test_reads_run_concurrently_with_the_writer_thread(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path, LogStorageOptions(segment_bytes=2000))
    writer = LogWriter(log, MemoryMetaStorage())
    done = threading.Event()
    for k in range(200):
        term = 1 + k // 50  # every 50 submissions a new term rewrites the last 3 entries
        lo = max(1, k * 2 - (2 if k % 50 == 0 else -1))
        writer.submit(
            None, ents(lo, k * 2 + 2, term=term), (lambda err: done.set()) if k == 199 else (lambda err: None)
        )
    while not done.is_set():
        last = log.last_index()
        got = log.entries(1, last + 1)
        assert [e.index for e in got] == list(range(1, len(got) + 1))
        assert all(e.data == f"{e.term}:{e.index}:".encode().ljust(8, b".") for e in got)
    writer.close()
    assert writer.error is None and log.last_index() == 400
    log.close()


def test_a_new_segment_and_its_directory_entry_are_fsynced_before_append_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment's first append is fdatasynced, which need not make the file's own metadata or its name in the
    directory durable: without fsync(file) and fsync(directory) a power cut can lose the whole new segment,
    entries acknowledged from it included. Every append that creates a segment issues both before returning."""
    events: list[tuple[str, str]] = []
    names: dict[int, str] = {}
    real_open, real_close = os.open, os.close

    def rec_open(path: str, flags: int, *args: object, **kw: object) -> int:
        fd = real_open(path, flags, *args, **kw)  # type: ignore[arg-type]
        names[fd] = os.path.realpath(path)
        if flags & os.O_CREAT:
            events.append(("create", names[fd]))
        return fd

    def rec_close(fd: int) -> None:
        names.pop(fd, None)
        real_close(fd)

    monkeypatch.setattr(os, "open", rec_open)
    monkeypatch.setattr(os, "close", rec_close)
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(("fsync", names[fd])))  # recorded, not done
    monkeypatch.setattr(os, "fdatasync", lambda fd: events.append(("fdatasync", names[fd])))
    directory = os.path.realpath(tmp_path)
    created = 0
    with SegmentLog(tmp_path, TINY) as log:
        for k in range(1, 40, 4):
            events.clear()
            log.append(ents(k, k + 3))  # each append returns only once its data is durable
            new = [p for op, p in events if op == "create" and p.endswith(".wal")]
            for seg in new:
                after = events[events.index(("create", seg)) :]
                assert ("fsync", seg) in after, f"the new segment {seg} was never fsynced: {after}"
                assert ("fsync", directory) in after, f"the directory entry of {seg} was never fsynced: {after}"
            created += len(new)
    assert created >= 3, "the appends did not cross segment boundaries: nothing was tested"


def test_recovery_does_not_crc_check_compacted_entries_but_does_check_live_ones(tmp_path: Path) -> None:
    """A compacted (dead) entry's payload is not read at recovery: damage there is harmless, since it is never
    read again. The same damage one entry above the first index is caught."""
    with SegmentLog(tmp_path) as log:
        for i in range(1, 41, 4):
            log.append(ents(i, i + 3))
        log.truncate_prefix(21)  # one segment: entries 1..20 are dead records in the surviving file
    (seg,) = wal_files(tmp_path)
    data = bytearray(seg.read_bytes())
    dead = data.index(b"1:10:")
    data[dead + 1] ^= 0xFF  # payload of dead entry 10
    seg.write_bytes(bytes(data))
    with SegmentLog(tmp_path) as log:
        assert dump(log) == [(1, i, EntryType.NORMAL, f"1:{i}:".encode().ljust(8, b".")) for i in range(21, 41)]
    live = data.index(b"1:22:")
    data[live + 1] ^= 0xFF  # payload of live entry 22, in a batch followed by later ones
    seg.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError):
        SegmentLog(tmp_path)


def test_a_damaged_index_that_makes_a_live_entry_look_compacted_is_still_caught(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        for i in range(1, 41, 4):
            log.append(ents(i, i + 3))
        log.truncate_prefix(21)
    (seg,) = wal_files(tmp_path)
    data = bytearray(seg.read_bytes())
    index_field = data.index(b"1:25:") - 8  # the entry frame's u64 index sits just before its data
    assert int.from_bytes(data[index_field : index_field + 8], "little") == 25
    data[index_field : index_field + 8] = (5).to_bytes(8, "little")  # 25 -> 5: below the first index
    seg.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError):
        SegmentLog(tmp_path)


def _hinted_log(tmp_path: Path) -> tuple[Path, int]:
    """One segment: batches of 4 entries 1..40, truncated to 23 (mid-batch); returns it and entry 23's offset."""
    with SegmentLog(tmp_path) as log:
        for i in range(1, 41, 4):
            log.append(ents(i, i + 3))
        log.truncate_prefix(23)
    (seg,) = wal_files(tmp_path)
    return seg, seg.read_bytes().index(b"1:23:") - 26  # the frame's 26 bytes of head precede its data


def test_recovery_starts_at_the_first_live_entry_that_wal_meta_points_to(tmp_path: Path) -> None:
    """The prefix truncation records where entry first_index's frame is; recovery starts there (inside its
    batch), so compacted records are not read at all: not even a damaged length in one stops the node."""
    seg, at = _hinted_log(tmp_path)
    verdict = scan_directory(tmp_path, skip_compacted=True)
    assert verdict.fatal is None and verdict.scans[0].start == at
    with SegmentLog(tmp_path) as log:
        assert log.skipped == (str(seg), at) and log.check_skipped() is None
    assert verdict.scans[0].spans[0].first_index == 23 and verdict.scans[0].spans[0].count == 2  # 23, 24
    data = bytearray(seg.read_bytes())
    dead = data.index(b"1:10:") - 26
    data[dead + 4 : dead + 8] = (999).to_bytes(4, "little")  # entry 10's length: the full walk would derail
    seg.write_bytes(bytes(data))
    assert scan_directory(tmp_path).fatal is not None  # rmqctl and the audit read every byte and see it
    with SegmentLog(tmp_path) as log:
        assert dump(log) == [(1, i, EntryType.NORMAL, f"1:{i}:".encode().ljust(8, b".")) for i in range(23, 41)]
        damage = log.check_skipped()  # what the node checks in the background after it started
        assert damage is not None and (damage.path, damage.offset) == (str(seg), dead)
        log.append(ents(41, 41))
    with SegmentLog(tmp_path) as log:
        assert log.last_index() == 41


@pytest.mark.parametrize("where", ["stale offset", "damaged entry", "past the end", "other segment"])
def test_a_wal_meta_hint_that_does_not_check_out_falls_back_to_the_full_walk(tmp_path: Path, where: str) -> None:
    seg, at = _hinted_log(tmp_path)
    raw = seg.read_bytes()
    hint = {
        "stale offset": (1, raw.index(b"1:21:") - 26),  # a whole entry frame, but not entry 23
        "damaged entry": (1, at),
        "past the end": (1, len(raw) + 100),
        "other segment": (7, at),
    }[where]
    (tmp_path / "wal_meta").write_bytes(encode_wal_meta(23, 0, *hint))
    if where == "damaged entry":  # entry 23's payload: a live entry, so the full walk must refuse it
        data = bytearray(raw)
        data[at + 27] ^= 0xFF
        seg.write_bytes(bytes(data))
        with pytest.raises(LogCorruptionError, match="entry frame CRC|invalid frame"):
            SegmentLog(tmp_path)
        return
    verdict = scan_directory(tmp_path, skip_compacted=True)
    assert verdict.scans[0].start == HEADER_SIZE
    with SegmentLog(tmp_path) as log:
        assert [e.index for e in log.entries(23, 41)] == list(range(23, 41))


def test_the_background_check_of_skipped_records_sees_a_flipped_bit_the_walk_would_not(tmp_path: Path) -> None:
    seg, at = _hinted_log(tmp_path)
    data = bytearray(seg.read_bytes())
    dead = data.index(b"1:10:") - 26
    data[dead + 27] ^= 0x01  # a payload byte of dead entry 10: only its CRC tells
    seg.write_bytes(bytes(data))
    with SegmentLog(tmp_path) as log:
        damage = log.check_skipped()
        assert damage is not None and damage.offset == dead and "compacted frame" in damage.reason
        seg.unlink()  # deleted by a prefix truncation meanwhile: nothing left to check
        assert log.check_skipped() is None


def test_a_version_1_wal_meta_without_a_hint_still_opens(tmp_path: Path) -> None:
    _hinted_log(tmp_path)
    body = struct.pack("<4sHHQQ", b"RWAL", 1, 0, 23, 0)
    (tmp_path / "wal_meta").write_bytes(body + struct.pack("<I", crc32c(body)))
    assert scan_directory(tmp_path, skip_compacted=True).scans[0].start == HEADER_SIZE
    with SegmentLog(tmp_path) as log:
        assert (log.first_index(), log.last_index()) == (23, 40)


def test_a_hint_past_a_truncate_frame_still_voids_the_stale_entries_before_it(tmp_path: Path) -> None:
    """Entries 4..6 are rewritten in a new segment that starts with a truncate frame; the hint then points
    past that frame. The stale 4..6 of the first segment must stay void, and so must the hinted frame
    itself once entry 4 is rewritten again."""
    with SegmentLog(tmp_path, TINY) as log:
        log.append(ents(1, 6))  # seals the first segment (over 200 bytes)
        log.append(ents(4, 6, term=2))
        log.truncate_prefix(4)
    verdict = scan_directory(tmp_path, skip_compacted=True)
    assert [s.start > HEADER_SIZE for s in verdict.scans] == [False, True]
    with SegmentLog(tmp_path, TINY) as log:
        assert [e.term for e in log.entries(4, 7)] == [2, 2, 2]
        log.append(ents(4, 5, term=3))  # entry 4 itself rewritten: the hinted frame is now stale
    with SegmentLog(tmp_path, TINY) as log:
        assert [(e.index, e.term) for e in log.entries(4, 6)] == [(4, 3), (5, 3)]


def test_the_entry_type_byte_is_where_every_reader_takes_it() -> None:
    """ENTRY_TYPE_AT is the one offset of the entry_type byte in a frame: decode_entry and the audit's
    per-entry loops (tools/audit/tasks.py) both read it there."""
    types = [EntryType.NORMAL, EntryType.CONF, EntryType.NOOP, EntryType.NORMAL]
    entries = [Entry(3, 10 + k, t, b"x" * k) for k, t in enumerate(types)]
    batch = encode_batch(entries, 0, None)
    for e, off in zip(entries, batch.offsets, strict=True):
        assert batch.data[off + ENTRY_TYPE_AT] == e.type
        assert decode_entry(batch.data, off, "seg", off) == e


def test_frame_starts_walks_every_frame_of_a_segment() -> None:
    """The truncate frame, each entry frame and the commit frame of every batch, then nothing past the end."""
    first = encode_batch(ents(1, 3), HEADER_SIZE, None)
    at = HEADER_SIZE + len(first.data)
    second = encode_batch(ents(2, 4, term=2), at, 2)
    data = encode_header(1, 1) + first.data + second.data
    assert list(frame_starts(data)) == [
        *first.offsets,
        at - COMMIT_SIZE,
        at,
        *second.offsets,
        len(data) - COMMIT_SIZE,
    ]
    assert second.offsets[0] == at + TRUNCATE_SIZE
    assert list(frame_starts(data + b"\x00" * 7)) == list(frame_starts(data))  # a tail too short for a prefix

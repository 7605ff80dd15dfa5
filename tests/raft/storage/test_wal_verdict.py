"""One source for what a WAL directory holds: for clean and damaged directories, the scanner's verdict
(raft.storage.walscan), what SegmentLog's recovery does, and what `rmqctl log info` prints agree, down to the
file, byte offset and reason of the damage. Each case also pins what the verdict is, so the three cannot
agree on something wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.rmqctl import main
from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage import LogCorruptionError, SegmentLog
from raft.storage.segment import HEADER_SIZE, WAL_META_FILE, encode_header, encode_wal_meta, segment_name
from raft.storage.walscan import WalScan, scan_directory


def build(d: Path) -> None:
    """Ten appends of ten entries (1..100, 40-byte payloads) in 1 KiB segments: five segments of two batches."""
    with SegmentLog(d, LogStorageOptions(segment_bytes=1024)) as log:
        for k in range(10):
            log.append([Entry(1 + k // 3, i, 0, bytes([i]) * 40) for i in range(10 * k + 1, 10 * k + 11)])


def segments(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.suffix == ".wal")


def flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


def torn_tail(d: Path) -> None:
    last = segments(d)[-1]
    data = last.read_bytes()
    last.write_bytes(data + data[-200:-120])  # 80 bytes of a batch whose fsync never finished


def flipped_bit_mid_segment(d: Path) -> None:
    flip(segments(d)[1], 500)  # inside an entry frame of a sealed segment


def flipped_bit_before_a_later_commit(d: Path) -> None:
    flip(segments(d)[-1], HEADER_SIZE + 30)  # the last segment, but a later batch proves it was durable


def missing_segment(d: Path) -> None:
    os.unlink(segments(d)[2])


def sealed_segment_cut_at_a_batch_boundary(d: Path) -> None:
    """Segment 1 loses its second batch exactly at the first one's commit frame: the segment itself parses, the
    gap shows at the next segment, and the refusal names both files."""
    os.truncate(segments(d)[1], scan_directory(d).scans[1].spans[1].offset)


def sealed_segment_cut_to_its_header(d: Path) -> None:
    """Segment 1 keeps only its header: it holds no entries, so the refusal must still name it (the corruption
    sweep's truncation at byte 40), beside the segment where the entries before the gap end."""
    os.truncate(segments(d)[1], HEADER_SIZE)


def bad_header(d: Path) -> None:
    flip(segments(d)[1], 12)  # first_index field: the header CRC no longer matches


def crashed_creation(d: Path) -> None:
    (d / segment_name(101, 6)).write_bytes(encode_header(101, 6)[:17])  # created, header not yet durable


def reset_leftovers(d: Path) -> None:
    (d / WAL_META_FILE).write_bytes(encode_wal_meta(105, 6))  # a reset to 105 that crashed before unlinking


def read_only(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


def info(d: Path) -> tuple[int, dict[str, Any], str]:
    r = CliRunner().invoke(main, ["log", "info", str(d), "-o", "json"], catch_exceptions=False)
    return r.exit_code, json.loads(r.stdout) if r.exit_code == 0 else {}, r.stderr


Damage = Callable[[Path], None]
# case -> (damage, None if recovery opens it, else (position of the segment named, reason))
CASES: dict[str, tuple[Damage | None, tuple[int, str] | None]] = {
    "clean": (None, None),
    "torn tail": (torn_tail, None),
    "crashed creation": (crashed_creation, None),
    "reset leftovers": (reset_leftovers, None),
    "flipped bit mid-segment": (flipped_bit_mid_segment, (1, "in a sealed (non-last) segment")),
    "flipped bit, later commit": (flipped_bit_before_a_later_commit, (-1, "followed by a valid commit frame")),
    "missing segment": (missing_segment, (2, "entry 61 found where index 41 was expected")),
    "sealed segment cut at a batch boundary": (
        sealed_segment_cut_at_a_batch_boundary,
        (2, "entry 41 found where index 31 was expected (the entries before it end in "),
    ),
    "sealed segment cut to its header": (
        sealed_segment_cut_to_its_header,
        (2, "entry 41 found where index 21 was expected (the entries before it end in "),
    ),
    "bad header": (bad_header, (1, "segment header CRC mismatch")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_scanner_recovery_and_rmqctl_agree(tmp_path: Path, case: str) -> None:
    d = tmp_path / "log"
    build(d)
    damage, refused = CASES[case]
    if damage is not None:
        damage(d)
    before = read_only(d)
    verdict = scan_directory(d)
    code, doc, stderr = info(d)
    assert read_only(d) == before  # neither the scan nor rmqctl writes

    if refused is not None:
        seg_pos, reason = refused
        fatal = verdict.fatal
        assert fatal is not None and reason in fatal.reason
        assert fatal.path == str(segments(d)[seg_pos])
        if case == "sealed segment cut to its header":
            assert fatal.reason.endswith(f"end in {segments(d)[0]}; {segments(d)[1]}, after it, holds none)")
        elif "entries before it end in" in reason:
            assert fatal.reason.endswith(f"end in {segments(d)[seg_pos - 1]})")
        assert (code, stderr) == (
            4,
            f"rmqctl: corrupt input: {fatal.path}: at byte offset {fatal.offset}: {fatal.reason}\n",
        )
        with pytest.raises(LogCorruptionError) as e:
            SegmentLog(d)
        assert (e.value.path, e.value.offset, e.value.reason) == (fatal.path, fatal.offset, fatal.reason)
        assert read_only(d) == before  # refused before changing anything
        return

    assert verdict.fatal is None and code == 0, stderr
    index = verdict.index()
    last = verdict.live.last
    rows = [(Path(r["file"]).name, r["status"], r["tornBytes"], r["entries"]) for r in doc["segments"]]
    assert rows == [
        (Path(s.path).name, s.status, s.torn_bytes, sum(s.seg_id == x for x in index.seg_ids)) for s in verdict.scans
    ]
    assert (doc["firstIndex"], doc["lastIndex"], doc["tornBytes"]) == (
        verdict.live.first,
        last,
        sum(s.torn_bytes for s in verdict.scans),
    )
    with SegmentLog(d) as log:
        assert (log.first_index(), log.last_index()) == (verdict.live.first, last)
        assert [log.term(i) for i in range(log.first_index(), last + 1)] == list(index.terms)
        assert [e.index for e in log.entries(log.first_index(), last + 1)] == list(range(verdict.live.first, last + 1))
    # Recovery applied the verdict: void and crashed segments deleted, torn tails cut; a second scan is clean.
    gone = {Path(s.path).name for s in verdict.scans if s.status in ("void", "crashed creation")}
    assert gone.isdisjoint(os.listdir(d))
    for s in verdict.scans:
        if s.status == "live":  # cut back to the valid end; the active segment is preallocated again (zeros)
            data = Path(s.path).read_bytes()
            assert data[s.valid_end :] == bytes(len(data) - s.valid_end)
    after: WalScan = scan_directory(d)
    assert after.fatal is None and all(s.status == "live" and s.torn_bytes == 0 for s in after.scans)
    assert (after.live.first, after.live.last, after.index().terms) == (verdict.live.first, last, index.terms)
    expected = {
        "clean": (1, 100, 0),
        "torn tail": (1, 100, 80),
        "crashed creation": (1, 100, 0),
        "reset leftovers": (105, 104, 0),
    }
    assert (verdict.live.first, last, doc["tornBytes"]) == expected[case]

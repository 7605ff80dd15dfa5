"""raft.storage.walscan: the WAL's own scan, reporting instead of raising, and never writing."""

from __future__ import annotations

import os
from pathlib import Path

from cli.rmqctl.walread import LogView
from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage import SegmentLog
from raft.storage.segment import WAL_META_FILE
from raft.storage.walscan import LiveLog, SegmentScan, list_segments, merge_scans, run_arrays, scan_segment_bytes


def write(log_dir: Path, batches: list[list[Entry]], segment_bytes: int = 64 << 20) -> None:
    with SegmentLog(log_dir, LogStorageOptions(segment_bytes=segment_bytes)) as log:
        for b in batches:
            log.append(b)


def tens(n: int) -> list[list[Entry]]:
    """n appends of 10 entries: 1..10, 11..20, ..."""
    return [entries(10 * k + 1, 10 * k + 10) for k in range(n)]


def entries(lo: int, hi: int, term: int = 1, size: int = 40) -> list[Entry]:
    return [Entry(term, i, 0, bytes([i % 251]) * size) for i in range(lo, hi + 1)]


def scan_dir(log_dir: Path) -> tuple[list[SegmentScan], LiveLog]:
    names = [(n, (log_dir / n).stat().st_size) for n in os.listdir(log_dir)]
    meta = (log_dir / WAL_META_FILE).read_bytes() if (log_dir / WAL_META_FILE).exists() else None
    listing = list_segments(names, meta)
    scans = [scan_segment_bytes((log_dir / s.name).read_bytes(), s, str(log_dir / s.name)) for s in listing.segments]
    return scans, merge_scans(listing, scans)


def terms_of(scans: list[SegmentScan], live: LiveLog) -> list[tuple[int, int]]:
    out = []
    for r in live.runs:
        terms, _, _, _ = run_arrays(scans, r)
        out += [(r.lo + k, t) for k, t in enumerate(terms)]
    return out


def test_clean_multi_segment_log_matches_the_wal_view(tmp_path: Path) -> None:
    d = tmp_path / "log"
    write(d, tens(12), segment_bytes=1024)
    scans, live = scan_dir(d)
    assert len(scans) > 3 and all(s.damage is None and s.torn_bytes == 0 for s in scans)
    view = LogView(d)
    assert (live.first, live.last, live.gaps, live.overlaps) == (view.first_index(), view.last_index(), [], [])
    assert terms_of(scans, live) == [(i, view.term(i)) for i in range(1, 121)]


def test_truncate_frames_void_the_old_suffix(tmp_path: Path) -> None:
    d = tmp_path / "log"
    write(d, [entries(1, 10), entries(6, 8, term=2)])  # the second append truncates 6.. and rewrites
    scans, live = scan_dir(d)
    assert terms_of(scans, live) == [(i, 1) for i in range(1, 6)] + [(i, 2) for i in range(6, 9)]


def test_torn_tail_is_reported_as_torn_not_as_damage(tmp_path: Path) -> None:
    d = tmp_path / "log"
    write(d, [entries(1, 10), entries(11, 20)])
    (seg,) = [d / n for n in os.listdir(d) if n.endswith(".wal")]
    end = scan_dir(d)[0][0].valid_end
    data = seg.read_bytes()
    assert len(data) == 64 << 20 and data[end:] == bytes(len(data) - end)  # preallocated: zeros, not torn
    junk = bytes(range(1, 81))  # half a frame after the last commit, in the preallocated space: a torn write
    seg.write_bytes(data[:end] + junk + data[end + len(junk) :])
    before = seg.read_bytes()
    scans, live = scan_dir(d)
    assert scans[0].damage is None and scans[0].torn_bytes == 80 and scans[0].valid_end == end
    assert live.last == 20 and seg.read_bytes() == before  # nothing written


def test_damage_in_a_sealed_segment_names_file_offset_and_index(tmp_path: Path) -> None:
    d = tmp_path / "log"
    write(d, tens(9), segment_bytes=1024)
    scans, live = scan_dir(d)
    victim = next(r for r in live.runs if r.lo <= 35 <= r.hi)
    _, _, offsets, _ = run_arrays(scans, victim)
    path = Path(scans[victim.seg].path)
    raw = bytearray(path.read_bytes())
    raw[offsets[35 - victim.lo] + 30] ^= 1
    path.write_bytes(bytes(raw))
    scans, live = scan_dir(d)
    damaged = [s for s in scans if s.damage is not None]
    assert len(damaged) == 1 and damaged[0].path == str(path)
    damage = damaged[0].damage
    assert damage is not None
    assert (damage.offset, damage.index) == (offsets[35 - victim.lo], 35)
    assert "sealed" in damage.reason
    # Entries before the damage are live, the later segments are still read, the gap is tied to the damage.
    held = [i for i, _ in terms_of(scans, live)]
    assert 30 in held and 35 not in held and 90 in held
    assert all(g.after_damage for g in live.gaps) and any(g.lo <= 35 <= g.hi for g in live.gaps)


def test_a_missing_batch_between_segments_is_a_gap(tmp_path: Path) -> None:
    d = tmp_path / "log"
    write(d, tens(9), segment_bytes=1024)
    scans, live = scan_dir(d)
    middle = scans[len(scans) // 2]
    os.unlink(middle.path)
    scans, live = scan_dir(d)
    lo = middle.spans[0].first_index
    hi = middle.spans[-1].first_index + middle.spans[-1].count - 1
    assert [(g.lo, g.hi, g.after_damage) for g in live.gaps] == [(lo, hi, False)]

"""Log matching on the driver from the scans' chunk digests (tools.audit.matching) gives what the executors'
entry-by-entry comparison gives (match_pieces + match_chunk over every chunk), whatever the segment and
batch cuts of each node, with the fallback taking exactly the chunks the digests cannot settle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from raft.core.messages import Entry
from raft.options import LogStorageOptions
from raft.storage import SegmentLog
from raft.storage.segment import WAL_META_FILE
from raft.storage.walscan import LiveLog, LiveRun, list_segments, merge_scans
from tools.audit.matching import match_scans
from tools.audit.tasks import ChunkResult, ScanOut, SegmentTask, match_chunk, match_pieces, scan_task

SIZE = 16  # indexes per chunk: every log below crosses many chunk borders
WANTED = (7, 40, 63, 64, 100)
GROUP = "g"


def write(log_dir: Path, appends: list[list[Entry]], segment_bytes: int, wal_first: int = 1) -> None:
    with SegmentLog(log_dir, LogStorageOptions(segment_bytes=segment_bytes)) as log:
        for entries in appends:
            log.append(entries)
        if wal_first > 1:
            log.truncate_prefix(wal_first)


def entries(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, 0, bytes([i % 251]) * 30) for i in range(lo, hi + 1)]


def cut(lo: int, hi: int, step: int, term: int = 1) -> list[list[Entry]]:
    return [entries(a, min(hi, a + step - 1), term) for a in range(lo, hi + 1, step)]


def scan_node(nid: int, log_dir: Path) -> tuple[list[ScanOut], LiveLog]:
    names = [(n, (log_dir / n).stat().st_size) for n in os.listdir(log_dir)]
    meta = (log_dir / WAL_META_FILE).read_bytes() if (log_dir / WAL_META_FILE).exists() else None
    listing = list_segments(names, meta)
    outs = [
        scan_task(SegmentTask(nid, pos, str(log_dir / s.name), s, listing.wal_first, WANTED, SIZE))
        for pos, s in enumerate(listing.segments)
    ]
    return outs, merge_scans(listing, [o.scan for o in outs])


def reference(by_node: dict[int, list[ScanOut]], logs: dict[int, LiveLog]) -> dict[int, ChunkResult]:
    """Every chunk the executors' way: match_pieces over every scanned segment, match_chunk per chunk."""
    runs: dict[tuple[int, int], list[LiveRun]] = {}
    for nid, live in logs.items():
        for r in live.runs:
            runs.setdefault((nid, r.seg), []).append(r)
    pieces: dict[tuple[str, int], list[Any]] = {}
    for outs in by_node.values():
        for o in outs:
            for key, piece in match_pieces(o, runs, {n: GROUP for n in by_node}, SIZE):
                pieces.setdefault(key, []).append(piece)
    return {key[1]: match_chunk(key, ps, {GROUP: list(WANTED)}, SIZE) for key, ps in pieces.items()}


def audit(tmp_path: Path, nodes: list[tuple[list[list[Entry]], int, int]]) -> tuple[Any, dict[int, ChunkResult]]:
    """nodes: (appends, segment_bytes, wal_first) per node. Returns (match_scans' answer, the reference)."""
    by_node, logs = {}, {}
    for nid, (appends, segment_bytes, wal_first) in enumerate(nodes):
        d = tmp_path / f"n{nid}"
        write(d, appends, segment_bytes, wal_first)
        by_node[nid], logs[nid] = scan_node(nid, d)
    wanted = {GROUP: list(WANTED)}
    return match_scans(logs, by_node, dict.fromkeys(by_node, GROUP), wanted, SIZE), reference(by_node, logs)


def same(result: ChunkResult, ref: ChunkResult) -> None:
    assert (result.divergent, result.sources, result.terms) == (ref.divergent, ref.sources, ref.terms)
    covered = [i for lo, hi, _ in result.routes for i in range(lo, hi + 1)]
    assert covered == [i for lo, hi, _ in ref.sources for i in range(lo, hi + 1)]


def test_alike_logs_cut_differently_match_on_digests_and_spread_the_routes(tmp_path: Path) -> None:
    """Three nodes hold entries 1..200 in batches of 7, 10 and 25, in segments of different sizes (the
    rollover falls at other indexes on each node): no fallback, and the chunks take turns as the source."""
    matched, ref = audit(
        tmp_path, [(cut(1, 200, 7), 1500, 1), (cut(1, 200, 10), 2600, 1), (cut(1, 200, 25), 1 << 20, 1)]
    )
    assert matched.fallback == set()
    assert sorted(r.sources[0][0] // SIZE for r in matched.results) == sorted(ref)
    for r in matched.results:
        same(r, ref[r.sources[0][0] // SIZE])
        assert r.divergent == [] and r.sources[0][2] == 0
    full = [r for r in matched.results if r.sources[0][1] - r.sources[0][0] + 1 == SIZE]
    assert {r.routes[0][2] for r in full} == {0, 1, 2}  # every node's segments route some chunks
    assert {i: t for r in matched.results for i, t in r.terms.items()} == {
        i: dict.fromkeys(range(3), 1) for i in WANTED
    }


def test_a_divergent_tail_is_found_where_the_executors_find_it(tmp_path: Path) -> None:
    """n2 holds another term from 77 on: the first chunk that differs has whole-chunk digests on every node
    (the fallback compares it entry by entry), the later ones too; the answers equal the reference's."""
    tail = cut(1, 76, 10) + cut(77, 150, 10, term=3)
    matched, ref = audit(tmp_path, [(cut(1, 150, 10), 1 << 20, 1), (cut(1, 150, 10), 1 << 20, 1), (tail, 1 << 20, 1)])
    assert matched.fallback == {(GROUP, c) for c in range(77 // SIZE, 150 // SIZE)}
    settled = {r.sources[0][0] // SIZE: r for r in matched.results}
    assert set(settled) | {c for _, c in matched.fallback} == set(ref)
    for c, r in settled.items():
        same(r, ref[c])
    first = ref[77 // SIZE].divergent
    assert [(d["nid"], d["index"], d["term"], d["canonical_term"]) for d in first] == [(2, 77, 3, 1)]


def test_a_truncation_inside_a_segment_and_a_compacted_prefix(tmp_path: Path) -> None:
    """n1 rewrote 30..45 in the same segment (a truncate frame): in chunk 16..31 its live entries are the old
    28..29 and the new 30..31, which no scan piece is, so that chunk takes the fallback (the next chunk's
    piece starts with the rewrite and is whole again); n2's log starts at 21 (compacted): its first chunk
    is a partial piece, compared on the driver. Everything else settles on digests, equal to the reference."""
    rewritten = cut(1, 45, 9) + cut(30, 120, 9, term=2)
    ahead = cut(1, 29, 9) + cut(30, 120, 9, term=2)
    matched, ref = audit(tmp_path, [(ahead, 1 << 20, 1), (rewritten, 1 << 20, 1), (ahead, 1 << 20, 21)])
    assert matched.fallback == {(GROUP, 30 // SIZE)}
    settled = {r.sources[0][0] // SIZE: r for r in matched.results}
    assert set(settled) | {c for _, c in matched.fallback} == set(ref)
    for c, r in settled.items():
        same(r, ref[c])
    assert all(not r.divergent for r in ref.values())

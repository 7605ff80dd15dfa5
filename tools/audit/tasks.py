"""What runs on the executors: plain functions over bytes, with the project's own readers.

scan_task      one WAL segment: raft.storage.walscan (the WAL's scan_segment), CONF entries decoded, and a
               digest per chunk of the index space (`ChunkPiece`): the driver matches logs on those
match_pieces   the (term, CRC) arrays of a node's live entries, cut at chunk boundaries (the fallback)
match_chunk    one chunk of the index space across the nodes of a group: log matching, canonical source
route_task     one segment's canonical entries, decoded once (msgpack) and appended to per-bucket pieces
snapshot_task  one snapshot: the snapshot package's storage + reader, statemachine.inspection decoding
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import shutil
import tempfile
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from google_crc32c import value as crc32c

from cli.rmqctl.state import read_sections, tables_of
from raft.core.confchange import decode_conf
from raft.core.messages import EntryType
from raft.storage.segment import ENTRY_TYPE_AT, Batch
from raft.storage.walscan import (
    LiveRun,
    SegmentListing,
    SegmentScan,
    entry_payloads,
    read_extent,
    run_arrays,
    scan_segment_bytes,
)
from snapshot.errors import SnapshotError
from snapshot.storage import FileSnapshotStorage
from statemachine import codes as C
from statemachine.sections import SECTION_NAMES
from tools.audit.cluster import Unreadable, unreadable
from tools.audit.model import Buckets, split_state

CHUNK = 1 << 16  # indexes per log-matching chunk
# A bucket's commands from one segment: (first index, indexes as array "q" bytes, codes as array "H" bytes,
# the commands' bytes concatenated). Bytes only, so that Spark moves them without pickling objects.
Routed = tuple[int, bytes, bytes, bytes]


@dataclass
class SegmentTask:
    nid: int  # the node input
    pos: int  # the segment's position in the node's listing
    uri: str
    listing: SegmentListing
    wal_first: int = 1  # the node's first live index (wal_meta): entries below are compacted
    wanted: tuple[int, ...] = ()  # snapshot indexes (ascending): the pieces carry their terms
    chunk: int = CHUNK


@dataclass(slots=True)
class ChunkPiece:
    """The entries of one segment in one chunk of the index space, lo..hi contiguous, in the order the
    segment holds them: which batch slices they are (the driver checks them against the live runs), a
    digest of their terms and frame CRCs, and the arrays themselves when the piece is not the whole chunk
    (pieces at segment ends, which the driver joins with the next segment's)."""

    chunk: int
    lo: int
    hi: int
    slices: list[tuple[int, int, int]]  # (batch, a, z): entries a..z-1 of the batch
    digest: bytes
    terms_at: dict[int, int]  # wanted index -> term
    terms: bytes | tuple[int, int] | None = None  # _pack_terms, for a partial piece
    crcs: bytes | None = None

    def full(self, size: int) -> bool:
        return self.lo == self.chunk * size and self.hi == (self.chunk + 1) * size - 1


def digest_of(terms: Any, crcs: Any) -> bytes:
    """Equal digests: equal (term, frame CRC) sequences (BLAKE2b of each sequence's bytes). Fed slice by
    slice (`_Digest`) or whole: the same value for the same sequence however it is cut."""
    d = _Digest()
    d.update(terms, crcs)
    return d.value()


class _Digest:
    def __init__(self) -> None:
        self.t, self.c = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)

    def update(self, terms: Any, crcs: Any) -> None:
        self.t.update(terms)
        self.c.update(crcs)

    def value(self) -> bytes:
        return self.t.digest() + self.c.digest()


def chunk_pieces(scan: SegmentScan, size: int, wal_first: int, wanted: tuple[int, ...]) -> list[ChunkPiece]:
    """A segment's entries from wal_first on, in batch order, cut into ChunkPieces at chunk boundaries and
    wherever an index does not follow the previous one (a truncation inside the segment: the driver, which
    knows the live runs, then takes the fallback for that chunk)."""
    out: list[ChunkPiece] = []
    cur: ChunkPiece | None = None
    dig = _Digest()
    parts: list[tuple[memoryview, memoryview]] = []

    def close(p: ChunkPiece) -> None:
        p.digest = dig.value()
        if not p.full(size):
            terms, crcs = array("q"), array("I")
            for t, c in parts:
                terms.frombytes(t)
                crcs.frombytes(c)
            p.terms, p.crcs = _pack_terms(terms), crcs.tobytes()
        out.append(p)

    for b, batch in enumerate(scan.batches):
        first, n = batch.first_index, len(batch.terms)
        tv, cv = memoryview(batch.terms).cast("B"), memoryview(scan.crcs[b]).cast("B")
        ts, cs = batch.terms.itemsize, scan.crcs[b].itemsize
        k = max(0, wal_first - first)
        while k < n:
            index = first + k
            c = index // size
            z = min(n, (c + 1) * size - first)
            if cur is None or cur.chunk != c or cur.hi + 1 != index:
                if cur is not None:
                    close(cur)
                cur, dig, parts = ChunkPiece(c, index, index - 1, [], b"", {}), _Digest(), []
            t, cr = tv[k * ts : z * ts], cv[k * cs : z * cs]
            dig.update(t, cr)
            parts.append((t, cr))
            cur.slices.append((b, k, z))
            cur.hi = first + z - 1
            for i in wanted[bisect_left(wanted, index) : bisect_left(wanted, cur.hi + 1)]:
                cur.terms_at[i] = batch.terms[k + i - index]
            k = z
    if cur is not None:
        close(cur)
    return out


@dataclass
class ScanOut:
    """A scanned segment as kept in the cached RDD (scan with arrays) and sent to the driver (light)."""

    nid: int
    pos: int
    uri: str
    scan: SegmentScan
    confs: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    conf_errors: list[tuple[int, str]] = field(default_factory=list)
    pieces: list[ChunkPiece] = field(default_factory=list)

    def light(self) -> ScanOut:
        s = self.scan
        return ScanOut(
            self.nid,
            self.pos,
            self.uri,
            SegmentScan(
                s.path, s.seg_id, s.first_index, s.size, s.status, [], [], s.valid_end, s.torn_bytes, s.damage, s.spans
            ),
            self.confs,
            self.conf_errors,
            self.pieces,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled compactly, for Spark's cache that every later stage reads: a batch's terms as (term, count)
        when they are one term, its offsets as 32-bit numbers when they fit (12 bytes an entry, not 24)."""
        batches = [
            (
                b.truncate_from,
                b.first_index,
                _pack_terms(b.terms),
                b.offsets if b.offsets and b.offsets[-1] >= 1 << 32 else array("I", b.offsets),
                b.sizes,
            )
            for b in self.scan.batches
        ]
        s = self.scan
        head = (s.path, s.seg_id, s.first_index, s.size, s.status, s.valid_end, s.torn_bytes, s.damage, s.spans)
        state = (self.nid, self.pos, self.uri, self.confs, self.conf_errors, head, batches, s.crcs, self.pieces)
        return _unpickle_scan_out, state


def _unpickle_scan_out(
    nid: int,
    pos: int,
    uri: str,
    confs: Any,
    conf_errors: Any,
    head: tuple[Any, ...],
    batches: list[tuple[Any, ...]],
    crcs: list[array[int]],
    pieces: list[ChunkPiece],
) -> ScanOut:
    path, seg_id, first_index, size, status, valid_end, torn_bytes, damage, spans = head
    # Offsets stay 32-bit when they were sent so: the audit only slices and iterates them.
    full = [
        Batch(truncate_from, first, _unpack_terms(terms), offsets, sizes)
        for truncate_from, first, terms, offsets, sizes in batches
    ]
    scan = SegmentScan(path, seg_id, first_index, size, status, full, crcs, valid_end, torn_bytes, damage, spans)
    return ScanOut(nid, pos, uri, scan, confs, conf_errors, pieces)


def local_path(uri: str) -> str | None:
    """The path of a plain local path; None for a URI, which is read through Spark's Hadoop layer (file://
    included, so that a local run takes the very code path of a cluster run on hdfs:// or s3a://)."""
    return uri if "://" not in uri else None


def read_local(uri: str) -> bytes:
    path = local_path(uri)
    assert path is not None, uri
    return read_extent(path)


def scan_local(task: SegmentTask) -> ScanOut | Unreadable:
    """scan_task of a local segment; one the driver listed and this executor's host does not have is told to
    the driver (a usage error, tools/audit/cluster.py)."""
    try:
        data = read_local(task.uri)
    except OSError as e:
        return unreadable(task.uri, e)
    return scan_task(task, data)


def scan_task(task: SegmentTask, data: bytes | None = None) -> ScanOut:
    data = read_local(task.uri) if data is None else data
    scan = scan_segment_bytes(data, task.listing, task.uri)
    out = ScanOut(
        task.nid, task.pos, task.uri, scan, pieces=chunk_pieces(scan, task.chunk, task.wal_first, task.wanted)
    )
    conf_type, at = EntryType.CONF, ENTRY_TYPE_AT  # the type byte, read inline in the per-entry loop
    for batch in scan.batches:  # CONF entries are rare: found by their type byte, decoded for the meta check
        for k in [k for k, off in enumerate(batch.offsets) if data[off + at] == conf_type]:
            payload = next(entry_payloads(data, [batch.offsets[k]], [batch.sizes[k]]))
            index = batch.first_index + k
            try:
                conf = decode_conf(payload)
            except (ValueError, TypeError) as e:
                out.conf_errors.append((index, str(e)))
                continue
            out.confs.append((index, batch.terms[k], tuple(conf.voters), tuple(conf.learners)))
    return out


def match_pieces(
    rec: ScanOut,
    runs: dict[tuple[int, int], list[LiveRun]],
    group_of: dict[int, str],
    size: int = CHUNK,
    only: frozenset[tuple[str, int]] | None = None,
) -> Iterator[tuple[tuple[str, int], tuple[int, int, bytes | tuple[int, int], bytes]]]:
    """((group, chunk), (nid, lo, terms, crcs)) for the live entries of one scanned segment: contiguous
    runs joined, then cut at chunk boundaries (`size` indexes); `only`: those (group, chunk) keys."""
    scans = {rec.pos: rec.scan}  # run_arrays indexes scans by position; an executor holds one segment
    joined: list[tuple[int, array[int], array[int]]] = []
    for run in runs.get((rec.nid, rec.pos), ()):
        terms, crcs, _, _ = run_arrays(scans, run)
        if joined and joined[-1][0] + len(joined[-1][1]) == run.lo:
            joined[-1][1].extend(terms)
            joined[-1][2].extend(crcs)
        else:
            joined.append((run.lo, array("q", terms), array("I", crcs)))
    group = group_of[rec.nid]
    for first, terms, crcs in joined:
        lo, last = first, first + len(terms) - 1
        while lo <= last:
            chunk = lo // size
            hi = min(last, (chunk + 1) * size - 1)
            a, z = lo - first, hi - first + 1
            if only is None or (group, chunk) in only:
                yield (group, chunk), (rec.nid, lo, _pack_terms(terms[a:z]), crcs[a:z].tobytes())
            lo = hi + 1


def _pack_terms(terms: array[int]) -> bytes | tuple[int, int]:
    """A piece's terms: (term, count) when they are all one term (a log's usual case: a third of the bytes
    the log-matching shuffle would move), else the array's bytes."""
    if terms and terms.count(terms[0]) == len(terms):
        return terms[0], len(terms)
    return terms.tobytes()


def _unpack_terms(packed: bytes | tuple[int, int]) -> array[int]:
    if isinstance(packed, tuple):
        return array("q", [packed[0]]) * packed[1]
    terms = array("q")
    terms.frombytes(packed)
    return terms


@dataclass
class ChunkResult:
    group: str
    divergent: list[dict[str, Any]]  # per node: its first divergent index in the chunk and what differs
    sources: list[tuple[int, int, int]]  # canonical (lo, hi, nid) runs: the node findings name
    terms: dict[int, dict[int, int]]  # wanted index -> {nid: term}
    # canonical (lo, hi, nid) runs the replay reads: where every node holds the chunk alike, the chunks
    # take turns among the nodes, so that routing is spread over every node's segments
    routes: list[tuple[int, int, int]] = field(default_factory=list)


Arrays = list[tuple[int, "array[int]", "array[int]"]]  # (lo, terms, crcs) pieces of one node


def joined(pieces: Arrays) -> Arrays:
    """A node's pieces in index order, the contiguous ones joined (pieces from several segments)."""
    pieces.sort(key=lambda p: p[0])
    merged = [pieces[0]]
    for lo, terms, crcs in pieces[1:]:
        if merged[-1][0] + len(merged[-1][1]) == lo:
            merged[-1][1].extend(terms)
            merged[-1][2].extend(crcs)
        else:
            merged.append((lo, terms, crcs))
    return merged


def piece_arrays(terms: bytes | tuple[int, int], crcs: bytes) -> tuple[array[int], array[int]]:
    c = array("I")
    c.frombytes(crcs)
    return _unpack_terms(terms), c


def wanted_in(wanted: dict[str, list[int]], group: str, chunk: int, size: int) -> dict[int, dict[int, int]]:
    lo_c, hi_c = chunk * size, (chunk + 1) * size - 1
    return {i: {} for i in wanted.get(group, ()) if lo_c <= i <= hi_c}


def match_chunk(key: tuple[str, int], pieces: Any, wanted: dict[str, list[int]], size: int = CHUNK) -> ChunkResult:
    """Compare one chunk ((nid, lo, terms, crcs) pieces, as match_pieces cuts them) across the nodes of a
    group: `match_arrays`."""
    per_node: dict[int, Arrays] = {}
    for nid, lo, tb, cb in pieces:
        per_node.setdefault(nid, []).append((lo, *piece_arrays(tb, cb)))
    return match_arrays(key, per_node, wanted, size)


def match_arrays(
    key: tuple[str, int], per_node: dict[int, Arrays], wanted: dict[str, list[int]], size: int
) -> ChunkResult:
    """Compare one chunk across the nodes of a group. Equal (index, term) must mean equal bytes (equal frame
    CRC, which covers index, term, type and data); the canonical entry of an index is the one most nodes
    hold (ties: the higher term, as a leader's entry replaces a stale one)."""
    group, chunk = key
    nids = sorted(per_node)
    for n in nids:
        per_node[n] = joined(per_node[n])
    out = ChunkResult(group, [], [], wanted_in(wanted, group, chunk, size))
    # Fast path: every node holds one identical contiguous piece.
    first = per_node[nids[0]]
    if len(first) == 1 and all(
        len(per_node[n]) == 1
        and per_node[n][0][0] == first[0][0]
        and per_node[n][0][1] == first[0][1]
        and per_node[n][0][2] == first[0][2]
        for n in nids
    ):
        lo, terms, _ = first[0]
        alike(out, chunk, lo, lo + len(terms) - 1, nids, lambda i: terms[i - lo])
        return out
    # Slow path: index by index (chunks at the log ends, compaction points and divergences).
    at: dict[int, dict[int, tuple[int, int]]] = {}
    for n in nids:
        for lo, terms, crcs in per_node[n]:
            for k in range(len(terms)):
                at.setdefault(lo + k, {})[n] = (terms[k], crcs[k])
    reported: set[int] = set()
    run: list[int] | None = None
    for i in sorted(at):
        held = at[i]
        if i in out.terms:
            out.terms[i] = {n: t for n, (t, _) in held.items()}
        counts: dict[tuple[int, int], int] = {}
        for v in held.values():
            counts[v] = counts.get(v, 0) + 1
        canon = max(counts, key=lambda v: (counts[v], v[0], -v[1]))
        src = min(n for n, v in held.items() if v == canon)
        if len(counts) > 1:
            for n, v in held.items():
                if v != canon and n not in reported:
                    reported.add(n)
                    others = sorted(m for m, w in held.items() if w == canon)
                    same_term = v[0] == canon[0]
                    out.divergent.append(
                        {
                            "nid": n,
                            "index": i,
                            "term": v[0],
                            "canonical_term": canon[0],
                            "others": others,
                            "same_term": same_term,
                        }
                    )
        if run is not None and run[2] == src and run[1] == i - 1:
            run[1] = i
        else:
            if run is not None:
                out.sources.append((run[0], run[1], run[2]))
            run = [i, i, src]
    if run is not None:
        out.sources.append((run[0], run[1], run[2]))
    out.routes = list(out.sources)
    return out


def alike(out: ChunkResult, chunk: int, lo: int, hi: int, nids: list[int], term_at: Callable[[int], int]) -> None:
    """Every node of `nids` (ascending) holds lo..hi, the same entries: no divergence, the first node is the
    source findings name, the chunk's turn picks the node the replay reads."""
    out.sources.append((lo, hi, nids[0]))
    out.routes.append((lo, hi, nids[chunk % len(nids)]))
    for i in out.terms:
        if lo <= i <= hi:
            out.terms[i] = {n: term_at(i) for n in nids}


def route_task(
    rec: ScanOut,
    sources: dict[tuple[int, int], list[tuple[int, int, int, int]]],
    buckets: Buckets,
    data: bytes | None = None,
) -> Iterator[tuple[int, Routed]]:
    """(bucket, Routed piece) for the canonical entries this segment is the source of. `sources` maps
    (nid, segment position) to (batch, skip, lo, hi) slices, in index order. Each command is decoded once
    here, to find its bucket(s); what travels is its bytes, concatenated per bucket with the index and code
    beside them, one piece per bucket and contiguous range of slices: pieces from the segments of several
    nodes never interleave, so that a bucket applies them in the order of their first index."""
    wanted = sources.get((rec.nid, rec.pos))
    if not wanted:
        return
    data = read_local(rec.uri) if data is None else data
    unpackb, route = msgpack.unpackb, buckets.route
    normal, at = EntryType.NORMAL, ENTRY_TYPE_AT
    parts: dict[int, tuple[array[int], array[int], list[bytes]]] = {}
    cache: dict[str, tuple[int, ...] | int | None] = {}  # brokerName -> bucket(s), for the hot heartbeat
    target: tuple[int, ...] | int | None
    heartbeat, heartbeats = C.BROKER_HEARTBEAT, C.BROKER_HEARTBEATS
    split: dict[int, bytes] = {}  # a 1202's payload per bucket (its own heartbeats)
    last = None
    for b, skip, lo, hi in wanted:
        if last is not None and lo != last + 1:  # another node's turn in between: the pieces end here
            yield from _routed(parts)
            parts = {}
        last = hi
        batch = rec.scan.batches[b]
        a, z = skip, skip + hi - lo + 1
        offsets = batch.offsets[a:z]
        index = lo
        for off, payload in zip(offsets, entry_payloads(data, offsets, batch.sizes[a:z]), strict=True):
            if data[off + at] == normal:
                try:
                    c = unpackb(payload)
                    code = c[1]
                    if type(code) is not int:  # not a command: applying it changes nothing (2015)
                        target = None
                    elif code == heartbeat and type(c[4]) is str:
                        target = cache.get(c[4])
                        if target is None:
                            target = cache[c[4]] = route(c)
                    elif code == heartbeats:
                        split = buckets.split_heartbeats(c)
                        target = tuple(split) or None
                    else:
                        target = route(c)
                except Exception:  # noqa: BLE001 - not a command: applying it changes nothing (2015)
                    target = None
                if target is not None:
                    for t in (target,) if isinstance(target, int) else target:
                        part = parts.get(t)
                        if part is None:
                            parts[t] = part = (array("q"), array("H"), [])
                        part[0].append(index)
                        part[1].append(code)
                        part[2].append(split[t] if code == heartbeats else payload)
            index += 1
    yield from _routed(parts)


def _routed(parts: dict[int, tuple[array[int], array[int], list[bytes]]]) -> Iterator[tuple[int, Routed]]:
    for t, (indexes, codes, payloads) in parts.items():
        yield t, (indexes[0], indexes.tobytes(), codes.tobytes(), b"".join(payloads))


def routed_commands(piece: Routed) -> Iterator[tuple[int, int, Any]]:
    """(index, code, command as msgpack decodes it) of a routed piece. The payloads are decoded in one go by a
    msgpack.Unpacker over their concatenation: each decoded alone (route_task), with nothing left over, so
    the stream splits back into exactly those commands."""
    _, index_bytes, code_bytes, payloads = piece
    indexes, codes = array("q"), array("H")
    indexes.frombytes(index_bytes)
    codes.frombytes(code_bytes)
    unpacker = msgpack.Unpacker(max_buffer_size=max(len(payloads), 1 << 20))
    unpacker.feed(payloads)
    return zip(indexes, codes, unpacker, strict=True)


# --- snapshots ---------------------------------------------------------------------------------------------


@dataclass
class SnapshotTask:
    nid: int
    index: int
    uri: str  # the snapshot_<N> directory
    files: list[str]  # names in it (for reading through Hadoop)


@dataclass
class SnapshotOut:
    nid: int
    index: int
    uri: str
    term: int | None = None
    voters: tuple[str, ...] = ()
    learners: tuple[str, ...] = ()
    digests: dict[str, int] = field(default_factory=dict)  # section name -> CRC32C of the decoded body
    error: tuple[str, int, str] | None = None  # (path, offset, reason)
    bodies: dict[int, bytes] | None = None
    sections: list[str] = field(default_factory=list)
    same_as: tuple[int, int] | None = None  # (nid, index) of a copy with the same bytes, decoded instead

    def light(self) -> SnapshotOut:
        """What the driver collects: without the section bodies."""
        return dataclasses.replace(self, bodies=None)


Decoded = dict[tuple[tuple[int, bytes], ...], tuple[tuple[int, int], list[str], dict[int, bytes]]]


def snapshot_group_task(
    tasks: list[SnapshotTask], buckets: Buckets, files: list[dict[str, bytes] | None] | None = None
) -> list[tuple[SnapshotOut | Unreadable, dict[int, bytes]]]:
    """The copies of one snapshot on several nodes (equal index and equal file CRCs in their metas, as the
    driver grouped them): each is opened and verified, and each distinct content decoded once; a copy
    whose section bodies equal one decoded before gets `same_as` (that copy's (nid, index)) and no slices
    of its own. A copy that fails verification reports its error and the next one is decoded."""
    seen: Decoded = {}
    return [snapshot_task(t, buckets, f, seen) for t, f in zip(tasks, files or [None] * len(tasks), strict=True)]


def snapshot_task(
    task: SnapshotTask, buckets: Buckets, files: dict[str, bytes] | None = None, seen: Decoded | None = None
) -> tuple[SnapshotOut | Unreadable, dict[int, bytes]]:
    """Open and verify one snapshot with the project's storage (read-only), decode every section. The
    entities come back split by bucket, each bucket's {(section, entity): value} pickled once here
    (`pack_slice`): Spark caches and shuffles them as bytes, and a replay that agrees never unpickles them.
    `seen`: contents decoded before in this task (snapshot_group_task)."""
    seen = {} if seen is None else seen
    tmp = None
    local = local_path(task.uri)
    try:
        if files is not None or local is None:
            tmp = tempfile.mkdtemp(prefix="rmq-audit-snap-")
            sdir = Path(tmp) / Path(task.uri.rstrip("/")).name
            sdir.mkdir()
            for name, data in (files or {}).items():
                (sdir / name).write_bytes(data)
        else:
            sdir = Path(local)
            if not os.path.isdir(sdir):  # listed by the driver, absent here: a usage error (cluster.py)
                return unreadable(local, FileNotFoundError(2, "No such file or directory")), {}
        out = SnapshotOut(task.nid, task.index, task.uri)
        st = FileSnapshotStorage(sdir.parent, read_only=True, known_types=SECTION_NAMES)
        slices: dict[int, bytes] = {}
        try:
            meta = st.read_meta(task.index)
            out.term, out.voters, out.learners = meta.last_included_term, tuple(meta.voters), tuple(meta.learners)
            with st.open(task.index, verify=True) as snap:
                snap.verify()
                bodies = {e.type: snap.section(e.type) for e in snap.entries}
                key = tuple(bodies.items())
                if key in seen:  # the nodes of a group usually hold byte-identical snapshots
                    out.same_as, out.sections, _ = seen[key]
                else:
                    sections = read_sections(snap, require_all=False)
                    slices = {b: pack_slice(v) for b, v in split_state(tables_of(sections), buckets).items()}
                    out.sections = [s.name for s in sections]
                    seen[key] = ((task.nid, task.index), out.sections, slices)
        except SnapshotError as e:
            path = str(getattr(e, "path", sdir))
            out.error = (
                path.replace(str(sdir), task.uri.rstrip("/")),
                int(getattr(e, "offset", 0) or 0),
                str(getattr(e, "reason", e)),
            )
            return out, {}
        out.digests = {SECTION_NAMES.get(t, str(t)): crc32c(body) for t, body in bodies.items()}
        out.bodies = bodies  # kept in the cache; the driver fetches those of a replay's starting point
        return out, slices
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def pack_slice(entities: dict[tuple[str, str], Any]) -> bytes:
    """One bucket's entities as bytes: equal bytes mean equal values of equal types (plain values pickle
    by content), so the replay compares bytes first and decodes only a slice that differs."""
    return pickle.dumps(entities, protocol=5)


def listdir_sizes(path: str) -> list[tuple[str, int]]:
    return [(n, os.stat(os.path.join(path, n)).st_size) for n in os.listdir(path)]

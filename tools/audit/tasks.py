"""What runs on the executors: plain functions over bytes, with the project's own readers.

scan_task      one WAL segment: raft.storage.walscan (the WAL's scan_segment), CONF entries decoded
match_pieces   the (term, CRC) arrays of a node's live entries, cut at chunk boundaries
match_chunk    one chunk of the index space across the nodes of a group: log matching, canonical source
route_task     one segment's canonical entries, decoded once (msgpack) and appended to per-bucket pieces
snapshot_task  one snapshot: the snapshot package's storage + reader, statemachine.inspection decoding
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from google_crc32c import value as crc32c

from cli.rmqctl.state import read_sections, tables_of
from raft.core.confchange import decode_conf
from raft.core.messages import EntryType
from raft.storage.segment import Batch
from raft.storage.walscan import (
    LiveRun,
    SegmentListing,
    SegmentScan,
    entry_payloads,
    run_arrays,
    scan_segment_bytes,
)
from snapshot.errors import SnapshotError
from snapshot.storage import SnapshotStorage
from statemachine import codes as C
from statemachine.sections import SECTION_NAMES
from tools.audit.model import Buckets, split_state

CHUNK = 1 << 16  # indexes per log-matching chunk
# A bucket's commands from one segment: (first index, indexes as array "q" bytes, codes as array "H" bytes,
# the commands' bytes concatenated). Bytes only, so that Spark moves them without pickling objects.
Routed = tuple[int, bytes, bytes, bytes]
TYPE_AT = 9  # the entry type byte in an entry frame (walscan.entry_type), read inline in the per-entry loops


@dataclass
class SegmentTask:
    nid: int  # the node input
    pos: int  # the segment's position in the node's listing
    uri: str
    listing: SegmentListing


@dataclass
class ScanOut:
    """A scanned segment as kept in the cached RDD (scan with arrays) and sent to the driver (light)."""

    nid: int
    pos: int
    uri: str
    scan: SegmentScan
    confs: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    conf_errors: list[tuple[int, str]] = field(default_factory=list)

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
        return _unpickle_scan_out, (self.nid, self.pos, self.uri, self.confs, self.conf_errors, head, batches, s.crcs)


def _unpickle_scan_out(
    nid: int,
    pos: int,
    uri: str,
    confs: Any,
    conf_errors: Any,
    head: tuple[Any, ...],
    batches: list[tuple[Any, ...]],
    crcs: list[array[int]],
) -> ScanOut:
    path, seg_id, first_index, size, status, valid_end, torn_bytes, damage, spans = head
    # Offsets stay 32-bit when they were sent so: the audit only slices and iterates them.
    full = [
        Batch(truncate_from, first, _unpack_terms(terms), offsets, sizes)
        for truncate_from, first, terms, offsets, sizes in batches
    ]
    scan = SegmentScan(path, seg_id, first_index, size, status, full, crcs, valid_end, torn_bytes, damage, spans)
    return ScanOut(nid, pos, uri, scan, confs, conf_errors)


def local_path(uri: str) -> str | None:
    """The path of a plain local path; None for a URI, which is read through Spark's Hadoop layer (file://
    included, so that a local run takes the very code path of a cluster run on hdfs:// or s3a://)."""
    return uri if "://" not in uri else None


def read_local(uri: str) -> bytes:
    path = local_path(uri)
    assert path is not None, uri
    with open(path, "rb") as f:
        return f.read()


def scan_task(task: SegmentTask, data: bytes | None = None) -> ScanOut:
    data = read_local(task.uri) if data is None else data
    scan = scan_segment_bytes(data, task.listing, task.uri)
    out = ScanOut(task.nid, task.pos, task.uri, scan)
    conf_type, at = EntryType.CONF, TYPE_AT
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
    rec: ScanOut, runs: dict[tuple[int, int], list[LiveRun]], group_of: dict[int, str]
) -> Iterator[tuple[tuple[str, int], tuple[int, int, bytes | tuple[int, int], bytes]]]:
    """((group, chunk), (nid, lo, terms, crcs)) for the live entries of one scanned segment: contiguous
    runs joined, then cut at chunk boundaries."""
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
            chunk = lo // CHUNK
            hi = min(last, (chunk + 1) * CHUNK - 1)
            a, z = lo - first, hi - first + 1
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
    sources: list[tuple[int, int, int]]  # canonical (lo, hi, nid) runs
    terms: dict[int, dict[int, int]]  # wanted index -> {nid: term}


def match_chunk(key: tuple[str, int], pieces: Any, wanted: dict[str, list[int]]) -> ChunkResult:
    """Compare one chunk across the nodes of a group. Equal (index, term) must mean equal bytes (equal frame
    CRC, which covers index, term, type and data); the canonical entry of an index is the one most nodes
    hold (ties: the higher term, as a leader's entry replaces a stale one)."""
    group, chunk = key
    per_node: dict[int, list[tuple[int, array[int], array[int]]]] = {}
    for nid, lo, tb, cb in pieces:
        terms, crcs = _unpack_terms(tb), array("I")
        crcs.frombytes(cb)
        per_node.setdefault(nid, []).append((lo, terms, crcs))
    nids = sorted(per_node)
    for n, own in per_node.items():  # pieces from several segments: join the contiguous ones
        own.sort(key=lambda p: p[0])
        merged = [own[0]]
        for lo, terms, crcs in own[1:]:
            if merged[-1][0] + len(merged[-1][1]) == lo:
                merged[-1][1].extend(terms)
                merged[-1][2].extend(crcs)
            else:
                merged.append((lo, terms, crcs))
        per_node[n] = merged
    out = ChunkResult(group, [], [], {})
    lo_c, hi_c = chunk * CHUNK, (chunk + 1) * CHUNK - 1
    for i in wanted.get(group, ()):
        if lo_c <= i <= hi_c:
            out.terms[i] = {}
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
        out.sources.append((lo, lo + len(terms) - 1, nids[0]))
        for i in out.terms:
            if lo <= i < lo + len(terms):
                out.terms[i] = {n: terms[i - lo] for n in nids}
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
    return out


def route_task(
    rec: ScanOut,
    sources: dict[tuple[int, int], list[tuple[int, int, int, int]]],
    buckets: Buckets,
    data: bytes | None = None,
) -> Iterator[tuple[int, Routed]]:
    """(bucket, Routed piece) for the canonical entries this segment is the source of. `sources` maps
    (nid, segment position) to (batch, skip, lo, hi) slices. Each command is decoded once here, to find its
    bucket(s); what travels is its bytes, concatenated per bucket with the index and code beside them."""
    wanted = sources.get((rec.nid, rec.pos))
    if not wanted:
        return
    data = read_local(rec.uri) if data is None else data
    unpackb, route = msgpack.unpackb, buckets.route
    normal, at = EntryType.NORMAL, TYPE_AT
    parts: dict[int, tuple[array[int], array[int], list[bytes]]] = {}
    cache: dict[str, tuple[int, ...] | int | None] = {}  # brokerName -> bucket(s), for the hot heartbeat
    target: tuple[int, ...] | int | None
    heartbeat = C.BROKER_HEARTBEAT
    for b, skip, lo, hi in wanted:
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
                        part[2].append(payload)
            index += 1
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
    base: bool  # ship the section bodies back (the replay starts from this snapshot)


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


# The last snapshot this worker decoded: [(buckets, its section bodies), (section names, packed slices)]. A
# snapshot with the very same bytes (another node's copy at the same index) is not decoded again.
_LAST_DECODED: list[Any] = [None, None]


def snapshot_task(
    task: SnapshotTask, buckets: Buckets, files: dict[str, bytes] | None = None
) -> tuple[SnapshotOut, dict[int, bytes]]:
    """Open and verify one snapshot with the project's storage (read-only), decode every section. The
    entities come back split by bucket, each bucket's {(section, entity): value} pickled once here
    (`pack_slice`): Spark caches and shuffles them as bytes, and a replay that agrees never unpickles them."""
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
        out = SnapshotOut(task.nid, task.index, task.uri)
        st = SnapshotStorage(sdir.parent, read_only=True, known_types=SECTION_NAMES)
        try:
            meta = st.read_meta(task.index)
            out.term, out.voters, out.learners = meta.last_included_term, tuple(meta.voters), tuple(meta.learners)
            with st.open(task.index, verify=True) as snap:
                snap.verify()
                bodies = {e.type: snap.section(e.type) for e in snap.entries}
                key = (buckets, tuple(bodies.items()))
                if _LAST_DECODED[0] != key:  # the nodes of a group usually hold byte-identical snapshots
                    sections = read_sections(snap, require_all=False)
                    slices = {b: pack_slice(v) for b, v in split_state(tables_of(sections), buckets).items()}
                    _LAST_DECODED[:] = [key, ([s.name for s in sections], slices)]
        except SnapshotError as e:
            path = str(getattr(e, "path", sdir))
            out.error = (
                path.replace(str(sdir), task.uri.rstrip("/")),
                int(getattr(e, "offset", 0) or 0),
                str(getattr(e, "reason", e)),
            )
            return out, {}
        out.digests = {SECTION_NAMES.get(t, str(t)): crc32c(body) for t, body in bodies.items()}
        out.sections, slices = _LAST_DECODED[1]
        if task.base:
            out.bodies = bodies
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

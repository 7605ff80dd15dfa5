"""Log matching on the driver, from what the scan stage already sends it: no second pass over the cached
scans and no shuffle of (term, CRC) arrays when the nodes hold their chunks alike.

Each scan task cuts its segment's entries into `tasks.ChunkPiece`s: per chunk of the index space, the
batch slices, a digest of the terms and frame CRCs, and the arrays themselves for a piece that is not the
whole chunk (the pieces at a segment's ends). Here, per node, the live runs (merge_scans) are cut the same
way and each (segment, chunk) must be exactly one piece's slices: then the piece is what the node holds
there. Per chunk of a group:

- every node holds the whole chunk in one piece and the digests are equal: the chunk matches (`alike`);
- else every node's arrays are here (partial pieces, joined across segments; a whole-chunk digest is
  compared with a joined node's digest first): `match_arrays`, the same comparison the executors make;
- else (a digest differs from another node's and only digests are here, or the live runs cut a piece: a
  truncation inside a segment) the chunk goes to the fallback, the executors' `match_pieces` over the cached
  scans for those chunks only.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from raft.storage.walscan import LiveLog
from tools.audit.tasks import (
    Arrays,
    ChunkPiece,
    ChunkResult,
    ScanOut,
    alike,
    digest_of,
    joined,
    match_arrays,
    piece_arrays,
    wanted_in,
)


@dataclass
class Matching:
    results: list[ChunkResult] = field(default_factory=list)
    fallback: set[tuple[str, int]] = field(default_factory=set)  # (group, chunk) for match_pieces/match_chunk


def live_slices(live: LiveLog, size: int) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
    """(segment position, chunk) -> the (batch, a, z) slices of the live entries, in log order."""
    out: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for r in live.runs:
        lo = r.lo
        while lo <= r.hi:
            c = lo // size
            hi = min(r.hi, (c + 1) * size - 1)
            a = r.skip + lo - r.lo
            out.setdefault((r.seg, c), []).append((r.batch, a, a + hi - lo + 1))
            lo = hi + 1
    return out


def match_scans(
    logs: dict[int, LiveLog],
    by_node: dict[int, list[ScanOut]],
    group_of: dict[int, str],
    wanted: dict[str, list[int]],
    size: int,
) -> Matching:
    """`by_node[nid]`: the node's scans by segment position, as merge_scans saw them."""
    out = Matching()
    held: dict[tuple[str, int], dict[int, list[ChunkPiece]]] = {}
    for nid, live in sorted(logs.items()):
        group, outs = group_of[nid], by_node.get(nid, [])
        for (seg, chunk), slices in live_slices(live, size).items():
            piece = next((p for p in outs[seg].pieces if p.chunk == chunk and p.slices == slices), None)
            if piece is None:
                out.fallback.add((group, chunk))
            else:
                held.setdefault((group, chunk), {}).setdefault(nid, []).append(piece)
    for key, per_node in sorted(held.items()):
        if key in out.fallback:
            continue
        result = _match_pieces(key, per_node, wanted, size)
        if result is None:
            out.fallback.add(key)
        else:
            out.results.append(result)
    return out


def _match_pieces(
    key: tuple[str, int], per_node: dict[int, list[ChunkPiece]], wanted: dict[str, list[int]], size: int
) -> ChunkResult | None:
    group, chunk = key
    nids = sorted(per_node)
    whole: dict[int, tuple[int, int, bytes]] = {}  # nid -> (lo, hi, digest) where it holds the whole chunk
    arrays: dict[int, Arrays] = {}
    for nid in nids:
        pieces = per_node[nid]
        if len(pieces) == 1 and pieces[0].crcs is None:
            p = pieces[0]
            whole[nid] = (p.lo, p.hi, p.digest)
            continue
        arrays[nid] = [
            (p.lo, *piece_arrays(p.terms, p.crcs)) for p in pieces if p.terms is not None and p.crcs is not None
        ]
        if len(arrays[nid]) != len(pieces):  # a whole-chunk piece beside others: cannot be live (fallback)
            return None
        runs = joined([(lo, array("q", t), array("I", c)) for lo, t, c in arrays[nid]])  # copies: arrays[nid] stays
        if len(runs) == 1:
            lo, terms, crcs = runs[0]
            if lo == chunk * size and lo + len(terms) == (chunk + 1) * size:
                whole[nid] = (lo, lo + len(terms) - 1, digest_of(terms, crcs))
    if len(whole) == len(nids) and len(set(whole.values())) == 1:
        lo, hi, _ = whole[nids[0]]
        terms_at = {i: t for nid in nids for p in per_node[nid] for i, t in p.terms_at.items()}
        result = ChunkResult(group, [], [], wanted_in(wanted, group, chunk, size))
        alike(result, chunk, lo, hi, nids, lambda i: terms_at[i])
        return result
    if len(arrays) == len(nids):
        return match_arrays(key, arrays, wanted, size)
    return None

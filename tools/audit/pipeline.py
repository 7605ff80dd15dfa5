"""The audit's driver: discovery, the Spark stages, the driver-side checks on small summaries, outputs."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlparse

from cli.datadir import probe
from raft.storage.identity import IDENTITY_FILE
from raft.storage.layout import LOG_DIR
from raft.storage.walscan import LiveLog, LiveRun, merge_scans
from snapshot.errors import SnapshotError
from snapshot.format import META_FILE as SNAPSHOT_META_FILE
from snapshot.format import decode_meta
from tools.audit.cluster import Unreadable, stop_if_unreadable
from tools.audit.discover import (
    HadoopFs,
    InputError,
    LocalFs,
    NodeInput,
    describe,
    find_data_dirs,
    join,
    name_nodes,
)
from tools.audit.epochs import BrokerEpochs, Election, check_epochs, find_epoch_files
from tools.audit.grouping import Config, Evidence, place
from tools.audit.matching import match_scans
from tools.audit.model import (
    CHECKS,
    EXIT_CORRUPT,
    EXIT_DIVERGENCE,
    EXIT_OK,
    FINDING_FIELDS,
    SCHEMA_VERSION,
    SEVERITIES,
    SPLIT_SECTIONS,
    Buckets,
    Finding,
)
from tools.audit.replay import ReplayPlan, replay_bucket
from tools.audit.tasks import (
    CHUNK,
    ChunkResult,
    ScanOut,
    SegmentTask,
    SnapshotOut,
    SnapshotTask,
    local_path,
    match_chunk,
    match_pieces,
    route_task,
    scan_local,
    scan_task,
    snapshot_group_task,
)

TOP = 100  # findings repeated in summary.json, for a reader without Parquet


@dataclass
class Options:
    paths: list[str]
    out: str
    run_id: str
    buckets: int | None = None
    fail_on: int = 1  # severity rank (model.SEVERITIES) from which findings fail the run
    plots: bool = True
    chunk: int = CHUNK  # indexes per log-matching chunk (tests use small ones to cross many chunk borders)
    broker_epochs: list[str] = field(default_factory=list)  # dirs of broker stores (epochs.find_epoch_files)


@dataclass
class Result:
    findings: list[dict[str, Any]]
    summary: dict[str, Any]
    exit_code: int
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.findings)

    def table(self) -> str:
        cols = ["check", "status", "findings", "worst", "first_index", "last_index", "why"]
        rows = [[str(r[c] if r[c] is not None else "-") for c in cols] for r in self.checks]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        line = "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()
        body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def _by_path(uri: str) -> str:
    """A file's path without scheme and authority: how a task is matched with what binaryFiles read (which
    writes file:///x as file:/x)."""
    parsed = urlparse(uri)
    return os.path.normpath(parsed.path) if parsed.scheme else os.path.abspath(uri)


def run(spark: Any, opts: Options, progress: Callable[[str], None] = lambda m: None) -> Result:
    from pyspark import StorageLevel

    t0 = time.monotonic()
    sc = spark.sparkContext
    fs: LocalFs | HadoopFs = LocalFs() if all("://" not in p for p in opts.paths) else HadoopFs(spark)
    dirs = find_data_dirs(fs, opts.paths)
    nodes = [describe(fs, k, d) for k, d in enumerate(dirs)]
    name_nodes(nodes)
    brokers: list[BrokerEpochs] = []
    if opts.broker_epochs:
        efs: LocalFs | HadoopFs = (
            fs if isinstance(fs, HadoopFs) or all("://" not in p for p in opts.broker_epochs) else HadoopFs(spark)
        )
        try:
            brokers = find_epoch_files(efs, opts.broker_epochs)
        except ValueError as e:
            raise InputError(str(e)) from None
    names = {n.nid: n.name for n in nodes}
    for n in nodes:
        held, pid = probe(n.uri) if local_path(n.uri) is not None else (False, None)
        if held:
            progress(
                f"warning: {n.uri} is held by a running node (pid {pid or '?'}); its files may change under "
                "the audit: audit a copy or a stopped node"
            )
    buckets = Buckets(opts.buckets or max(2, 2 * sc.defaultParallelism), max(1, sc.defaultParallelism // 2))
    findings: list[Finding] = []
    metas = _read_snapshot_metas(fs, nodes, findings)

    # --- stage 1: the snapshots and every segment, in one stage -------------------------------------------
    # One stage, its tasks in this order: the snapshots (one task per content, about a segment's work),
    # then the segments from the largest down, so that the short tasks come last and the cores end together.
    wanted_all = tuple(sorted({i for n in nodes for i in n.snapshots}))
    tasks = [
        SegmentTask(n.nid, pos, join(join(n.uri, LOG_DIR), s.name), s, n.listing.wal_first, wanted_all, opts.chunk)
        for n in nodes
        if n.listing is not None
        for pos, s in enumerate(n.listing.segments)
    ]
    snap_tasks = [SnapshotTask(n.nid, i, sdir, files) for n in nodes for i, (sdir, files) in n.snapshots.items()]
    progress(
        f"{len(nodes)} data dir(s), {len(tasks)} segment(s) ({_size(sum(t.listing.size for t in tasks))} "
        f"allocated), {len(snap_tasks)} snapshot(s); scanning and decoding"
    )
    b_buckets = sc.broadcast(buckets)
    scans = _scan_rdd(sc, tasks).persist(StorageLevel.MEMORY_AND_DISK)
    snap_groups = _snapshot_groups(snap_tasks, metas)
    snaps = _snapshot_rdd(sc, fs, snap_groups, b_buckets).persist(StorageLevel.MEMORY_AND_DISK)
    both = snaps.map(lambda x: x[0].light()).union(scans.map(lambda r: r.light())).collect()
    stop_if_unreadable(both)  # a local input the driver listed and an executor did not find: InputError
    snap_outs: list[SnapshotOut] = [x for x in both if isinstance(x, SnapshotOut)]
    light: list[ScanOut] = [x for x in both if isinstance(x, ScanOut)]
    by_node: dict[int, list[ScanOut]] = {}
    for r in sorted(light, key=lambda r: (r.nid, r.pos)):
        by_node.setdefault(r.nid, []).append(r)
    logs: dict[int, LiveLog] = {}
    for n in nodes:
        if n.listing_error is not None:
            path, off, reason = n.listing_error
            findings.append(Finding("?", n.name, "wal.crc", path=path, offset=off, detail=reason))
        if n.listing is None:
            continue
        outs = by_node.get(n.nid, [])
        logs[n.nid] = merge_scans(n.listing, [o.scan for o in outs])
    extent = {nid: sum(_extent(o) for o in outs) for nid, outs in by_node.items()}
    progress(f"log data: {_size(sum(extent.values()))} in {len(light)} segment(s) (the bytes holding entries)")
    groups = _groups(nodes, by_node, metas, findings)
    group_of = {n.nid: groups[n.nid] for n in nodes}
    for n in nodes:
        _wal_findings(n, group_of[n.nid], by_node.get(n.nid, []), logs.get(n.nid), findings)
    _identity_findings(nodes, group_of, findings)

    # --- stage 2: log matching across the nodes of each group, on the scans' chunk digests ------------------
    wanted: dict[str, list[int]] = {}
    for n in nodes:
        wanted.setdefault(group_of[n.nid], []).extend(n.snapshots)
    matched = match_scans(logs, by_node, group_of, wanted, opts.chunk)
    chunks = matched.results
    if matched.fallback:
        progress(f"log matching: {len(matched.fallback)} chunk(s) compared entry by entry on the executors")
        chunks += _match_fallback(sc, scans, logs, group_of, wanted, matched.fallback, opts.chunk)
    sources: dict[str, list[tuple[int, int, int]]] = {}
    routes: dict[str, list[tuple[int, int, int]]] = {}
    terms: dict[tuple[str, int], dict[int, int]] = {}
    first_div: dict[tuple[str, int], dict[str, Any]] = {}
    for c in chunks:
        sources.setdefault(c.group, []).extend(c.sources)
        routes.setdefault(c.group, []).extend(c.routes)
        for i, held_terms in c.terms.items():
            terms[(c.group, i)] = held_terms
        for d in c.divergent:
            key = (c.group, d["nid"])
            if key not in first_div or d["index"] < first_div[key]["index"]:
                first_div[key] = d
    for (group, nid), d in sorted(first_div.items()):
        what = "the same term with different bytes" if d["same_term"] else f"term {d['term']}"
        others = ", ".join(names[m] for m in d["others"])
        findings.append(
            Finding(
                group,
                names[nid],
                "log.matching",
                log_index=d["index"],
                first_divergent_index=d["index"],
                snapshot_value=str(d["term"]),
                replayed_value=str(d["canonical_term"]),
                detail=f"{names[nid]} holds {what} at index {d['index']} where {others} hold "
                f"term {d['canonical_term']}; its log diverges from there",
            )
        )
    for g in sources:
        sources[g] = _coalesce(sorted(sources[g]))
        routes[g] = _coalesce(sorted(routes[g]))

    # --- stage 3: the snapshots' checks; the bodies of the replays' starting points -------------------------
    bases = {g: _base_candidate(g, sources.get(g, []), metas, group_of) for g in set(group_of.values())}
    readable = {(s.nid, s.index): s for s in snap_outs if s.error is None}
    for s in snap_outs:
        if s.error is not None:
            path, off, reason = s.error
            findings.append(
                Finding(
                    group_of[s.nid],
                    names[s.nid],
                    "snapshot.readable",
                    path=path,
                    snapshot_index=s.index,
                    offset=off,
                    detail=reason,
                )
            )
    _snapshot_checks(nodes, names, group_of, readable, terms, logs, by_node, findings)
    starts = {k for k in readable if bases.get(group_of[k[0]]) == k[1] and k[1] > 0}
    if starts:
        for k, bodies in (
            snaps.filter(lambda x: (x[0].nid, x[0].index) in starts)
            .map(lambda x: ((x[0].nid, x[0].index), x[0].bodies))
            .collect()
        ):
            readable[k].bodies = bodies

    # --- stage 4: route the canonical log to buckets and replay ---------------------------------------------
    plans: dict[str, ReplayPlan] = {}
    run_starts = {nid: [r.lo for r in live.runs] for nid, live in logs.items()}  # ascending, as merge_scans cuts
    route: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
    unverified: list[dict[str, Any]] = []
    for g in sorted(set(group_of.values())):
        plan = _plan(g, sources.get(g, []), bases.get(g), readable, group_of, names)
        plans[g] = plan
        for nid, index in sorted(readable):
            if group_of[nid] == g and not plan.base_index < index <= plan.end:
                if plan.base_index < 0:
                    why = "the log does not start at 1 and no readable snapshot is where it continues from"
                elif index == plan.base_index:
                    why = "it is the replay's starting point"
                else:
                    why = "the log before it is compacted" if index < plan.base_index else "the log does not reach it"
                unverified.append({"group": g, "node": names[nid], "index": index, "why": why})
        for lo, hi, nid in routes.get(g, []):
            lo, hi = max(lo, plan.base_index + 1), min(hi, plan.end)
            live_runs = logs[nid].runs
            for live_run in live_runs[max(0, bisect_right(run_starts[nid], lo) - 1) :]:
                if live_run.lo > hi:
                    break
                a, z = max(lo, live_run.lo), min(hi, live_run.hi)
                if a <= z:
                    piece = (live_run.batch, live_run.skip + a - live_run.lo, a, z)
                    route.setdefault((nid, live_run.seg), []).append(piece)
    progress(f"replaying into {buckets.count} bucket(s) per group")
    b_route, b_plans = sc.broadcast(route), sc.broadcast(plans)
    keyed_group = sc.broadcast(group_of)
    remote_uris = [o.uri for o in light if local_path(o.uri) is None and (o.nid, o.pos) in route]
    routed = _route_rdd(sc, scans, b_route, b_buckets, keyed_group, remote_uris)
    # A decoded snapshot's slices go to the buckets of every group holding a copy of it (plan.aliases).
    slice_groups: dict[tuple[int, int], set[str]] = {}
    for k, snap_out in readable.items():
        slice_groups.setdefault(snap_out.same_as or k, set()).add(group_of[k[0]])
    b_slice_groups = sc.broadcast({k: sorted(v) for k, v in slice_groups.items()})
    slices = snaps.flatMap(  # a few tasks for all the snapshots: each is a small copy out of the cache
        lambda x: [
            ((g, b), (x[0].nid, x[0].index, v))
            for g in b_slice_groups.value.get((x[0].nid, x[0].index), ())
            for b, v in x[1].items()
        ]
    ).coalesce(max(1, min(len(snap_groups), sc.defaultParallelism)))
    keys = [(g, b) for g in sorted(plans) for b in range(buckets.count)]
    b_part = sc.broadcast({k: p for p, k in enumerate(keys)})
    replays = (  # one partition per (group, bucket): no Python-side grouping of the big blobs
        routed.mapValues(lambda piece: ("log", piece))
        .union(slices.mapValues(lambda s: ("snapshot", s)))
        .partitionBy(len(keys), lambda k: b_part.value[k])
        .mapPartitionsWithIndex(lambda p, items: _replay_partition(keys[p], items, b_plans.value, b_buckets.value))
        .collect()
    )
    rows = [f.row() for f in findings] + [row for _, r in replays for row in r.findings]
    applied = sum(r.applied for _, r in replays)
    if opts.broker_epochs:
        elections: dict[str, list[tuple[str, Election]]] = {}
        for g, r in replays:
            for set_name, got in r.elections.items():
                elections.setdefault(set_name, []).extend((g, e) for e in got)
        for got in elections.values():
            got.sort(key=lambda ge: ge[1][3])
        complete = {g: p.base_index == 0 for g, p in plans.items()}
        rows += [f.row() for f in check_epochs(brokers, elections, complete)]
    scans.unpersist()
    snaps.unpersist()

    # --- outputs --------------------------------------------------------------------------------------------
    elapsed = time.monotonic() - t0
    stats = {
        "nodes": [
            {
                "group": group_of[n.nid],
                "node": n.name,
                "dataDir": n.uri,
                "firstIndex": logs[n.nid].first if n.nid in logs else None,
                "lastIndex": logs[n.nid].last if n.nid in logs else None,
                "entries": logs[n.nid].indexes() if n.nid in logs else 0,
                "segments": len(by_node.get(n.nid, [])),
                "logDataBytes": extent.get(n.nid, 0),
                "logAllocatedBytes": sum(o.scan.size for o in by_node.get(n.nid, [])),
                "snapshots": sorted(n.snapshots),
                "quarantinedSnapshots": n.quarantined,
            }
            for n in nodes
        ],
        "groups": {
            g: {
                "baseIndex": p.base_index,
                "replayedTo": p.end,
                "snapshotPoints": [i for i, _ in p.points if p.base_index < i <= p.end],
            }
            for g, p in plans.items()
        },
        "entriesScanned": sum(s.count for o in light for s in o.scan.spans),
        "logDataBytes": sum(extent.values()),
        "logAllocatedBytes": sum(o.scan.size for o in light),
        "commandsApplied": applied,
        "snapshotsNotReplayVerified": unverified,
        "sectionsNotReplayAudited": sorted({n for s in readable.values() for n in s.sections} - SPLIT_SECTIONS),
        "brokerEpochFiles": [
            {"path": b.path, "broker": b.label, "entries": [[e.epoch, e.start_offset] for e in b.entries]}
            for b in brokers
        ],
        "buckets": {"sets": buckets.sets, "kv": buckets.kv, "config": 1},
        "seconds": round(elapsed, 3),
    }
    skipped = _skipped(nodes, logs, group_of, snap_tasks, readable, plans, applied, len(light))
    if not opts.broker_epochs:
        skipped["broker.epoch"] = skipped["broker.epoch_file"] = "no --broker-epochs given"
    return _finish(spark, opts, rows, stats, skipped, nodes, by_node, logs, names, progress)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _extent(o: ScanOut) -> int:
    """A segment's data extent: the bytes from its start to the end of its last batch, torn bytes after it
    included; not the file's size, which a preallocated segment reaches with zeros (docs/audit.md, Sizes)."""
    return o.scan.valid_end + o.scan.torn_bytes if o.scan.spans or o.scan.torn_bytes else 0


def _skipped(
    nodes: list[NodeInput],
    logs: dict[int, LiveLog],
    group_of: dict[int, str],
    snap_tasks: list[SnapshotTask],
    readable: dict[tuple[int, int], Any],
    plans: dict[str, ReplayPlan],
    applied: int,
    segments: int,
) -> dict[str, str]:
    """The checks that had nothing to check, and why: reported `skipped`, never `ok`."""
    out: dict[str, str] = {}
    if not segments:
        for check in ("wal.crc", "wal.continuity", "wal.torn_tail"):
            out[check] = "no WAL segment in any data dir"
    holders: dict[str, int] = {}
    for nid, live in logs.items():
        if live.runs:
            holders[group_of[nid]] = holders.get(group_of[nid], 0) + 1
    if not any(k >= 2 for k in holders.values()):
        out["log.matching"] = "no group has two nodes with log entries to compare"
    if not snap_tasks:
        out["snapshot.readable"] = "no snapshot in any data dir"
        out["snapshot.replay"] = "no snapshot in any data dir"
        out["snapshot.digest"] = "no snapshot in any data dir"
        if all(live.first <= 1 for live in logs.values()):
            out["snapshot.meta"] = "no snapshot in any data dir, and every log starts at index 1"
    else:
        if not any(p.base_index < i <= p.end for p in plans.values() for i, _ in p.points):
            out["snapshot.replay"] = "no readable snapshot lies in a replayed range (snapshotsNotReplayVerified)"
        at: dict[tuple[str, int], int] = {}
        for nid, i in readable:
            at[(group_of[nid], i)] = at.get((group_of[nid], i), 0) + 1
        if not any(k >= 2 for k in at.values()):
            out["snapshot.digest"] = "no index at which two nodes of a group hold a readable snapshot"
    if not applied:
        for check in CHECKS:
            if check.startswith("invariant."):
                out[check] = "no state machine command was replayed"
    return out


def _replay_partition(key: tuple[str, int], items: Any, plans: dict[str, ReplayPlan], buckets: Buckets) -> Any:
    """The partition of (group, bucket) `key`: the partitioner gives each key a partition of its own, which
    runs even when nothing was routed to it (its snapshots are still compared)."""
    pieces: list[Any] = []
    slices: list[Any] = []
    for _, (kind, value) in items:
        (pieces if kind == "log" else slices).append(value)
    yield key[0], replay_bucket(key[1], pieces, slices, plans[key[0]], buckets)


# --- stage helpers -----------------------------------------------------------------------------------------


def _scan_rdd(sc: Any, tasks: list[SegmentTask]) -> Any:
    """One partition per local segment, the largest first (the later stages over the cache keep the order):
    the last tasks of each stage are the short ones, so the cores finish together."""
    local = sorted((t for t in tasks if local_path(t.uri) is not None), key=lambda t: -t.listing.size)
    remote = {_by_path(t.uri): t for t in tasks if local_path(t.uri) is None}
    rdd = sc.parallelize(local, max(1, len(local))).map(scan_local)
    if remote:
        b = sc.broadcast(remote)
        paths = ",".join(t.uri for t in remote.values())
        rdd = rdd.union(sc.binaryFiles(paths).map(lambda kv: scan_task(b.value[_by_path(kv[0])], kv[1])))
    return rdd


def _match_fallback(
    sc: Any,
    scans: Any,
    logs: dict[int, LiveLog],
    group_of: dict[int, str],
    wanted: dict[str, list[int]],
    keys: set[tuple[str, int]],
    size: int,
) -> list[ChunkResult]:
    """The chunks the scans' digests do not settle, entry by entry: the live (term, CRC) arrays of every
    node, cut by match_pieces over the cached scans and shuffled to one task per chunk."""
    runs: dict[tuple[int, int], list[LiveRun]] = {}
    for nid, live in logs.items():
        for live_run in live.runs:
            runs.setdefault((nid, live_run.seg), []).append(live_run)
    b_runs, b_group, b_wanted = sc.broadcast(runs), sc.broadcast(group_of), sc.broadcast(wanted)
    only = frozenset(keys)
    return (
        scans.flatMap(lambda r: match_pieces(r, b_runs.value, b_group.value, size, only))
        .groupByKey()
        .map(lambda kv: match_chunk(kv[0], kv[1], b_wanted.value, size))
        .collect()
    )


def _route_rdd(sc: Any, scans: Any, b_route: Any, b_buckets: Any, b_group: Any, uris: list[str]) -> Any:
    """`uris`: the remote segments that are a canonical source (known on the driver: no pass over the cache)."""

    def keyed(pairs: Any, nid: int) -> Any:
        g = b_group.value[nid]
        return (((g, b), piece) for b, piece in pairs)

    local = scans.filter(lambda r: local_path(r.uri) is not None)
    rdd = local.flatMap(lambda r: keyed(route_task(r, b_route.value, b_buckets.value), r.nid))
    if uris:
        remote = scans.filter(lambda r: local_path(r.uri) is None and (r.nid, r.pos) in b_route.value)
        data = sc.binaryFiles(",".join(uris)).map(lambda kv: (_by_path(kv[0]), kv[1]))
        joined = remote.keyBy(lambda r: _by_path(r.uri)).join(data)
        rdd = rdd.union(
            joined.flatMap(
                lambda kv: keyed(route_task(kv[1][0], b_route.value, b_buckets.value, kv[1][1]), kv[1][0].nid)
            )
        )
    return rdd


def _snapshot_groups(tasks: list[SnapshotTask], metas: dict[tuple[int, int], Any]) -> list[list[SnapshotTask]]:
    """The snapshots by content as their metas tell it (index and every file's name, size and CRC): the
    nodes' copies of one snapshot go to one task, which decodes them once (snapshot_group_task)."""
    groups: dict[Any, list[SnapshotTask]] = {}
    for t in sorted(tasks, key=lambda t: (t.index, t.nid)):
        meta = metas.get((t.nid, t.index))
        key = (t.index, tuple(sorted((f.name, f.size, f.crc32c) for f in meta.files))) if meta else (t.index, t.uri)
        groups.setdefault(key, []).append(t)
    return list(groups.values())


def _snapshot_rdd(sc: Any, fs: LocalFs | HadoopFs, groups: list[list[SnapshotTask]], b_buckets: Any) -> Any:
    local = [g for g in groups if all(local_path(t.uri) is not None for t in g)]
    remote = [g for g in groups if any(local_path(t.uri) is None for t in g)]
    rdd = sc.parallelize(local, max(1, len(local))).flatMap(lambda g: snapshot_group_task(g, b_buckets.value))
    if remote:
        # Hadoop's input formats skip names starting with "_" or "." (the meta is __raft_snapshot_meta):
        # those small files are read here and shipped with the task, the rest by the executors.
        tasks = [t for g in remote for t in g]
        by_dir = {_by_path(t.uri): (k, t) for k, g in enumerate(remote) for t in g}
        b = sc.broadcast(by_dir)
        hidden = [(_by_path(t.uri), (f, fs.read(join(t.uri, f)))) for t in tasks for f in t.files if f[0] in "_."]
        files = sc.parallelize(hidden, max(1, min(len(hidden), sc.defaultParallelism)))
        shown = [join(t.uri, f) for t in tasks for f in t.files if f[0] not in "_."]
        if shown:
            files = files.union(
                sc.binaryFiles(",".join(shown)).map(
                    lambda kv: (os.path.dirname(_by_path(kv[0])), (os.path.basename(_by_path(kv[0])), kv[1]))
                )
            )

        def group_task(members: Any) -> list[tuple[SnapshotOut | Unreadable, dict[int, bytes]]]:
            ordered = sorted(members, key=lambda m: (m[0].index, m[0].nid))
            return snapshot_group_task([t for t, _ in ordered], b_buckets.value, [f for _, f in ordered])

        rdd = rdd.union(
            files.groupByKey()
            .map(lambda kv: (b.value[kv[0]][0], (b.value[kv[0]][1], dict(kv[1]))))
            .groupByKey()
            .flatMap(lambda kv: group_task(kv[1]))
        )
    return rdd


def _read_snapshot_metas(
    fs: LocalFs | HadoopFs, nodes: list[NodeInput], findings: list[Finding]
) -> dict[tuple[int, int], Any]:
    """Every snapshot's meta (small), read on the driver: configurations for grouping, terms for planning.
    An unreadable meta is reported by the snapshot stage, which reads everything again."""
    out = {}
    for n in nodes:
        for index, (sdir, files) in n.snapshots.items():
            if SNAPSHOT_META_FILE not in files:
                continue
            try:
                out[(n.nid, index)] = decode_meta(
                    fs.read(join(sdir, SNAPSHOT_META_FILE)), join(sdir, SNAPSHOT_META_FILE)
                )
            except SnapshotError:
                continue
    return out


def _groups(
    nodes: list[NodeInput],
    by_node: dict[int, list[ScanOut]],
    metas: dict[tuple[int, int], Any],
    findings: list[Finding],
) -> dict[int, str]:
    """Group identity from the data (tools/audit/grouping.py): configurations shared, IDENTITY's group id
    where no configuration contradicts it; a node that cannot be placed is a `group.unplaced` finding."""
    evidence = []
    for n in nodes:
        configs: list[tuple[int, Config]] = [
            (idx, (tuple(sorted(v)), tuple(sorted(lr)))) for o in by_node.get(n.nid, []) for idx, _, v, lr in o.confs
        ]
        configs += [
            (i, (tuple(sorted(m.voters)), tuple(sorted(m.learners)))) for (nid, i), m in metas.items() if nid == n.nid
        ]
        init = n.init_conf
        if init is not None:
            configs.append((0, (tuple(sorted(init.voters)), ())))
        node_id = n.identity.node if n.identity is not None else init.node if init is not None else None
        group_id = n.identity.group if n.identity is not None else init.group if init is not None else None
        evidence.append(Evidence(n.nid, n.name, node_id, group_id, configs))
    placed = place(evidence)
    for n in nodes:
        why = placed.unplaced.get(n.nid)
        if why is not None:
            findings.append(
                Finding(placed.group_of[n.nid], n.name, "group.unplaced", severity="warning", path=n.uri, detail=why)
            )
    return placed.group_of


def _identity_findings(nodes: list[NodeInput], group_of: dict[int, str], findings: list[Finding]) -> None:
    for n in nodes:
        g = group_of[n.nid]
        if n.identity_error is not None:
            path, off, reason = n.identity_error
            findings.append(Finding(g, n.name, "identity.readable", path=path, offset=off, detail=reason))
        elif n.identity is None:
            findings.append(
                Finding(
                    g,
                    n.name,
                    "identity.missing",
                    severity="warning",
                    path=n.uri,
                    detail="no IDENTITY file (a copy from before nodes wrote one): the node is "
                    "labelled by its directory name",
                )
            )
        elif not (g == n.identity.group or g.startswith(n.identity.group + "[")):
            findings.append(
                Finding(
                    g,
                    n.name,
                    "identity.conflict",
                    path=join(n.uri, IDENTITY_FILE),
                    snapshot_value=json.dumps(n.identity.group),
                    replayed_value=json.dumps(g),
                    detail=f"IDENTITY names group {n.identity.group!r}, but the node shares its "
                    f"configurations with group {g!r}",
                )
            )


def _wal_findings(n: NodeInput, group: str, outs: list[ScanOut], live: LiveLog | None, findings: list[Finding]) -> None:
    for o in outs:
        s = o.scan
        if s.damage is not None:
            d = s.damage
            findings.append(
                Finding(
                    group,
                    n.name,
                    "wal.crc",
                    path=d.path,
                    offset=d.offset,
                    log_index=d.index,
                    detail=f"{d.reason}; bytes from offset {d.offset} to {s.size} unreadable",
                )
            )
        if s.torn_bytes:
            last = s.spans[-1].first_index + s.spans[-1].count - 1 if s.spans else None
            findings.append(
                Finding(
                    group,
                    n.name,
                    "wal.torn_tail",
                    severity="info",
                    path=s.path,
                    offset=s.valid_end,
                    log_index=last,
                    detail=f"{s.torn_bytes} bytes after the last commit frame (a torn write; a node start cuts them)",
                )
            )
    if live is None:
        return
    for gap in live.gaps:
        if not gap.after_damage:
            findings.append(
                Finding(
                    group,
                    n.name,
                    "wal.continuity",
                    path=gap.path,
                    offset=gap.offset,
                    log_index=gap.lo,
                    detail=f"entries {gap.lo}..{gap.hi} are missing",
                )
            )
    for d in live.overlaps:
        findings.append(
            Finding(group, n.name, "wal.continuity", path=d.path, offset=d.offset, log_index=d.index, detail=d.reason)
        )


def _coalesce(runs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for lo, hi, nid in runs:
        if out and out[-1][2] == nid and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, nid)
        else:
            out.append((lo, hi, nid))
    return out


def _base_candidate(
    group: str, sources: list[tuple[int, int, int]], metas: dict[tuple[int, int], Any], group_of: dict[int, str]
) -> int:
    """0 when the group's log starts at 1; else the lowest snapshot index the log continues from."""
    start = sources[0][0] if sources else None
    if start is not None and start <= 1:
        return 0
    indexes = sorted(i for (nid, i) in metas if group_of[nid] == group and (start is None or i >= start - 1))
    return indexes[0] if indexes else -1


def _plan(
    group: str,
    sources: list[tuple[int, int, int]],
    base: int | None,
    readable: dict[tuple[int, int], Any],
    group_of: dict[int, str],
    names: dict[int, str],
) -> ReplayPlan:
    base_bodies = None
    base_index = base if base is not None else -1
    if base_index > 0:
        holders = [s for (nid, i), s in sorted(readable.items()) if i == base_index and group_of[nid] == group]
        base_bodies = holders[0].bodies if holders else None
        if base_bodies is None:
            base_index = -1
    end = base_index
    if base_index >= 0:
        for lo, hi, _ in sources:
            if lo > end + 1:
                break
            end = max(end, hi)
    points: dict[int, list[int]] = {}
    for nid, i in sorted(readable):
        if group_of[nid] == group:
            points.setdefault(i, []).append(nid)
    aliases = {k: s.same_as for k, s in readable.items() if group_of[k[0]] == group and s.same_as is not None}
    return ReplayPlan(group, base_index, base_bodies, end, sorted(points.items()), names, sources, aliases)


def _snapshot_checks(
    nodes: list[NodeInput],
    names: dict[int, str],
    group_of: dict[int, str],
    readable: dict[tuple[int, int], Any],
    terms: dict[tuple[str, int], dict[int, int]],
    logs: dict[int, LiveLog],
    by_node: dict[int, list[ScanOut]],
    findings: list[Finding],
) -> None:
    # Configurations in force, per group: CONF entries of the logs (by index).
    confs: dict[str, dict[int, tuple[tuple[str, ...], tuple[str, ...]]]] = {}
    for nid, outs in by_node.items():
        for o in outs:
            for idx, _, voters, learners in o.confs:
                confs.setdefault(group_of[nid], {})[idx] = (tuple(sorted(voters)), tuple(sorted(learners)))
    for (nid, index), s in sorted(readable.items()):
        g, name = group_of[nid], names[nid]
        held = terms.get((g, index), {})
        log_term = held.get(nid)
        basis = name
        if log_term is None and held:
            counts: dict[int, int] = {}
            for t in held.values():
                counts[t] = counts.get(t, 0) + 1
            log_term = max(counts, key=lambda t: (counts[t], t))
            basis = ", ".join(names[m] for m in sorted(held) if held[m] == log_term)
        about = partial(Finding, g, name, "snapshot.meta", path=s.uri, snapshot_index=index, snapshot_term=s.term)
        if log_term is not None and log_term != s.term:
            findings.append(
                about(
                    log_index=index,
                    field="lastIncludedTerm",
                    snapshot_value=str(s.term),
                    replayed_value=str(log_term),
                    detail=f"the meta says term {s.term}, the log of {basis} has term {log_term} at index {index}",
                )
            )
        known = [i for i in confs.get(g, {}) if i <= index]
        if known:
            voters, learners = confs[g][max(known)]
            mine = (tuple(sorted(s.voters)), tuple(sorted(s.learners)))
            if mine != (voters, learners):
                findings.append(
                    about(
                        log_index=max(known),
                        field="voters/learners",
                        snapshot_value=json.dumps(mine),
                        replayed_value=json.dumps((voters, learners)),
                        detail=f"the meta's configuration differs from the CONF entry at index {max(known)}",
                    )
                )
    for n in nodes:
        live = logs.get(n.nid)
        if live is None or live.first <= 1 or not live.runs:
            continue
        covered = [i for (nid, i) in readable if nid == n.nid and i >= live.first - 1]
        if not covered:
            findings.append(
                Finding(
                    group_of[n.nid],
                    n.name,
                    "snapshot.meta",
                    log_index=live.first,
                    detail=f"the log starts at {live.first} but no readable snapshot covers "
                    f"1..{live.first - 1}: this node cannot rebuild its state",
                )
            )
    # Section digests across nodes at equal indexes.
    at: dict[tuple[str, int], list[Any]] = {}
    for (nid, index), s in readable.items():
        at.setdefault((group_of[nid], index), []).append(s)
    for (g, index), snaps in sorted(at.items()):
        if len(snaps) < 2:
            continue
        for section in sorted({k for s in snaps for k in s.digests}):
            holders_of: dict[int | None, list[Any]] = {}
            for s in snaps:
                holders_of.setdefault(s.digests.get(section), []).append(s)
            if len(holders_of) < 2:
                continue
            major = max(holders_of, key=lambda d: (len(holders_of[d]), d is not None, d or 0))
            for d, holders in holders_of.items():
                if d == major:
                    continue
                for s in holders:
                    others = ", ".join(names[o.nid] for o in holders_of[major])
                    findings.append(
                        Finding(
                            g,
                            names[s.nid],
                            "snapshot.digest",
                            path=s.uri,
                            snapshot_index=index,
                            snapshot_term=s.term,
                            section=section,
                            snapshot_value=None if d is None else f"{d:#010x}",
                            replayed_value=None if major is None else f"{major:#010x}",
                            detail=f"section {section} of snapshot {index} differs from {others}'s",
                        )
                    )


# --- outputs -----------------------------------------------------------------------------------------------


def _finish(
    spark: Any,
    opts: Options,
    rows: list[dict[str, Any]],
    stats: dict[str, Any],
    skipped: dict[str, str],
    nodes: list[NodeInput],
    by_node: dict[int, list[ScanOut]],
    logs: dict[int, LiveLog],
    names: dict[int, str],
    progress: Callable[[str], None],
) -> Result:
    from pyspark.sql import types as T

    run_date = dt.datetime.now(dt.UTC).date().isoformat()
    rows.sort(
        key=lambda r: (
            r["group"],
            r["node"],
            r["check"],
            r["log_index"] or -1,
            r["section"] or "",
            r["entity"] or "",
            r["field"] or "",
        )
    )
    for r in rows:
        r.update(run_id=opts.run_id, run_date=run_date, schema_version=SCHEMA_VERSION)
    checks = []
    for check in CHECKS:
        mine = [r for r in rows if r["check"] == check]
        idx = [r["log_index"] for r in mine if r["log_index"] is not None]
        worst = max((r["severity"] for r in mine), key=SEVERITIES.index, default=None)
        fails = CHECKS[check][1] and SEVERITIES.index(worst) >= opts.fail_on if mine else False
        status = ("skipped" if check in skipped else "ok") if not mine else "fail" if fails else "note"
        checks.append(
            {
                "check": check,
                "status": status,
                "why": skipped.get(check) if status == "skipped" else None,
                "findings": len(mine),
                "worst": worst,
                "first_index": min(idx) if idx else None,
                "last_index": max(idx) if idx else None,
            }
        )
    failing = [r for r in rows if SEVERITIES.index(r["severity"]) >= opts.fail_on and CHECKS[r["check"]][1]]
    code = EXIT_CORRUPT if any(CHECKS[r["check"]][1] == 3 for r in failing) else EXIT_DIVERGENCE if failing else EXIT_OK
    summary = {
        "schemaVersion": SCHEMA_VERSION,
        "runId": opts.run_id,
        "runDate": run_date,
        "exitCode": code,
        "findings": len(rows),
        "checks": checks,
        **stats,
        "out": opts.out,
        "topFindings": [{k: v for k, v in r.items() if v is not None} for r in rows[:TOP]],
    }

    str_, long_ = T.StringType(), T.LongType()
    longs = {"snapshot_index", "snapshot_term", "log_index", "first_divergent_index", "offset"}
    schema = T.StructType(
        [T.StructField("run_id", str_, False), T.StructField("schema_version", T.IntegerType(), False)]
        + [
            T.StructField(f, long_ if f in longs else str_, f not in ("group", "node", "check", "severity"))
            for f in FINDING_FIELDS
        ]
        + [T.StructField("run_date", str_, False)]
    )
    csch = T.StructType(
        [
            T.StructField("run_id", str_),
            T.StructField("check", str_),
            T.StructField("status", str_),
            T.StructField("findings", long_),
            T.StructField("worst", str_),
            T.StructField("first_index", long_),
            T.StructField("last_index", long_),
            T.StructField("why", str_),
        ]
    )
    check_rows = [
        (opts.run_id, c["check"], c["status"], c["findings"], c["worst"], c["first_index"], c["last_index"], c["why"])
        for c in checks
    ]
    with ThreadPoolExecutor(2) as pool:  # the two writes are two jobs: run at once, the plots meanwhile
        writes = [
            pool.submit(_write_findings, spark, rows, schema, join(opts.out, "findings")),
            pool.submit(
                lambda: spark.createDataFrame(check_rows, csch)
                .coalesce(1)
                .write.mode("overwrite")
                .parquet(join(opts.out, "summary"))
            ),
        ]
        files = {"summary.json": json.dumps(summary, indent=2, sort_keys=True, default=str).encode()}
        if opts.plots:
            from tools.audit.plots import plot_findings, plot_growth

            files["plots/log_growth.png"] = plot_growth(nodes, by_node, logs, names)
            files["plots/findings_by_check.png"] = plot_findings(checks)
        for w in writes:
            w.result()
    files["_SUCCESS"] = b""
    _write_files(spark, opts.out, files)
    progress(f"done in {stats['seconds']:.1f}s: {len(rows)} finding(s), exit {code}")
    return Result(rows, summary, code, checks)


def _write_findings(spark: Any, rows: list[dict[str, Any]], schema: Any, path: str) -> None:
    """findings/, partitioned by run_date and check: one task per check writes its directory's file, the
    rows in their sorted order (several writers at once instead of one for the whole table)."""
    by_check: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_check.setdefault(r["check"], []).append(tuple(r[f.name] for f in schema.fields))
    parts = list(by_check.values())
    if parts:  # parallelize puts one list in each slice: a partition holds exactly one check's rows
        data = spark.sparkContext.parallelize(parts, len(parts)).flatMap(lambda part: part)
        df = spark.createDataFrame(data, schema)
    else:
        df = spark.createDataFrame([], schema).coalesce(1)
    df.write.mode("overwrite").partitionBy("run_date", "check").parquet(path)


def _write_files(spark: Any, out: str, files: dict[str, bytes]) -> None:
    local = local_path(out)
    if local is not None:
        for name, data in files.items():
            path = os.path.join(local, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "wb") as f:
                f.write(data)
            os.replace(path + ".tmp", path)
        return
    import tempfile

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            src = os.path.join(tmp, name.replace("/", "_"))
            with open(src, "wb") as f:
                f.write(data)
            dst = jvm.org.apache.hadoop.fs.Path(join(out, name))
            dst.getFileSystem(conf).copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(src), dst)

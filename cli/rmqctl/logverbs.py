"""Offline log verbs: `rmqctl log info|dump|replay`, on a data dir (or its log/ dir) without a running node.

The log is read with walread.LogView (the WAL's recovery rules, read-only). Entries past the commit index
may be in the log: the commit index is not persisted, so an offline tool cannot tell them apart. `replay`
therefore replays what the log holds, which a restarting node would also do once it learns they commit.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import click

from cli.datadir import probe
from cli.rmqctl import BadUsage, Failed
from cli.rmqctl.offline import copy_option, path_argument
from cli.rmqctl.output import Block, Out, emit_document, emit_rows, iso_millis, output_options, pass_out, progress
from cli.rmqctl.state import state_blocks
from cli.rmqctl.store import Source, open_source
from cli.rmqctl.store import storage as snapshot_storage
from cli.rmqctl.walread import LogView
from raft.core.confchange import decode_conf
from raft.core.messages import Entry, EntryType
from raft.storage.layout import DOWNLOAD_DIR, LOG_DIR, META_DIR, SNAPSHOT_DIR
from raft.storage.meta import read_hard_state
from snapshot.errors import SnapshotExistsError, SnapshotFormatError
from snapshot.storage import FileSnapshotStorage
from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine.commands import CommandError, decode
from statemachine.inspection import decode_sections
from statemachine.sections import SECTION_NAMES
from statemachine.values import JSONObject

ALL_PARTS = (LOG_DIR, META_DIR, SNAPSHOT_DIR)


@click.group("log")
def log() -> None:
    """Offline: describe, dump and replay the Raft log (no running node needed)."""


def _view(out: Out, src: Source) -> LogView:
    if src.kind not in ("datadir", "logdir"):
        raise BadUsage(f"{src.given}: expected a data dir or its log/ dir")
    directory = src.log_dir()
    with progress(out, "reading the log", LogView.total_bytes(directory)) as advance:
        return LogView(directory, advance)


def describe(e: Entry) -> JSONObject:
    """One entry as a dump row: type, command code and name, time, decoded fields."""
    row: JSONObject = {
        "index": e.index,
        "term": e.term,
        "type": _type_name(e.type),
        "code": None,
        "name": None,
        "time": None,
        "timeMillis": None,
        "fields": {},
    }
    if e.type == EntryType.NORMAL:
        try:
            cmd = decode(e.data)
        except CommandError as err:  # the CRC held, so these are the bytes the leader wrote; apply answers 2015
            row |= {"name": "INVALID", "fields": {"error": str(err), "bytes": len(e.data)}}
            return row
        row |= {
            "code": cmd.code,
            "name": cmd.name,
            "time": iso_millis(cmd.time_millis),
            "timeMillis": cmd.time_millis,
            "fields": cmd.fields,
        }
    elif e.type == EntryType.CONF:
        try:
            conf = decode_conf(e.data)
            row["fields"] = {"voters": list(conf.voters), "learners": list(conf.learners)}
            if conf.addresses:  # members added at run time: where the log says each one is reached
                row["fields"]["addresses"] = {
                    m: {"raft": raft, "http": http, "remoting": remoting} for m, raft, http, remoting in conf.addresses
                }
        except (ValueError, TypeError) as err:
            row["fields"] = {"error": str(err)}
    return row


def _type_name(t: int) -> str:
    try:
        return EntryType(t).name
    except ValueError:
        return str(t)


@log.command("info")
@path_argument
@copy_option
@output_options
@pass_out
def info(out: Out, path: str, copy: bool) -> None:
    """Index and term range, segment files, entries and bytes per command code, term and vote, snapshots."""
    with open_source(path, copy=copy, parts=ALL_PARTS) as src:
        view = _view(out, src)
        meta_file = src.meta_file()
        hs = read_hard_state(meta_file) if meta_file is not None else None
        per_code: Counter[tuple[int | None, str]] = Counter()
        data_bytes: Counter[tuple[int | None, str]] = Counter()
        with progress(out, "decoding entries", len(view)) as advance:
            for e in view.entries(view.first_index(), view.last_index()):
                row = describe(e)
                key = (row["code"], row["name"] or row["type"])
                per_code[key] += 1
                data_bytes[key] += len(e.data)
                advance(1)
        snapshots, quarantined = _snapshot_rows(src)
        empty = len(view) == 0
        doc = {
            "path": src.show(src.given),
            "firstIndex": view.first_index(),
            "lastIndex": view.last_index(),
            "entries": len(view),
            "firstTerm": None if empty else view.term(view.first_index()),
            "lastTerm": None if empty else view.term(view.last_index()),
            "entryBytes": view.frame_bytes(),
            "segmentBytes": sum(s.size for s in view.segments),
            "walFirstIndex": view.wal_first,
            "tornBytes": sum(s.torn_bytes for s in view.segments),
            "raftTerm": hs.term if hs else 0,
            "raftVote": hs.vote if hs else "",
            "raftMeta": "present" if hs else "absent",
            "quarantinedSnapshots": quarantined,
            "downloadInProgress": _downloads(src),
        }
        segments = [s.row(src.show) for s in view.segments]
    codes = [
        {"code": c, "name": n, "entries": per_code[(c, n)], "bytes": data_bytes[(c, n)]}
        for c, n in sorted(per_code, key=lambda k: (k[0] is not None, k[0] or 0, k[1]))
    ]
    blocks = [
        Block("segments", segments),
        Block("codes", codes, ["code", "name", "entries", "bytes"]),
        Block("snapshots", snapshots, ["index", "term", "bytes", "status"]),
    ]
    emit_document(out, doc, blocks, title="log")


def _snapshot_rows(src: Source) -> tuple[list[JSONObject], list[str]]:
    root = src.snapshot_root()
    if root is None or not root.is_dir():
        return [], []
    st = snapshot_storage(root)
    rows = []
    for i in st.list():
        try:  # only the meta: `snapshot verify` is the check, `log info` describes
            m = st.read_meta(i)
            rows.append(
                {"index": i, "term": m.last_included_term, "bytes": sum(f.size for f in m.files), "status": "ok"}
            )
        except SnapshotFormatError as e:
            rows.append({"index": i, "term": None, "bytes": None, "status": f"unreadable meta: {e.reason}"})
    return rows, [p.name for p in st.quarantined()]


def _downloads(src: Source) -> list[str]:
    d = src.data_dir / DOWNLOAD_DIR if src.data_dir is not None else None
    return sorted(p.name for p in d.iterdir()) if d is not None and d.is_dir() else []


def _parse_code(value: str) -> int:
    """A request code as a number, RocketMQ's name (CONTROLLER_ELECT_MASTER) or ours (ELECT_MASTER)."""
    if value.isdigit() and int(value) in C.REQUEST_NAMES:
        return int(value)
    wanted = value.upper()
    for code, name in C.REQUEST_NAMES.items():
        if wanted == name:
            return code
    named = getattr(C, wanted, None)
    if isinstance(named, int) and named in C.REQUEST_NAMES:
        return named
    raise click.BadParameter(f"unknown command code {value!r}; known: {', '.join(map(str, sorted(C.REQUEST_NAMES)))}")


def _range(view: LogView, lo: int | None, hi: int | None) -> tuple[int, int]:
    first, last = view.first_index(), view.last_index()
    lo = first if lo is None else lo
    hi = last if hi is None else hi
    if lo > hi and len(view) == 0 and (lo, hi) == (first, last):
        return lo, hi  # an empty log, nothing asked for: an empty dump
    if not first <= lo <= hi <= last:
        below = f"; entries below {first} are compacted into a snapshot" if lo < first else ""
        raise BadUsage(f"--from {lo} --to {hi} is not a range inside the log [{first}, {last}]{below}")
    return lo, hi


@log.command("dump")
@path_argument
@click.option("--from", "lo", type=int, help="First index (default: the log's first).")
@click.option("--to", "hi", type=int, help="Last index, inclusive (default: the log's last).")
@click.option("--code", "codes", multiple=True, metavar="CODE|NAME", help="Only these command codes (repeatable).")
@copy_option
@output_options
@pass_out
def dump(out: Out, path: str, lo: int | None, hi: int | None, codes: tuple[str, ...], copy: bool) -> None:
    """One row per entry: index, term, type, command code and name, time, decoded fields.
    With -o json: NDJSON, one object per line."""
    wanted = {_parse_code(c) for c in codes}
    with open_source(path, copy=copy, parts=(LOG_DIR,)) as src:
        view = _view(out, src)
        lo, hi = _range(view, lo, hi)

        def rows() -> Iterator[JSONObject]:
            with progress(out, "dumping", hi - lo + 1) as advance:
                for e in view.entries(lo, hi):
                    advance(1)
                    row = describe(e)
                    if not wanted or row["code"] in wanted:
                        yield row

        cols = ["index", "term", "type", "code", "name", "time", "fields"]
        emit_rows(out, rows(), cols, title=f"log {lo}..{hi}")


@log.command("replay")
@path_argument
@click.option("--to", "to", type=int, help="Replay up to this index, inclusive (default: the log's last).")
@click.option(
    "--from-snapshot/--no-snapshot",
    default=True,
    help="Start from the newest usable snapshot at or below --to (default), or from an empty state.",
)
@click.option(
    "--write-snapshot",
    "write_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the state as a snapshot into this snapshot root instead of printing it.",
)
@click.option("--voter", "voters", multiple=True, help="Voters for the written snapshot's meta (repeatable).")
@copy_option
@output_options
@pass_out
def replay(
    out: Out,
    path: str,
    to: int | None,
    from_snapshot: bool,
    write_dir: Path | None,
    voters: tuple[str, ...],
    copy: bool,
) -> None:
    """Rebuild the controller state at --to through the state machine (what a node restarting from these
    files would compute) and print its tables, or write it as a snapshot."""
    with open_source(path, copy=copy, parts=ALL_PARTS) as src:
        view = _view(out, src)
        to = view.last_index() if to is None else to
        if not 0 <= to <= view.last_index():
            raise BadUsage(f"--to {to} is not in the log (its last index is {view.last_index()})")
        sm = ControllerStateMachine()
        base, conf, skipped = _load_base(src, view, sm, to, from_snapshot)
        results: Counter[int] = Counter()
        applied = 0
        with progress(out, "replaying", to - base[0]) as advance:
            for e in view.entries(base[0] + 1, to):
                if e.type == EntryType.NORMAL:
                    results[sm.apply(e.data).code] += 1
                    applied += 1
                elif e.type == EntryType.CONF:
                    try:
                        c = decode_conf(e.data)
                    except (ValueError, TypeError) as err:  # the CRC held: a node would stop on this entry too
                        raise Failed(f"entry {e.index}: the CONF entry does not decode: {err}") from err
                    conf = (c.voters, c.learners)
                advance(1)
        term = view.term(to) if to >= view.first_index() else base[1]
        doc = {
            "path": src.show(src.given),
            "toIndex": to,
            "toTerm": term,
            "fromSnapshot": base[0] if base[2] else None,
            "replayedEntries": to - base[0],
            "appliedCommands": applied,
            "skippedSnapshots": skipped,
        }
        if write_dir is not None:
            _write(out, src, sm, write_dir, doc, tuple(voters) or conf[0], conf[1])
            return
    tables = decode_sections(sm.encode_sections())
    codes = [{"code": c, "name": C.code_name(c), "count": n} for c, n in sorted(results.items())]
    blocks = [Block("results", codes, ["code", "name", "count"]), *state_blocks(tables)]
    emit_document(out, doc, blocks, json_doc={**doc, "results": codes, "tables": tables}, title=f"state at {to}")


def _load_base(
    src: Source, view: LogView, sm: ControllerStateMachine, to: int, from_snapshot: bool
) -> tuple[tuple[int, int, bool], tuple[tuple[str, ...], tuple[str, ...]], list[str]]:
    """Load the newest snapshot at or below `to` that verifies and that the log continues from, falling back
    to older ones like a starting node (each skip is reported). Returns ((index, term, from a snapshot),
    (voters, learners), skipped)."""
    skipped: list[str] = []
    root = src.snapshot_root()
    if from_snapshot and root is not None and root.is_dir():
        st = snapshot_storage(root)
        for i in st.list():
            if i > to:
                continue
            if i < to and view.first_index() > i + 1:
                skipped.append(f"snapshot {i}: the log starts at {view.first_index()}, entries {i + 1}.. are missing")
                continue
            try:
                with st.open(i, verify=True) as snap:
                    sm.on_snapshot_load(snap)
                    m = snap.meta
                return (i, m.last_included_term, True), (m.voters, m.learners), skipped
            except (SnapshotFormatError, KeyError) as e:
                msg = src.show(str(e))
                skipped.append(f"snapshot {i}: {msg}")
                click.echo(f"rmqctl: warning: skipping snapshot {i}: {msg}", err=True)
    if view.first_index() > 1:
        why = "; ".join(skipped) or ("--no-snapshot" if not from_snapshot else "there is no snapshot")
        raise Failed(
            f"cannot replay to {to}: the log starts at {view.first_index()} and no usable snapshot "
            f"covers entries 1..{view.first_index() - 1} ({why})"
        )
    return (0, 0, False), ((), ()), skipped


def _write(
    out: Out,
    src: Source,
    sm: ControllerStateMachine,
    root: Path,
    doc: JSONObject,
    voters: tuple[str, ...],
    learners: tuple[str, ...],
) -> None:
    """Write the replayed state as a committed snapshot under `root`, with the snapshot package's writer."""
    root = root.absolute()
    source_root = src.snapshot_root()
    if source_root is not None and root == Path(src.show(source_root)).absolute():  # the original, not a copy
        raise BadUsage(f"{root}: refusing to write into the snapshot dir being read; choose another directory")
    if root.name == SNAPSHOT_DIR and probe(root.parent)[0]:
        raise BadUsage(f"{root.parent}: data directory is locked by a running node; choose another directory")
    if not voters:
        raise BadUsage(
            f"the voters at index {doc['toIndex']} are unknown (no snapshot and no CONF entry): "
            "pass --voter ID for each voter"
        )
    user_meta = {"writtenBy": "rmqctl log replay", "source": doc["path"], "fromSnapshot": doc["fromSnapshot"]}
    write_state_snapshot(out, sm, root, doc, voters, learners, user_meta)


def write_state_snapshot(
    out: Out,
    sm: ControllerStateMachine,
    root: Path,
    doc: JSONObject,
    voters: tuple[str, ...],
    learners: tuple[str, ...],
    user_meta: JSONObject,
) -> None:
    """Write `sm` as the committed snapshot `root/snapshot_<doc.toIndex>` (term doc.toTerm) with the snapshot
    package's writer, and print `doc` with where it went (`log replay`, `migrate import`)."""
    # No retention here: the operator's directory keeps every snapshot written to it.
    st = FileSnapshotStorage(root, max_reserved=1 << 30, known_types=SECTION_NAMES)
    try:
        pending = st.create(
            doc["toIndex"], doc["toTerm"], voters, learners, created_at=time.time(), user_meta=user_meta
        )
    except SnapshotExistsError as e:
        raise Failed(str(e)) from None
    writer = pending.writer()
    sm.on_snapshot_save(writer)
    writer.finish()
    meta = pending.commit()
    written = {
        **doc,
        "written": str(st.path(meta.last_included_index)),
        "voters": list(voters),
        "learners": list(learners),
        "bytes": sum(f.size for f in meta.files),
    }
    emit_document(out, written, title="snapshot written")

"""Offline snapshot verbs: `rmqctl snapshot inspect|verify|diff`, on files, without a running node.

PATH may be a node's data dir (its snapshots), its `snapshot/` dir, or one `snapshot_<N>` dir (also a
quarantined `snapshot_<N>.corrupt-<k>`). A data dir held by a running node is refused unless `--copy`
(store.py). The log verbs are in logverbs.py.
"""

from __future__ import annotations

import click

from cli.rmqctl import EXIT_FAILED, BadUsage, CorruptInput, Failed
from cli.rmqctl.output import Block, Out, emit_document, iso_seconds, output_options, pass_out, progress
from cli.rmqctl.state import Section, read_sections, state_blocks, tables_of
from cli.rmqctl.store import Source, open_source, storage
from raft.storage.layout import SNAPSHOT_DIR
from snapshot.errors import SnapshotFormatError
from snapshot.storage import FileSnapshotStorage, StoredSnapshot
from statemachine.inspection import diff_values
from statemachine.values import JSONObject

path_argument = click.argument("path", type=click.Path(exists=True, file_okay=False))
copy_option = click.option(
    "--copy", is_flag=True, help="Read a copy of the files (needed when a running node holds the data dir)."
)


@click.group("snapshot")
def snapshot() -> None:
    """Offline: inspect, verify and diff snapshots (no running node needed)."""


def _snapshots_of(src: Source) -> list[int]:
    if src.kind == "logdir":
        raise BadUsage(f"{src.given}: a log dir; expected a data dir, its snapshot/ dir or a snapshot_<N> dir")
    return src.snapshot_indexes()


def _pick(src: Source, index: int | None) -> tuple[FileSnapshotStorage, int]:
    """The snapshot to read: `index`, or the newest in scope."""
    indexes = _snapshots_of(src)
    root = src.snapshot_root()
    if not indexes or root is None:
        raise Failed(f"{src.given}: no snapshot")
    if index is None:
        return storage(root), indexes[0]
    if index not in indexes:
        raise BadUsage(f"{src.given}: no snapshot {index} (there are: {', '.join(map(str, indexes))})")
    return storage(root), index


def _meta_doc(src: Source, snap: StoredSnapshot) -> JSONObject:
    m = snap.meta
    return {
        "path": src.show(snap.dir),
        "index": m.last_included_index,
        "term": m.last_included_term,
        "voters": list(m.voters),
        "learners": list(m.learners),
        "createdAt": iso_seconds(m.created_at),
        "userMeta": dict(m.user_meta),
    }


@snapshot.command("inspect")
@path_argument
@click.option("--index", type=int, help="The snapshot to show (default: the newest).")
@click.option("--tables", is_flag=True, help="Also show the decoded tables.")
@copy_option
@output_options
@pass_out
def inspect(out: Out, path: str, index: int | None, tables: bool, copy: bool) -> None:
    """Meta, files, sections (rows, raw and stored bytes) and, with --tables, the decoded tables.

    Reading the sections checks their CRCs; `snapshot verify` also checks whole-file CRCs."""
    with open_source(path, copy=copy, parts=(SNAPSHOT_DIR,)) as src:
        st, index = _pick(src, index)
        with st.open(index, verify=False) as snap:
            sections = read_sections(snap, require_all=False)
            doc = _meta_doc(src, snap)
            files = [{"name": f.name, "size": f.size, "crc32c": f.crc32c} for f in snap.meta.files]
        doc |= {
            "sectionCount": len(sections),
            "rawBytes": sum(s.entry.raw_length for s in sections),
            "storedBytes": sum(s.entry.stored_length for s in sections),
            "snapshots": src.snapshot_indexes(),
        }
    rows = [s.row() for s in sections]
    blocks = [Block("files", files), Block("sections", rows)]
    decoded = tables_of(sections)
    if tables:
        blocks += state_blocks(decoded)
    json_doc = {**doc, "files": files, "sections": rows, **({"tables": decoded} if tables else {})}
    emit_document(out, doc, blocks, json_doc=json_doc, title=f"snapshot {index}")


@snapshot.command("verify")
@path_argument
@click.option("--index", type=int, help="Verify only this snapshot (default: every snapshot in PATH).")
@copy_option
@output_options
@pass_out
def verify(out: Out, path: str, index: int | None, copy: bool) -> None:
    """Check every snapshot in PATH: meta CRC, every file's size and CRC32C, every section's CRC and lz4
    frame, and that every section decodes. Exit 4 naming file and byte offset if any check fails."""
    problems: list[CorruptInput] = []
    rows: list[JSONObject] = []
    with open_source(path, copy=copy, parts=(SNAPSHOT_DIR,)) as src:
        indexes = [index] if index is not None else _snapshots_of(src)
        if index is not None:
            _pick(src, index)
        root = src.snapshot_root()
        if not indexes or root is None:
            raise Failed(f"{src.given}: no snapshot to verify")
        st = storage(root)
        total = sum(f.stat().st_size for i in indexes for f in st.path(i).iterdir() if f.is_file())
        with progress(out, "verifying snapshots", total) as advance:
            for i in indexes:
                row: JSONObject = {"index": i, "term": None, "status": "ok", "sections": None, "bytes": None}
                try:
                    row["term"] = st.read_meta(i).last_included_term
                    with st.open(i, verify=True) as snap:  # meta, file sizes, whole-file CRCs
                        snap.verify()  # every section: CRC, lz4 frame, length
                        row["sections"] = len(read_sections(snap))  # every section decodes
                        row["bytes"] = sum(f.size for f in snap.meta.files)
                except SnapshotFormatError as e:
                    problem = CorruptInput.of(e, src.show)
                    problems.append(problem)
                    row |= {"status": "corrupt", "error": problem.message}
                advance(sum(f.stat().st_size for f in st.path(i).iterdir() if f.is_file()))
                rows.append(row)
        doc = {
            "path": src.show(src.given),
            "checked": len(rows),
            "ok": len(rows) - len(problems),
            "corrupt": len(problems),
        }
    cols = ["index", "term", "status", "sections", "bytes", "error"]
    emit_document(out, doc, [Block("snapshots", [{"error": None, **r} for r in rows], cols)])
    if problems:
        last = problems[-1]
        last.lines = [p.message for p in problems[:-1]]
        raise last


def _load_for_diff(src: Source, index: int | None) -> tuple[JSONObject, JSONObject]:
    st, index = _pick(src, index)
    with st.open(index, verify=True) as snap:
        sections: list[Section] = read_sections(snap, require_all=False)
        meta = _meta_doc(src, snap)
    return meta, tables_of(sections)


def _keyed(tables: JSONObject) -> JSONObject:
    """The live table's broker list keyed by identity (cluster:broker:id), so that one broker's change is
    one row, not the whole list (diff_values compares lists of different lengths whole)."""
    live = tables.get("brokerLiveTable")
    if not isinstance(live, dict) or not isinstance(live.get("brokers"), list):
        return tables
    brokers = {f"{b['clusterName']}:{b['brokerName']}:{b['brokerId']}": b for b in live["brokers"]}
    return {**tables, "brokerLiveTable": {**live, "brokers": brokers}}


@snapshot.command("diff")
@click.argument("a", type=click.Path(exists=True, file_okay=False))
@click.argument("b", type=click.Path(exists=True, file_okay=False))
@click.option("--index-a", type=int, help="The snapshot of A to compare (default: the newest).")
@click.option("--index-b", type=int, help="The snapshot of B to compare (default: the newest).")
@click.option("--state-only", is_flag=True, help="Compare the tables only, not index, term and peers.")
@copy_option
@output_options
@pass_out
def diff(out: Out, a: str, b: str, index_a: int | None, index_b: int | None, state_only: bool, copy: bool) -> None:
    """Semantic diff of two snapshots: one row per differing value (path, a, b), key-sorted.

    Exit 0 when equal, 1 when different (like diff(1)), 4 if either is corrupt."""
    with open_source(a, copy=copy, parts=(SNAPSHOT_DIR,)) as src_a:
        meta_a, tables_a = _load_for_diff(src_a, index_a)
    with open_source(b, copy=copy, parts=(SNAPSHOT_DIR,)) as src_b:
        meta_b, tables_b = _load_for_diff(src_b, index_b)
    rows: list[JSONObject] = []
    if not state_only:
        for key in ("index", "term", "voters", "learners"):
            if meta_a[key] != meta_b[key]:
                rows.append({"path": f"meta/{key}", "a": meta_a[key], "b": meta_b[key]})
    tables_a, tables_b = _keyed(tables_a), _keyed(tables_b)
    for name in sorted(set(tables_a) | set(tables_b)):
        if name not in tables_a or name not in tables_b:
            rows.append(
                {
                    "path": name,
                    "a": "present" if name in tables_a else None,
                    "b": "present" if name in tables_b else None,
                }
            )
        else:
            rows.extend(diff_values(tables_a[name], tables_b[name], name))
    doc = {
        "a": meta_a["path"],
        "b": meta_b["path"],
        "indexA": meta_a["index"],
        "indexB": meta_b["index"],
        "equal": not rows,
        "differences": len(rows),
    }
    json_doc = {**doc, "differences": rows}
    emit_document(out, doc, [Block("differences", rows, ["path", "a", "b"])], json_doc=json_doc)
    if rows:
        raise click.exceptions.Exit(EXIT_FAILED)

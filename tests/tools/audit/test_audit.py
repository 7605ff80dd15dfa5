"""The Spark audit over data dirs of a real 3-node group: clean, then one injected fault per test, each found
at its exact location (node, index, section, entity) and nothing else reported."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from raft.core.messages import Entry
from raft.storage import SegmentLog
from raft.storage.identity import IDENTITY_FILE, read_identity
from raft.storage.walscan import LiveLog, list_segments, merge_scans, run_arrays, scan_segment_bytes
from snapshot.format import META_FILE, decode_meta, encode_meta
from snapshot.storage import FileSnapshotStorage
from statemachine import ControllerStateMachine
from statemachine.sections import SECTION_NAMES
from tools.audit.job import LOCAL_JVM_OPTIONS
from tools.audit.model import EXIT_CORRUPT, EXIT_DIVERGENCE, EXIT_OK
from tools.audit.pipeline import Options, Result, run

pytestmark = pytest.mark.xdist_group("spark-audit")  # one JVM per worker, shared by the module


def audit(spark: Any, root: Path, out: Path, **kw: Any) -> Result:
    return run(spark, Options([str(root)], str(out), "test-run", plots=kw.pop("plots", False), **kw))


def node(root: Path, data_dir: str) -> str:
    """The node id the data dir's IDENTITY file names: the audit's label for it."""
    ident = read_identity(str(root / data_dir))
    assert ident is not None
    return ident.node


def only(result: Result, check: str) -> list[dict[str, Any]]:
    return [f for f in result.findings if f["check"] == check]


def log_of(node_dir: Path) -> tuple[list[Any], LiveLog, bytes]:
    """The node's (single) segment, scanned, and its bytes."""
    log_dir = node_dir / "log"
    listing = list_segments([(n, (log_dir / n).stat().st_size) for n in os.listdir(log_dir)], None)
    assert len(listing.segments) == 1
    data = (log_dir / listing.segments[0].name).read_bytes()
    scans = [scan_segment_bytes(data, listing.segments[0], str(log_dir / listing.segments[0].name))]
    return scans, merge_scans(listing, scans), data


def frame_of(node_dir: Path, index: int) -> tuple[Path, int, int]:
    """(segment path, offset, size) of the entry frame of `index`."""
    scans, live, _ = log_of(node_dir)
    for r in live.runs:
        if r.lo <= index <= r.hi:
            _, _, offsets, sizes = run_arrays(scans, r)
            return Path(scans[0].path), offsets[index - r.lo], sizes[index - r.lo]
    raise AssertionError(index)


def entries_of(node_dir: Path) -> list[Entry]:
    with SegmentLog(node_dir / "log") as log:
        return log.entries(log.first_index(), log.last_index())


def test_clean_cluster_run_has_no_findings(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    r = audit(spark, root, tmp_path / "out", plots=True)
    assert r.findings == [] and r.exit_code == EXIT_OK
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    (group,) = s["groups"].values()
    assert group == {"baseIndex": 0, "replayedTo": marks["last"], "snapshotPoints": [marks["first"], marks["second"]]}
    assert sorted(n["node"] for n in s["nodes"]) == sorted(node(root, d) for d in ("n0", "n1", "n2"))
    assert list(s["groups"]) == ["jRaft-Controller"]
    assert s["entriesScanned"] == 3 * marks["last"] and s["commandsApplied"] > 50
    assert s["snapshotsNotReplayVerified"] == [] and s["sectionsNotReplayAudited"] == []
    for name in ("log_growth.png", "findings_by_check.png"):
        assert (tmp_path / "out" / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "out" / "_SUCCESS").exists()
    df = spark.read.parquet(str(tmp_path / "out" / "summary"))
    assert df.count() == len(s["checks"])
    # every check had something to check and found nothing, but the brokers' epoch files, not given
    assert {(r.check, r.status, r.why) for r in df.collect() if r.status != "ok"} == {
        ("broker.epoch", "skipped", "no --broker-epochs given"),
        ("broker.epoch_file", "skipped", "no --broker-epochs given"),
    }


def test_clean_run_with_small_chunks_settles_every_chunk_on_digests(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """Chunks of 16 indexes: the leader's and the followers' batches are cut differently, so whole chunks are
    compared by digests over other cuts, the replay reads chunks from every node in turn (its pieces from
    three nodes' segments interleave by index), and the outcome is the default run's."""
    root, marks = data
    small = audit(spark, root, tmp_path / "small", chunk=16)
    default = audit(spark, root, tmp_path / "default")
    assert small.findings == [] and small.exit_code == EXIT_OK
    keep = ("groups", "commandsApplied", "entriesScanned", "snapshotsNotReplayVerified", "nodes")
    assert {k: small.summary[k] for k in keep} == {k: default.summary[k] for k in keep}
    assert small.summary["commandsApplied"] > marks["last"] // 2


def test_the_local_jvm_runs_with_the_audit_options(spark: Any) -> None:
    """session() starts the JVM of a local master with C1 and the serial collector (LOCAL_JVM_OPTIONS)."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(bean.getInputArguments())


def test_flipped_bit_in_a_log_record(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    index = marks["first"] + 3
    path, off, size = frame_of(root / "n1", index)
    raw = bytearray(path.read_bytes())
    raw[off + size - 2] ^= 0x10  # one bit of the command bytes
    path.write_bytes(bytes(raw))
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["node"], f["log_index"], f["offset"], f["path"]) == (
        "wal.crc",
        node(root, "n1"),
        index,
        off,
        str(path),
    )
    assert "CRC" in f["detail"] and r.exit_code == EXIT_CORRUPT


def test_dropped_entry(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    index = marks["second"] - 5
    path, off, size = frame_of(root / "n2", index)
    raw = path.read_bytes()
    path.write_bytes(raw[:off] + raw[off + size :])
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["node"], f["log_index"]) == ("wal.crc", node(root, "n2"), index)
    assert r.exit_code == EXIT_CORRUPT


def test_snapshot_with_one_wrong_value(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    index = marks["second"]
    snap_root = root / "n0" / "snapshot"
    st = FileSnapshotStorage(snap_root, read_only=True, known_types=SECTION_NAMES)
    sm = ControllerStateMachine()
    with st.open(index) as snap:
        sm.on_snapshot_load(snap)
        meta = snap.meta
    assert sm.kv.table["ns1"]["key-3"] == "v2-3"
    sm.kv.table["ns1"]["key-3"] = "tampered"
    tmp_root = tmp_path / "rewritten"
    out = FileSnapshotStorage(tmp_root, known_types=SECTION_NAMES)
    pending = out.create(index, meta.last_included_term, meta.voters, meta.learners, created_at=meta.created_at)
    writer = pending.writer()
    sm.on_snapshot_save(writer)
    writer.finish()
    pending.commit()
    shutil.rmtree(st.path(index))
    shutil.copytree(out.path(index), st.path(index))
    r = audit(spark, root, tmp_path / "out")
    replay = only(r, "snapshot.replay")
    assert [(f["node"], f["snapshot_index"], f["section"], f["entity"]) for f in replay] == [
        (node(root, "n0"), index, "kvConfig", "ns1/key-3")
    ]
    assert (json.loads(replay[0]["snapshot_value"]), json.loads(replay[0]["replayed_value"])) == ("tampered", "v2-3")
    digest = only(r, "snapshot.digest")
    assert [(f["node"], f["snapshot_index"], f["section"]) for f in digest] == [(node(root, "n0"), index, "kvConfig")]
    assert len(r.findings) == 2 and r.exit_code == EXIT_DIVERGENCE
    # findings/ is written by one task per check: each check's directory holds one file, and reading the
    # table back gives every row as the run returned it
    findings = tmp_path / "out" / "findings"
    for check in ("snapshot.replay", "snapshot.digest"):
        (part,) = [p for p in findings.glob(f"run_date=*/check={check}/*.parquet")]
        assert spark.read.parquet(str(part)).count() == 1
    back = [{**row.asDict(), "run_date": str(row.run_date)} for row in spark.read.parquet(str(findings)).collect()]
    assert sorted(tuple(sorted(f.items())) for f in back) == sorted(tuple(sorted(f.items())) for f in r.findings)


def test_damaged_copy_of_a_snapshot_the_others_are_decoded_from(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """The three nodes' copies of a snapshot have equal metas, so one task decodes the first copy that
    verifies and the others stand for it. n0's copy (the first) has a flipped byte in its data file: it is
    reported unreadable, n1's is decoded instead, and n1's and n2's are still checked against the replay."""
    root, marks = data
    index = marks["first"]
    path = root / "n0" / "snapshot" / f"snapshot_{index:020d}" / "data"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x04
    path.write_bytes(bytes(raw))
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["node"], f["snapshot_index"]) == ("snapshot.readable", node(root, "n0"), index)
    assert r.exit_code == EXIT_CORRUPT and r.summary["snapshotsNotReplayVerified"] == []
    (group,) = r.summary["groups"].values()
    assert group["snapshotPoints"] == [marks["first"], marks["second"]]


@pytest.mark.parametrize("chunk", [None, 16])
def test_node_whose_log_diverges(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path, chunk: int | None
) -> None:
    """n2 holds entries of another term after `keep` (a deposed leader's uncommitted tail), written with
    the project's WAL. With chunks of 16, whole chunks differ by digest and the executors compare them
    entry by entry (the fallback job)."""
    root, marks = data
    keep = marks["second"] + 4
    entries = entries_of(root / "n2")
    shutil.rmtree(root / "n2" / "log")
    with SegmentLog(root / "n2" / "log") as log:
        log.append(entries[:keep])
        log.append([Entry(e.term + 7, e.index, e.type, e.data) for e in entries[keep:]])
    r = audit(spark, root, tmp_path / "out", **({"chunk": chunk} if chunk else {}))
    (f,) = r.findings
    assert (f["check"], f["node"], f["log_index"], f["first_divergent_index"]) == (
        "log.matching",
        node(root, "n2"),
        keep + 1,
        keep + 1,
    )
    assert r.exit_code == EXIT_DIVERGENCE


def test_snapshot_meta_lies_about_its_term(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    index = marks["first"]
    meta_path = root / "n1" / "snapshot" / f"snapshot_{index:020d}" / META_FILE
    meta = decode_meta(meta_path.read_bytes(), str(meta_path))
    meta_path.write_bytes(encode_meta(dataclasses.replace(meta, term=meta.term + 1)))
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["node"], f["snapshot_index"], f["field"]) == (
        "snapshot.meta",
        node(root, "n1"),
        index,
        "lastIncludedTerm",
    )
    assert (f["snapshot_value"], f["replayed_value"]) == (
        str(meta.last_included_term + 1),
        str(meta.last_included_term),
    )
    assert r.exit_code == EXIT_CORRUPT


def test_torn_tail_is_reported_as_such(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, marks = data
    path, off, size = frame_of(root / "n0", marks["last"])
    end = log_of(root / "n0")[0][0].valid_end  # the preallocated segment holds zeros from here on
    raw = path.read_bytes()
    torn = raw[off : off + size - 3]  # the start of a next batch that never finished
    path.write_bytes(raw[:end] + torn + raw[end + len(torn) :])
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["severity"], f["node"], f["offset"]) == ("wal.torn_tail", "info", node(root, "n0"), end)
    assert r.exit_code == EXIT_OK


@pytest.mark.parametrize("chunk", [None, 16])
def test_compacted_logs_replay_from_the_snapshot_they_continue_from(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path, chunk: int | None
) -> None:
    """Every node compacted its log up to the first snapshot (the WAL's own truncate_prefix): the replay
    starts from that snapshot (its bodies fetched from the cached snapshots), split by bucket, and the
    second snapshot is still checked value by value. With chunks of 16, the first live chunk is a partial
    piece on every node (compared on the driver) unless the compaction point is a multiple of 16."""
    root, marks = data
    for n in ("n0", "n1", "n2"):
        with SegmentLog(root / n / "log") as log:
            log.truncate_prefix(marks["first"] + 1)
    r = audit(spark, root, tmp_path / "out", **({"chunk": chunk} if chunk else {}))
    assert r.findings == [] and r.exit_code == EXIT_OK
    (group,) = r.summary["groups"].values()
    assert group == {"baseIndex": marks["first"], "replayedTo": marks["last"], "snapshotPoints": [marks["second"]]}
    assert sorted((u["node"], u["index"]) for u in r.summary["snapshotsNotReplayVerified"]) == sorted(
        (node(root, n), marks["first"]) for n in ("n0", "n1", "n2")
    )


def test_nodes_are_labelled_by_their_identity_even_when_renamed(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """The directories are renamed, two of them to each other's names: the labels follow the IDENTITY files."""
    root, _ = data
    ids = {d: node(root, d) for d in ("n0", "n1", "n2")}
    (root / "n0").rename(root / "tmp")
    (root / "n1").rename(root / "n0")
    (root / "tmp").rename(root / "n1")
    (root / "n2").rename(root / "copy-of-something")
    r = audit(spark, root, tmp_path / "out")
    assert r.findings == [] and r.exit_code == EXIT_OK
    labels = {Path(n["dataDir"]).name: n["node"] for n in r.summary["nodes"]}
    assert labels == {"n1": ids["n0"], "n0": ids["n1"], "copy-of-something": ids["n2"]}
    assert {n["group"] for n in r.summary["nodes"]} == {"jRaft-Controller"}


def test_copies_without_identity_are_labelled_by_directory_with_a_warning(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    root, _ = data
    for d in ("n0", "n1", "n2"):
        (root / d / IDENTITY_FILE).unlink()
    r = audit(spark, root, tmp_path / "out")
    missing = only(r, "identity.missing")
    assert sorted((f["node"], f["severity"], f["path"]) for f in missing) == [
        (d, "warning", str(root / d)) for d in ("n0", "n1", "n2")
    ]
    assert len(r.findings) == 3 and r.exit_code == EXIT_OK  # a warning about labels, not about the data
    (group,) = {n["group"] for n in r.summary["nodes"]}
    assert group.startswith("127.0.0.1:")  # named by its voters, as before IDENTITY existed


def test_damaged_identity_is_corrupt_input(spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, _ = data
    path = root / "n2" / IDENTITY_FILE
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x01  # the node id's last byte: the CRC no longer matches
    path.write_bytes(bytes(raw))
    r = audit(spark, root, tmp_path / "out")
    (f,) = r.findings
    assert (f["check"], f["node"], f["path"], f["offset"]) == ("identity.readable", "n2", str(path), len(raw) - 4)
    assert "CRC" in f["detail"] and r.exit_code == EXIT_CORRUPT

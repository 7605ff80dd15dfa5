"""rmqctl offline verbs (`snapshot inspect|verify|diff`, `log info|dump|replay`) in every output mode, the
exit codes, corrupt input named by file and byte offset, the data-dir lock and --copy, and the output
helpers. Data dirs are written by the real storage code (tests/testdata/rmqctl_fixtures.py); paths are
normalised to <tmp>.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from cli.datadir import DataDirLockedError, is_locked, lock_data_dir, probe
from cli.rmqctl.output import Block, Out, color_allowed, emit_document, emit_rows, progress
from raft.core.confchange import encode_conf
from raft.core.messages import ConfState, Entry, EntryType, HardState
from raft.storage import SegmentLog
from snapshot.rw import SnapshotReader
from statemachine.inspection import decode_sections
from tests.cli import helpers
from tests.testdata.rmqctl_fixtures import Fixture, build, write_snapshot

S16 = "snapshot/snapshot_00000000000000000016"
SEG1 = "log/00000000000000000009-0000000000000002.wal"


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    """Snapshots at 8 and 16, log compacted to start at 9, three segments (9..16, 17..20, 21..23)."""
    return build(tmp_path / "node", snapshots=(8, 16), compact_to=9, segment_bytes=400)


def rmqctl(*args: Any, env: dict[str, str | None] | None = None) -> Result:
    return helpers.rmqctl(*args, env=env, columns=250)  # wide: the offline tables are compared whole


def norm(text: str, fx: Fixture) -> str:
    return text.replace(str(fx.root.parent), "<tmp>")


def lines(r: Result, fx: Fixture) -> list[str]:
    return norm(r.stdout, fx).splitlines()


def state(fx: Fixture, index: int) -> dict[str, Any]:
    return decode_sections(fx.state_at(index).encode_sections())


# --- log info ------------------------------------------------------------------------------------------------


def test_log_info_text_is_mqadmin_key_value_lines(fx: Fixture) -> None:
    r = rmqctl("log", "info", fx.root)  # not a TTY: text is the default
    assert r.exit_code == 0, r.stderr
    assert lines(r, fx) == [
        "#Path\t<tmp>/node",
        "#FirstIndex\t9",
        "#LastIndex\t23",
        "#Entries\t15",
        "#FirstTerm\t1",
        "#LastTerm\t2",
        "#EntryBytes\t1036",
        "#SegmentBytes\t1431",
        "#WalFirstIndex\t9",
        "#TornBytes\t0",
        "#RaftTerm\t2",
        "#RaftVote\tn1",
        "#RaftMeta\tpresent",
        "#QuarantinedSnapshots\t",
        "#DownloadInProgress\t",
        "#Table\tsegments",
        "#File\t#SegId\t#FirstIndex\t#Bytes\t#Entries\t#TornBytes\t#Status",
        f"<tmp>/node/{SEG1}\t2\t9\t625\t8\t0\tlive",
        "<tmp>/node/log/00000000000000000017-0000000000000003.wal\t3\t17\t406\t4\t0\tlive",
        "<tmp>/node/log/00000000000000000021-0000000000000004.wal\t4\t21\t400\t3\t0\tlive",
        "#Table\tcodes",
        "#Code\t#Name\t#Entries\t#Bytes",
        "null\tNOOP\t1\t0",
        "100\tPUT_KV_CONFIG\t3\t64",
        "1001\tCONTROLLER_ALTER_SYNC_STATE_SET\t1\t33",
        "1002\tCONTROLLER_ELECT_MASTER\t1\t44",
        "1003\tCONTROLLER_REGISTER_BROKER\t2\t116",
        "1004\tCONTROLLER_GET_REPLICA_INFO\t1\t27",
        "1009\tUPDATE_CONTROLLER_CONFIG\t1\t41",
        "1012\tCONTROLLER_GET_NEXT_BROKER_ID\t1\t42",
        "1013\tCONTROLLER_APPLY_BROKER_ID\t1\t72",
        "1018\tRAFT_BROKER_HEART_BEAT_EVENT_REQUEST\t3\t207",
        "#Table\tsnapshots",
        "#Index\t#Term\t#Bytes\t#Status",
        "16\t2\t577\tok",
        "8\t1\t517\tok",
    ]


def test_log_info_json_and_table(fx: Fixture) -> None:
    doc = json.loads(rmqctl("-o", "json", "log", "info", fx.root).stdout)
    assert (doc["firstIndex"], doc["lastIndex"], doc["entries"], doc["firstTerm"], doc["lastTerm"]) == (9, 23, 15, 1, 2)
    assert (doc["raftTerm"], doc["raftVote"]) == (2, "n1")
    assert [s["entries"] for s in doc["segments"]] == [8, 4, 3]
    assert {c["name"]: c["entries"] for c in doc["codes"]}["RAFT_BROKER_HEART_BEAT_EVENT_REQUEST"] == 3
    assert [(s["index"], s["term"]) for s in doc["snapshots"]] == [(16, 2), (8, 1)]
    table = rmqctl("log", "info", fx.root, "-o", "table").stdout  # -o on the verb works too
    for cell in ("FirstIndex", "RAFT_BROKER_HEART_BEAT_EVENT_REQUEST", "segments", "snapshots", "live"):
        assert cell in table
    assert "#" not in table and "\x1b[" not in table


def test_log_info_on_the_log_dir_of_an_uncompacted_log(tmp_path: Path) -> None:
    fx = build(tmp_path / "node")
    doc = json.loads(rmqctl("log", "info", fx.log_dir, "-o", "json").stdout)
    assert (doc["firstIndex"], doc["lastIndex"], doc["raftTerm"]) == (1, 23, 2)
    assert {c["name"]: c["entries"] for c in doc["codes"]}["CONF"] == 1


# --- log dump ------------------------------------------------------------------------------------------------


def test_log_dump_text_rows(fx: Fixture) -> None:
    r = rmqctl("log", "dump", fx.root, "--from", 11, "--to", 14)
    assert r.exit_code == 0, r.stderr
    assert lines(r, fx) == [
        "#Index\t#Term\t#Type\t#Code\t#Name\t#Time\t#Fields",
        '11\t1\tNORMAL\t1002\tCONTROLLER_ELECT_MASTER\t2023-11-14T22:13:20.000Z\t{"brokerId":1,"brokerName":'
        '"broker-set-a","clusterName":"DefaultCluster","designateElect":false}',
        '12\t1\tNORMAL\t1001\tCONTROLLER_ALTER_SYNC_STATE_SET\t2023-11-14T22:13:20.000Z\t{"brokerName":'
        '"broker-set-a","masterBrokerId":1,"masterEpoch":1,"syncStateSet":[1,2],"syncStateSetEpoch":1}',
        "13\t2\tNOOP\tnull\tnull\tnull\t{}",
        '14\t2\tNORMAL\t100\tPUT_KV_CONFIG\t2023-11-14T22:13:21.000Z\t{"key":"k1","namespace":"ns","value":"v1"}',
    ]


def test_log_dump_json_is_ndjson_with_code_filter_by_name_and_number(fx: Fixture) -> None:
    r = rmqctl("log", "dump", fx.root, "-o", "json", "--code", "ELECT_MASTER", "--code", "1018")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["index"], x["code"]) for x in rows] == [(10, 1018), (11, 1002), (16, 1018), (20, 1018)]
    assert rows[1] == {
        "index": 11,
        "term": 1,
        "type": "NORMAL",
        "code": 1002,
        "name": "CONTROLLER_ELECT_MASTER",
        "time": "2023-11-14T22:13:20.000Z",
        "timeMillis": 1_700_000_000_000,
        "fields": {
            "brokerId": 1,
            "brokerName": "broker-set-a",
            "clusterName": "DefaultCluster",
            "designateElect": False,
        },
    }
    table = rmqctl("log", "dump", fx.root, "-o", "table", "--code", "CONTROLLER_REGISTER_BROKER").stdout
    assert table.count("CONTROLLER_REGISTER_BROKER") == 2 and "NOOP" not in table


def test_log_dump_shows_conf_entries_and_refuses_bad_arguments(tmp_path: Path, fx: Fixture) -> None:
    full = build(tmp_path / "full")
    row = json.loads(rmqctl("log", "dump", full.root, "-o", "json", "--from", 2, "--to", 2).stdout)
    assert (row["type"], row["fields"]) == ("CONF", {"voters": ["n1", "n2", "n3"], "learners": []})
    r = rmqctl("log", "dump", fx.root, "--from", 1)
    assert r.exit_code == 2 and "entries below 9 are compacted" in r.stderr
    # A member added at run time: its CONF entry carries where it is reached, and the dump shows it.
    grown = ConfState(("n1", "n2", "n3", "n4"), (), (("n4", "10.0.0.4:9880", "10.0.0.4:9770", "10.0.0.4:10770"),))
    with SegmentLog(full.log_dir) as wal:
        wal.append([Entry(3, wal.last_index() + 1, EntryType.CONF, encode_conf(grown))])
        last = wal.last_index()
    row = json.loads(rmqctl("log", "dump", full.root, "-o", "json", "--from", last).stdout)
    assert row["fields"] == {
        "voters": ["n1", "n2", "n3", "n4"],
        "learners": [],
        "addresses": {"n4": {"raft": "10.0.0.4:9880", "http": "10.0.0.4:9770", "remoting": "10.0.0.4:10770"}},
    }
    assert rmqctl("log", "dump", fx.root, "--to", 99).exit_code == 2
    r = rmqctl("log", "dump", fx.root, "--code", "NO_SUCH_CODE")
    assert r.exit_code == 2 and "unknown command code" in r.stderr


# --- log replay ----------------------------------------------------------------------------------------------


def test_log_replay_prints_the_state_in_each_mode(fx: Fixture) -> None:
    doc = json.loads(rmqctl("log", "replay", fx.root, "-o", "json").stdout)
    assert doc["tables"] == state(fx, 23)
    assert (doc["toIndex"], doc["toTerm"], doc["fromSnapshot"], doc["replayedEntries"]) == (23, 2, 16, 7)
    assert doc["results"] == [{"code": 0, "name": "SUCCESS", "count": 7}]
    text = lines(rmqctl("log", "replay", fx.root, "--to", 12), fx)
    assert text[:7] == [
        "#Path\t<tmp>/node",
        "#ToIndex\t12",
        "#ToTerm\t1",
        "#FromSnapshot\t8",
        "#ReplayedEntries\t4",
        "#AppliedCommands\t4",
        "#SkippedSnapshots\t",
    ]
    i = text.index("#Table\tsyncStateSetInfoTable")
    assert text[i + 1 : i + 3] == [
        "#BrokerName\t#ClusterName\t#MasterBrokerId\t#MasterEpoch\t#SyncStateSet\t#SyncStateSetEpoch",
        "broker-set-a\tDefaultCluster\t1\t1\t[1,2]\t2",
    ]
    i = text.index("#Table\tkvConfig")
    assert text[i + 1 :] == ["#Namespace\t#Key\t#Value"] + text[i + 2 :] and "#Table\tcontrollerConfig" in text
    table = rmqctl("log", "replay", fx.root, "-o", "table").stdout
    for cell in ("replicaInfoTable", "127.0.0.1:9002", "brokerLiveTable", "enableElectUncleanMaster", "other"):
        assert cell in table


def test_log_replay_without_snapshot_needs_the_whole_log(tmp_path: Path, fx: Fixture) -> None:
    r = rmqctl("log", "replay", fx.root, "--no-snapshot")
    assert r.exit_code == 1 and "the log starts at 9" in r.stderr
    full = build(tmp_path / "full", snapshots=(8,))
    doc = json.loads(rmqctl("log", "replay", full.root, "--no-snapshot", "--to", 20, "-o", "json").stdout)
    assert (doc["fromSnapshot"], doc["replayedEntries"], doc["tables"]) == (None, 20, state(full, 20))
    assert rmqctl("log", "replay", fx.root, "--to", 24).exit_code == 2


def test_log_replay_falls_back_past_a_corrupt_snapshot(fx: Fixture) -> None:
    data = fx.snapshot_dir(16) / "data"
    damaged = bytearray(data.read_bytes())
    damaged[-3] ^= 0x01
    data.write_bytes(bytes(damaged))
    r = rmqctl("log", "replay", fx.root, "-o", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert (doc["fromSnapshot"], doc["tables"]) == (8, state(fx, 23))
    assert "rmqctl: warning: skipping snapshot 16:" in r.stderr and str(data) in r.stderr


def test_log_replay_writes_a_snapshot_equal_to_the_nodes(tmp_path: Path, fx: Fixture) -> None:
    out = tmp_path / "replayed"
    r = rmqctl("log", "replay", fx.root, "--to", 16, "--write-snapshot", out, "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["written"], doc["voters"], doc["toTerm"]) == (
        str(out / "snapshot_00000000000000000016"),
        ["n1", "n2", "n3"],
        2,
    )
    assert rmqctl("snapshot", "verify", out).exit_code == 0
    same = rmqctl("snapshot", "diff", fx.root, out, "-o", "json")
    assert same.exit_code == 0 and json.loads(same.stdout)["equal"] is True
    again = rmqctl("log", "replay", fx.root, "--to", 16, "--write-snapshot", out)
    assert again.exit_code == 1 and "already exists" in again.stderr
    into_source = rmqctl("log", "replay", fx.root, "--to", 20, "--write-snapshot", fx.snapshot_root)
    assert into_source.exit_code == 2


# --- snapshot inspect ----------------------------------------------------------------------------------------


def test_snapshot_inspect_text_and_json(fx: Fixture) -> None:
    r = rmqctl("snapshot", "inspect", fx.root)
    assert r.exit_code == 0, r.stderr
    text = lines(r, fx)
    assert text[:13] == [
        f"#Path\t<tmp>/node/{S16}",
        "#Index\t16",
        "#Term\t2",
        "#Voters\tn1",
        "#Voters\tn2",
        "#Voters\tn3",
        "#Learners\t",
        "#CreatedAt\t2023-11-14T22:13:20.000Z",
        "#UserMeta\t{}",
        "#SectionCount\t5",
        "#RawBytes\t352",
        "#StoredBytes\t377",
        "#Snapshots\t16",
    ]
    i = text.index("#Table\tsections")
    assert text[i + 1] == "#Type\t#Name\t#Codec\t#Rows\t#RawBytes\t#StoredBytes\t#Offset\t#Crc32c"
    with SnapshotReader(fx.snapshot_dir(16) / "data") as reader:
        expected = [
            f"{e.type}\t{name}\tlz4\t{rows}\t{e.raw_length}\t{e.stored_length}\t{e.offset}\t{e.crc32c}"
            for e, (name, rows) in zip(
                reader.entries,
                [
                    ("replicaInfoTable", 1),
                    ("syncStateSetInfoTable", 1),
                    ("brokerLiveTable", 2),
                    ("kvConfig", 1),
                    ("controllerConfig", 1),
                ],
                strict=True,
            )
        ]
    assert text[i + 2 :] == expected
    doc = json.loads(rmqctl("snapshot", "inspect", fx.root, "--index", 8, "--tables", "-o", "json").stdout)
    assert (doc["index"], doc["term"], doc["snapshots"], doc["tables"]) == (8, 1, [16, 8], state(fx, 8))
    assert [f["name"] for f in doc["files"]] == ["data"] and len(doc["sections"]) == 5


def test_snapshot_inspect_table_and_path_forms(fx: Fixture) -> None:
    table = rmqctl("snapshot", "inspect", fx.root, "--tables", "-o", "table").stdout
    for cell in ("snapshot 16", "sections", "replicaInfoTable", "kvConfig", "127.0.0.1:9001", "2023-11-14T22:13:20"):
        assert cell in table
    for path in (fx.snapshot_root, fx.snapshot_dir(8)):
        index = 16 if path == fx.snapshot_root else 8
        assert json.loads(rmqctl("snapshot", "inspect", path, "-o", "json").stdout)["index"] == index
    assert rmqctl("snapshot", "inspect", fx.root, "--index", 9).exit_code == 2
    assert rmqctl("snapshot", "inspect", fx.log_dir).exit_code == 2  # a log dir is no snapshot path
    for d in (fx.snapshot_dir(8), fx.snapshot_dir(16)):
        shutil.rmtree(d)
    r = rmqctl("snapshot", "inspect", fx.root)
    assert r.exit_code == 1 and "no snapshot" in r.stderr


# --- snapshot verify -----------------------------------------------------------------------------------------


def test_snapshot_verify_all_good(fx: Fixture) -> None:
    r = rmqctl("snapshot", "verify", fx.root)
    assert r.exit_code == 0 and r.stderr == ""
    assert lines(r, fx) == [
        "#Path\t<tmp>/node",
        "#Checked\t2",
        "#Ok\t2",
        "#Corrupt\t0",
        "#Table\tsnapshots",
        "#Index\t#Term\t#Status\t#Sections\t#Bytes\t#Error",
        "16\t2\tok\t5\t577\tnull",
        "8\t1\tok\t5\t517\tnull",
    ]
    doc = json.loads(rmqctl("snapshot", "verify", fx.snapshot_dir(8), "-o", "json").stdout)
    assert doc["snapshots"] == [{"index": 8, "term": 1, "status": "ok", "sections": 5, "bytes": 517, "error": None}]
    assert "ok" in rmqctl("snapshot", "verify", fx.root, "-o", "table").stdout


def test_the_parent_of_the_local_clusters_data_dirs_is_refused_naming_one_to_pass(fx: Fixture) -> None:
    r = rmqctl("snapshot", "verify", fx.root.parent)  # `make run` keeps data/n1, data/n2, ...: `data` is none
    assert r.exit_code == 2
    assert norm(r.stderr, fx) == (
        "rmqctl: usage error: <tmp>: not a data dir, snapshot root, snapshot_<N> dir or "
        "log dir; it holds the data dirs node: pass one, e.g. <tmp>/node\n"
    )


def test_snapshot_verify_names_the_flipped_section_byte(fx: Fixture) -> None:
    data = fx.snapshot_dir(16) / "data"
    with SnapshotReader(data) as reader:
        sync = reader.entry(2)
    damaged = bytearray(data.read_bytes())
    damaged[sync.offset + 5] ^= 0x10
    data.write_bytes(bytes(damaged))
    r = rmqctl("snapshot", "verify", fx.root, "-o", "json")
    assert r.exit_code == 4
    where = f"{data}: section 2 (syncStateSetInfoTable) at byte offset {sync.offset}: bad section CRC"
    assert r.stderr.startswith(f"rmqctl: corrupt input: {where}") and len(r.stderr.splitlines()) == 1
    rows = json.loads(r.stdout)["snapshots"]
    assert [(x["index"], x["status"]) for x in rows] == [(16, "corrupt"), (8, "ok")]
    assert rmqctl("snapshot", "inspect", fx.root).exit_code == 4  # reading the section checks its CRC too


def test_snapshot_verify_bad_meta_and_several_corrupt_snapshots(fx: Fixture) -> None:
    meta = fx.snapshot_dir(8) / "__raft_snapshot_meta"
    damaged = bytearray(meta.read_bytes())
    damaged[30] ^= 0xFF
    meta.write_bytes(bytes(damaged))
    r = rmqctl("snapshot", "verify", fx.root)
    assert r.exit_code == 4
    assert r.stderr.startswith(f"rmqctl: corrupt input: {meta}: at byte offset {len(damaged) - 4}: bad meta CRC: ")
    (fx.snapshot_dir(16) / "data").write_bytes(b"RMQSNAP\x00")  # cut short: one line per corrupt snapshot
    r = rmqctl("snapshot", "verify", fx.root)
    assert r.exit_code == 4 and len(r.stderr.splitlines()) == 2 and "at byte offset 8: truncated file" in r.stderr


def test_snapshot_verify_with_nothing_to_verify_fails(tmp_path: Path) -> None:
    fx = build(tmp_path / "node")
    r = rmqctl("snapshot", "verify", fx.root)
    assert r.exit_code == 1 and r.stderr.startswith("rmqctl: error: ") and "no snapshot to verify" in r.stderr
    r = rmqctl("snapshot", "verify", tmp_path)
    assert r.exit_code == 2 and "not a data dir" in r.stderr


# --- snapshot diff -------------------------------------------------------------------------------------------


def test_snapshot_diff_equal_and_different(tmp_path: Path, fx: Fixture) -> None:
    twin = write_snapshot(tmp_path / "twin", fx.state_at(16), 16, 2)
    same = rmqctl("snapshot", "diff", fx.root, twin)
    assert same.exit_code == 0
    assert lines(same, fx)[4:] == ["#Equal\ttrue", "#Differences\t0", "#Table\tdifferences", "#Path\t#A\t#B"]
    r = rmqctl("snapshot", "diff", fx.snapshot_dir(8), fx.root, "-o", "json")
    assert r.exit_code == 1 and r.stderr == ""
    doc = json.loads(r.stdout)
    paths = {d["path"]: (d["a"], d["b"]) for d in doc["differences"]}
    assert (doc["equal"], doc["indexA"], doc["indexB"]) == (False, 8, 16)
    assert paths["meta/index"] == (8, 16) and paths["meta/term"] == (1, 2)
    assert paths["kvConfig/ns"] == (None, {"k1": "v1"})
    assert paths["brokerLiveTable/brokers/DefaultCluster:broker-set-a:1/lastUpdateTimestamp"] == (
        1_700_000_000_000,
        1_700_000_002_000,
    )  # one row per broker change, keyed by identity
    assert paths["controllerConfig/explicit/enableElectUncleanMaster"] == (None, True)
    text = lines(rmqctl("snapshot", "diff", fx.snapshot_dir(8), fx.root, "--state-only"), fx)
    assert "meta/index\t8\t16" not in text and 'kvConfig/ns\tnull\t{"k1":"v1"}' in text
    assert "kvConfig/ns" in rmqctl("snapshot", "diff", fx.snapshot_dir(8), fx.root, "-o", "table").stdout


# --- corrupt logs and meta -----------------------------------------------------------------------------------


def test_truncated_sealed_segment_is_corrupt_input(fx: Fixture) -> None:
    seg = fx.root / SEG1
    with open(seg, "r+b") as f:
        f.truncate(500)
    for verb in ("info", "dump", "replay"):
        r = rmqctl("log", verb, fx.root)
        assert r.exit_code == 4, verb
        assert r.stderr.startswith(f"rmqctl: corrupt input: {seg}: at byte offset 442: ") and "sealed" in r.stderr


def test_torn_tail_of_the_last_segment_is_reported_not_corrupt(fx: Fixture) -> None:
    last = fx.root / "log/00000000000000000021-0000000000000004.wal"
    with open(last, "r+b") as f:
        f.truncate(150)  # inside its only batch: a crash before the fsync
    doc = json.loads(rmqctl("log", "info", fx.root, "-o", "json").stdout)
    # torn: from the header's end to the last non-zero byte (zeros after it are unused, preallocated space)
    torn = len(last.read_bytes()[40:150].rstrip(b"\0"))
    assert 100 < torn <= 110
    assert (doc["lastIndex"], doc["tornBytes"], doc["segments"][-1]["tornBytes"]) == (20, torn, torn)
    assert last.stat().st_size == 150  # read-only: the tail is reported, not cut


@pytest.mark.parametrize(
    ("damage", "offset", "reason"),
    [
        (lambda b: b[:10], 10, "too short"),
        (lambda b: b"XXXX" + b[4:], 0, "bad magic"),
        (lambda b: b[:9] + b"\x07" + b[10:], 18, "CRC"),
    ],
)
def test_bad_raft_meta_is_corrupt_input(fx: Fixture, damage: Any, offset: int, reason: str) -> None:
    meta = fx.root / "meta/raft_meta"
    meta.write_bytes(damage(meta.read_bytes()))
    r = rmqctl("log", "info", fx.root)
    assert r.exit_code == 4
    assert r.stderr.startswith(f"rmqctl: corrupt input: {meta}: at byte offset {offset}: ") and reason in r.stderr
    assert r.stderr.count("at byte offset") == 1  # the storage's own error, not a re-derived copy of it


# --- the data-dir lock and --copy ----------------------------------------------------------------------------


@contextlib.contextmanager
def held(d: Path) -> Iterator[None]:
    """The data dir locked as a running node locks it."""
    lock = lock_data_dir(d)
    try:
        yield
    finally:
        lock.release()


def test_lock_data_dir_excludes_a_second_holder_and_names_the_pid(tmp_path: Path) -> None:
    d = tmp_path / "fresh"
    assert not is_locked(str(d / "absent")) and not (d / "absent").exists()
    with held(d):
        assert is_locked(str(d)) and (d / "LOCK").read_text() == f"{os.getpid()}\n" and probe(d) == (True, os.getpid())
        with pytest.raises(DataDirLockedError) as e:
            lock_data_dir(d)
        assert str(d) in str(e.value) and f"process {os.getpid()}" in str(e.value)
    assert not is_locked(str(d)) and probe(d) == (False, None)
    lock_data_dir(d).release()  # free again


def test_locked_data_dir_is_refused_unless_copy(fx: Fixture) -> None:
    with held(fx.root):
        for args in (
            ["log", "info", fx.root],
            ["log", "dump", fx.root],
            ["log", "replay", fx.root],
            ["snapshot", "inspect", fx.root],
            ["snapshot", "verify", fx.snapshot_dir(8)],
            ["snapshot", "diff", fx.root, fx.snapshot_root],
            ["log", "info", fx.log_dir],
        ):
            r = rmqctl(*args)
            assert r.exit_code == 2, args
            assert r.stderr.startswith(f"rmqctl: usage error: {fx.root}: data directory is locked by process ")
            assert "--copy" in r.stderr and r.stdout == ""
        copied = rmqctl("log", "info", fx.root, "--copy", "-o", "json")
        assert copied.exit_code == 0 and rmqctl("log", "replay", fx.root, "--copy").exit_code == 0
        doc = json.loads(copied.stdout)
        assert doc["path"] == str(fx.root) and doc["segments"][0]["file"] == str(fx.root / SEG1)  # not the copy
        inspect = json.loads(rmqctl("snapshot", "inspect", fx.snapshot_dir(8), "--copy", "-o", "json").stdout)
        assert inspect["path"] == str(fx.snapshot_dir(8)) and inspect["index"] == 8
        assert rmqctl("snapshot", "verify", fx.root, "--copy").exit_code == 0
        from_log_dir = json.loads(rmqctl("log", "replay", fx.log_dir, "--copy", "-o", "json").stdout)
        assert (from_log_dir["fromSnapshot"], from_log_dir["tables"]) == (16, state(fx, 23))  # snapshots copied too
        into_node = rmqctl("log", "replay", fx.root, "--copy", "--write-snapshot", fx.snapshot_root)
        assert into_node.exit_code == 2 and "refusing to write into the snapshot dir being read" in into_node.stderr
    assert rmqctl("log", "info", fx.root).exit_code == 0


def test_copy_names_the_original_file_when_it_is_corrupt(fx: Fixture) -> None:
    seg = fx.root / SEG1
    with open(seg, "r+b") as f:
        f.truncate(500)
    with held(fx.root):
        r = rmqctl("log", "info", fx.root, "--copy")
    assert r.exit_code == 4 and r.stderr.startswith(f"rmqctl: corrupt input: {seg}: at byte offset 442")


def test_a_quarantined_snapshot_can_be_inspected_and_verified(fx: Fixture) -> None:
    quarantined = fx.snapshot_dir(8).rename(fx.snapshot_root / "snapshot_00000000000000000008.corrupt-1")
    doc = json.loads(rmqctl("snapshot", "inspect", quarantined, "-o", "json").stdout)
    assert (doc["index"], doc["path"]) == (8, str(quarantined))
    assert rmqctl("snapshot", "verify", quarantined, "--copy").exit_code == 0
    info = json.loads(rmqctl("log", "info", fx.root, "-o", "json").stdout)
    assert info["quarantinedSnapshots"] == [quarantined.name]


# --- a data dir written by a real node -----------------------------------------------------------------------


def test_a_real_node_data_dir(tmp_path: Path) -> None:
    from raft.node import Node
    from raft.options import NodeOptions, RaftOptions, SnapshotOptions
    from raft.testing.cluster import free_ports
    from statemachine import ControllerStateMachine
    from tests.testdata.rmqctl_fixtures import controller_commands

    data = tmp_path / "n1"
    sm = ControllerStateMachine()
    opts = NodeOptions(
        "n1",
        str(data),
        {"n1": ("127.0.0.1", free_ports(1)[0])},
        b"s",
        raft=RaftOptions(election_timeout_ms=300),  # only on-demand snapshots; keep the whole log
        snapshot=SnapshotOptions(threshold_entries=0, interval_s=0, log_margin=1000),
    )

    async def run() -> int:
        node = Node(opts, sm)
        await node.start()
        await node.wait_for_leader(10)
        commands = controller_commands()
        for c in commands[:12]:
            await node.apply(c)
        await node.snapshot()
        for c in commands[12:]:
            await node.apply(c)
        applied = node.applied_index
        refused = rmqctl("log", "info", data)  # the running node holds the data dir's lock
        assert refused.exit_code == 2 and f"locked by process {os.getpid()}" in refused.stderr
        live = json.loads(rmqctl("log", "info", data, "--copy", "-o", "json").stdout)
        assert live["lastIndex"] >= applied and live["path"] == str(data)
        await node.stop()
        return applied

    last = asyncio.run(asyncio.wait_for(run(), 60))
    info = json.loads(rmqctl("log", "info", data, "-o", "json").stdout)
    assert info["lastIndex"] == last and info["raftTerm"] >= 1 and len(info["snapshots"]) == 1
    assert rmqctl("snapshot", "verify", data).exit_code == 0
    replayed = json.loads(rmqctl("log", "replay", data, "-o", "json").stdout)
    assert replayed["tables"] == decode_sections(sm.encode_sections())
    from_scratch = json.loads(rmqctl("log", "replay", data, "--no-snapshot", "-o", "json").stdout)
    assert from_scratch["tables"] == replayed["tables"]


# --- output helpers and global options -----------------------------------------------------------------------


def test_output_modes_of_the_helpers(capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"masterEpoch": 3, "peers": ["a:1", "b:2"], "nested": {"k": None, "ok": True}, "id": 2**63 - 1}
    block = Block("rows", [{"x": 1, "y": [1, 2]}, {"x": 2, "y": {"z": "t\tab"}}])
    emit_document(Out("text", False), doc, [block])
    assert capsys.readouterr().out.splitlines() == [
        "#MasterEpoch\t3",
        "#Peers\ta:1",
        "#Peers\tb:2",
        "#Nested.k\tnull",
        "#Nested.ok\ttrue",
        f"#Id\t{2**63 - 1}",
        "#Table\trows",
        "#X\t#Y",
        "1\t[1,2]",
        '2\t{"z":"t\\tab"}',
    ]
    emit_document(Out("json", False), doc, [block])
    out = capsys.readouterr().out
    assert json.loads(out)["id"] == 2**63 - 1 and out.index('"id"') < out.index('"masterEpoch"')  # sorted keys
    assert emit_rows(Out("json", False), iter([{"b": 1, "a": 2}]), ["a", "b"]) == 1
    assert capsys.readouterr().out == '{"a": 2, "b": 1}\n'
    emit_rows(Out("text", False), [{"a": None}], ["a"])
    assert capsys.readouterr().out == "#A\nnull\n"


def test_progress_draws_on_a_terminal_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    with progress(Out("text", False), "working", 3, stream=tty) as advance:
        advance(3)
    assert "working" in tty.getvalue() and capsys.readouterr() == ("", "")
    with progress(Out("text", False), "working", 3, stream=io.StringIO()) as advance:  # not a TTY: silent
        advance(3)


def test_color_and_mode_defaults(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color_allowed() and not color_allowed(True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_allowed()
    monkeypatch.setattr("cli.rmqctl.default_mode", lambda: "table")  # what a TTY gets
    r = rmqctl("--no-color", "log", "info", fx.root)
    assert r.exit_code == 0 and "FirstIndex" in r.stdout and "#FirstIndex" not in r.stdout
    assert rmqctl("-o", "yaml", "log", "info", fx.root).exit_code == 2
    assert rmqctl("log", "info", fx.root / "missing").exit_code == 2


def test_hard_state_absent_reads_as_term_zero(tmp_path: Path) -> None:
    fx = build(tmp_path / "node", hard_state=HardState())
    (fx.root / "meta/raft_meta").unlink()
    doc = json.loads(rmqctl("log", "info", fx.root, "-o", "json").stdout)
    assert (doc["raftTerm"], doc["raftVote"], doc["raftMeta"]) == (0, "", "absent")

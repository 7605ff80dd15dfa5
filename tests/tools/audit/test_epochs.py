"""The brokers' epoch files (RocketMQ's `epochFileCheckpoint`) against the controller's elections
(tools/audit/epochs.py): the format as RocketMQ 5.5.0 writes and reads it, the check on synthetic broker
stores, and the check through the whole audit on a real group's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.audit.discover import LocalFs
from tools.audit.epochs import (
    BrokerEpochs,
    Election,
    EpochFileError,
    check_epochs,
    crc32_of,
    encode_epoch_file,
    find_epoch_files,
    parse_epoch_file,
)
from tools.audit.model import EXIT_CORRUPT, EXIT_DIVERGENCE, EXIT_OK
from tools.audit.pipeline import Options, Result, run

# --- the format ---------------------------------------------------------------------------------------------


def test_crc_is_javas_crc32_masked_to_31_bits() -> None:
    """RocketMQ's own example in CheckpointFile's javadoc: entries 7-7000 and 8-8000 have CRC 773307083."""
    assert crc32_of(b"7-7000\n8-8000\n") == 773307083
    assert encode_epoch_file([(7, 7000), (8, 8000)]) == b"2\n773307083\n7-7000\n8-8000\n"


def test_a_file_as_rocketmq_writes_it_parses_line_by_line() -> None:
    data = encode_epoch_file([(1, 0), (3, 4096), (4, 9000)])
    got = parse_epoch_file(data, "f")
    assert [(e.epoch, e.start_offset, e.line) for e in got] == [(1, 0, 3), (3, 4096, 4), (4, 9000, 5)]
    assert [data[e.offset : e.offset + 2] for e in got] == [b"1-", b"3-", b"4-"]
    assert parse_epoch_file(data.replace(b"\n", b"\r\n"), "f")[2].start_offset == 9000  # readLine takes \r\n
    unchecked = b"1\n0\n5-77\n"  # CRC 0: RocketMQ does not check it
    assert [(e.epoch, e.start_offset) for e in parse_epoch_file(unchecked, "f")] == [(5, 77)]


@pytest.mark.parametrize(
    ("data", "line", "offset", "words"),
    [
        (b"", 1, 0, "ends before its count"),
        (b"2\n", 2, 2, "ends before its count"),
        (b"x\n0\n", 1, 0, "entry count line"),
        (b"1\n12a\n1-0\n", 2, 2, "CRC line"),
        (b"1\n0\n1:0\n", 3, 4, "not an entry"),
        (b"2\n0\n1-0\n", 1, 0, "says 2 entries, the file holds 1"),
        (b"2\n0\n2-10\n2-20\n", 4, 9, "does not rise"),
        (b"2\n0\n2-10\n3-10\n", 4, 9, "does not rise"),
        (encode_epoch_file([(1, 0), (2, 50)]).replace(b"2-50", b"2-51"), 2, 2, "CRC"),
    ],
)
def test_a_malformed_file_is_an_error_naming_line_and_byte(data: bytes, line: int, offset: int, words: str) -> None:
    with pytest.raises(EpochFileError) as e:
        parse_epoch_file(data, "/x/epochFileCheckpoint")
    assert (e.value.line, e.value.offset) == (line, offset) and words in e.value.reason
    assert str(e.value).startswith(f"/x/epochFileCheckpoint: line {line} (byte {offset}): ")


# --- the check, on synthetic broker stores ------------------------------------------------------------------

G = "jRaft-Controller"
# broker-a: 1 master at epoch 1 (index 10), 2 at epoch 2 (index 40), 1 again at epoch 3 (index 70).
ELECTIONS: dict[str, list[tuple[str, Election]]] = {
    "broker-a": [
        (G, (1, 1, "127.0.0.1:10911", 10)),
        (G, (2, 2, "127.0.0.1:10921", 40)),
        (G, (3, 1, "127.0.0.1:10911", 70)),
    ]
}


def store(root: Path, name: str, bid: int, entries: list[tuple[int, int]], raw: bytes | None = None) -> Path:
    d = root / f"{name}-{bid}" / "store"
    d.mkdir(parents=True)
    (d / "brokerIdentity").write_text(f"DefaultCluster#{name}#{bid}")
    (d / "epochFileCheckpoint").write_bytes(raw if raw is not None else encode_epoch_file(entries))
    return d / "epochFileCheckpoint"


def checked(root: Path) -> list[dict[str, Any]]:
    return [f.row() for f in check_epochs(find_epoch_files(LocalFs(), [str(root)]), ELECTIONS, {G: True})]


def test_histories_that_agree_with_the_elections_have_no_findings(tmp_path: Path) -> None:
    """Each broker's own epochs, and the slaves' copies of their masters' entries (same start offset)."""
    store(tmp_path, "broker-a", 1, [(1, 0), (2, 500), (3, 900)])
    store(tmp_path, "broker-a", 2, [(1, 0), (2, 500), (3, 900)])
    assert checked(tmp_path) == []


def test_a_broker_claiming_an_epoch_the_controller_gave_another_is_named(tmp_path: Path) -> None:
    one = store(tmp_path, "broker-a", 1, [(1, 0), (2, 480), (3, 900)])  # 1 wrote epoch 2 itself, from 480
    two = store(tmp_path, "broker-a", 2, [(1, 0), (2, 500), (3, 900)])
    (f,) = checked(tmp_path)
    assert (f["check"], f["severity"], f["node"], f["entity"], f["log_index"]) == (
        "broker.epoch",
        "error",
        "broker-a/1",
        "broker-a/1",
        40,
    )
    assert json.loads(f["snapshot_value"]) == {"epoch": 2, "startOffset": 480, "line": 4}
    assert json.loads(f["replayed_value"]) == {"brokerId": 2, "address": "127.0.0.1:10921"}
    assert f["path"] == str(one) and f["offset"] == one.read_bytes().index(b"2-480")
    assert "gave epoch 2 to broker-a/2@127.0.0.1:10921" in f["detail"] and f"{two} line 4" in f["detail"]


def test_an_epoch_the_controller_never_gave_is_named(tmp_path: Path) -> None:
    store(tmp_path, "broker-a", 1, [(1, 0), (2, 500), (3, 900)])
    store(tmp_path, "broker-a", 2, [(1, 0), (2, 500), (3, 900), (4, 1200)])
    (f,) = checked(tmp_path)
    assert (f["node"], f["severity"], json.loads(f["snapshot_value"])["epoch"]) == ("broker-a/2", "error", 4)
    assert "never gave a master of broker-a" in f["detail"] and "line 6" in f["detail"]


def test_a_set_the_controller_never_knew_is_named(tmp_path: Path) -> None:
    store(tmp_path, "broker-z", 1, [(1, 0)])
    (f,) = checked(tmp_path)
    assert f["entity"] == "broker-z/1" and "never elected a master of broker-z" in f["detail"]


def test_a_slave_copy_without_its_masters_file_is_only_noted(tmp_path: Path) -> None:
    store(tmp_path, "broker-a", 2, [(1, 0), (2, 500)])  # epoch 1 was broker 1's, whose file is not given
    (f,) = checked(tmp_path)
    assert (f["severity"], json.loads(f["snapshot_value"])["epoch"]) == ("info", 1)
    assert "not among the inputs" in f["detail"]


def test_a_corrupt_epoch_file_is_a_precise_error(tmp_path: Path) -> None:
    good = encode_epoch_file([(1, 0), (2, 500)])
    path = store(tmp_path, "broker-a", 2, [], raw=good.replace(b"2-500", b"2-5x0"))
    (f,) = checked(tmp_path)
    assert (f["check"], f["path"], f["offset"]) == ("broker.epoch_file", str(path), good.index(b"2-500"))
    assert f["detail"].startswith("line 4: ") and "not an entry" in f["detail"]


def test_a_file_whose_broker_cannot_be_told_is_an_error(tmp_path: Path) -> None:
    path = store(tmp_path, "broker-a", 1, [(1, 0)])
    (path.parent / "brokerIdentity").unlink()
    (f,) = checked(tmp_path)
    assert f["check"] == "broker.epoch_file" and "cannot be told" in f["detail"]


def test_without_brokeridentity_the_broker_conf_address_names_the_broker(tmp_path: Path) -> None:
    path = store(tmp_path, "broker-a", 2, [(1, 0), (2, 500), (3, 900)])
    (path.parent / "brokerIdentity").unlink()
    (path.parent.parent / "broker.conf").write_text("brokerName=broker-a\nbrokerIP1=127.0.0.1\nlistenPort=10921\n")
    (b,) = find_epoch_files(LocalFs(), [str(tmp_path)])
    assert (b.broker_name, b.broker_id, b.address) == ("broker-a", None, "127.0.0.1:10921")
    findings = check_epochs([b], ELECTIONS, {G: True})
    assert b.broker_id == 2 and [f.severity for f in findings] == ["info", "info"]  # 1 and 3 are 1's: no file


def test_a_directory_without_epoch_files_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no epochFileCheckpoint within 4 levels"):
        find_epoch_files(LocalFs(), [str(tmp_path)])
    assert BrokerEpochs("p").label == "?/?"


# --- through the audit, on a real group's data (tests/testdata/cluster_data.py) -------------------------------

pytestmark_spark = pytest.mark.xdist_group("spark-audit")


def audit(spark: Any, root: Path, out: Path, epochs: Path | None) -> Result:
    return run(spark, Options([str(root)], str(out), "t", plots=False, broker_epochs=[str(epochs)] if epochs else []))


@pytestmark_spark
def test_the_audit_checks_epoch_files_against_its_replay(
    spark: Any, data: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """cluster_data elects broker 1 of each set master at epoch 1 (10.0.k.1:10911)."""
    root, _ = data
    r = audit(spark, root, tmp_path / "o0", None)
    assert {c["check"]: (c["status"], c["why"]) for c in r.checks}["broker.epoch"] == (
        "skipped",
        "no --broker-epochs given",
    )
    brokers = tmp_path / "brokers"
    for bid in (1, 2):
        d = brokers / f"broker-3-{bid}"
        d.mkdir(parents=True)
        (d / "brokerIdentity").write_text(f"c1#broker-3#{bid}")
        (d / "epochFileCheckpoint").write_bytes(encode_epoch_file([(1, 0)]))
    r = audit(spark, root, tmp_path / "o1", brokers)
    assert r.findings == [] and r.exit_code == EXIT_OK
    assert {c["check"]: c["status"] for c in r.checks}["broker.epoch"] == "ok"
    assert [(f["broker"], f["entries"]) for f in r.summary["brokerEpochFiles"]] == [
        ("broker-3/1", [[1, 0]]),
        ("broker-3/2", [[1, 0]]),
    ]
    (brokers / "broker-3-2" / "epochFileCheckpoint").write_bytes(encode_epoch_file([(1, 0), (2, 64)]))
    r = audit(spark, root, tmp_path / "o2", brokers)
    (f,) = r.findings
    assert (f["check"], f["node"], f["group"], json.loads(f["snapshot_value"])["epoch"]) == (
        "broker.epoch",
        "broker-3/2",
        "jRaft-Controller",
        2,
    )
    assert r.exit_code == EXIT_DIVERGENCE
    (brokers / "broker-3-2" / "epochFileCheckpoint").write_bytes(b"1\n")
    r = audit(spark, root, tmp_path / "o3", brokers)
    assert [f["check"] for f in r.findings] == ["broker.epoch_file"] and r.exit_code == EXIT_CORRUPT


def test_an_epoch_its_master_never_wrote_cannot_be_a_slaves_copy(tmp_path: Path) -> None:
    """broker 1 was master at epoch 3 (and is the last master) but wrote nothing at it, as RocketMQ does when a
    re-elected master has no new data: its file ends at epoch 1, so broker 2 cannot have copied an epoch 3."""
    store(tmp_path, "broker-a", 1, [(1, 0), (2, 500)])
    store(tmp_path, "broker-a", 2, [(1, 0), (2, 500), (3, 501)])
    (f,) = checked(tmp_path)
    assert (f["node"], f["severity"], f["log_index"]) == ("broker-a/2", "error", 70)
    assert "which never wrote at it" in f["detail"]


def test_epochs_before_a_replay_that_starts_from_a_snapshot_are_only_noted(tmp_path: Path) -> None:
    """A compacted log replayed from a snapshot knows broker-a's masters from epoch 2 on (the base's master
    first); epoch 1, and a set it never saw, are noted as not checked, not reported as errors."""
    store(tmp_path, "broker-a", 2, [(1, 0), (2, 500)])
    store(tmp_path, "broker-z", 1, [(4, 0)])
    later: dict[str, list[tuple[str, Election]]] = {"broker-a": [(G, (2, 2, "127.0.0.1:10921", 0))]}
    got = check_epochs(find_epoch_files(LocalFs(), [str(tmp_path)]), later, {G: False})
    assert sorted((f.entity, f.severity, json.loads(f.snapshot_value or "")["epoch"]) for f in got) == [
        ("broker-a/2", "info", 1),
        ("broker-z/1", "info", 4),
    ]
    assert all("not checked" in f.detail for f in got)

"""rmqctl migrate import and the export file's checks, offline (docs/migration.md). Reading a real RocketMQ
controller (export, verify) and switching real brokers is tests/interop/test_migration.py."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from api.remoting import headers as H
from api.remoting.client import RemotingClient
from cli.rmqctl.migrate import checksum
from raft.testing.cluster import free_ports
from snapshot.storage import FileSnapshotStorage
from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine.commands import HEARTBEAT_DEFAULTS, heartbeat_of
from statemachine.sections import SECTION_NAMES
from tests.cli import helpers
from tools.cluster import ControllerdCluster

VOTERS = ("127.0.0.1:9880", "127.0.0.1:9881", "127.0.0.1:9882")


def export_doc() -> dict[str, Any]:
    """What `migrate export` writes for two broker sets, one with a dead slave and an id gap (4 was cleaned)."""
    doc: dict[str, Any] = {
        "format": "rmqctl-migration",
        "version": 1,
        "exportedAtMillis": 1_700_000_000_000,
        "source": {"controllers": ["127.0.0.1:9878"], "leader": "127.0.0.1:9878", "group": "g", "namesrv": "n:9876"},
        "controllerConfig": {"enableElectUncleanMaster": "true", "electMasterMaxRetryCount": "5", "listenPort": "9878"},
        "brokerSets": [
            {
                "clusterName": "C1",
                "brokerName": "a",
                "masterBrokerId": 2,
                "masterAddress": "127.0.0.1:10912",
                "masterEpoch": 7,
                "syncStateSet": [2, 3],
                "syncStateSetEpoch": 11,
                "brokers": [
                    {"brokerId": 1, "brokerAddress": "127.0.0.1:10911", "alive": False},
                    {"brokerId": 2, "brokerAddress": "127.0.0.1:10912", "alive": True},
                    {"brokerId": 5, "brokerAddress": "127.0.0.1:10915", "alive": True},
                    {"brokerId": 3, "brokerAddress": "127.0.0.1:10913", "alive": True},
                ],
            },
            {
                "clusterName": "C2",
                "brokerName": "b",
                "masterBrokerId": None,
                "masterAddress": None,
                "masterEpoch": 3,
                "syncStateSet": [1],
                "syncStateSetEpoch": 4,
                "brokers": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10921", "alive": False}],
            },
        ],
    }
    doc["sha256"] = checksum(doc)
    return doc


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


def run_import(src: Path, out: Path, *extra: Any) -> Any:
    voters = [a for v in VOTERS for a in ("--voter", v)]
    return helpers.rmqctl("migrate", "import", src, *voters, "--write-snapshot", out, "-o", "json", *extra)


def test_import_carries_ids_masters_epochs_and_config_and_gives_a_grace_period(tmp_path: Path) -> None:
    r = run_import(write(tmp_path / "x.json", export_doc()), tmp_path / "snap", "--grace-ms", 90_000)
    assert r.exit_code == 0, r.output
    st = FileSnapshotStorage(tmp_path / "snap", max_reserved=8, known_types=SECTION_NAMES)
    assert st.list() == [1]
    sm = ControllerStateMachine()
    with st.open(1, verify=True) as snap:
        assert snap.meta.voters == VOTERS and snap.meta.last_included_term == 1
        sm.on_snapshot_load(snap)
    a, b = sm.replicas.sets["a"], sm.replicas.sets["b"]
    assert (a.cluster_name, b.cluster_name) == ("C1", "C2")
    assert {i: addr for i, (addr, _) in a.brokers.items()} == {
        1: "127.0.0.1:10911",
        2: "127.0.0.1:10912",
        3: "127.0.0.1:10913",
        5: "127.0.0.1:10915",
    }
    assert a.next_assign_broker_id == 6 and b.next_assign_broker_id == 2
    sa, sb = sm.sync.sets["a"], sm.sync.sets["b"]
    assert (sa.master_broker_id, sa.master_epoch, sorted(sa.sync_state_set), sa.sync_state_set_epoch) == (
        2,
        7,
        [2, 3],
        11,
    )
    assert (sb.master_broker_id, sb.master_epoch, sorted(sb.sync_state_set), sb.sync_state_set_epoch) == (
        None,
        3,
        [1],
        4,
    )
    assert sm.config.values() == {
        "electMasterMaxRetryCount": 5,
        "enableElectUncleanMaster": True,
        "notifyBrokerRoleChanged": True,
    }
    # Alive for the grace period: those the old controller saw alive, never the dead ones.
    rows = {key[1:]: row for key, row in sm.live.table.items()}
    assert sorted(rows) == [("a", 2), ("a", 3), ("a", 5)]
    t = rows[("a", 2)][4]
    assert all(row[5] == 90_000 and row[4] == t for row in rows.values())
    assert sm.live.is_alive("C1", "a", 2, t + 90_000) and not sm.live.is_alive("C1", "a", 2, t + 90_001)
    assert rows[("a", 2)][6] == HEARTBEAT_DEFAULTS["epoch"]
    # The master stays master while its grace lasts; once it expires, the next election of set a gives epoch 8,
    # above every epoch the old controller gave.
    assert sm.manager.elect_master("a", 3, False, t + 1).code == 2011  # CONTROLLER_MASTER_STILL_EXIST
    beat: dict[str, str | int] = {
        "clusterName": "C1",
        "brokerName": "a",
        "brokerId": 3,
        "brokerAddr": "127.0.0.1:10913",
    }
    sm.apply(heartbeat_of(t + 90_001, beat))
    elected = sm.manager.elect_master("a", 3, False, t + 90_001)
    assert elected.header is not None and elected.header["masterEpoch"] == 8, elected


def corrupt_cases() -> list[tuple[str, Any, str]]:
    def edited(change: Any, rehash: bool = True) -> dict[str, Any]:
        doc = export_doc()
        change(doc)
        if rehash:
            doc["sha256"] = checksum(doc)
        return doc

    return [
        ("version", edited(lambda d: d.update(version=2)), "field version: version 2 is not one this rmqctl reads"),
        ("format", edited(lambda d: d.update(format="other")), "field format: not an rmqctl migration file"),
        (
            "type",
            edited(lambda d: d["brokerSets"][1].update(masterEpoch="3")),
            "field brokerSets[1].masterEpoch: Input should be a valid integer",
        ),
        ("extra", edited(lambda d: d["brokerSets"][0]["brokers"][0].update(x=1)), "field brokerSets[0].brokers[0].x"),
        (
            "sha",
            edited(lambda d: d["brokerSets"][0].update(masterEpoch=8), rehash=False),
            "field sha256: the sha256 does not match",
        ),
        (
            "master",
            edited(lambda d: d["brokerSets"][0].update(masterBrokerId=9)),
            "field brokerSets[0]: a: master 9 is not one of",
        ),
        (
            "sss",
            edited(lambda d: d["brokerSets"][1].update(syncStateSet=[2])),
            "field brokerSets[1]: b: SyncStateSet [2] is not within [1]",
        ),
    ]


@pytest.mark.parametrize(("case", "doc", "message"), corrupt_cases(), ids=[c[0] for c in corrupt_cases()])
def test_a_bad_file_is_refused_naming_the_field_and_nothing_is_written(
    tmp_path: Path, case: str, doc: Any, message: str
) -> None:
    src = write(tmp_path / "x.json", doc)
    r = run_import(src, tmp_path / "snap")
    assert r.exit_code == 4, r.output
    assert f"rmqctl: corrupt input: {src}: {message}" in r.stderr
    assert not (tmp_path / "snap").exists()


def test_a_truncated_file_is_refused_at_its_byte_offset(tmp_path: Path) -> None:
    text = json.dumps(export_doc(), indent=2)
    src = tmp_path / "x.json"
    cut = text.index('"brokerSets"')  # cut after a comma: the next property name is missing at `cut`
    src.write_text(text[:cut])
    r = run_import(src, tmp_path / "snap")
    assert r.exit_code == 4
    assert f"rmqctl: corrupt input: {src}: at byte offset {cut}: not JSON: Expecting property name" in r.stderr
    assert not (tmp_path / "snap").exists()


def test_import_refuses_to_overwrite_a_snapshot(tmp_path: Path) -> None:
    src = write(tmp_path / "x.json", export_doc())
    assert run_import(src, tmp_path / "snap").exit_code == 0
    again = run_import(src, tmp_path / "snap")
    assert again.exit_code == 1 and "exists" in again.stderr


def test_export_from_an_unreachable_controller_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    (port,) = free_ports(1)  # nothing listens on it
    out = tmp_path / "x.json"
    r = helpers.rmqctl("migrate", "export", "--from", f"127.0.0.1:{port}", "--namesrv", "127.0.0.1:1", "-f", out)
    assert r.exit_code == 3, r.output
    assert (
        f"rmqctl: unreachable: no controller leader: 127.0.0.1:{port}: request 1005: ConnectionRefusedError" in r.stderr
    )
    assert not out.exists()


def test_verify_needs_one_old_view(tmp_path: Path) -> None:
    r = helpers.rmqctl("migrate", "verify", "--to", "127.0.0.1:1", "--namesrv", "127.0.0.1:2")
    assert r.exit_code == 2 and "exactly one of --from" in r.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("controllerd")
def test_a_group_started_from_the_import_serves_it_and_verify_lists_every_difference(tmp_path: Path) -> None:
    """Three controllerd nodes start from the imported snapshot: their remoting front end answers 1005/1006/1004/
    1010 with the file's state (verify --file: no difference); after a designated election in the new group,
    verify lists the master, its epoch and the SyncStateSet change, and exits 1."""
    src = write(tmp_path / "x.json", export_doc())
    group = ControllerdCluster(str(tmp_path / "ours"), election_ms=500, extra="scanNotActiveBrokerInterval=1000\n")
    r = helpers.rmqctl(
        "migrate", "import", src, *[a for v in group.rafts for a in ("--voter", v)], "--write-snapshot", tmp_path / "s"
    )
    assert r.exit_code == 0, r.output
    (snap,) = (tmp_path / "s").glob("snapshot_*")
    for i in range(3):
        shutil.copytree(snap, tmp_path / "ours" / f"n{i}" / "snapshot" / snap.name)
    try:
        group.start_all()
        group.wait_ready()
        to = ";".join(group.remotings)
        same = helpers.rmqctl("migrate", "verify", "--file", src, "--to", to, "-o", "json")
        assert same.exit_code == 0, same.output
        assert json.loads(same.stdout)["differences"] == []

        host, port = json.loads(same.stdout)["new"].rsplit(":", 1)  # the leader's remoting address

        async def elect_and_verify() -> Any:
            # The broker's connection stays open: a heartbeating broker whose channel closes is gone (RocketMQ's
            # channelClosed), and its set would be re-elected.
            c = await RemotingClient.connect(host, int(port))
            try:
                beat = {"clusterName": "C1", "brokerName": "a", "brokerId": 3, "brokerAddr": "127.0.0.1:10913"}
                await c.request(H.BROKER_HEARTBEAT, {**beat, "heartbeatTimeoutMills": 60000})
                names = {"clusterName": "C1", "brokerName": "a", "brokerId": 3, "designateElect": True}
                r = await c.request(C.ELECT_MASTER, names)
                assert r.code == 0 and r.ext_fields["masterEpoch"] == "8", r
                return await asyncio.to_thread(
                    helpers.rmqctl, "migrate", "verify", "--file", src, "--to", to, "-o", "json"
                )
            finally:
                c.close()

        moved = asyncio.run(elect_and_verify())
        assert moved.exit_code == 1
        rows = {(d["brokerName"], d["field"]): (d["old"], d["new"]) for d in json.loads(moved.stdout)["differences"]}
        assert rows == {
            ("a", "masterBrokerId"): (2, 3),
            ("a", "masterAddress"): ("127.0.0.1:10912", "127.0.0.1:10913"),
            ("a", "masterEpoch"): (7, 8),
            ("a", "syncStateSet"): ([2, 3], [3]),
            ("a", "syncStateSetEpoch"): (11, 12),
        }
        assert "rmqctl: error: 5 difference(s) between the old and the new controller" in moved.stderr
    finally:
        group.stop_all()

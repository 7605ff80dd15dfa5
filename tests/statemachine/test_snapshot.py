"""Snapshot sections: real files through SnapshotWriter/SnapshotReader, canonical bytes, strict and
all-or-nothing loading, and the inspection decoders."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from snapshot import SnapshotFormatError, SnapshotReader, SnapshotWriter, decode_file, encode_file
from statemachine import (
    SECTION_BROKER_LIVE_TABLE,
    SECTION_KV_CONFIG,
    SECTION_NAMES,
    SECTION_REPLICA_TABLE,
    SECTION_SYNC_STATE_TABLE,
    ControllerStateMachine,
    decode_sections,
    diff_sections,
)
from statemachine import commands as cmd
from statemachine._body import pack_rows

from .harness import BROKER, CLUSTER, IPS, TIMEOUT, Ctl


def busy() -> Ctl:
    """Two broker-sets, a KV entry, a replicated config change, a pending re-election retry."""
    ctl = Ctl()
    ctl.group(3)
    ctl.group(2, name="broker-set-b")
    ctl.run(cmd.kv_put(ctl.now, "ns", "k", "v"))
    ctl.config(enableElectUncleanMaster=True)
    ctl.advance(TIMEOUT // 2)
    ctl.hb(1, IPS[0], name="broker-set-b", epoch=1, max_offset=7)
    ctl.advance(TIMEOUT // 2 + 1)
    ctl.scan()  # set a loses everyone: its master is cleared and a retry stays pending; set b loses only 2
    return ctl


def test_section_registry() -> None:
    assert SECTION_NAMES == {
        1: "replicaInfoTable",
        2: "syncStateSetInfoTable",
        3: "brokerLiveTable",
        4: "kvConfig",
        5: "controllerConfig",
        6: "alarms",
        7: "featureLevel",
    }
    assert [m.section_type() for m in ControllerStateMachine().managers()] == sorted(SECTION_NAMES)


def test_save_and_load_through_real_files(tmp_path) -> None:  # noqa: ANN001
    ctl = busy()
    ctl.sm.apply(cmd.feature_level(ctl.now, 1))
    ctl.sm.apply(cmd.alarm(ctl.now, True, "NOSPACE", "127.0.0.1:9880", "full"))  # every section written
    assert ctl.sm.live.reelect == {BROKER: 2}
    writer = SnapshotWriter(tmp_path / "data", known_types=SECTION_NAMES)
    ctl.sm.on_snapshot_save(writer)
    expected = ctl.sm.encode_sections()
    ctl.hb(1, IPS[0], name="broker-set-b", epoch=9)  # applying goes on before the writer thread finishes
    assert ctl.sm.encode_sections() != expected
    writer.finish()
    restored = ControllerStateMachine()
    with SnapshotReader(tmp_path / "data", known_types=SECTION_NAMES) as reader:
        assert reader.section_types() == sorted(SECTION_NAMES)
        assert {t: reader.section(t) for t in SECTION_NAMES} == expected  # the point in time of the save
        restored.on_snapshot_load(reader)
    assert restored.encode_sections() == expected
    # the restored replica replays the entry after the snapshot, then both go on identically
    twin = Ctl(restored, ctl.now)
    twin.hb(1, IPS[0], name="broker-set-b", epoch=9)
    assert twin.sm.encode_sections() == ctl.sm.encode_sections()
    for c in (ctl, twin):
        c.advance(5000)
    assert ctl.scan() == twin.scan()
    assert ctl.data(BROKER, "broker-set-b") == twin.data(BROKER, "broker-set-b")
    assert ctl.sm.encode_sections() == twin.sm.encode_sections()


def test_bytes_do_not_depend_on_insertion_order() -> None:
    a, b = Ctl(), Ctl()
    a.group(3, name="x")
    a.group(3, name="y")
    b.group(3, name="y")
    b.group(3, name="x")
    for name, bid in [("x", 1), ("y", 2), ("x", 3)]:
        a.hb(bid, name=name)
    for name, bid in [("x", 3), ("x", 1), ("y", 2)]:
        b.hb(bid, name=name)
    for key, value in [("k1", "1"), ("k2", "2")]:
        a.run(cmd.kv_put(a.now, "ns", key, value))
    for key, value in [("k2", "2"), ("k1", "1")]:
        b.run(cmd.kv_put(b.now, "ns", key, value))
    assert a.sm.encode_sections() == b.sm.encode_sections()


@pytest.mark.parametrize("n", [0, 1, 15, 16, 65535, 65536])
def test_pre_encoded_rows_pack_like_msgpack(n: int) -> None:
    rows = [[i % 7, "x"] for i in range(n)]
    assert pack_rows([msgpack.packb(r) for r in rows]) == msgpack.packb([1, rows])


def test_load_then_encode_gives_the_same_bytes() -> None:
    sections = busy().sm.encode_sections()
    sm = ControllerStateMachine()
    sm.load_sections(sections)
    assert sm.encode_sections() == sections


def section(sm: ControllerStateMachine, t: int) -> list:
    return msgpack.unpackb(sm.encode_sections()[t])


@pytest.mark.parametrize(
    ("t", "damage"),
    [
        (SECTION_REPLICA_TABLE, lambda d: [2, *d[1:]]),  # unknown body version
        (SECTION_REPLICA_TABLE, lambda d: [1, list(reversed(d[1]))]),  # not sorted
        (SECTION_REPLICA_TABLE, lambda d: [1, [[*d[1][0][:3], [[1, 2, "x"]]]]]),  # address not a string
        (SECTION_SYNC_STATE_TABLE, lambda d: [1, [[*d[1][0][:5], [3, 1]]]]),  # set not ascending
        (SECTION_SYNC_STATE_TABLE, lambda d: [1, d[1], "extra"]),
        (SECTION_BROKER_LIVE_TABLE, lambda d: [1, d[1], [["x", 0]]]),  # a retry count must be positive
        (SECTION_BROKER_LIVE_TABLE, lambda d: [1, [d[1][0][:9]], []]),  # short row
        (SECTION_KV_CONFIG, lambda d: [1, [["ns", []]]]),  # empty namespace
        (5, lambda d: [1, [["configStorePath", "/x"]]]),  # not a replicated key
        (5, lambda d: [1, [["electMasterMaxRetryCount", -1]]]),
    ],
)
def test_bad_bodies_are_refused_and_leave_the_state_untouched(tmp_path, t: int, damage) -> None:  # noqa: ANN001
    ctl = busy()
    sections = ctl.sm.encode_sections()
    bad = dict(sections)
    bad[t] = msgpack.packb(damage(msgpack.unpackb(sections[t])))
    target = Ctl()
    target.group(2)
    before = target.sm.encode_sections()
    with pytest.raises(ValueError):
        target.sm.load_sections(bad)
    assert target.sm.encode_sections() == before
    # through a real file: load_managers reports it as a SnapshotFormatError naming the section
    (tmp_path / "data").write_bytes(encode_file(sorted(bad.items())))
    with SnapshotReader(tmp_path / "data", known_types=SECTION_NAMES) as reader:
        with pytest.raises(SnapshotFormatError) as e:
            target.sm.on_snapshot_load(reader)
    assert e.value.section == t and target.sm.encode_sections() == before


def test_inspection_gives_plain_json() -> None:
    ctl = busy()
    assert 6 not in ctl.sm.encode_sections()  # no alarm raised: no alarms section (earlier readers load it)
    assert 7 not in ctl.sm.encode_sections()  # level 0: no feature level section (v0.3.0 loads the snapshot)
    ctl.sm.apply(cmd.feature_level(ctl.now, 1))
    ctl.sm.apply(cmd.alarm(ctl.now, True, "NOSPACE", "127.0.0.1:9880", "full"))
    data = encode_file(sorted(ctl.sm.encode_sections().items()))
    doc = decode_sections(decode_file(data, known_types=SECTION_NAMES))
    json.dumps(doc)  # plain JSON
    assert list(doc) == list(SECTION_NAMES.values())
    b = doc["replicaInfoTable"]["broker-set-b"]
    assert b["clusterName"] == CLUSTER and b["nextAssignBrokerId"] == 3
    assert b["brokerIdTable"]["1"]["brokerAddress"] == IPS[0]
    assert doc["syncStateSetInfoTable"][BROKER]["masterBrokerId"] is None
    assert doc["brokerLiveTable"]["pendingReelections"] == {BROKER: 2}
    assert [e["brokerId"] for e in doc["brokerLiveTable"]["brokers"]] == [1]
    assert doc["kvConfig"] == {"ns": {"k": "v"}}
    assert doc["alarms"] == {
        "alarms": [{"alarm": "NOSPACE", "memberId": "127.0.0.1:9880", "raisedAtMillis": ctl.now, "detail": "full"}]
    }
    assert doc["controllerConfig"]["explicit"] == {"enableElectUncleanMaster": True}


def test_semantic_diff() -> None:
    ctl = busy()
    before = ctl.sm.encode_sections()
    ctl.hb(2, IPS[1])
    ctl.elect(2)  # 2 is alive and in the SyncStateSet: it becomes master of broker-set-a
    diff = diff_sections(before, ctl.sm.encode_sections())
    paths = {d["path"]: (d["a"], d["b"]) for d in diff}
    assert paths["syncStateSetInfoTable/broker-set-a/masterBrokerId"] == (None, 2)
    assert paths["syncStateSetInfoTable/broker-set-a/masterEpoch"] == (2, 3)
    assert not any(p.startswith("replicaInfoTable") for p in paths)
    assert diff_sections(before, before) == []


def test_section_bodies_are_encoded_again_only_after_a_write() -> None:
    # A fleet's brokers each send GET_REPLICA_INFO every 5 s (syncBrokerMetadataPeriod): reads must not throw the
    # cached bodies away, or every checkpoint and snapshot re-encodes the replica tables. A write must.
    ctl = busy()
    encoded: list[int] = []

    def counted(m: Any) -> Callable[[], bytes]:
        real, t = m.encode_snapshot, m.section_type()

        def encode() -> bytes:
            encoded.append(t)
            return bytes(real())

        return encode

    for m in ctl.sm.saved_managers():
        if m is not ctl.sm.live:
            m.encode_snapshot = counted(m)  # type: ignore[method-assign]
    first = ctl.sm.section_parts()
    n = len(encoded)
    assert n == len(first) - 1  # every section but the live table's, encoded once
    ctl.run(cmd.get_replica_info(ctl.now, BROKER))
    ctl.run(cmd.get_sync_state_data(ctl.now, [BROKER]))
    ctl.next_id()
    ctl.hb(1)
    kept = {t: parts for t, parts in ctl.sm.section_parts().items() if t != SECTION_BROKER_LIVE_TABLE}
    assert kept == {t: parts for t, parts in first.items() if t != SECTION_BROKER_LIVE_TABLE}
    assert len(encoded) == n  # reads and heartbeats: the cached bodies
    ctl.run(cmd.kv_put(ctl.now, "ns", "k2", "v"))
    again = ctl.sm.section_parts()
    assert len(encoded) == 2 * n and again[SECTION_KV_CONFIG] != first[SECTION_KV_CONFIG]

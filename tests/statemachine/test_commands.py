"""The command format: constructors, decoding, and bytes that are not a command (never raise, never change
state, answer 2015)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachine import CommandError, ControllerStateMachine, decode
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.commands import FIELDS, FORMAT_VERSION, check
from statemachine.features import MAX_LEVEL, FeatureLevelError

from .harness import Ctl, remark

T = 1_700_000_000_000

EXAMPLES = {
    C.ALTER_SYNC_STATE_SET: cmd.alter_sync_state_set(T, "b", 1, 2, [3, 1, 1], 4),
    C.ELECT_MASTER: cmd.elect_master(T, "b"),
    C.REGISTER_BROKER: cmd.register_broker(T, "c", "b", 1, "a:1"),
    C.GET_REPLICA_INFO: cmd.get_replica_info(T, "b"),
    C.GET_SYNC_STATE_DATA: cmd.get_sync_state_data(T, ["b", "a"]),
    C.UPDATE_CONTROLLER_CONFIG: cmd.update_controller_config(T, {"notifyBrokerRoleChanged": False}),
    C.CLEAN_BROKER_DATA: cmd.clean_broker_data(T, "b", broker_controller_ids_to_clean="1;2"),
    C.GET_NEXT_BROKER_ID: cmd.get_next_broker_id(T, "c", "b"),
    C.APPLY_BROKER_ID: cmd.apply_broker_id(T, "c", "b", 1, "a:1;5"),
    C.BROKER_CLOSE_CHANNEL: cmd.close_channel(T, "c", "b", 1),
    C.CHECK_NOT_ACTIVE_BROKER: cmd.check_not_active_broker(T, T - 3_000),
    C.GET_BROKER_LIVE_INFO: cmd.get_broker_live_info(T, ("c", "b", 1)),
    C.BROKER_HEARTBEAT: cmd.heartbeat(T, "c", "b", "a:1", 1, epoch=3),
    C.KV_PUT: cmd.kv_put(T, "ns", "k", "v"),
    C.KV_GET: cmd.kv_get(T, "ns", "k"),
    C.KV_DELETE: cmd.kv_delete(T, "ns", "k"),
    C.KV_CAS: cmd.kv_cas(T, "ns", "k", None, "v"),
    C.ALARM: cmd.alarm(T, True, "NOSPACE", "127.0.0.1:9880", "store 3 GiB > quota 2 GiB"),
    C.FEATURE_LEVEL: cmd.feature_level(T, 1),
    C.BROKER_HEARTBEATS: cmd.heartbeats(
        T,
        [
            cmd.heartbeat_item({"clusterName": "c", "brokerName": "b", "brokerAddr": "a:1", "brokerId": 1}),
            cmd.heartbeat_item({"clusterName": "c", "brokerName": "b", "brokerAddr": "a:2", "brokerId": 2, "epoch": 3}),
        ],
    ),
}


def test_every_request_has_a_constructor_and_decodes() -> None:
    assert set(EXAMPLES) == set(FIELDS) == set(C.REQUEST_NAMES)
    for code, data in EXAMPLES.items():
        c = decode(data)
        assert c.code == code and c.time_millis == T and list(c.fields) == [n for n, _ in FIELDS[code]]


def test_decoded_fields() -> None:
    assert decode(EXAMPLES[C.ALTER_SYNC_STATE_SET]).fields["syncStateSet"] == [1, 3]  # sorted, deduplicated
    assert decode(EXAMPLES[C.ELECT_MASTER]).fields == {
        "clusterName": "",
        "brokerName": "b",
        "brokerId": -1,
        "designateElect": False,
    }
    hb = decode(EXAMPLES[C.BROKER_HEARTBEAT]).to_dict()
    assert hb["name"] == "RAFT_BROKER_HEART_BEAT_EVENT_REQUEST" and hb["lastUpdateTimestamp"] == T
    assert (hb["epoch"], hb["maxOffset"], hb["heartbeatTimeoutMillis"], hb["electionPriority"]) == (
        3,
        -1,
        10000,
        2**31 - 1,
    )
    assert decode(EXAMPLES[C.CHECK_NOT_ACTIVE_BROKER]).to_dict() == {
        "code": 1015,
        "name": "CHECK_NOT_ACTIVE_BROKER_REQUEST",
        "checkTimeMillis": T,
        "aliveSinceMillis": T - 3_000,
    }
    assert decode(cmd.check_not_active_broker(T)).to_dict() == {  # the form without the field reads as written
        "code": 1015,
        "name": "CHECK_NOT_ACTIVE_BROKER_REQUEST",
        "checkTimeMillis": T,
    }
    assert decode(EXAMPLES[C.GET_REPLICA_INFO]).to_dict()["invokeTime"] == T


def test_heartbeat_bytes_are_compact() -> None:
    data = cmd.heartbeat(T, "DefaultCluster", "broker-a", "192.168.0.1:10911", 1, epoch=5, max_offset=1 << 40)
    assert data[:4] == bytes([0x9C, FORMAT_VERSION, 0xCD, 0x03])  # fixarray(12), 1, uint16 1018...
    assert len(data) < 80


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: cmd.heartbeat(T, "c", "b", "a", True), TypeError),
        (lambda: cmd.heartbeat(T, "c", "b", "a", 1, epoch=2**63), ValueError),
        (lambda: cmd.register_broker(T, "c", "b", 1, None), TypeError),  # type: ignore[arg-type]
        (lambda: cmd.get_replica_info(1.5, "b"), TypeError),  # type: ignore[arg-type]
        (lambda: cmd.encode(C.KV_GET, T, "ns"), TypeError),
        (lambda: cmd.encode(904, T), ValueError),
        (lambda: cmd.update_controller_config(T, {"configStorePath": "/x"}), ValueError),
    ],
)
def test_constructors_refuse_bad_input(make, error) -> None:  # noqa: ANN001
    with pytest.raises(error):
        make()


def forged(*items: object) -> bytes:
    return msgpack.packb(list(items))


BAD = [
    (b"", "not msgpack"),
    (b"\xc1", "not msgpack"),
    (forged(1, 1004, T, "b") + b"\x00", "not msgpack"),
    (msgpack.packb({"code": 1004}), "not a msgpack array"),
    (forged(1, 1004), "not a msgpack array"),
    (forged(2, 1004, T, "b"), "unsupported command format version 2"),
    (forged(True, 1004, T, "b"), "unsupported command format version True"),
    (forged(1, 9999, T), "Unknown request code: 9999"),
    (forged(1, 904, T), "Unknown request code: 904"),
    (forged(1, "1004", T, "b"), "Unknown request code: '1004'"),
    (forged(1, 1004, T), "3 items, expected 4"),
    (forged(1, 1004, T, "b", "extra"), "5 items, expected 4"),
    (forged(1, 1004, 1.0, "b"), "timeMillis is not an integer"),
    (forged(1, 1004, T, b"b"), "'brokerName'"),
    (forged(1, 1002, T, "c", "b", True, False), "'brokerId'"),
    (forged(1, 1002, T, "c", "b", 1, 0), "'designateElect'"),
    (forged(1, 1001, T, "b", 1, 1, [1, "2"], 1), "'syncStateSet'"),
    (forged(1, 1016, T, ["c", "b"]), "'brokerIdentity'"),
    (forged(1, 1018, T, "c", "b", "a", 1, 1, 1, 1, 1, None), "'electionPriority'"),
    (forged(1, 1018, T, "c", "b", "a", 1, 1, 1, 1, 1), "11 items, expected 12"),
    (forged(1, 1015, T, "x"), "'aliveSinceMillis'"),
    (forged(1, 1015, T, True), "'aliveSinceMillis'"),
    (forged(1, 1015, T, None), "'aliveSinceMillis'"),  # left out is shorter, never nil
    (forged(1, 1015, T, T, T), "5 items, expected 3 or 4"),
    (forged(1, 1015), "not a msgpack array"),
]


@pytest.mark.parametrize(("data", "reason"), BAD)
def test_malformed_commands_answer_2015_and_change_nothing(data: bytes, reason: str) -> None:
    ctl = Ctl()
    ctl.group(3)
    before = ctl.sm.encode_sections()
    r = ctl.sm.apply(data)
    assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR and reason in remark(r), r.remark
    assert ctl.sm.encode_sections() == before
    with pytest.raises(CommandError) as e:
        decode(data)
    assert e.value.field == (reason.strip("'") if reason.startswith("'") else None)


@pytest.mark.parametrize("code", sorted(FIELDS))
def test_each_command_decodes_into_a_named_tuple_of_its_fields(code: int) -> None:
    """FIELDS is derived from NAMED: the header, then every field by its name, in the wire order."""
    c = check(msgpack.unpackb(EXAMPLES[code]))
    named = cmd.named(c)
    assert type(named) is cmd.NAMED[code]
    assert named._fields == (*cmd.HEADER, *(name for name, _ in FIELDS[code]))
    assert list(named) == c and (named.version, named.code, named.timeMillis) == (FORMAT_VERSION, code, T)
    assert decode(EXAMPLES[code]).fields == {name: getattr(named, name) for name, _ in FIELDS[code]}
    if code == C.BROKER_HEARTBEAT:
        assert len(c) == cmd.HEARTBEAT_ARITY  # the fast path's arity comes from the same table


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: cmd.kv_put(T, "ns", "k", 1), "value"),  # type: ignore[arg-type]
        (lambda: cmd.heartbeat(T, "c", "b", "a", 1, heartbeat_timeout_millis="x"), "heartbeatTimeoutMillis"),  # type: ignore[arg-type]
        (lambda: cmd.alter_sync_state_set(T, "b", 1, 1, [2**63], 1), "syncStateSet"),
        (lambda: cmd.register_broker(T, "c", "b", True, "a:1"), "brokerId"),
        (lambda: cmd.update_controller_config(T, {"enableElectUncleanMaster": 1}), "config"),
        (lambda: cmd.check_not_active_broker(T, "x"), "aliveSinceMillis"),  # type: ignore[arg-type]
        (lambda: cmd.check_not_active_broker(T, True), "aliveSinceMillis"),
        (lambda: cmd.check_not_active_broker(T, 2**63), "aliveSinceMillis"),
    ],
)
def test_constructor_refusals_name_the_field(build: Any, field: str) -> None:
    """A constructor's CommandError carries the field (FIELDS spelling) for the front ends to name."""
    with pytest.raises(CommandError) as e:
        build()
    assert e.value.field == field and repr(field) in str(e.value)


def test_check_not_active_broker_has_two_forms_and_both_parse() -> None:
    """1015 gained an optional trailing field (aliveSinceMillis). The entry without it (3 items, every log
    written before) and the entry with it (4 items) both parse and apply; the checked form of the short one
    has None for the field, so the handler sees one shape. encode writes whichever it is given."""
    legacy, floored = cmd.check_not_active_broker(T), cmd.check_not_active_broker(T, T - 3_000)
    assert legacy == bytes.fromhex("93 01 cd 03 f7 cf 00 00 01 8b cf e5 68 00")  # docs/statemachine.md
    assert floored == bytes.fromhex("94 01 cd 03 f7 cf 00 00 01 8b cf e5 68 00 cf 00 00 01 8b cf e5 5c 48")
    assert cmd.encode(C.CHECK_NOT_ACTIVE_BROKER, T) == legacy
    assert cmd.encode(C.CHECK_NOT_ACTIVE_BROKER, T, T - 3_000) == floored
    raw = msgpack.unpackb(legacy)
    checked = check(raw)
    assert checked == [FORMAT_VERSION, C.CHECK_NOT_ACTIVE_BROKER, T, None] and raw == checked[:3]  # not padded in place
    short, full = cmd.named(checked), cmd.named(check(msgpack.unpackb(floored)))
    assert isinstance(short, cmd.CheckNotActiveBroker) and short.aliveSinceMillis is None
    assert isinstance(full, cmd.CheckNotActiveBroker) and full.aliveSinceMillis == T - 3_000
    assert decode(legacy).fields == {} and decode(floored).fields == {"aliveSinceMillis": T - 3_000}
    for data in (legacy, floored):
        r = ControllerStateMachine().apply(data)
        assert r.ok and r.body["inactiveBrokers"] == []
    with pytest.raises(TypeError, match="takes 0 to 1 fields, got 2"):
        cmd.encode(C.CHECK_NOT_ACTIVE_BROKER, T, 1, 2)
    with pytest.raises(TypeError, match="takes 2 fields, got 1"):
        cmd.encode(C.KV_GET, T, "ns")  # codes without optional fields keep one arity


def test_on_apply_returns_one_result_per_entry_in_order() -> None:
    class E:
        def __init__(self, i: int, data: bytes) -> None:
            self.index, self.term, self.data = i, 1, data

    sm = ControllerStateMachine()
    entries = [E(1, cmd.kv_put(T, "n", "k", "1")), E(2, b"junk"), E(3, cmd.kv_get(T, "n", "k"))]
    results = sm.on_apply(entries)
    assert [r.code for r in results] == [0, C.CONTROLLER_JRAFT_INTERNAL_ERROR, 0]
    assert results[2].body == {"value": "1"}


_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.just(1),
    st.just(1018),
    st.just(T),
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=3), st.dictionaries(st.text(max_size=3), _scalar, max_size=2))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzzed_commands_never_raise_and_refusals_change_nothing(data: st.DataObject) -> None:
    ctl = Ctl()
    ctl.group(3)
    base = msgpack.unpackb(data.draw(st.sampled_from(sorted(EXAMPLES.values()))))
    mode = data.draw(st.sampled_from(["replace", "truncate", "bytes"]))
    if mode == "replace":
        i = data.draw(st.integers(0, len(base) - 1))
        base[i] = data.draw(_value)
        try:
            raw = msgpack.packb(base)
        except (TypeError, ValueError, OverflowError):
            return
    elif mode == "truncate":
        raw = msgpack.packb(base)
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    else:
        raw = data.draw(st.binary(max_size=40))
    before = ctl.sm.encode_sections()
    try:
        r = ctl.sm.apply(raw)
    except FeatureLevelError:  # by design, and only for this: a FEATURE_LEVEL entry above this release's stops
        assert msgpack.unpackb(raw)[1] == C.FEATURE_LEVEL and msgpack.unpackb(raw)[3] > MAX_LEVEL  # the node
        assert ctl.sm.encode_sections() == before
        return
    if r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR:
        assert ctl.sm.encode_sections() == before


@settings(max_examples=300, deadline=None)
@given(st.lists(_scalar, min_size=12, max_size=12), st.integers(0, 11))
def test_heartbeat_fast_path_agrees_with_the_generic_check(values: list, keep_from: int) -> None:
    """apply() takes a shortcut for heartbeats; it must accept exactly what commands.check accepts."""
    good = msgpack.unpackb(cmd.heartbeat(T, "c", "b", "a", 1))
    c = good[:keep_from] + values[keep_from:]  # a valid prefix, then random values
    try:
        raw = msgpack.packb(c)
    except (TypeError, ValueError, OverflowError):
        return
    c = msgpack.unpackb(raw)
    try:
        check(c)
        accepted = True
    except CommandError:
        accepted = False
    sm = ControllerStateMachine()
    r = sm.apply(raw)
    assert (r.code != C.CONTROLLER_JRAFT_INTERNAL_ERROR) == accepted


def test_heartbeat_ok_agrees_with_the_generic_check() -> None:
    """heartbeat_ok, the unrolled hot-path check, accepts exactly what the generic check (FIELDS' kinds) accepts:
    a well-formed heartbeat, and one with any single field of a wrong kind (docs/request-path.md, "A new
    heartbeat field")."""
    from statemachine.commands import HEADER_FIELDS, _kind_ok, heartbeat_item_ok, heartbeat_ok

    good = check(msgpack.unpackb(cmd.heartbeat(1, "c", "b", "127.0.0.1:10911", 0)))
    kinds = FIELDS[C.BROKER_HEARTBEAT]
    assert len(good) == HEADER_FIELDS + len(kinds) and heartbeat_ok(good)
    for i in range(len(kinds)):
        for wrong in ("x", 1, True, None, [1]):
            c = list(good)
            c[HEADER_FIELDS + i] = wrong
            generic = all(_kind_ok(k, c[HEADER_FIELDS + j]) for j, (_, k) in enumerate(kinds))
            assert heartbeat_ok(c) == generic, (i, wrong)
            assert heartbeat_item_ok(c[HEADER_FIELDS:]) == generic, (i, wrong)  # one heartbeat of 1202
    assert not heartbeat_item_ok(good[HEADER_FIELDS:-1]) and not heartbeat_item_ok([*good[HEADER_FIELDS:], 1])

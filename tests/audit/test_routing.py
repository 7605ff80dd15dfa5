"""The audit's routing: what the replay may skip or split must commute with the real state machine."""

from __future__ import annotations

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.inspection import decode_sections
from tests.statemachine.harness import Ctl
from tools.audit.model import NAME_AT, READ_ONLY, Buckets, split_state


def populated() -> tuple[ControllerStateMachine, int]:
    ctl = Ctl()
    ctl.group(3)
    ctl.run(cmd.kv_put(ctl.now, "ns", "k", "v"))
    sm = ControllerStateMachine()
    for data in ctl.log:
        sm.apply(data)
    return sm, ctl.now


def test_read_only_commands_change_nothing() -> None:
    sm, now = populated()
    name = next(iter(sm.sync.sets))
    reads = [
        cmd.get_replica_info(now, name),
        cmd.get_sync_state_data(now, [name, "nope"]),
        cmd.get_next_broker_id(now, "c", name),
        cmd.get_broker_live_info(now),
        cmd.kv_get(now, "ns", "k"),
    ]
    assert {cmd.decode(r).code for r in reads} == READ_ONLY
    before = sm.encode_sections()
    for r in reads:
        sm.apply(r)
    assert sm.encode_sections() == before


def test_every_mutating_code_is_routed() -> None:
    b = Buckets(4, 2)
    mutating = set(C.REQUEST_NAMES) & set(cmd.FIELDS) - READ_ONLY
    for code in mutating:
        fields = cmd.FIELDS[code]
        sample = {cmd.STR: "x", cmd.OPT_STR: "x", cmd.INT: 1, cmd.BOOL: False, cmd.INT_LIST: [1], cmd.CONFIG: {}}
        c = [1, code, 0, *(sample[kind] for _, kind in fields)]
        assert b.route(c) is not None, C.REQUEST_NAMES[code]
    assert (
        set(NAME_AT) | {C.CHECK_NOT_ACTIVE_BROKER, C.UPDATE_CONTROLLER_CONFIG, C.KV_PUT, C.KV_DELETE, C.KV_CAS}
        == mutating
    )


def test_split_state_puts_every_entity_in_exactly_one_bucket() -> None:
    sm, _ = populated()
    tables = decode_sections(sm.encode_sections())
    b = Buckets(3, 1)
    split = split_state(tables, b)
    keys = [k for part in split.values() for k in part]
    assert len(keys) == len(set(keys))
    name = next(iter(tables["syncStateSetInfoTable"]))
    assert ("syncStateSetInfoTable", name) in split[b.of_set(name)]
    assert ("kvConfig", "ns/k") in split[b.of_kv("ns", "k")]
    assert {e for s, e in split[b.config]} == set(tables["controllerConfig"]["effective"])

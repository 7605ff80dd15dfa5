"""The audit's routing: what the replay may skip or split must commute with the real state machine."""

from __future__ import annotations

from array import array

import msgpack

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.inspection import decode_sections
from tests.statemachine.harness import CLUSTER, Ctl
from tools.audit.model import NAME_AT, READ_ONLY, Buckets, split_state
from tools.audit.replay import ReplayPlan, replay_bucket
from tools.audit.tasks import pack_slice


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
        if code == C.BROKER_HEARTBEATS:  # split by each heartbeat's set, not routed whole
            continue
        c = [1, code, 0, *(sample[kind] for _, kind in fields)]
        assert b.route(c) is not None, C.REQUEST_NAMES[code]
    assert (
        set(NAME_AT)
        | {
            C.CHECK_NOT_ACTIVE_BROKER,
            C.UPDATE_CONTROLLER_CONFIG,
            C.KV_PUT,
            C.KV_DELETE,
            C.KV_CAS,
            C.ALARM,
            C.FEATURE_LEVEL,
            C.BROKER_HEARTBEATS,
        }
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


def _replay_in_buckets(log: list[bytes], buckets: Buckets) -> tuple[ControllerStateMachine, list[dict]]:
    """The full replay of `log`, and the findings of the audit's own per-bucket replay (tools.audit.replay)
    against it: each bucket gets the commands routed to it, as route_task would give them."""
    full = ControllerStateMachine()
    for data in log:
        full.apply(data)
    split = split_state(decode_sections(full.encode_sections()), buckets)
    n, findings = len(log), []
    for b in range(buckets.count):
        indexes, codes, payloads = array("q"), array("H"), []
        for i, data in enumerate(log, 1):
            c = msgpack.unpackb(data)
            target: tuple[int, ...] | int | None
            if c[1] == C.BROKER_HEARTBEATS:  # split by set, as route_task does
                split_beats = buckets.split_heartbeats(c)
                target, data = tuple(split_beats) or None, split_beats.get(b, data)
            else:
                target = buckets.route(c)
            if target is not None and b in ((target,) if isinstance(target, int) else target):
                indexes.append(i)
                codes.append(c[1])
                payloads.append(data)
        pieces = [(indexes[0], indexes.tobytes(), codes.tobytes(), b"".join(payloads))] if payloads else []
        plan = ReplayPlan("g", 0, None, n, [(n, [0])], {0: "n0"})
        findings += replay_bucket(b, pieces, [(0, n, pack_slice(split.get(b, {})))], plan, buckets).findings
    return full, findings


def test_bucketed_replay_of_both_scan_forms_matches_the_full_replay() -> None:
    """1015 with aliveSinceMillis (a new leader's scans) and without it (every log written before the field
    existed) both go to every set bucket; the floor is judged broker by broker, so the audit's split replay
    still ends where the full one does."""
    ctl = Ctl()
    names = [f"set-{k}" for k in range(4)]
    for name in names:
        ctl.group(2, name=name)
    since = ctl.now + 5_000  # a new leader took over 5 s after every broker's last heartbeat
    ctl.advance(9_000)
    assert ctl.scan().body["inactiveBrokers"] == []  # the form without the field
    ctl.advance(3_000)
    assert ctl.scan(since).body["inactiveBrokers"] == []  # past the timeout (10 s), not past takeover + timeout
    ctl.advance(1_000)
    for name, ids in (("set-0", (1, 2)), ("set-1", (1, 2)), ("set-2", (2,))):  # set-3 never comes back
        for b in ids:
            ctl.hb(b, name=name)
    ctl.advance(2_001)  # takeover + timeout passed
    r = ctl.scan(since)
    assert [(x["brokerName"], x["brokerId"]) for x in r.body["inactiveBrokers"]] == [
        ("set-2", 1),
        ("set-3", 1),
        ("set-3", 2),
    ]
    ctl.advance(1_000)
    ctl.scan()
    assert [len(msgpack.unpackb(d)) for d in ctl.log if msgpack.unpackb(d)[1] == C.CHECK_NOT_ACTIVE_BROKER] == [
        3,
        4,
        4,
        3,
    ]
    for buckets in (Buckets(2, 1), Buckets(3, 2)):
        full, findings = _replay_in_buckets(ctl.log, buckets)
        assert findings == []
        masters = {name: full.sync.sets[name].master_broker_id for name in names if name in full.sync.sets}
        assert masters == {"set-0": 1, "set-1": 1, "set-2": 2, "set-3": None}


def test_bucketed_replay_of_batched_heartbeats_matches_the_full_replay() -> None:
    """1202 entries span sets of several buckets: each bucket applies its own sets' heartbeats at the entry's
    time (split_heartbeats), the feature level that gates them reaches every set bucket, and a malformed or
    gated 1202 reaches none; the split replay still ends where the full one does, scans and elections included."""
    ctl = Ctl()
    names = [f"set-{k}" for k in range(5)]
    for name in names:
        ctl.group(2, name=name)

    def items(pairs: list[tuple[str, int]]) -> list[list[str | int]]:
        return [
            cmd.heartbeat_item(
                {"clusterName": CLUSTER, "brokerName": n, "brokerAddr": f"10.0.{k}.{b}:1", "brokerId": b}
            )
            for k, (n, b) in enumerate(pairs)
        ]

    every = [(n, b) for n in names for b in (1, 2)]
    ctl.advance(8_000)
    gated = ctl.run(cmd.heartbeats(ctl.now, items(every)))  # level 0: refused, changes nothing
    assert gated.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR
    assert ctl.run(cmd.feature_level(ctl.now, 2)).ok
    assert ctl.run(cmd.heartbeats(ctl.now, items(every[:6]))).ok  # set-0..2 stay alive; set-3, set-4 do not
    bad = msgpack.packb([cmd.FORMAT_VERSION, C.BROKER_HEARTBEATS, ctl.now, [*items(every[6:]), ["x"]]])
    assert ctl.run(bad).code == C.CONTROLLER_JRAFT_INTERNAL_ERROR  # set-3 and set-4 would be kept alive by it
    ctl.advance(7_000)
    r = ctl.scan()
    assert sorted({x["brokerName"] for x in r.body["inactiveBrokers"]}) == ["set-3", "set-4"]
    for buckets in (Buckets(2, 1), Buckets(3, 2), Buckets(5, 1)):
        full, findings = _replay_in_buckets(ctl.log, buckets)
        assert findings == []
        assert sorted(k[1] for k in full.live.table) == sorted(n for n, _ in every[:6])

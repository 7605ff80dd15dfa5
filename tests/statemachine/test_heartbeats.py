"""BROKER_HEARTBEATS (1202): the heartbeats one leader loop turn received, in one entry. It must apply exactly as
its heartbeats' 1018s at the same time would, in order; below feature level 2, or malformed anywhere, it changes
nothing (not even the clock), as a release that does not know it would."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd

from .harness import T0, tables


def leveled(level: int = 2) -> ControllerStateMachine:
    sm = ControllerStateMachine()
    assert sm.apply(cmd.feature_level(T0 - 1, level)).ok
    return sm


def item(name: str, broker_id: int, **more: int) -> list[str | int]:
    return cmd.heartbeat_item(
        {
            "clusterName": "c",
            "brokerName": name,
            "brokerAddr": f"10.0.0.{broker_id}:10911",
            "brokerId": broker_id,
            **more,
        }
    )


beats = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 3),
        st.integers(-1, 4),  # epoch
        st.integers(-1, 1 << 40),  # maxOffset
        st.integers(1000, 20_000),  # heartbeatTimeoutMillis
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(before=beats, batch=beats, dt=st.integers(-5_000, 5_000))
def test_a_batch_applies_as_its_heartbeats_would_one_by_one(
    before: list[tuple[str, int, int, int, int]], batch: list[tuple[str, int, int, int, int]], dt: int
) -> None:
    """Same sections, same clock, same answer: the batch against the same heartbeats as 1018s at its time, after
    some earlier heartbeats (so rows are merged, not only created), at a time before or after the clock."""
    one, many = leveled(), leveled()
    for name, bid, epoch, offset, timeout in before:
        h = item(name, bid, epoch=epoch, maxOffset=offset, heartbeatTimeoutMillis=timeout)
        for sm in (one, many):
            assert sm.apply(cmd.encode(C.BROKER_HEARTBEAT, T0, *h)).ok
    items = [item(n, b, epoch=e, maxOffset=o, heartbeatTimeoutMillis=t) for n, b, e, o, t in batch]
    answers = {one.apply(cmd.encode(C.BROKER_HEARTBEAT, T0 + dt, *h)) for h in items}
    assert answers == {many.apply(cmd.heartbeats(T0 + dt, items))}
    assert tables(many) == tables(one) and many.live.clock == one.live.clock == max(T0, T0 + dt)
    assert [many.live.packed[k] for k in many.live.table] == [msgpack.packb(r) for r in many.live.table.values()]


def test_below_level_2_it_changes_nothing_and_says_which_level() -> None:
    for level in (0, 1):
        sm = leveled(level) if level else ControllerStateMachine()
        before, clock = tables(sm), sm.live.clock
        r = sm.apply(cmd.heartbeats(T0 + 10, [item("a", 1), item("a", 2)]))  # two: one would be a 1018
        assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR
        assert (
            r.remark == f"RAFT_BROKER_HEART_BEATS needs feature level 2; the group is at {level} (rmqctl raft features)"
        )
        assert tables(sm) == before and sm.live.clock == clock and not sm.live.table


def test_one_bad_heartbeat_refuses_the_whole_entry() -> None:
    good = item("a", 1)
    for bad, field in (
        ([], "heartbeats"),  # no heartbeat at all
        ([good, good[:-1]], "heartbeats"),  # one too short
        ([good, [*good[:3], "1", *good[4:]]], "heartbeats"),  # a brokerId that is text
        ([good, [*good[:4], True, *good[5:]]], "heartbeats"),  # a bool for an int
        ("x", "heartbeats"),
    ):
        sm = leveled()
        before, clock = tables(sm), sm.live.clock
        r = sm.apply(msgpack.packb([cmd.FORMAT_VERSION, C.BROKER_HEARTBEATS, T0 + 10, bad]))
        assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR and repr(field) in (r.remark or ""), r
        assert tables(sm) == before and sm.live.clock == clock and not sm.live.table


def test_the_constructor_names_the_field_at_fault() -> None:
    cases: tuple[tuple[dict[str, Any], str], ...] = (
        ({"clusterName": "c", "brokerName": "a", "brokerAddr": "x:1"}, "brokerId"),  # required, no default
        ({"clusterName": "c", "brokerName": "a", "brokerAddr": "x:1", "brokerId": 1 << 64}, "brokerId"),
        ({"clusterName": "c", "brokerName": 3, "brokerAddr": "x:1", "brokerId": 1}, "brokerName"),
        ({"clusterName": "c", "brokerName": "a", "brokerAddr": "x:1", "brokerId": 1, "epoch": "2"}, "epoch"),
    )
    for fields, field in cases:
        try:
            cmd.heartbeat_item(fields)
        except cmd.CommandError as e:
            assert e.field == field, (fields, e)
        else:
            raise AssertionError(f"{fields} accepted")


def test_the_batch_is_what_one_by_one_encodes_after_the_header() -> None:
    """Each heartbeat of a 1202 is its 1018's fields after timeMillis, byte for byte (docs/statemachine.md)."""
    h = item("a", 1, epoch=5, maxOffset=1000)
    single = msgpack.unpackb(cmd.heartbeat(T0, "c", "a", "10.0.0.1:10911", 1, epoch=5, max_offset=1000))
    assert msgpack.unpackb(cmd.heartbeats(T0, [h, h])) == [
        cmd.FORMAT_VERSION,
        C.BROKER_HEARTBEATS,
        T0,
        [single[3:]] * 2,
    ]

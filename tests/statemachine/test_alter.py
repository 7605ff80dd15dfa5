"""alterSyncStateSet (spec §4.5): the prechecks in their exact order, with RocketMQ's codes and remarks.

Each test breaks one check and everything after it, so a check evaluated out of order shows up as the
wrong code."""

from __future__ import annotations

from statemachine import codes as C

from .harness import BROKER, Ctl, remark

PREFIX = "Rejecting alter syncStateSet request because"


def ready() -> Ctl:
    """Master 1, masterEpoch 1, SyncStateSet {1,2,3} at syncStateSetEpoch 2; broker 4 registered and alive."""
    ctl = Ctl()
    ctl.group(3)
    assert ctl.register_new("127.0.0.1:9003") == 4
    ctl.hb(4, "127.0.0.1:9003")
    return ctl


def test_1_unknown_set() -> None:
    r = ready().alter(9, 9, {9}, 9, name="nope")
    assert (r.code, r.remark) == (C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
    assert r.header == {"newSyncStateSetEpoch": None} and r.body is None


def test_2_equal_set_comes_before_the_master_check() -> None:
    r = ready().alter(2, 0, {3, 2, 1}, 0)
    assert r.code == C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert r.remark == "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"


def test_3_requester_is_not_the_master() -> None:
    r = ready().alter(2, 0, {2, 9}, 0)
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_MASTER, f"{PREFIX} the current leader is:{{1}}, not {{2}}")


def test_3_no_master_at_all() -> None:
    ctl = Ctl()
    ctl.register_new("127.0.0.1:9000")
    r = ctl.alter(1, 0, {1}, 0)
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_MASTER, f"{PREFIX} the current leader is:{{null}}, not {{1}}")


def test_4_stale_master_epoch() -> None:
    r = ready().alter(1, 0, {1, 9}, 0)
    assert (r.code, r.remark) == (
        C.CONTROLLER_FENCED_MASTER_EPOCH,
        f"{PREFIX} the current master epoch is:{{1}}, not {{0}}",
    )


def test_5_stale_sync_state_set_epoch() -> None:
    r = ready().alter(1, 1, {1, 9}, 1)
    assert (r.code, r.remark) == (
        C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        f"{PREFIX} the current syncStateSet epoch is:{{2}}, not {{1}}",
    )


def test_6_unregistered_member() -> None:
    r = ready().alter(1, 1, {1, 9}, 2)
    assert (r.code, r.remark) == (C.CONTROLLER_INVALID_REPLICAS, f"{PREFIX} the replicas {{9}} don't exist")


def test_6_dead_member_and_the_first_offending_member_wins() -> None:
    ctl = ready()
    ctl.hb(2, heartbeat_timeout_millis=-1)  # dead at the next command's time
    r = ctl.alter(1, 1, {1, 2, 9}, 2)  # 2 (dead) comes before 9 (unregistered)
    assert (r.code, r.remark) == (C.CONTROLLER_BROKER_NOT_ALIVE, f"{PREFIX} the replicas {{2}} don't alive")
    r = ctl.alter(1, 1, {1, 7, 2}, 2)  # now 2 comes after 7
    assert r.code == C.CONTROLLER_BROKER_NOT_ALIVE and "{2}" in remark(r)
    r = ctl.alter(1, 1, {1, 3, 5}, 2)
    assert r.code == C.CONTROLLER_INVALID_REPLICAS and "{5}" in remark(r)


def test_6_liveness_is_judged_at_the_command_time() -> None:
    ctl = ready()
    ctl.hb(4, "127.0.0.1:9003", heartbeat_timeout_millis=1000)
    ctl.advance(1000)
    assert ctl.alter(1, 1, {1, 4}, 2).ok  # exactly at last + timeout: alive
    ctl.advance(1)
    assert ctl.alter(1, 1, {1, 2, 3, 4}, 3).code == C.CONTROLLER_BROKER_NOT_ALIVE


def test_7_new_set_without_the_master() -> None:
    r = ready().alter(1, 1, {2, 3}, 2)
    assert (r.code, r.remark) == (
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        f"{PREFIX} the newSyncStateSet don't contains origin leader {{1}}",
    )


def test_8_success_replaces_the_set_and_bumps_only_its_epoch() -> None:
    ctl = ready()
    r = ctl.alter(1, 1, {4, 1}, 2)
    assert r.ok and r.remark is None
    assert r.header == {"newSyncStateSetEpoch": 3}
    assert r.body == {"syncStateSet": [1, 4], "syncStateSetEpoch": 3}
    assert ctl.state() == (1, 1, [1, 4], 3)
    assert ctl.alter(1, 1, {1, 2, 3, 4}, 2).code == C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH  # the old epoch is fenced


def test_refusals_change_nothing() -> None:
    ctl = ready()
    before = ctl.sm.encode_sections()
    for args in [(2, 1, {1, 2}, 2), (1, 0, {1}, 2), (1, 1, {1}, 0), (1, 1, {1, 9}, 2), (1, 1, {2}, 2)]:
        assert not ctl.alter(*args).ok
    assert ctl.sm.encode_sections() == before
    assert ctl.data().body["replicasInfoTable"][BROKER]["syncStateSetEpoch"] == 2

"""electMaster and the elect policy (spec §4.4): first election, kept master, ranking by epoch, offset and
priority, unclean and admin-designated elections, and the 2004/2012 failure split."""

from __future__ import annotations

from statemachine import codes as C

from .harness import BROKER, CLUSTER, IPS, Ctl, header

DEAD = -10_000  # a heartbeat timeout that makes the broker dead at once


def live_group(**per_broker: dict) -> Ctl:
    """group(3) (master 1, SyncStateSet {1,2,3}), then one heartbeat per broker with the given fields."""
    ctl = Ctl()
    ctl.group(3)
    for key, fields in per_broker.items():
        ctl.hb(int(key[1:]), **fields)
    return ctl


def test_first_election_goes_to_the_requester_without_liveness_check() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.register_new(IPS[1])
    r = ctl.elect(2)  # nobody ever sent a heartbeat
    assert r.ok and r.remark is None
    assert r.header == {"masterBrokerId": 2, "masterAddress": IPS[1], "masterEpoch": 1, "syncStateSetEpoch": 1}
    assert r.body == {
        "brokerMemberGroup": {"cluster": CLUSTER, "brokerName": BROKER, "brokerAddrs": {"1": IPS[0], "2": IPS[1]}},
        "syncStateSet": [2],
    }
    assert ctl.state() == (2, 1, [2], 1)


def test_first_election_of_an_unregistered_id_is_refused() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    r = ctl.elect(7)
    assert (r.code, r.remark) == (
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        f"BrokerId: 7 hasn't been registered in broker-set: {BROKER}",
    )
    assert ctl.state() == (None, 0, [], 0)


def test_elect_on_unknown_set() -> None:
    r = Ctl().elect(1)
    assert (r.code, r.remark) == (C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    assert r.header == {"masterBrokerId": None, "masterAddress": None, "masterEpoch": None, "syncStateSetEpoch": None}


def test_alive_master_is_kept_for_every_trigger() -> None:
    ctl = live_group()
    for r in (ctl.elect(2), ctl.elect(None), ctl.elect(1, designate=True)):
        assert r.code == C.CONTROLLER_MASTER_STILL_EXIST
        assert r.remark == f"The old master 1 is still alive, not need to elect new master for broker {BROKER}"
        assert r.header == {"masterBrokerId": 1, "masterAddress": IPS[0], "masterEpoch": 1, "syncStateSetEpoch": 2}
        assert r.body == {"syncStateSet": [1, 2, 3]}
    assert ctl.state() == (1, 1, [1, 2, 3], 2)


def test_broker_trigger_elects_the_only_alive_in_sync_broker() -> None:
    ctl = live_group(b1={"heartbeat_timeout_millis": DEAD}, b2={"heartbeat_timeout_millis": DEAD})
    r = ctl.elect(3)
    assert r.ok and header(r)["masterBrokerId"] == 3 and header(r)["masterAddress"] == IPS[2]
    table = ctl.data().body["replicasInfoTable"][BROKER]
    assert (table["masterBrokerId"], table["masterEpoch"], table["syncStateSetEpoch"]) == (3, 2, 3)
    assert len(table["inSyncReplicas"]) == 1 and len(table["notInSyncReplicas"]) == 2


def test_prefers_higher_epoch() -> None:
    ctl = live_group(
        b1={"heartbeat_timeout_millis": DEAD, "epoch": 1, "max_offset": 3},
        b2={"epoch": 1, "max_offset": 2},
        b3={"epoch": 0, "max_offset": 3},
    )
    r = ctl.elect(None)
    assert r.ok and r.header == {"masterBrokerId": 2, "masterAddress": IPS[1], "masterEpoch": 2, "syncStateSetEpoch": 3}


def test_prefers_higher_offset_when_epochs_are_equal() -> None:
    ctl = live_group(
        b1={"heartbeat_timeout_millis": DEAD, "epoch": 1, "max_offset": 3},
        b2={"epoch": 1, "max_offset": 2},
        b3={"epoch": 1, "max_offset": 3},
    )
    r = ctl.elect(None)
    assert (header(r)["masterBrokerId"], header(r)["masterAddress"], header(r)["masterEpoch"]) == (3, IPS[2], 2)


def test_prefers_lower_priority_value_when_epoch_and_offset_are_equal() -> None:
    ctl = live_group(
        b1={"heartbeat_timeout_millis": DEAD, "epoch": 1, "max_offset": 3, "election_priority": 3},
        b2={"epoch": 1, "max_offset": 3, "election_priority": 2},
        b3={"epoch": 1, "max_offset": 3, "election_priority": 1},
    )
    r = ctl.elect(None)
    assert header(r)["masterBrokerId"] == 3 and header(r)["masterEpoch"] == 2


def test_exact_ties_go_to_the_lowest_id_and_extreme_values_do_not_overflow() -> None:
    ctl = live_group(
        b1={"heartbeat_timeout_millis": DEAD},
        b2={"epoch": 5, "max_offset": 2**62, "election_priority": -(2**31)},
        b3={"epoch": 5, "max_offset": 2**62, "election_priority": -(2**31)},
    )
    assert header(ctl.elect(None))["masterBrokerId"] == 2
    ctl = live_group(b1={"heartbeat_timeout_millis": DEAD}, b2={"max_offset": -(2**62)}, b3={"max_offset": 2**62})
    assert header(ctl.elect(None))["masterBrokerId"] == 3  # Java's (int) (o2 - o1) would overflow here


def test_admin_designated_election() -> None:
    ctl = live_group(b1={"heartbeat_timeout_millis": DEAD})
    r = ctl.elect(None)  # controller trigger: 1 is dead, 2 wins the tie
    assert r.ok and header(r)["masterBrokerId"] == 2 and header(r)["masterEpoch"] == 2
    assert ctl.alter(2, 2, {2, 3}, 3).ok
    # the admin wants 1, which is not alive: nothing changes
    r = ctl.elect(1, designate=True)
    assert (r.code, r.remark) == (C.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")
    assert header(r)["masterBrokerId"] is None and ctl.state() == (2, 2, [2, 3], 4)
    # the admin designates the current master: kept
    assert ctl.elect(2, designate=True).code == C.CONTROLLER_MASTER_STILL_EXIST
    # 1 is back and in sync: the admin moves the master to it even though the old master is alive
    ctl.hb(1)
    assert ctl.alter(2, 2, {1, 2, 3}, 4).ok
    r = ctl.elect(1, designate=True)
    assert r.ok and r.header == {"masterBrokerId": 1, "masterAddress": IPS[0], "masterEpoch": 3, "syncStateSetEpoch": 6}


def test_designated_broker_outside_the_sync_state_set_needs_unclean_election() -> None:
    ctl = live_group()
    assert ctl.alter(1, 1, {1, 2}, 2).ok  # 3 leaves the SyncStateSet
    assert ctl.elect(3, designate=True).code == C.CONTROLLER_ELECT_MASTER_FAILED
    assert ctl.config(enableElectUncleanMaster=True).ok
    r = ctl.elect(3, designate=True)
    assert r.ok and header(r)["masterBrokerId"] == 3 and ctl.state() == (3, 2, [3], 4)


def test_all_replicas_shut_down_then_the_last_master_restarts() -> None:
    ctl = live_group()
    assert ctl.alter(1, 1, {1}, 2).ok
    ctl.hb(1, heartbeat_timeout_millis=DEAD)
    r = ctl.elect(None)  # controller trigger: the SyncStateSet {1} has nobody alive
    assert (r.code, r.remark) == (
        C.CONTROLLER_MASTER_NOT_AVAILABLE,
        "Old master has down and failed to elect a new broker master",
    )
    assert r.header == {"masterBrokerId": None, "masterAddress": None, "masterEpoch": None, "syncStateSetEpoch": None}
    assert ctl.state() == (None, 2, [1], 3)  # master cleared, masterEpoch bumped, the set and its epoch kept
    # a broker outside the set asks: still nobody, and a broker trigger changes nothing (2012)
    assert ctl.elect(2).code == C.CONTROLLER_ELECT_MASTER_FAILED
    assert ctl.state() == (None, 2, [1], 3)
    ctl.hb(1)  # the old master restarts
    r = ctl.elect(2)
    assert r.ok and header(r)["masterBrokerId"] == 1 and ctl.state() == (1, 3, [1], 4)


def test_unclean_election_is_replicated_config() -> None:
    ctl = live_group()
    assert ctl.alter(1, 1, {1}, 2).ok
    ctl.hb(1, heartbeat_timeout_millis=DEAD)
    assert ctl.elect(2).code == C.CONTROLLER_ELECT_MASTER_FAILED
    assert ctl.config(enableElectUncleanMaster=True).ok
    r = ctl.elect(3)  # any alive registered replica now; broker trigger does not prefer itself
    assert r.ok and header(r)["masterBrokerId"] == 2 and ctl.state() == (2, 2, [2], 4)


def test_successful_election_notifies_the_alive_members() -> None:
    ctl = live_group(b1={"heartbeat_timeout_millis": DEAD}, b3={"heartbeat_timeout_millis": DEAD})
    r = ctl.elect(None)
    (note,) = r.notifications
    assert (note.broker_name, note.master_broker_id, note.master_address) == (BROKER, 2, IPS[1])
    assert (note.master_epoch, note.sync_state_set_epoch, note.sync_state_set) == (2, 3, (2,))
    assert note.targets == ((2, IPS[1]),)
    assert note.header() == {"masterAddress": IPS[1], "masterEpoch": 2, "syncStateSetEpoch": 3, "masterBrokerId": 2}
    assert note.body() == {"syncStateSet": [2], "syncStateSetEpoch": 3}
    assert ctl.elect(2).notifications == ()  # kept master: nothing to push


def test_notifications_follow_the_replicated_switch() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.hb(1)
    assert ctl.config(notifyBrokerRoleChanged=False).ok
    r = ctl.elect(1)
    assert r.ok and r.notifications == ()

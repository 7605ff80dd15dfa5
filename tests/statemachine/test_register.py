"""Registration (spec §4.1-4.3): getNextBrokerId, applyBrokerId, registerBroker."""

from __future__ import annotations

from statemachine import codes as C

from .harness import BROKER, CLUSTER, IPS, T0, Ctl, header


def test_next_broker_id_of_an_unknown_set_is_1() -> None:
    r = Ctl().next_id()
    assert r.ok and r.header == {"clusterName": CLUSTER, "brokerName": BROKER, "nextBrokerId": 1}


def test_three_step_registration_assigns_ids_in_sequence() -> None:
    ctl = Ctl()
    assert [ctl.register_new(ip) for ip in IPS] == [1, 2, 3]
    assert header(ctl.next_id())["nextBrokerId"] == 4
    body = ctl.data().body["replicasInfoTable"][BROKER]
    assert body["masterBrokerId"] is None and body["inSyncReplicas"] == []
    assert [(r["brokerId"], r["brokerAddress"], r["alive"]) for r in body["notInSyncReplicas"]] == [
        (1, IPS[0], False),
        (2, IPS[1], False),
        (3, IPS[2], False),
    ]


def test_apply_on_unknown_set_accepts_only_id_1() -> None:
    ctl = Ctl()
    r = ctl.apply_id(2, IPS[1])
    assert r.code == C.CONTROLLER_BROKER_ID_INVALID
    assert r.remark == f"Broker-set: {BROKER} hasn't been registered in controller, but broker try to apply brokerId: 2"
    assert r.header == {"clusterName": CLUSTER, "brokerName": BROKER}
    assert ctl.info().code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert ctl.apply_id(1, IPS[0]).ok and ctl.info().ok


def test_apply_of_a_taken_id_with_another_check_code_is_refused() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    r = ctl.apply_id(1, IPS[1])
    assert (r.code, r.remark) == (C.CONTROLLER_BROKER_ID_INVALID, f"Fail to apply brokerId: 1 in broker-set: {BROKER}")


def test_apply_retry_with_the_same_check_code_is_idempotent() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    before = ctl.sm.encode_sections()
    assert ctl.apply_id(1, IPS[0]).ok  # the broker retries after a timeout
    assert ctl.sm.encode_sections() == before  # in particular nextAssignBrokerId did not move
    assert header(ctl.next_id())["nextBrokerId"] == 2


def test_address_is_the_check_code_up_to_the_first_semicolon() -> None:
    ctl = Ctl()
    assert ctl.apply_id(1, "ignored", code="10.1.1.1:10911;1700000000000;x").ok
    assert ctl.apply_id(2, "ignored", code="10.1.1.2:10911").ok  # no ';': the whole code
    rows = ctl.data().body["replicasInfoTable"][BROKER]["notInSyncReplicas"]
    assert [r["brokerAddress"] for r in rows] == ["10.1.1.1:10911", "10.1.1.2:10911"]


def test_any_unused_id_is_accepted_and_next_id_skips_taken_ones() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    assert ctl.apply_id(3, IPS[2]).ok  # out of sequence
    assert ctl.sm.replicas.sets[BROKER].next_assign_broker_id == 3  # 1 + ids ever added (spec §2.1)
    # RocketMQ would answer 3 (taken) and the next broker would loop on 2014; we answer the first free id.
    assert header(ctl.next_id())["nextBrokerId"] == 4
    assert ctl.register_new(IPS[1]) == 4


def test_register_unknown_set_or_id() -> None:
    ctl = Ctl()
    r = ctl.register(1, IPS[0])
    assert (r.code, r.remark) == (
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        f"Broker-set: {BROKER} hasn't been registered in controller",
    )
    assert header(r)["clusterName"] == CLUSTER and header(r)["masterBrokerId"] is None
    ctl.register_new(IPS[0])
    r = ctl.register(5, IPS[1])
    assert (r.code, r.remark) == (
        C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        f"BrokerId: 5 hasn't been registered in broker-set: {BROKER}",
    )


def test_register_never_elects_and_reports_no_master_before_an_election() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.hb(1)
    r = ctl.register(1, IPS[0])
    assert r.ok and header(r)["masterBrokerId"] is None and header(r)["masterEpoch"] is None
    assert r.body == {"syncStateSet": [], "syncStateSetEpoch": 0}
    assert ctl.state() == (None, 0, [], 0)


def test_register_reports_an_alive_master() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.register_new(IPS[1])
    ctl.hb(1)
    assert ctl.elect(1).ok
    assert ctl.elect(2).code == C.CONTROLLER_MASTER_STILL_EXIST
    ctl.hb(3)
    assert ctl.register_new(IPS[2]) == 3
    r = ctl.register(3, IPS[2])
    assert r.header == {
        "clusterName": CLUSTER,
        "brokerName": BROKER,
        "masterBrokerId": 1,
        "masterAddress": IPS[0],
        "masterEpoch": 1,
        "syncStateSetEpoch": 1,
    }
    assert r.body == {"syncStateSet": [1], "syncStateSetEpoch": 1}
    table = ctl.data().body["replicasInfoTable"][BROKER]
    assert [x["brokerId"] for x in table["inSyncReplicas"]] == [1]
    assert [x["brokerId"] for x in table["notInSyncReplicas"]] == [2, 3]


def test_register_hides_a_master_that_is_not_alive_at_the_command_time() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.register_new(IPS[1])
    ctl.hb(1, heartbeat_timeout_millis=3000)
    assert ctl.elect(1).ok
    ctl.advance(3000)  # last + timeout >= t: still alive at the boundary
    assert header(ctl.register(2, IPS[1]))["masterBrokerId"] == 1
    ctl.advance(1)
    r = ctl.register(2, IPS[1])
    assert r.ok and header(r)["masterBrokerId"] is None and header(r)["masterAddress"] is None
    assert r.body == {"syncStateSet": [1], "syncStateSetEpoch": 1}


def test_register_with_a_new_address_updates_it_and_keeps_the_check_code() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    ctl.hb(1)
    assert ctl.elect(1).ok
    assert ctl.register(1, "10.9.9.9:10911").ok
    assert header(ctl.info())["masterAddress"] == "10.9.9.9:10911"
    assert ctl.apply_id(1, IPS[0], code=f"{IPS[0]};{T0}").ok  # the original check code still matches


def test_full_registration_then_sync_state_set_of_all_three() -> None:
    ctl = Ctl()
    ctl.group(3)
    table = ctl.data().body["replicasInfoTable"][BROKER]
    assert (table["masterBrokerId"], table["masterAddress"], table["masterEpoch"]) == (1, IPS[0], 1)
    assert table["syncStateSetEpoch"] == 2
    assert len(table["inSyncReplicas"]) == 3 and table["notInSyncReplicas"] == []
    assert all(x["alive"] for x in table["inSyncReplicas"])

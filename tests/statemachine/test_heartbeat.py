"""The replicated broker live table (spec §2.3) and what the heartbeat manager tests of RocketMQ check:
heartbeat merge, liveness at the entry's time, the inactive-broker scan, close-channel, live-info lookups,
and the scan-driven re-election with electMasterMaxRetryCount (spec §6)."""

from __future__ import annotations

import msgpack

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.commands import DEFAULT_ELECTION_PRIORITY
from statemachine.sections import SECTION_BROKER_LIVE_TABLE as LIVE

from .harness import BROKER, CLUSTER, IPS, T0, TIMEOUT, Ctl, tables


def live(ctl: Ctl, broker_id: int, name: str = BROKER) -> dict:
    r = ctl.live_info((CLUSTER, name, broker_id))
    assert r.ok, r
    (entry,) = r.body
    return entry


def test_heartbeat_answers_success_and_fills_defaults() -> None:
    ctl = Ctl()
    r = ctl.hb(1, IPS[0])
    assert (r.code, r.remark, r.header, r.body) == (C.SUCCESS, "Heart beat success", None, None)
    assert live(ctl, 1) == {
        "clusterName": CLUSTER,
        "brokerName": BROKER,
        "brokerId": 1,
        "brokerAddr": IPS[0],
        "lastUpdateTimestamp": T0,
        "heartbeatTimeoutMillis": TIMEOUT,
        "epoch": -1,
        "maxOffset": -1,
        "confirmOffset": -1,
        "electionPriority": DEFAULT_ELECTION_PRIORITY,
    }


def test_merge_rule() -> None:
    ctl = Ctl()
    ctl.hb(1, IPS[0], epoch=2, max_offset=100, confirm_offset=90, heartbeat_timeout_millis=5000, election_priority=3)
    ctl.advance(1000)
    # older progress: only time, timeout and priority move; the address never changes after the first beat
    ctl.hb(
        1, "10.9.9.9:1", epoch=1, max_offset=500, confirm_offset=400, heartbeat_timeout_millis=7000, election_priority=1
    )
    e = live(ctl, 1)
    assert (e["brokerAddr"], e["lastUpdateTimestamp"], e["heartbeatTimeoutMillis"], e["electionPriority"]) == (
        IPS[0],
        T0 + 1000,
        7000,
        1,
    )
    assert (e["epoch"], e["maxOffset"], e["confirmOffset"]) == (2, 100, 90)
    ctl.hb(1, epoch=2, max_offset=99, confirm_offset=99)  # same epoch, lower offset: kept
    assert (live(ctl, 1)["maxOffset"], live(ctl, 1)["confirmOffset"]) == (100, 90)
    ctl.hb(1, epoch=2, max_offset=101, confirm_offset=95)  # same epoch, higher offset: taken
    assert (live(ctl, 1)["maxOffset"], live(ctl, 1)["confirmOffset"]) == (101, 95)
    ctl.hb(1, epoch=3, max_offset=0, confirm_offset=0)  # higher epoch wins even with a lower offset
    assert (live(ctl, 1)["epoch"], live(ctl, 1)["maxOffset"]) == (3, 0)


def test_live_info_lookup() -> None:
    ctl = Ctl()
    ctl.hb(2, IPS[1])
    ctl.hb(1, IPS[0], name="a-set")
    r = ctl.live_info()
    assert r.ok and [(e["brokerName"], e["brokerId"]) for e in r.body] == [("a-set", 1), (BROKER, 2)]
    r = ctl.live_info((CLUSTER, BROKER, 7))
    assert (r.code, r.remark, r.body) == (C.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS, "brokerIdentityInfo not exist", [])
    assert ctl.live_info(("other-cluster", BROKER, 2)).code == C.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS


def test_scan_expires_strictly_after_the_timeout() -> None:
    # RocketMQ's heartbeat manager test: a broker beats once with a 3 s timeout and is then reported inactive.
    ctl = Ctl()
    ctl.hb(1, "127.0.0.1:7000", name="broker1", cluster="cluster1", heartbeat_timeout_millis=3000)
    ctl.hb(2, IPS[1])
    ctl.advance(3000)
    r = ctl.scan()
    assert r.ok and r.body["inactiveBrokers"] == [] and r.body["checkTimeMillis"] == T0 + 3000
    ctl.advance(1)
    r = ctl.scan()
    assert r.body["inactiveBrokers"] == [{"clusterName": "cluster1", "brokerName": "broker1", "brokerId": 1}]
    assert r.body["elections"] == [] and r.body["newMasters"] == []
    assert ctl.live_info(("cluster1", "broker1", 1)).code == C.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS
    assert ctl.live_info((CLUSTER, BROKER, 2)).ok


def test_scan_reports_expired_brokers_sorted() -> None:
    ctl = Ctl()
    for name, bid in [("b", 2), ("a", 3), ("b", 1), ("a", 1)]:
        ctl.hb(bid, name=name)
    ctl.advance(TIMEOUT + 1)
    ids = [(x["brokerName"], x["brokerId"]) for x in ctl.scan().body["inactiveBrokers"]]
    assert ids == [("a", 1), ("a", 3), ("b", 1), ("b", 2)]


def beat_all_but(ctl: Ctl, dead: set[int], n: int = 3) -> None:
    for b in range(1, n + 1):
        if b not in dead:
            ctl.hb(b)


def test_expired_master_is_replaced_by_the_scan() -> None:
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(6000)
    ctl.hb(2, epoch=1, max_offset=10)
    ctl.hb(3, epoch=1, max_offset=20)
    ctl.advance(TIMEOUT - 6000 + 1)  # 1 has expired, 2 and 3 have not
    r = ctl.scan()
    assert r.body["inactiveBrokers"] == [{"clusterName": CLUSTER, "brokerName": BROKER, "brokerId": 1}]
    (election,) = r.body["elections"]
    assert election == {
        "brokerName": BROKER,
        "trigger": "masterExpired",
        "code": 0,
        "codeName": "SUCCESS",
        "remark": None,
        "masterBrokerId": 3,
        "masterAddress": IPS[2],
        "masterEpoch": 2,
        "retriesLeft": 0,
    }
    assert r.body["newMasters"] == [
        {"brokerName": BROKER, "masterBrokerId": 3, "masterAddress": IPS[2], "masterEpoch": 2}
    ]
    (note,) = r.notifications
    assert note.master_broker_id == 3 and note.targets == ((2, IPS[1]), (3, IPS[2]))
    assert ctl.state() == (3, 2, [3], 3)
    assert not ctl.sm.scan_needed(ctl.now)


def test_intended_rule_master_inactive_while_a_replica_lives() -> None:
    ctl = Ctl()
    ctl.group(3)
    assert ctl.close(1).body["elections"][0]["code"] == C.SUCCESS  # close-channel of the master re-elects
    assert ctl.state()[0] == 2
    # a master elected without ever heartbeating (the first election skips liveness) is inactive at once
    ctl2 = Ctl()
    for ip in IPS[:2]:
        ctl2.register_new(ip)
    ctl2.hb(2)
    assert ctl2.elect(1).ok
    assert ctl2.alter(1, 1, {1, 2}, 1).code == C.CONTROLLER_BROKER_NOT_ALIVE
    assert ctl2.sm.scan_needed(ctl2.now)
    r = ctl2.scan()
    assert r.body["inactiveBrokers"] == []
    (election,) = r.body["elections"]
    # the SyncStateSet is {1} and 1 is dead: nobody to elect, so the master is cleared (2004)
    assert (election["trigger"], election["code"], election["retriesLeft"]) == ("masterInactive", 2004, 2)
    assert ctl2.state() == (None, 2, [1], 1)


def test_inverted_predicate_is_not_used() -> None:
    """ISSUE #8380: RocketMQ's jRaft scan selects sets whose master is alive and some replica is not. Those
    must not be touched; only the intended rule triggers elections."""
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(TIMEOUT)
    beat_all_but(ctl, {3})
    ctl.advance(1)
    r = ctl.scan()
    assert [x["brokerId"] for x in r.body["inactiveBrokers"]] == [3]
    assert r.body["elections"] == []
    assert ctl.state() == (1, 1, [1, 2, 3], 2)


def test_an_abandoned_set_is_reported_once_and_its_epoch_bumped_once() -> None:
    """Every broker of the set is gone: the first scan clears the master (2004, masterEpoch + 1, as RocketMQ's
    not-elected event). The retries the later scans spend find nobody either, and with no master left to
    clear they change nothing: no epoch bump, no report (RocketMQ bumps the epoch on every failed retry;
    issue 23: an abandoned set said "no master elected" every scan while its epoch climbed)."""
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(TIMEOUT + 1)  # everyone died
    r = ctl.scan()
    (election,) = r.body["elections"]
    assert election["code"] == C.CONTROLLER_MASTER_NOT_AVAILABLE
    assert (election["trigger"], election["masterEpoch"], election["retriesLeft"]) == ("masterExpired", 2, 2)
    for left in (1, 0):
        ctl.advance(5000)
        assert ctl.sm.scan_needed(ctl.now)  # a retry is owed: the scan runs, and changes nothing
        before = {k: v for k, v in tables(ctl.sm).items() if k != LIVE}
        assert ctl.scan().body["elections"] == []
        assert ctl.sm.live.reelect.get(BROKER, 0) == left
        assert {k: v for k, v in tables(ctl.sm).items() if k != LIVE} == before  # every other table untouched
    assert not ctl.sm.scan_needed(ctl.now)  # electMasterMaxRetryCount (3) attempts spent
    assert ctl.scan().body["elections"] == []
    assert ctl.state() == (None, 2, [1, 2, 3], 2)


def test_a_controller_triggered_election_of_a_set_that_never_had_a_master_bumps_its_epoch_as_rocketmq() -> None:
    ctl = Ctl()
    ctl.register_new(IPS[0])
    r = ctl.elect(None)  # controller trigger (brokerId -1), nobody alive
    assert r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE
    assert ctl.state()[:2] == (None, 1)  # RocketMQ's not-elected event: the first-election rule no longer applies
    r = ctl.elect(None)
    assert r.code == C.CONTROLLER_MASTER_NOT_AVAILABLE and ctl.state()[:2] == (None, 1)  # nothing to clear


def test_a_retry_succeeds_when_a_sync_replica_returns() -> None:
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(TIMEOUT + 1)
    assert ctl.scan().body["elections"][0]["code"] == C.CONTROLLER_MASTER_NOT_AVAILABLE
    ctl.advance(5000)
    ctl.hb(2)  # back
    r = ctl.scan()
    assert r.body["elections"][0]["trigger"] == "retry" and r.body["newMasters"][0]["masterBrokerId"] == 2
    assert ctl.state() == (2, 3, [2], 3)
    assert not ctl.sm.scan_needed(ctl.now)


def test_retry_count_is_replicated_config() -> None:
    ctl = Ctl()
    ctl.group(3)
    assert ctl.config(electMasterMaxRetryCount=1).ok
    ctl.advance(TIMEOUT + 1)
    assert ctl.scan().body["elections"][0]["retriesLeft"] == 0
    assert ctl.scan().body["elections"] == []
    ctl = Ctl()
    ctl.group(3)
    assert ctl.config(electMasterMaxRetryCount=0).ok  # RocketMQ's loop then never runs
    ctl.advance(TIMEOUT + 1)
    r = ctl.scan()
    assert len(r.body["inactiveBrokers"]) == 3 and r.body["elections"] == []
    assert ctl.state() == (1, 1, [1, 2, 3], 2)


def test_close_channel() -> None:
    ctl = Ctl()
    ctl.group(3)
    r = ctl.close(3)  # a slave: forgotten, nothing else
    assert r.ok and r.body == {"removed": True, "elections": [], "newMasters": []}
    assert ctl.close(3).body["removed"] is False
    r = ctl.close(1)  # the master: re-elected at once
    assert r.body["elections"][0]["trigger"] == "channelClosed"
    assert r.body["newMasters"][0]["masterBrokerId"] == 2


def test_cleaned_set_drops_its_pending_retries() -> None:
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(TIMEOUT + 1)
    assert ctl.scan().body["elections"][0]["retriesLeft"] == 2
    assert ctl.clean(ids=None).ok  # the master is gone (cleared), so a blank clean is allowed
    assert ctl.scan().body["elections"] == []
    assert not ctl.sm.scan_needed(ctl.now)


def test_scan_needed() -> None:
    ctl = Ctl()
    assert not ctl.sm.scan_needed(ctl.now)
    ctl.group(3)
    assert not ctl.sm.scan_needed(ctl.now + TIMEOUT)
    assert ctl.sm.scan_needed(ctl.now + TIMEOUT + 1)
    ctl.hb(1, heartbeat_timeout_millis=100)  # an earlier deadline lowers the floor
    assert ctl.sm.scan_needed(ctl.now + 101)
    ctl.advance(101)
    ctl.scan()
    assert not ctl.sm.scan_needed(ctl.now)


# --- time never runs backwards across leaders (issue 12, bug 6) -------------------------------------------


def test_a_leader_whose_clock_is_behind_does_not_turn_time_back() -> None:
    """Leader A stamps a beat at T0; leader B, its clock a minute behind, stamps the next one; A leads again
    and scans 5 s after the broker's real last beat. Without the clamp the beat would be stored a minute in
    the past and A's scan would expire a healthy broker."""
    ctl = Ctl()
    ctl.hb(1, IPS[0])
    behind = Ctl(ctl.sm, now=T0 - 60_000)  # leader B's clock
    behind.hb(1)
    assert live(ctl, 1)["lastUpdateTimestamp"] == T0  # applied at max(T0 - 60 s, T0)
    assert ctl.sm.clock_ms == T0
    ctl.advance(5_000)  # leader A again
    r = ctl.scan()
    assert r.ok and r.body["inactiveBrokers"] == [], r.body
    assert ctl.sm.clock_ms == T0 + 5_000


def test_every_applied_command_moves_the_clock_and_reads_do_not() -> None:
    ctl = Ctl()
    ctl.hb(1, IPS[0])
    ctl.advance(3_000)
    ctl.live_info((CLUSTER, BROKER, 1))  # a read (answered outside the log): the clock stays
    ctl.info()
    ctl.next_id()
    assert ctl.sm.clock_ms == T0
    ctl.config(electMasterMaxRetryCount=2)  # any logged command moves it, whatever it answers
    assert ctl.sm.clock_ms == T0 + 3_000
    ctl.sm.apply(b"\xc1")  # bytes that are no command change nothing, the clock included
    assert ctl.sm.clock_ms == T0 + 3_000


def test_the_clock_survives_a_snapshot_and_a_version_1_section_loads() -> None:
    ctl = Ctl()
    ctl.hb(1, IPS[0])
    ctl.advance(7_000)
    ctl.config(electMasterMaxRetryCount=2)
    sections = ctl.sm.encode_sections()
    assert msgpack.unpackb(sections[LIVE])[0] == 2 and msgpack.unpackb(sections[LIVE])[-1] == T0 + 7_000
    restored = ControllerStateMachine()
    restored.load_sections(sections)
    assert restored.clock_ms == T0 + 7_000  # a restarted replica still refuses to go back
    Ctl(restored, now=T0).hb(1)
    assert live(Ctl(restored), 1)["lastUpdateTimestamp"] == T0 + 7_000
    # A version 1 body (written before the clock was kept) loads, its clock the latest beat it holds.
    v1 = msgpack.packb([1, *msgpack.unpackb(sections[LIVE])[1:3]])
    old = ControllerStateMachine()
    old.load_sections({**sections, LIVE: v1})
    assert old.clock_ms == T0 and old.live.table == ctl.sm.live.table


# --- a new leader's scans: aliveSinceMillis (issue 24 item 4, KAFKA-18138) --------------------------------

SHORT = 4_000  # broker B's heartbeat timeout in these tests


def failover_set() -> Ctl:
    """A set of two at T0: master 1 (broker B), SyncStateSet {1, 2}, both last heard at T0, timeout SHORT."""
    ctl = Ctl()
    ctl.group(2)
    ctl.hb(1, heartbeat_timeout_millis=SHORT)
    ctl.hb(2, heartbeat_timeout_millis=SHORT)
    assert ctl.state() == (1, 1, [1, 2], 2)
    return ctl


def test_a_scan_with_alive_since_judges_no_broker_on_heartbeats_before_the_takeover() -> None:
    """B's last heartbeat T0 was committed by the old leader; the new leader took over at T0 + 3000, so B had
    no way to reach it before. At T0 + 5000 B is past its timeout by its last heartbeat, but not by the
    takeover: not expired, not re-elected. At T0 + 7500 (takeover + timeout passed) it is."""
    ctl = failover_set()
    since = T0 + 3_000
    ctl.now = T0 + 5_000
    assert ctl.sm.scan_needed(ctl.now)  # by the heartbeats alone B (and 2) would go
    assert not ctl.sm.scan_needed(ctl.now, since)  # the leader's check uses the same floor: no scan proposed
    before = tables(ctl.sm)
    r = ctl.scan(since)
    assert r.ok and r.body["checkTimeMillis"] == T0 + 5_000 and r.body["aliveSinceMillis"] == since
    assert r.body["inactiveBrokers"] == [] and r.body["elections"] == [] and r.notifications == ()
    assert {k: v for k, v in tables(ctl.sm).items() if k != LIVE} == {k: v for k, v in before.items() if k != LIVE}
    assert ctl.state() == (1, 1, [1, 2], 2)
    # Reads keep the raw timestamps: B is not alive by its last heartbeat, whatever the last scan's floor.
    assert live(ctl, 1)["lastUpdateTimestamp"] == T0
    assert [r["alive"] for r in ctl.data().body["replicasInfoTable"][BROKER]["inSyncReplicas"]] == [False, False]
    ctl.now = T0 + 6_000
    ctl.hb(2, heartbeat_timeout_millis=SHORT)  # broker 2 reached the new leader; B never does
    ctl.now = T0 + 7_000
    assert not ctl.sm.scan_needed(ctl.now, since)  # takeover + timeout, not yet past it
    ctl.now = T0 + 7_500
    assert ctl.sm.scan_needed(ctl.now, since)
    r = ctl.scan(since)
    assert r.body["inactiveBrokers"] == [{"clusterName": CLUSTER, "brokerName": BROKER, "brokerId": 1}]
    (election,) = r.body["elections"]
    assert (election["trigger"], election["code"], election["masterBrokerId"]) == ("masterExpired", C.SUCCESS, 2)
    assert ctl.state() == (2, 2, [2], 3)
    assert not ctl.sm.scan_needed(ctl.now, since)


def test_a_scan_without_alive_since_judges_as_before() -> None:
    """The entry without the field (every log written before it existed) replays as it always did: at
    T0 + 5000 both brokers are past their timeout, expire, and the set loses its master."""
    ctl = failover_set()
    ctl.now = T0 + 5_000
    data = cmd.check_not_active_broker(ctl.now)
    assert len(msgpack.unpackb(data)) == 3  # [version, 1015, checkTimeMillis]: the legacy form
    r = ctl.run(data)
    assert r.body["aliveSinceMillis"] is None
    assert [b["brokerId"] for b in r.body["inactiveBrokers"]] == [1, 2]
    (election,) = r.body["elections"]
    assert (election["trigger"], election["code"]) == ("masterExpired", C.CONTROLLER_MASTER_NOT_AVAILABLE)
    assert ctl.state() == (None, 2, [1, 2], 2)


def test_the_floor_holds_for_the_scans_election_too() -> None:
    """Inside one scan entry every liveness question uses the floor: master 1 (timeout 1000) expires one
    timeout after the takeover, replica 2 (timeout SHORT, last heard before the takeover too) is kept, so it
    is also alive for the election that replaces 1, and for the role-change notification."""
    ctl = failover_set()
    ctl.hb(1, heartbeat_timeout_millis=1_000)
    since = T0 + 3_000
    ctl.now = T0 + 5_000
    r = ctl.scan(since)
    assert [b["brokerId"] for b in r.body["inactiveBrokers"]] == [1]
    assert r.body["newMasters"] == [
        {"brokerName": BROKER, "masterBrokerId": 2, "masterAddress": IPS[1], "masterEpoch": 2}
    ]
    (note,) = r.notifications
    assert note.targets == ((2, IPS[1]),)
    # The same entry without the floor: both expired, nobody to elect.
    ctl = failover_set()
    ctl.hb(1, heartbeat_timeout_millis=1_000)
    ctl.now = T0 + 5_000
    r = ctl.scan()
    assert [b["brokerId"] for b in r.body["inactiveBrokers"]] == [1, 2] and r.body["newMasters"] == []


def test_a_floor_after_the_scans_time_is_ignored() -> None:
    """A floor later than the time the scan applies at is no takeover time (a clock stepped back, forged
    bytes): honouring it would keep every broker alive while it stays ahead. The scan judges without it."""
    ctl = failover_set()
    ctl.now = T0 + 5_000
    assert ctl.sm.scan_needed(ctl.now, T0 + 60_000)
    r = ctl.scan(T0 + 60_000)
    assert r.body["aliveSinceMillis"] is None and [b["brokerId"] for b in r.body["inactiveBrokers"]] == [1, 2]
    # The floor is compared with the time the scan applies at: a scan stamped behind the state machine's
    # clock applies at that clock, and a floor up to it counts.
    ctl = failover_set()
    ctl.now = T0 + 5_000
    ctl.config(electMasterMaxRetryCount=3)  # moves the clock to T0 + 5000
    behind = Ctl(ctl.sm, now=T0 + 2_000)
    r = behind.scan(T0 + 3_000)
    assert r.body["checkTimeMillis"] == T0 + 5_000 and r.body["aliveSinceMillis"] == T0 + 3_000
    assert r.body["inactiveBrokers"] == []

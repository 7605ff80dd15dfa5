"""cleanBrokerData (spec §4.8), with the deliberate departures from RocketMQ's quirks (docs/statemachine.md)."""

from __future__ import annotations

import pytest

from statemachine import codes as C
from statemachine.manager import parse_broker_ids

from .harness import BROKER, CLUSTER, IPS, Ctl, header, remark

REFUSED = C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def dead_group() -> Ctl:
    """group(3) whose brokers then all stopped heartbeating (master 1 still recorded)."""
    ctl = Ctl()
    ctl.group(3)
    ctl.advance(60_000)
    return ctl


def test_listed_id_still_alive_is_refused() -> None:
    ctl = Ctl()
    ctl.group(3)
    r = ctl.clean(ids="1")
    assert (r.code, r.remark) == (REFUSED, f"Broker [{BROKER},  1] is still alive, clean up failure")
    assert r.header is None and r.body is None


def test_blank_ids_with_a_master_are_refused() -> None:
    ctl = dead_group()
    for ids in (None, "", "  ", ";"):  # ";" parses to no id at all: treated as blank, not as "the whole set"
        r = ctl.clean(ids=ids)
        assert (r.code, r.remark) == (REFUSED, f"Broker {BROKER} is still alive, clean up failure")


def test_cleaning_dead_ids() -> None:
    ctl = dead_group()
    assert ctl.clean(ids="3").ok
    table = ctl.data().body["replicasInfoTable"][BROKER]
    assert [x["brokerId"] for x in table["inSyncReplicas"]] == [1, 2] and table["notInSyncReplicas"] == []
    assert ctl.state() == (1, 1, [1, 2], 2)  # epochs unchanged


def test_cleaning_the_master_clears_it() -> None:
    ctl = dead_group()
    assert ctl.clean(ids="1;").ok  # trailing ';' is fine, as with Java's split
    # RocketMQ would keep masterBrokerId = 1, an id no longer registered; here the master is cleared as a
    # "not elected" event would, so that the master is always a member of the SyncStateSet.
    assert ctl.state() == (None, 2, [2, 3], 2)


def test_cleaning_every_id_removes_the_set() -> None:
    ctl = dead_group()
    assert ctl.clean(ids="1;2;3").ok
    assert ctl.info().code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert header(ctl.next_id())["nextBrokerId"] == 1


def test_unknown_set() -> None:
    ctl = dead_group()
    for cluster in (CLUSTER, None):
        r = ctl.clean(name="broker12", ids="1;2;3", living=True, cluster=cluster)
        assert (r.code, r.remark) == (REFUSED, "Broker broker12 is not existed,clean broker data failure.")


def test_clean_living_broker_skips_the_checks() -> None:
    ctl = Ctl()
    ctl.group(3)
    assert ctl.clean(ids="3", living=True).ok  # alive, but the operator insists
    assert ctl.state() == (1, 1, [1, 2], 2)  # RocketMQ would have dropped the whole set: only 3 goes here
    assert ctl.clean(living=True, cluster=None).ok  # a blank list means the whole set
    assert ctl.info().code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_bad_id_list() -> None:
    ctl = dead_group()
    r = ctl.clean(ids="1;x")
    assert r.code == REFUSED
    assert r.remark == (
        "Please set the option <brokerControllerIdsToClean> according to the format, exception: "
        'java.lang.NumberFormatException: For input string: "x"'
    )
    assert ctl.state() == (1, 1, [1, 2, 3], 2)


def test_a_null_cluster_still_protects_living_brokers() -> None:
    ctl = Ctl()
    ctl.group(3)
    r = ctl.clean(ids="2", cluster=None)
    assert r.code == REFUSED and "still alive" in remark(r)


def test_emptying_the_sync_state_set_makes_the_set_unknown() -> None:
    ctl = Ctl()
    for ip in IPS[:2]:
        ctl.register_new(ip)
    assert ctl.clean(ids="2").ok  # never elected: the SyncStateSet was empty, so its record goes (spec §4.8)
    assert ctl.register(1, IPS[0]).code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert header(ctl.next_id())["nextBrokerId"] == 3  # the replica table still answers getNextBrokerId
    assert ctl.apply_id(1, IPS[0]).ok  # re-applying recreates the set
    assert ctl.register(1, IPS[0]).ok


@pytest.mark.parametrize(
    ("text", "ids"), [("1", [1]), ("1;2;3", [1, 2, 3]), ("+4;-5", [4, -5]), ("7;;", [7]), (";", []), ("١٢", [12])]
)
def test_java_id_parsing(text: str, ids: list[int]) -> None:
    assert parse_broker_ids(text) == ids


@pytest.mark.parametrize("bad", [";1", "1;;2", " 1", "1.0", "0x1", "9223372036854775808", "1_000", "²"])
def test_java_id_parsing_errors(bad: str) -> None:
    with pytest.raises(ValueError, match="NumberFormatException: For input string"):
        parse_broker_ids(bad)

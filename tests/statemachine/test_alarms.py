"""ALARM (1200) and the alarms section: raised once per (alarm, member), disarmed by type, in the snapshot,
deterministic, and an old snapshot without the section loads with no alarm."""

from __future__ import annotations

import msgpack
import pytest

from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.commands import CommandError
from statemachine.machine import ControllerStateMachine
from statemachine.sections import SECTION_ALARMS

A, B = "127.0.0.1:9880", "127.0.0.1:9881"


def leveled() -> ControllerStateMachine:
    """A state machine at feature level 1, where alarms apply (statemachine/features.py)."""
    sm = ControllerStateMachine()
    assert sm.apply(cmd.feature_level(0, 1)).code == C.SUCCESS
    return sm


def test_raise_is_idempotent_and_disarm_clears_every_member() -> None:
    sm = leveled()
    r = sm.apply(cmd.alarm(1000, True, "NOSPACE", A, "store 3 GiB > quota 2 GiB"))
    assert r.code == C.SUCCESS and r.body == {"alarm": "NOSPACE", "memberId": A, "raised": True}
    assert sm.apply(cmd.alarm(2000, True, "NOSPACE", A, "later")).body["raised"] is False
    sm.apply(cmd.alarm(3000, True, "NOSPACE", B, "free 10 MiB < 64 MiB"))
    assert sm.alarms.raised("NOSPACE") == [(A, 1000, "store 3 GiB > quota 2 GiB"), (B, 3000, "free 10 MiB < 64 MiB")]
    r = sm.apply(cmd.alarm(4000, False, "NOSPACE", ""))
    assert r.body == {"disarmed": [{"alarm": "NOSPACE", "memberId": A}, {"alarm": "NOSPACE", "memberId": B}]}
    assert sm.alarms.raised("NOSPACE") == [] and sm.alarms.to_json() == {"alarms": []}


def test_the_section_round_trips_and_an_old_snapshot_has_no_alarms() -> None:
    sm = leveled()
    sm.apply(cmd.alarm(1000, True, "NOSPACE", B, "b"))
    sm.apply(cmd.alarm(1001, True, "NOSPACE", A, "a"))
    sections = sm.encode_sections()
    other = ControllerStateMachine()
    other.load_sections(sections)
    assert other.encode_sections() == sections and other.alarms.table == sm.alarms.table
    del sections[SECTION_ALARMS]  # written before the section existed
    old = leveled()
    old.apply(cmd.alarm(5, True, "NOSPACE", A))
    old.load_sections(sections)
    assert old.alarms.table == {}


def test_a_bad_section_or_command_is_refused_naming_the_field() -> None:
    sm = leveled()
    with pytest.raises(ValueError, match="unknown alarm 'FULL'"):
        sm.alarms.load_snapshot(b"\x92\x01\x91\x94\xa4FULL\xa1m\x01\xa0")
    with pytest.raises(CommandError, match="unknown alarm 'FULL'") as e:
        cmd.alarm(1, True, "FULL", A)
    assert e.value.field == "alarm"
    with pytest.raises(CommandError, match="needs the member") as e:
        cmd.alarm(1, True, "NOSPACE", "")
    assert e.value.field == "memberId"
    # Malformed bytes answer 2015 and change nothing.
    r = sm.apply(msgpack.packb([1, C.ALARM, 1, True, "NOSPACE", 7, ""]))
    assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR and sm.alarms.table == {}

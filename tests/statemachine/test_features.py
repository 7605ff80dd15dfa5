"""The feature level (statemachine/features.py): a gated format answers an error and changes nothing below its
level, FEATURE_LEVEL only raises, and a level above this release's stops the node, from an entry or from a
snapshot, naming both levels (and the file), instead of being quarantined or answered with errors."""

from __future__ import annotations

import msgpack
import pytest

from snapshot.rw import SnapshotReader, SnapshotWriter
from statemachine import codes as C
from statemachine import commands as cmd
from statemachine.features import MAX_LEVEL, FeatureLevelError
from statemachine.machine import ControllerStateMachine
from statemachine.sections import SECTION_FEATURES, SECTION_NAMES, SECTION_VERSION

A = "127.0.0.1:9880"


def test_alarms_wait_for_level_1_and_the_level_never_goes_down() -> None:
    sm = ControllerStateMachine()
    before = sm.encode_sections()
    r = sm.apply(cmd.alarm(1000, True, "NOSPACE", A, "full"))
    assert r.code == C.CONTROLLER_JRAFT_INTERNAL_ERROR and "needs feature level 1; the group is at 0" in (
        r.remark or ""
    )
    assert sm.alarms.table == {} and sm.encode_sections().keys() == before.keys()
    r = sm.apply(cmd.feature_level(1001, 1))
    assert r.code == C.SUCCESS and r.body == {"level": 1, "raised": True} and sm.features.level == 1
    assert sm.apply(cmd.alarm(1002, True, "NOSPACE", A, "full")).code == C.SUCCESS
    assert sm.alarms.raised("NOSPACE") == [(A, 1002, "full")]
    r = sm.apply(cmd.feature_level(1003, 0))  # an older proposal applied late
    assert r.body == {"level": 1, "raised": False} and sm.features.level == 1


def test_a_level_above_this_release_stops_the_node_and_changes_nothing() -> None:
    sm = ControllerStateMachine()
    sm.apply(cmd.feature_level(1, MAX_LEVEL))
    before = sm.encode_sections()
    with pytest.raises(FeatureLevelError, match=f"feature level is {MAX_LEVEL + 1}, above {MAX_LEVEL}, the highest"):
        sm.apply(cmd.feature_level(1, MAX_LEVEL + 1))  # same time: the clock would move
    assert sm.encode_sections() == before


def test_the_section_is_written_from_level_1_and_a_newer_snapshot_is_refused_naming_the_file(tmp_path) -> None:  # noqa: ANN001
    sm = ControllerStateMachine()
    assert SECTION_FEATURES not in sm.encode_sections()  # level 0: the snapshot v0.3.0 loads
    sm.apply(cmd.feature_level(1, 1))
    sections = sm.encode_sections()
    assert msgpack.unpackb(sections[SECTION_FEATURES]) == [SECTION_VERSION, 1]
    other = ControllerStateMachine()
    other.load_sections(sections)
    assert other.features.level == 1 and other.encode_sections() == sections

    sections[SECTION_FEATURES] = msgpack.packb([SECTION_VERSION, MAX_LEVEL + 1])  # written by a newer release
    writer = SnapshotWriter(tmp_path / "snap", known_types=SECTION_NAMES)
    for t, body in sorted(sections.items()):
        writer.add_section(t, body)
    writer.finish()
    target = ControllerStateMachine()
    with SnapshotReader(tmp_path / "snap", known_types=SECTION_NAMES) as reader:
        with pytest.raises(FeatureLevelError) as e:  # not a SnapshotFormatError: the file is valid, just newer
            target.on_snapshot_load(reader)
    assert str(tmp_path / "snap") in str(e.value) and f"is {MAX_LEVEL + 1}, above {MAX_LEVEL}" in str(e.value)
    assert target.features.level == 0 and target.encode_sections() == ControllerStateMachine().encode_sections()


def test_a_bad_level_is_refused_naming_the_field() -> None:
    with pytest.raises(cmd.CommandError, match="non-negative integer") as e:
        cmd.feature_level(1, -1)
    assert e.value.field == "level"
    with pytest.raises(ValueError, match="featureLevel: bad level 'x'"):
        ControllerStateMachine().features.load_snapshot(msgpack.packb([SECTION_VERSION, "x"]))


def test_a_gated_command_below_its_level_leaves_the_state_as_a_release_without_it_does() -> None:
    """v0.3.0 answers an ALARM entry as an unknown code: an error, before the command's time is taken. A node of
    this release at level 0 must leave every section as v0.3.0 does, the live table's clock included."""
    sm = ControllerStateMachine()
    sm.apply(cmd.heartbeat(1000, "c", "b", "10.0.0.1:10911", 1))
    before = sm.encode_sections()
    sm.apply(cmd.alarm(5000, True, "NOSPACE", A, "full"))  # a later time than anything applied
    assert sm.encode_sections() == before and sm.clock_ms == 1000

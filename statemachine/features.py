"""The group's feature level (KRaft's `metadata.version`): which replicated formats the group may write.

Every release reads the formats of the levels up to its own MAX_LEVEL. The group's level is replicated state,
raised only through FEATURE_LEVEL (1201) entries, which the leader proposes once every member says it reads
that level (api/service/controller.py, `raise_feature_level`); it never goes down. A command of a format
newer than the group's level (GATED) answers an error and changes nothing on every member, its time not taken
either (ControllerStateMachine.apply_command checks before the clock), exactly as a release that does not know
it answers, so a half-upgraded group applies every entry to the same state.

A member that applies a FEATURE_LEVEL above its MAX_LEVEL, or loads a snapshot whose level is above it,
cannot read what comes next: it stops (FeatureLevelError) naming both levels, rather than answer errors to
entries the others apply. Levels, formats and their section layout: docs/statemachine.md ("Feature levels").
"""

from __future__ import annotations

from statemachine import _body as B
from statemachine import codes as C
from statemachine.codes import SUCCESS
from statemachine.result import Result
from statemachine.sections import SECTION_FEATURES
from statemachine.values import JSONObject

# level -> the formats it adds. Level 0 is v0.3.0's formats (that release has no feature levels).
LEVELS: dict[int, str] = {
    0: "v0.3.0's formats",
    1: "alarms: ALARM (1200) entries and the snapshot section alarms (6); the feature level itself: "
    "FEATURE_LEVEL (1201) entries and the snapshot section featureLevel (7)",
    2: "batched heartbeats: BROKER_HEARTBEATS (1202) entries, the heartbeats one leader loop turn received",
}
MAX_LEVEL = max(LEVELS)  # the highest level this release reads
GATED: dict[int, int] = {C.ALARM: 1, C.BROKER_HEARTBEATS: 2}  # command code -> the level it needs


class FeatureLevelError(RuntimeError):
    """The group's level is above what this release reads: the node must stop (and be upgraded)."""


def too_high(level: int, where: str) -> str:
    return (
        f"{where}: the group's feature level is {level}, above {MAX_LEVEL}, the highest this release reads; "
        f"upgrade this node (docs/operations.md, 'Upgrades and versions')"
    )


class FeatureTable:
    """The group's feature level. A SnapshotAbleMetadataManager; its section is written only above level 0,
    so a group that never raised its level writes snapshots v0.3.0 still loads."""

    def __init__(self) -> None:
        self.level = 0

    def gate(self, code: int) -> Result | None:
        """The answer to a command of `code` the group's level does not allow yet; None when it may apply."""
        need = GATED.get(code)
        if need is None or self.level >= need:
            return None
        return Result(
            C.CONTROLLER_JRAFT_INTERNAL_ERROR,
            f"{C.REQUEST_NAMES.get(code, code)} needs feature level {need}; the group is at {self.level} "
            f"(rmqctl raft features)",
        )

    def apply(self, level: int) -> Result:
        if level > MAX_LEVEL:
            raise FeatureLevelError(too_high(level, "a FEATURE_LEVEL entry"))
        before = self.level
        self.level = max(before, level)  # never lowered: an older entry proposed late changes nothing
        return Result(SUCCESS, body={"level": self.level, "raised": self.level > before})

    # --- snapshot ---------------------------------------------------------------------------------------

    def section_type(self) -> int:
        return SECTION_FEATURES

    def encode_snapshot(self) -> bytes:
        return B.pack(self.level)

    def load_snapshot(self, body: bytes) -> None:
        (level,) = B.unpack(SECTION_FEATURES, body, 1)
        B.check(B.is_int(level) and level >= 0, "featureLevel: bad level {!r}", level)
        if level > MAX_LEVEL:
            raise FeatureLevelError(too_high(level, "snapshot section featureLevel (7)"))
        self.level = level

    def to_json(self) -> JSONObject:
        return {"level": self.level, "maxLevel": MAX_LEVEL}

"""AlarmTable: the group's raised alarms (etcd's alarm list), replicated so that every member refuses the same
writes and shows the same list. Raised and disarmed only through ALARM (1200) commands; what an alarm makes the
leader refuse is the service's (api/service/alarms.py), never applying: applying an alarm changes no other table.

A row is (alarm, memberId, raisedAtMillis, detail), one per alarm type and member, ascending by (alarm,
memberId). Raising an alarm that is already raised for that member changes nothing (the first time and detail
stay); disarming removes every member's alarm of that type ("" for every type), as `etcdctl alarm disarm` does.
Section body and command layout: docs/statemachine.md ("Alarms").
"""

from __future__ import annotations

from statemachine import _body as B
from statemachine.codes import SUCCESS
from statemachine.result import Result
from statemachine.sections import SECTION_ALARMS
from statemachine.values import JSONObject

NOSPACE = "NOSPACE"  # a member's store passed controllerStoreQuotaBytes or its free space the floor
CORRUPT = "CORRUPT"  # a member's applied state hash differs from the majority's at the same index
ALARMS = (CORRUPT, NOSPACE)  # every alarm this version knows (a snapshot row or command naming another is refused)


class AlarmTable:
    """(alarm, memberId) -> (raisedAtMillis, detail). A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], tuple[int, str]] = {}

    def raised(self, alarm: str) -> list[tuple[str, int, str]]:
        """(memberId, raisedAtMillis, detail) of every member that raised `alarm`, by member."""
        return [(m, t, d) for (a, m), (t, d) in sorted(self.table.items()) if a == alarm]

    def apply(self, activate: bool, alarm: str, member: str, detail: str, now_ms: int) -> Result:
        if activate:
            known = (alarm, member) in self.table
            if not known:
                self.table[(alarm, member)] = (now_ms, detail)
            return Result(SUCCESS, body={"alarm": alarm, "memberId": member, "raised": not known})
        gone = [k for k in self.table if alarm in ("", k[0]) and member in ("", k[1])]
        for k in gone:
            del self.table[k]
        return Result(SUCCESS, body={"disarmed": [{"alarm": a, "memberId": m} for a, m in sorted(gone)]})

    # --- snapshot ---------------------------------------------------------------------------------------

    def section_type(self) -> int:
        return SECTION_ALARMS

    def encode_snapshot(self) -> bytes:
        return B.pack([[a, m, t, d] for (a, m), (t, d) in sorted(self.table.items())])

    def load_snapshot(self, body: bytes) -> None:
        (rows,) = B.unpack(SECTION_ALARMS, body, 1)
        table: dict[tuple[str, str], tuple[int, str]] = {}
        for alarm, member, at, detail in B.rows(rows, 4, "alarms"):
            B.check(B.is_str(alarm) and alarm in ALARMS, "alarms: unknown alarm {!r}", alarm)
            B.check(B.is_str(member) and bool(member), "alarms {}: bad member {!r}", alarm, member)
            B.check(B.is_int(at) and B.is_str(detail), "alarms {} {}: bad time or detail", alarm, member)
            table[(alarm, member)] = (at, detail)
        B.ascending([[r[0], r[1]] for r in rows], "alarms (alarm, memberId)")
        self.table = table

    def to_json(self) -> JSONObject:
        return {
            "alarms": [
                {"alarm": a, "memberId": m, "raisedAtMillis": t, "detail": d}
                for (a, m), (t, d) in sorted(self.table.items())
            ]
        }

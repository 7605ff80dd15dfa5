"""The replicated broker live table of the jRaft controller (RaftReplicasInfoManager.brokerLiveTable,
spec §2.3) and its snapshot section.

Liveness is always judged against a time taken from a log entry, never against a clock:
alive at t  <=>  lastUpdateTimestamp + heartbeatTimeoutMillis >= t;  expired at t  <=>  not alive at t.
A scan entry (1015) may carry a floor `since` (aliveSinceMillis, its leader's takeover time): inside that
entry the last heartbeat counts as max(lastUpdateTimestamp, since), so a new leader judges no broker on
heartbeats it could not have received (docs/statemachine.md, "A new leader's scans").
The section also carries the controller-triggered re-elections still owed retries (see heartbeat.py),
because they are part of what the scan decides and must survive a snapshot.

The section also carries the state machine's clock: the time of the last applied command. A command's time
is max(its leader's clock, that clock) (machine.py), so time never runs backwards across leaders.

Each entry is stored as its own snapshot row, a list in the section's field order (LiveRow). Heartbeats
update it in place, and a snapshot packs the rows as they are, in one msgpack call: with tens of thousands
of brokers, building fresh rows would take most of the save's time on the apply thread.
"""

from __future__ import annotations

from typing import Any

import msgpack

from statemachine import _body as B
from statemachine.sections import SECTION_BROKER_LIVE_TABLE, SECTION_VERSION

Identity = tuple[str, str, int]  # (clusterName, brokerName, brokerId): BrokerIdentityInfo
# [clusterName, brokerName, brokerId, brokerAddr, lastUpdateTimestamp, heartbeatTimeoutMillis, epoch,
#  maxOffset, confirmOffset, electionPriority]: BrokerLiveInfo with its identity, without a channel.
LiveRow = list[Any]
ADDR, LAST, TIMEOUT, EPOCH, MAX_OFFSET, CONFIRM, PRIORITY = range(3, 10)
ROW_FIELDS = (
    "clusterName",
    "brokerName",
    "brokerId",
    "brokerAddr",
    "lastUpdateTimestamp",
    "heartbeatTimeoutMillis",
    "epoch",
    "maxOffset",
    "confirmOffset",
    "electionPriority",
)

_INF = float("inf")
LIVE_VERSION = 2  # section 3's body layout: [2, live, reelect, clock]; version 1 ([1, live, reelect]) still loads


def row_json(row: LiveRow) -> dict[str, Any]:
    return dict(zip(ROW_FIELDS, row, strict=True))


class BrokerLiveTable:
    """(clusterName, brokerName, brokerId) -> LiveRow, plus brokerName -> re-election attempts left.
    A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.table: dict[Identity, LiveRow] = {}
        self.reelect: dict[str, int] = {}
        # A lower bound of every entry's deadline (lastUpdateTimestamp + timeout), kept so that "has anything
        # expired?" is usually one comparison. Derived data: not in the snapshot, never affects a result.
        self.deadline_floor: float = _INF
        # The time (ms) of the last applied command: no command applies at an earlier time (machine.py).
        self.clock = 0

    def section_type(self) -> int:
        return SECTION_BROKER_LIVE_TABLE

    def apply_heartbeat(self, c: list) -> None:
        """Merge a checked heartbeat command [v, code, t, cluster, name, addr, id, epoch, maxOffset,
        confirmOffset, timeout, priority] (spec §2.3). The hot path: keep it lean."""
        _, _, t, cluster, name, addr, bid, epoch, max_offset, confirm, timeout, priority = c
        key = (cluster, name, bid)
        row = self.table.get(key)
        if row is None:
            self.table[key] = [cluster, name, bid, addr, t, timeout, epoch, max_offset, confirm, priority]
        else:
            # The address is kept from the first heartbeat; progress (epoch, offsets) only moves forward.
            row[4] = t
            row[5] = timeout
            row[9] = priority
            if epoch > row[6] or (epoch == row[6] and max_offset > row[7]):
                row[6] = epoch
                row[7] = max_offset
                row[8] = confirm
        if t + timeout < self.deadline_floor:
            self.deadline_floor = t + timeout

    def alive_row(
        self, cluster: str | None, name: str, broker_id: int, t: int, since: int | None = None
    ) -> LiveRow | None:
        """The broker's row when it is alive at `t`, its last heartbeat taken as no earlier than `since`."""
        row = self.table.get((cluster, name, broker_id))  # type: ignore[arg-type]
        if row is None:
            return None
        last = row[LAST]
        if since is not None and since > last:
            last = since
        return row if last + row[TIMEOUT] >= t else None

    def is_alive(self, cluster: str | None, name: str, broker_id: int, t: int, since: int | None = None) -> bool:
        return self.alive_row(cluster, name, broker_id, t, since) is not None

    def _floor(self) -> float:
        return min((r[LAST] + r[TIMEOUT] for r in self.table.values()), default=_INF)

    def any_expired(self, t: int, since: int | None = None) -> bool:
        """Whether a scan at `t` (with the floor `since`) would remove an entry. Usually O(1): one comparison,
        and the deadline floor refreshed when it passes; with `since`, also a pass over the table while a
        deadline has passed that the floor holds back (for at most one heartbeat timeout after a takeover)."""
        if t <= self.deadline_floor:
            return False
        self.deadline_floor = self._floor()
        if t <= self.deadline_floor:
            return False
        if since is None:
            return True
        return any(r[LAST] + r[TIMEOUT] < t and since + r[TIMEOUT] < t for r in self.table.values())

    def expire(self, t: int, since: int | None = None) -> list[Identity]:
        """Remove and return (ascending) every identity expired at `t`, each last heartbeat taken as no
        earlier than `since` when given. One pass over the table finds them and the new deadline floor (the
        least deadline, without `since`, of the entries left: a lower bound for any later floor)."""
        if t <= self.deadline_floor:
            return []
        held = -_INF if since is None else since  # max(last, since) + timeout < t <=> both sums are < t
        gone, floor = [], _INF
        for k, r in self.table.items():
            deadline = r[LAST] + r[TIMEOUT]
            if deadline < t and held + r[TIMEOUT] < t:  # expired at t: t - lastUpdateTimestamp > timeout
                gone.append(k)
            elif deadline < floor:
                floor = deadline
        gone.sort()
        for k in gone:
            del self.table[k]
        self.deadline_floor = floor
        return gone

    # --- snapshot ---------------------------------------------------------------------------------------

    def encode_snapshot(self) -> bytes:
        table = self.table
        reelect = [[name, self.reelect[name]] for name in sorted(self.reelect)]
        return msgpack.packb([LIVE_VERSION, [table[k] for k in sorted(table)], reelect, self.clock])

    def load_snapshot(self, body: bytes) -> None:
        version = B.version_of(SECTION_BROKER_LIVE_TABLE, body, (SECTION_VERSION, LIVE_VERSION))
        if version == LIVE_VERSION:
            live, reelect, clock = B.unpack(SECTION_BROKER_LIVE_TABLE, body, 3, LIVE_VERSION)
            B.check(type(clock) is int and clock >= 0, "brokerLiveTable clock {!r}: not an integer >= 0", clock)
        else:
            live, reelect = B.unpack(SECTION_BROKER_LIVE_TABLE, body, 2)
            clock = None  # written before the clock was kept: the latest heartbeat time is a lower bound
        table: dict[Identity, LiveRow] = {}
        for row in B.rows(live, 10, "brokerLiveTable"):
            ok = type(row[0]) is str and type(row[1]) is str and type(row[2]) is int and type(row[3]) is str
            B.check(ok and all(type(n) is int for n in row[4:]), "brokerLiveTable {!r}: types", row[:3])
            table[(row[0], row[1], row[2])] = row
        B.ascending([(r[0], r[1], r[2]) for r in live], "brokerLiveTable identities")
        retries: dict[str, int] = {}
        for name, left in B.rows(reelect, 2, "brokerLiveTable re-elections"):
            B.check(B.is_str(name) and B.is_int(left) and left > 0, "brokerLiveTable re-election {!r}: types", name)
            retries[name] = left
        B.ascending([r[0] for r in reelect], "brokerLiveTable re-election names")
        if clock is None:
            clock = max((r[LAST] for r in live), default=0)
        self.table, self.reelect, self.clock = table, retries, clock
        self.deadline_floor = self._floor()

    def to_json(self) -> dict[str, Any]:
        return {
            "brokers": [row_json(self.table[k]) for k in sorted(self.table)],
            "pendingReelections": {name: self.reelect[name] for name in sorted(self.reelect)},
            "clockMillis": self.clock,
        }

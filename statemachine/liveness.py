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
update it in place and keep its msgpack bytes (`packed`), and a snapshot joins those bytes: with tens of
thousands of brokers, building or packing the rows at snapshot time would take most of the save's time on the
apply thread.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import msgpack

from statemachine import _body as B
from statemachine import commands as K
from statemachine.sections import SECTION_BROKER_LIVE_TABLE, SECTION_VERSION
from statemachine.values import Cell, JSONObject, Unpacked

Identity = tuple[str, str, int]  # (clusterName, brokerName, brokerId): BrokerIdentityInfo
# [clusterName, brokerName, brokerId, brokerAddr, lastUpdateTimestamp, heartbeatTimeoutMillis, epoch,
#  maxOffset, confirmOffset, electionPriority, *LIVE_KEPT]: BrokerLiveInfo with its identity, without a channel,
# then the heartbeat fields commands.LIVE_KEPT names (none today).
LiveRow = list[Cell]
ADDR, LAST, TIMEOUT, EPOCH, MAX_OFFSET, CONFIRM, PRIORITY = range(3, 10)
BASE_FIELDS = (
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
ROW_FIELDS = BASE_FIELDS + K.LIVE_KEPT
BASE_WIDTH, ROW_WIDTH = len(BASE_FIELDS), len(ROW_FIELDS)
# What a row written before a kept field existed loads with (the field's RocketMQ default).
_KEPT_DEFAULTS = [K.HEARTBEAT_DEFAULTS[name] for name in K.LIVE_KEPT]

# The hot path, generated from the heartbeat command's fields (commands.BrokerHeartbeat) as dataclasses
# generate __init__: one tuple unpack of the whole command, names as the command spells them, so that a new
# heartbeat field needs nothing here (and a field the table keeps, only its name in commands.LIVE_KEPT). A
# slice or an index per field is measurably slower. The address is kept from the first heartbeat; progress
# (epoch, offsets) only moves forward; the timeout, the priority and every kept field are the latest's.
_APPLY_HEARTBEAT = """
    key = (clusterName, brokerName, brokerId)
    row = self.table.get(key)
    if row is None:
        self.in_order = False
        row = self.table[key] = [
            clusterName, brokerName, brokerId, brokerAddr, t, heartbeatTimeoutMillis, epoch, maxOffset,
            confirmOffset, electionPriority, {kept}
        ]
    else:
        row[4] = t
        row[5] = heartbeatTimeoutMillis
        row[9] = electionPriority{kept_updates}
        if epoch > row[6] or (epoch == row[6] and maxOffset > row[7]):
            row[6] = epoch
            row[7] = maxOffset
            row[8] = confirmOffset
    self.packed[key] = self.pack_row(row)
    if t + heartbeatTimeoutMillis < self.deadline_floor:
        self.deadline_floor = t + heartbeatTimeoutMillis
"""


def _apply_heartbeat() -> tuple[
    Callable[[BrokerLiveTable, list[Unpacked]], None], Callable[[BrokerLiveTable, int, list[list[Unpacked]]], None]
]:
    """apply_heartbeat (one 1018, as its list) and apply_heartbeats (1202's heartbeats at one time), from the
    same template."""
    names = K.BrokerHeartbeat._fields[K.HEADER_FIELDS :]
    assert set(BASE_FIELDS) - {"lastUpdateTimestamp"} <= set(names), names
    assert set(K.LIVE_KEPT) <= set(names) - set(BASE_FIELDS), K.LIVE_KEPT
    body = _APPLY_HEARTBEAT.format(
        kept=", ".join(K.LIVE_KEPT),
        kept_updates="".join(f"\n        row[{BASE_WIDTH + i}] = {n}" for i, n in enumerate(K.LIVE_KEPT)),
    )
    fields = ", ".join(names)
    source = (
        f"def apply_heartbeat(self, c):\n    _, _, t, {fields} = c\n{body}\n"
        f"def apply_heartbeats(self, t, items):\n    for h in items:\n        {fields} = h\n"
        f"{textwrap.indent(body, '    ')}\n"
    )
    scope: dict[str, object] = {}
    exec(compile(source, f"<{__name__}.apply_heartbeat>", "exec"), scope)  # noqa: S102  our own template
    one = cast("Callable[[BrokerLiveTable, list[Unpacked]], None]", scope["apply_heartbeat"])
    one.__doc__ = "Merge a checked heartbeat command (commands.BrokerHeartbeat's fields, as a list) into its row."
    many = cast("Callable[[BrokerLiveTable, int, list[list[Unpacked]]], None]", scope["apply_heartbeats"])
    many.__doc__ = "Merge checked heartbeats (1202's: each a 1018's fields after timeMillis) at time t, in order."
    return one, many


_INF = float("inf")
LIVE_VERSION = 2  # section 3's body layout: [2, live, reelect, clock]; version 1 ([1, live, reelect]) still loads


def row_json(row: LiveRow) -> JSONObject:
    return dict(zip(ROW_FIELDS, row, strict=True))


class BrokerLiveTable:
    """(clusterName, brokerName, brokerId) -> LiveRow, plus brokerName -> re-election attempts left.
    A SnapshotAbleMetadataManager."""

    def __init__(self) -> None:
        self.table: dict[Identity, LiveRow] = {}
        # Each row's msgpack bytes, kept as the row changes (0.2 us a heartbeat), so that a snapshot or a
        # checkpoint hash joins bytes instead of packing every row at once: with 10,000 brokers heartbeating,
        # every row changes between two of them, and packing them all stalled the apply thread for ~5 ms of a
        # loaded core (docs/performance.md, "The checkpoint and snapshot stall, taken apart"). Invariant: for
        # every key of `table`, packed[key] == packb(table[key]). Rows change only in apply_heartbeat and
        # load_snapshot, which keep it; a key deleted from `table` may linger here until snapshot_parts drops it.
        self.packed: dict[Identity, bytes] = {}
        self.pack_row: Callable[[LiveRow], bytes] = msgpack.Packer().pack  # this table's: one applying thread
        # Whether `packed` holds its keys in ascending order, as snapshot_parts left it: then, while no key was
        # added (which clears this) or deleted (which leaves `packed` longer than `table`), the section's rows
        # are `packed`'s values as they are, taken without a lookup or a hash per row.
        self.in_order = True
        self.reelect: dict[str, int] = {}
        # A lower bound of every entry's deadline (lastUpdateTimestamp + timeout), kept so that "has anything
        # expired?" is usually one comparison. Derived data: not in the snapshot, never affects a result.
        self.deadline_floor: float = _INF
        # The time (ms) of the last applied command: no command applies at an earlier time (machine.py).
        self.clock = 0

    def section_type(self) -> int:
        return SECTION_BROKER_LIVE_TABLE

    if TYPE_CHECKING:

        def apply_heartbeat(self, c: list) -> None:
            """Merge a checked heartbeat command (commands.BrokerHeartbeat's fields, as a list) into its row."""

        def apply_heartbeats(self, t: int, items: list[list[Unpacked]]) -> None:
            """Merge checked heartbeats (1202's: each a 1018's fields after timeMillis) at time t, in order."""

    else:
        apply_heartbeat, apply_heartbeats = _apply_heartbeat()  # generated from commands.BrokerHeartbeat: see above

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
        """packb([LIVE_VERSION, rows ascending by identity, reelect, clock]), byte for byte, from the rows'
        kept bytes (`packed`)."""
        return b"".join(self.snapshot_parts())

    def snapshot_parts(self) -> list[bytes]:
        """The section body in parts, `b"".join(parts) == encode_snapshot()`: the rows are `packed`'s values as
        they are (sorted again only after a key was added or deleted); the join may wait or run on another
        thread, since the parts never change."""
        table, packed = self.table, self.packed
        if not self.in_order or len(packed) != len(table):  # a key added or deleted: put them in order again
            packed = self.packed = {k: packed[k] for k in sorted(table)}
            self.in_order = True
        reelect = [[name, self.reelect[name]] for name in sorted(self.reelect)]
        parts = [B.array_header(4) + msgpack.packb(LIVE_VERSION) + B.array_header(len(table))]
        parts += packed.values()
        parts.append(msgpack.packb(reelect) + msgpack.packb(self.clock))
        return parts

    def load_snapshot(self, body: bytes) -> None:
        version = B.version_of(SECTION_BROKER_LIVE_TABLE, body, (SECTION_VERSION, LIVE_VERSION))
        if version == LIVE_VERSION:
            live, reelect, clock = B.unpack(SECTION_BROKER_LIVE_TABLE, body, 3, LIVE_VERSION)
            B.check(type(clock) is int and clock >= 0, "brokerLiveTable clock {!r}: not an integer >= 0", clock)
        else:
            live, reelect = B.unpack(SECTION_BROKER_LIVE_TABLE, body, 2)
            clock = None  # written before the clock was kept: the latest heartbeat time is a lower bound
        table: dict[Identity, LiveRow] = {}
        if _KEPT_DEFAULTS and all(type(r) is list and len(r) == BASE_WIDTH for r in live):
            live = [[*r, *_KEPT_DEFAULTS] for r in live]  # rows written before the kept fields were kept
        for row in B.rows(live, ROW_WIDTH, "brokerLiveTable"):
            ok = type(row[0]) is str and type(row[1]) is str and type(row[2]) is int and type(row[3]) is str
            ok = ok and all(type(n) is int for n in row[4:BASE_WIDTH])
            ok = ok and all(type(v) is type(d) for v, d in zip(row[BASE_WIDTH:], _KEPT_DEFAULTS, strict=True))
            B.check(ok, "brokerLiveTable {!r}: types", row[:3])
            table[(row[0], row[1], row[2])] = row
        B.ascending([(r[0], r[1], r[2]) for r in live], "brokerLiveTable identities")
        retries: dict[str, int] = {}
        for name, left in B.rows(reelect, 2, "brokerLiveTable re-elections"):
            B.check(B.is_str(name) and B.is_int(left) and left > 0, "brokerLiveTable re-election {!r}: types", name)
            retries[name] = left
        B.ascending([r[0] for r in reelect], "brokerLiveTable re-election names")
        if clock is None:
            clock = max((r[LAST] for r in live), default=0)
        pack = self.pack_row  # `table` was filled in ascending order (checked above), and so is `packed`
        self.packed, self.in_order = {k: pack(r) for k, r in table.items()}, True
        self.table, self.reelect, self.clock = table, retries, clock
        self.deadline_floor = self._floor()

    def to_json(self) -> JSONObject:
        return {
            "brokers": [row_json(self.table[k]) for k in sorted(self.table)],
            "pendingReelections": {name: self.reelect[name] for name in sorted(self.reelect)},
            "clockMillis": self.clock,
        }

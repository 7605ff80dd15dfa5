"""The leader's view of one follower: how far it has replicated and how much may be in flight.

States follow etcd-raft's design: PROBE sends one AppendEntries at a time until the match point is found,
REPLICATE pipelines up to `max_inflight` messages optimistically, SNAPSHOT waits for an InstallSnapshot.
"""

from __future__ import annotations

import enum
from collections import deque


class ProgressState(enum.IntEnum):
    PROBE = 0
    REPLICATE = 1
    SNAPSHOT = 2


class Progress:
    __slots__ = (
        "match",
        "next",
        "state",
        "probe_sent",
        "inflights",
        "max_inflight",
        "pending_snapshot",
        "recent_active",
        "is_learner",
        "read_ack",
        "last_contact",
    )

    def __init__(self, next_index: int, max_inflight: int, is_learner: bool = False) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.inflights: deque[int] = deque()  # last index of each in-flight AppendEntries
        self.max_inflight = max_inflight
        self.pending_snapshot = 0
        self.recent_active = False
        self.is_learner = is_learner
        self.read_ack = 0  # highest heartbeat round (seq) this peer answered
        self.last_contact = -1  # core tick of this peer's latest response; -1: none since we became leader

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflights) >= self.max_inflight
        return True

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
        else:
            self.next = self.match + 1
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflights.clear()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.probe_sent = False
        self.inflights.clear()

    def become_snapshot(self, snapshot_index: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = snapshot_index
        self.inflights.clear()

    def sent(self, last_index: int) -> None:
        """Record an AppendEntries carrying entries up to last_index (or a probe)."""
        if self.state is ProgressState.REPLICATE:
            if last_index >= self.next:
                self.next = last_index + 1
                self.inflights.append(last_index)
        else:
            self.probe_sent = True

    def maybe_update(self, index: int) -> bool:
        """An acknowledgement up to index arrived. Returns whether match moved."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        if self.next < index + 1:
            self.next = index + 1
        inflights = self.inflights
        while inflights and inflights[0] <= index:
            inflights.popleft()
        return updated

    def lost_entries(self, last_index: int) -> None:
        """The follower no longer holds what it acknowledged (its disk was wiped or replaced); its log now
        ends at last_index. Where that log agrees with ours is unknown, so match is forgotten, never set
        from the reject (etcd's MaybeDecrTo moves only next): probing from its end finds the real match."""
        self.match = 0
        self.become_probe()
        self.next = last_index + 1

    def maybe_decrease(self, rejected: int, next_guess: int) -> bool:
        """A follower rejected an append whose previous index was `rejected`. Returns whether the
        rejection was fresh (not a stale or duplicate answer) and next was moved back."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False  # stale
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False  # stale: we already probed elsewhere
        self.next = max(min(rejected, next_guess + 1), self.match + 1, 1)
        self.probe_sent = False
        return True

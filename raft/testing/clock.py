"""ManualClock: a `raft.node.clock.Clock` whose time moves only when a test advances it.

Nodes of an in-process group (raft/testing/group.py) given one tick only when the test says so: an election,
a heartbeat, a lease expiry or a periodic snapshot happens at the step the test chose, not when the machine
gets round to it. The timers' callbacks run on the caller's thread (the event loop), in deadline order, each
with `time()` at its deadline.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class ManualTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, ManualTimer]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> ManualTimer:
        t = ManualTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), t))
        return t

    def next_deadline(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def advance(self, seconds: float) -> int:
        """Move time forward by `seconds`, firing every timer due on the way (and any they set that fall due
        before the end), in deadline order. Answers how many fired."""
        if seconds < 0:
            raise ValueError("time does not go back")
        end = self._now + seconds
        fired = 0
        while (when := self.next_deadline()) is not None and when <= end:
            _, _, t = heapq.heappop(self._timers)
            self._now = max(self._now, when)
            fired += 1
            t.callback()
        self._now = end
        return fired

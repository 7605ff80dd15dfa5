"""Where a node reads the time and sets its timers: a `Clock` (a Protocol), by default the event loop's.

The node loop's ticks (elections, heartbeats, the leader lease's clock), the snapshot triggers' clock and the
proposal timestamps all read `Clock.time()`; the tick timer is `Clock.call_at`. `LoopClock` is the real one
(the running loop's monotonic time and timers). A test harness passes its own through `NodeParts.clock`
(`raft.testing.clock.ManualClock`: time moves only when the test advances it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Monotonic seconds."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Call `callback` on the node's event loop once `time()` reaches `when`."""
        ...


class LoopClock:
    """The real clock: the event loop's."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def time(self) -> float:
        return self._loop.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return self._loop.call_at(when, callback)

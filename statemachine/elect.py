"""ElectPolicy: RocketMQ's DefaultElectPolicy (spec §4.4.1), deterministic.

Differences from the Java, all about determinism: candidates are ranked with plain comparisons (Java's
comparator subtracts ints and longs and can overflow), and exact ties go to the lowest brokerId (Java keeps
whichever its HashSet yields first, which for small ids is also the lowest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from statemachine.liveness import EPOCH, MAX_OFFSET, PRIORITY, LiveRow

LiveInfoGetter = Callable[[int], "LiveRow | None"]  # brokerId -> its live row if alive, else None


class ElectPolicy:
    """Pick a master among alive brokers. `alive(broker_id)` returns the broker's live row when it is alive
    at the time of the command being applied, else None."""

    __slots__ = ("alive",)

    def __init__(self, alive: LiveInfoGetter) -> None:
        self.alive = alive

    def elect(
        self,
        sync_state_set: Iterable[int],
        all_replicas: Iterable[int] | None,
        old_master: int | None,
        preferred: int | None,
    ) -> int | None:
        """The SyncStateSet first; then, when unclean election is enabled (`all_replicas` given), every
        registered replica."""
        chosen = self._try_elect(sync_state_set, old_master, preferred)
        if chosen is None and all_replicas is not None:
            chosen = self._try_elect(all_replicas, old_master, preferred)
        return chosen

    def _try_elect(self, brokers: Iterable[int], old_master: int | None, preferred: int | None) -> int | None:
        alive = {}
        for b in sorted(brokers):
            info = self.alive(b)
            if info is not None:
                alive[b] = info
        if not alive:
            return None
        if old_master in alive and (preferred is None or preferred == old_master):
            return old_master
        if preferred is not None:
            return preferred if preferred in alive else None
        # Higher epoch, then higher maxOffset, then lower electionPriority; then the lowest id.
        return min(alive, key=lambda b: (-alive[b][EPOCH], -alive[b][MAX_OFFSET], alive[b][PRIORITY], b))

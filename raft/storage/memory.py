"""In-memory LogStorage and MetaStorage with the same semantics and errors as the on-disk ones.

For tests and the simulation: "durable" means "survives until the object is dropped". Entries are stored
by reference, as the rest of the layer treats Entry objects as immutable once created.
"""

from __future__ import annotations

from collections.abc import Sequence

from raft.core.messages import Entry, HardState


class MemoryLogStorage:
    def __init__(self, first_index: int = 1) -> None:
        if first_index < 1:
            raise ValueError(f"first_index must be >= 1, got {first_index}")
        self._first = first_index
        self._entries: list[Entry] = []
        self.appends = 0  # calls that wrote something: the in-memory analogue of fsyncs
        self.skipped: tuple[str, int] | None = None  # recovery skips nothing here (NodeLog)

    def check_skipped(self) -> Exception | None:
        return None

    def first_index(self) -> int:
        return self._first

    def last_index(self) -> int:
        return self._first + len(self._entries) - 1

    def term(self, index: int) -> int:
        k = index - self._first
        if not 0 <= k < len(self._entries):
            raise IndexError(f"index {index} not in log [{self._first}, {self.last_index()}]")
        return self._entries[k].term

    def entries(self, lo: int, hi: int) -> list[Entry]:
        if lo > hi:
            raise ValueError(f"entries({lo}, {hi}): lo > hi")
        if lo == hi:
            return []
        if lo < self._first or hi > self.last_index() + 1:
            raise IndexError(f"entries [{lo}, {hi}) not in log [{self._first}, {self.last_index()}]")
        return self._entries[lo - self._first : hi - self._first]

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        x = entries[0].index
        if x < self._first:
            raise ValueError(f"append at index {x} is below the first index {self._first} (compacted)")
        if x > self.last_index() + 1:
            raise ValueError(f"append at index {x} leaves a gap after the last index {self.last_index()}")
        for k, e in enumerate(entries):
            if e.index != x + k:
                raise ValueError(f"entries not contiguous: expected index {x + k}, got {e.index}")
        del self._entries[x - self._first :]
        self._entries.extend(entries)
        self.appends += 1

    def truncate_prefix(self, first_index: int) -> None:
        if first_index <= self._first:
            return
        del self._entries[: first_index - self._first]
        self._first = first_index

    def reset(self, next_index: int) -> None:
        if next_index < 1:
            raise ValueError(f"reset to index {next_index}: indexes start at 1")
        self._entries.clear()
        self._first = next_index

    def close(self) -> None:
        pass


class MemoryMetaStorage:
    def __init__(self, hs: HardState | None = None) -> None:
        self._hs = hs or HardState()
        self.saves = 0

    def load(self) -> HardState:
        return self._hs

    def save(self, hs: HardState) -> None:
        self._hs = hs
        self.saves += 1

    def close(self) -> None:
        pass

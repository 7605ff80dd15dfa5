"""The storage seams of the Raft layer, as small Protocols with in-memory and on-disk implementations."""

from __future__ import annotations

from typing import Protocol

from raft.core.messages import Entry, HardState

Skipped = tuple[str, int]  # (segment, offset) recovery started at, by a start hint


class LogStorage(Protocol):
    """A durable, append-only (with suffix and prefix truncation) sequence of entries."""

    def first_index(self) -> int:
        """Index of the first stored entry; last_index() + 1 when the log is empty."""

    def last_index(self) -> int:
        """Index of the last stored entry; first_index() - 1 when the log is empty."""

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries with lo <= index < hi, all of which must be stored."""

    def append(self, entries: list[Entry]) -> None:
        """Durably append. If entries[0].index <= last_index(), the stored suffix from that index is
        replaced first. Returns only when the entries are fsynced."""

    def truncate_prefix(self, first_index: int) -> None:
        """Drop every entry below first_index (after a snapshot). May leave the log empty, in which
        case first_index() must still report the given first_index afterwards."""

    def close(self) -> None: ...


class NodeLog(LogStorage, Protocol):
    """What `raft.node.Node` calls on its log, beyond the LogStorage seam."""

    skipped: Skipped | None
    """Where recovery started without reading the compacted records before it (None: nothing skipped)."""

    def term(self, index: int) -> int:
        """Term of the stored entry at index."""

    def reset(self, next_index: int) -> None:
        """Drop every entry; the log becomes empty with first_index() == next_index (snapshot installed)."""

    def check_skipped(self) -> Exception | None:
        """The damage, if any, in the records `skipped` passed over (read now, off the event loop)."""


class MetaStorage(Protocol):
    def load(self) -> HardState: ...

    def save(self, hs: HardState) -> None:
        """Durably store term and vote (fsynced) before returning."""

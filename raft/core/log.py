"""The core's view of the log: every entry after the compaction point, held in memory.

Entries `entries[k]` have index `offset + 1 + k`; `offset`/`offset_term` name the entry just before the
first one held (0/0 for a fresh log, or the last compacted entry). `stable` is how far the driver has
reported the log durable; `handed` is how far entries have been handed out in a Ready for persisting.
"""

from __future__ import annotations

from raft.core.confchange import decode_conf
from raft.core.messages import ConfState, Entry, EntryType


class RaftLog:
    __slots__ = ("entries", "offset", "offset_term", "committed", "applied", "stable", "handed", "base_conf", "confs")

    def __init__(
        self,
        offset: int = 0,
        offset_term: int = 0,
        entries: list[Entry] | None = None,
        base_conf: ConfState | None = None,
    ) -> None:
        # Raft thesis §4.1: a server uses the latest configuration in its log, committed or not.
        # `base_conf` is the configuration as of `offset`; `confs` those of CONF entries after it.
        self.base_conf = base_conf or ConfState()
        self.confs: list[tuple[int, ConfState]] = []
        self.entries: list[Entry] = []
        self._track_confs(entries or [])
        self.entries = list(entries or [])
        self.offset = offset
        self.offset_term = offset_term
        for k, e in enumerate(self.entries):
            if e.index != offset + 1 + k:
                raise ValueError(f"log entries not contiguous at position {k}: index {e.index}")
        self.committed = offset
        self.applied = offset  # handed out for applying (the driver applies in order)
        self.stable = self.last_index()  # entries given to the constructor come from durable storage
        self.handed = self.stable

    def _track_confs(self, entries: list[Entry]) -> None:
        conf_type = EntryType.CONF
        for e in entries:
            if e.type == conf_type:
                self.confs.append((e.index, decode_conf(e.data)))

    def conf(self) -> ConfState:
        return self.confs[-1][1] if self.confs else self.base_conf

    def conf_index(self) -> int:
        """Index of the entry holding the latest configuration (the log's offset for the base one)."""
        return self.confs[-1][0] if self.confs else self.offset

    def conf_at(self, index: int) -> ConfState:
        """The configuration in effect once entries up to index are applied (for snapshots)."""
        conf = self.base_conf
        for i, c in self.confs:
            if i > index:
                break
            conf = c
        return conf

    def first_index(self) -> int:
        return self.offset + 1

    def last_index(self) -> int:
        return self.offset + len(self.entries)

    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.offset_term

    def term(self, index: int) -> int | None:
        """Term of the entry at index; None if compacted away or beyond the end."""
        if index == self.offset:
            return self.offset_term
        k = index - self.offset - 1
        if 0 <= k < len(self.entries):
            return self.entries[k].term
        return None

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log is at least as up to date as ours."""
        my_term = self.last_term()
        return last_term > my_term or (last_term == my_term and last_index >= self.last_index())

    def slice(self, lo: int, hi: int, max_count: int, max_bytes: int) -> list[Entry]:
        """Entries lo <= index < hi, at most max_count and about max_bytes (always at least one)."""
        start = lo - self.offset - 1
        stop = min(hi - self.offset - 1, start + max_count)
        out = self.entries[start:stop]
        if max_bytes and len(out) > 1:
            size = 0
            for k, e in enumerate(out):
                size += len(e.data) + 24
                if size > max_bytes and k > 0:
                    return out[:k]
        return out

    def append(self, entries: list[Entry]) -> None:
        """Append after the last entry, or overwrite a conflicting suffix. Never touches committed entries."""
        if not entries:
            return
        first = entries[0].index
        if first <= self.committed:
            raise AssertionError(f"overwriting committed entry {first} (committed {self.committed})")
        if first > self.last_index() + 1:
            raise AssertionError(f"gap: appending {first} after {self.last_index()}")
        del self.entries[first - self.offset - 1 :]
        while self.confs and self.confs[-1][0] >= first:
            self.confs.pop()  # a truncated conf entry no longer counts
        self.entries.extend(entries)
        self._track_confs(entries)
        if first <= self.stable:
            self.stable = first - 1
        if first <= self.handed:
            self.handed = first - 1

    def find_conflict(self, entries: list[Entry]) -> int:
        """Index of the first entry whose term differs from ours (or that we lack); 0 if none."""
        for e in entries:
            t = self.term(e.index)
            if t != e.term:
                if t is None and e.index <= self.offset:
                    continue  # compacted: known committed, hence equal
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The largest index <= index whose term is <= term (the fast-backup hint)."""
        while index > self.offset:
            t = self.term(index)
            if t is not None and t <= term:
                break
            index -= 1
        return index

    def commit_to(self, index: int) -> bool:
        if index > self.committed:
            if index > self.last_index():
                raise AssertionError(f"commit {index} beyond last index {self.last_index()}")
            self.committed = index
            return True
        return False

    def unstable(self) -> list[Entry]:
        """Entries not yet handed out for persisting."""
        return self.entries[self.handed - self.offset :]

    def applicable(self) -> list[Entry]:
        """Committed, durable, not yet applied entries. Applying waits for local durability so that a
        snapshot never covers entries this node could lose in a crash."""
        hi = min(self.committed, self.stable)
        if hi <= self.applied:
            return []
        return self.entries[self.applied - self.offset : hi - self.offset]

    def stable_to(self, index: int, term: int) -> None:
        if self.term(index) == term and index > self.stable:
            self.stable = index

    def compact(self, index: int) -> None:
        """Forget entries up to and including index (they are covered by a snapshot)."""
        if index <= self.offset:
            return
        if index > self.applied:
            raise AssertionError(f"compacting {index} beyond applied {self.applied}")
        term = self.term(index)
        assert term is not None
        self.base_conf = self.conf_at(index)
        self.confs = [c for c in self.confs if c[0] > index]
        del self.entries[: index - self.offset]
        self.offset, self.offset_term = index, term

    def restore(self, index: int, term: int, conf: ConfState) -> None:
        """Reset to an installed snapshot: the log becomes empty after (index, term)."""
        self.entries = []
        self.base_conf, self.confs = conf, []
        self.offset, self.offset_term = index, term
        self.committed = self.applied = self.stable = self.handed = index

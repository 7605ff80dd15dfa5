"""A simulated broker's disk: its identity, its commit log (offsets only) and its epoch file (RIP-44).

The commit log is its end offset; what matters for failover is which master epoch wrote each byte, which the
epoch file says: entries (epoch, startOffset) in ascending order, entry i covering [start_i, start_{i+1})
and the last one up to the log's end (RocketMQ's EpochFileCache). A new master appends (its masterEpoch, its
end); a slave copies the entries of what it replicates; a slave that meets a master truncates its log to
the consistent point of the two epoch files first (`consistent_offset`), so that a tail no acknowledged
write depends on (written by an old master after the others stopped copying) is dropped.

Files (docs/brokersim.md), each written to a temp file, fsynced and renamed into place:
- `identity`: `brokerId=<n>` and `registerCheckCode=<address>;<ms>` lines, then `applied=true|false`;
- `epochs`: one line per entry, `<epoch> <startOffset>`, then `end <endOffset>` (the log's end).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def write_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Identity:
    broker_id: int
    check_code: str
    applied: bool


def load_identity(path: str) -> Identity | None:
    """The persisted identity, None when there is none; ValueError naming file and line when malformed."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    values: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        key, sep, value = line.partition("=")
        if not sep or key not in ("brokerId", "registerCheckCode", "applied"):
            raise ValueError(f"{path}:{n}: expected brokerId=, registerCheckCode= or applied=, got {line!r}")
        values[key] = value
    try:
        return Identity(int(values["brokerId"]), values["registerCheckCode"], values["applied"] == "true")
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: incomplete or malformed identity ({e})") from None


def save_identity(path: str, ident: Identity) -> None:
    write_atomically(
        path,
        f"brokerId={ident.broker_id}\nregisterCheckCode={ident.check_code}\n"
        f"applied={'true' if ident.applied else 'false'}\n",
    )


@dataclass
class CommitLog:
    """End offset plus the epoch entries [(epoch, startOffset)] of what is in the log."""

    end: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)
    path: str | None = None  # the epoch file, when persisted

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def entry_end(self, i: int) -> int:
        return self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.end

    def epoch_at(self, offset: int) -> int | None:
        """The epoch that wrote the byte at `offset`; None beyond the end."""
        if offset >= self.end:
            return None
        for epoch, start in reversed(self.epochs):
            if start <= offset:
                return epoch
        return None

    def begin_epoch(self, epoch: int) -> None:
        """As a new master: what it writes from now on is `epoch`'s."""
        if self.epochs and self.epochs[-1][1] == self.end:
            self.epochs.pop()  # the previous epoch wrote nothing here
        if not self.epochs or self.epochs[-1][0] != epoch:
            self.epochs.append((epoch, self.end))
        self.save()

    def append(self, size: int) -> tuple[int, int]:
        """The master writes `size` bytes: their [start, end)."""
        start = self.end
        self.end += size
        return start, self.end

    def truncate(self, offset: int) -> None:
        """Drop everything from `offset` on, and the epoch entries that start there or later."""
        if offset >= self.end:
            return
        self.end = offset
        while self.epochs and self.epochs[-1][1] >= offset:
            self.epochs.pop()
        self.save()

    def copy_from(self, master: CommitLog, upto: int) -> None:
        """As a slave: replicate the master's bytes [self.end, upto) with their epoch entries."""
        if upto <= self.end:
            return
        for epoch, start in master.epochs:
            if start < upto and (epoch, start) not in self.epochs and epoch > self.last_epoch:
                self.epochs.append((epoch, max(start, self.end)))
        self.end = upto
        self.save()

    def save(self) -> None:
        if self.path is not None:
            write_atomically(self.path, "".join(f"{e} {s}\n" for e, s in self.epochs) + f"end {self.end}\n")

    @classmethod
    def load(cls, path: str) -> CommitLog:
        log = cls(path=path)
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return log
        for n, line in enumerate(lines, 1):
            a, _, b = line.partition(" ")
            try:
                if a == "end":
                    log.end = int(b)
                else:
                    log.epochs.append((int(a), int(b)))
            except ValueError:
                raise ValueError(
                    f"{path}:{n}: expected '<epoch> <startOffset>' or 'end <offset>', got {line!r}"
                ) from None
        return log


def consistent_offset(slave: CommitLog, master: CommitLog) -> int:
    """RIP-44: the offset up to which the slave's log is the master's. From the slave's newest entry back, the
    first entry the master has too (same epoch, same start) gives min(its end on each side); no common
    entry: 0 (the slave's log is all truncated)."""
    theirs = dict(master.epochs)
    for i in range(len(slave.epochs) - 1, -1, -1):
        epoch, start = slave.epochs[i]
        if theirs.get(epoch) == start:
            j = master.epochs.index((epoch, start))
            return min(slave.entry_end(i), master.entry_end(j))
    return 0

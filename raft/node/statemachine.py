"""The user's state machine, in sofa-jraft's vocabulary."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from raft.core.messages import Entry
from raft.status import RaftBaseError
from snapshot.rw import SnapshotReader, SnapshotWriter


class StateMachine(Protocol):
    def on_apply(self, entries: list[Entry]) -> list[Any]:
        """Apply committed commands in log order; return one result per entry (the leader hands each
        result to the caller of `Node.apply`). Must be deterministic. Raising stops the node."""

    def on_snapshot_save(self, writer: SnapshotWriter) -> None:
        """Write a point-in-time image through `writer`: its sections (`add_section`, `add_section_lazy`)."""

    def on_snapshot_load(self, reader: SnapshotReader) -> None:
        """Replace the whole state with the image read through `reader` (a committed snapshot's data file)."""

    def on_leader_start(self, term: int) -> None:
        """This node leads `term`, and the term's first entry is applied: every earlier command is visible."""

    def on_leader_stop(self, term: int) -> None:
        """This node no longer leads `term`."""

    def on_error(self, error: BaseException) -> None:
        """A fatal error stopped the node (storage failure, state machine exception)."""


class SnapshotUnsupported(RaftBaseError, RuntimeError):
    """The state machine keeps no snapshots: its state is rebuilt from the whole log."""


class BaseStateMachine(ABC):
    """Base with no-op leadership callbacks, for state machines rebuilt from the log alone (no
    snapshots); subclasses implement `on_apply`."""

    @abstractmethod
    def on_apply(self, entries: list[Entry]) -> list[Any]: ...

    def on_snapshot_save(self, writer: SnapshotWriter) -> None:
        raise SnapshotUnsupported(f"{type(self).__name__} keeps no snapshots")

    def on_snapshot_load(self, reader: SnapshotReader) -> None:
        raise SnapshotUnsupported(f"{type(self).__name__} keeps no snapshots")

    def on_leader_start(self, term: int) -> None:  # noqa: B027 - an optional hook: doing nothing is the default
        pass

    def on_leader_stop(self, term: int) -> None:  # noqa: B027 - an optional hook: doing nothing is the default
        pass

    def on_error(self, error: BaseException) -> None:  # noqa: B027 - an optional hook: doing nothing is the default
        pass

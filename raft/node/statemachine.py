"""The user's state machine, in sofa-jraft's vocabulary."""

from __future__ import annotations

from typing import Any, Protocol

from raft.core.messages import Entry


class StateMachine(Protocol):
    def on_apply(self, entries: list[Entry]) -> list[Any]:
        """Apply committed commands in log order; return one result per entry (the leader hands each
        result to the caller of `Node.apply`). Must be deterministic. Raising stops the node."""

    def on_snapshot_save(self, writer: Any) -> None:
        """Write a point-in-time image through `writer` (the snapshot subsystem's SnapshotWriter)."""

    def on_snapshot_load(self, reader: Any) -> None:
        """Replace the whole state with the image read through `reader`."""

    def on_leader_start(self, term: int) -> None:
        """This node leads `term`, and the term's first entry is applied: every earlier command is visible."""

    def on_leader_stop(self, term: int) -> None:
        """This node no longer leads `term`."""

    def on_error(self, error: BaseException) -> None:
        """A fatal error stopped the node (storage failure, state machine exception)."""


class BaseStateMachine:
    """Convenience base with no-op callbacks; subclasses implement `on_apply`."""

    def on_apply(self, entries: list[Entry]) -> list[Any]:
        raise NotImplementedError

    def on_snapshot_save(self, writer: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not take snapshots")

    def on_snapshot_load(self, reader: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not load snapshots")

    def on_leader_start(self, term: int) -> None:
        pass

    def on_leader_stop(self, term: int) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        pass

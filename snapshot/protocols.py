"""The snapshot seams: what the Raft node (its SnapshotExecutor, the snapshot manager, InstallSnapshot's
server and downloader) calls on a snapshot storage (`snapshot.storage.FileSnapshotStorage` is the on-disk one),
and what the snapshot manager reads of the node's snapshot options (`SnapshotTriggers`)."""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from snapshot.format import SnapshotMeta

if TYPE_CHECKING:
    from snapshot.storage import PendingSnapshot, Quarantined, StoredSnapshot


class SnapshotStorage(Protocol):
    def path(self, index: int) -> Path:
        """The directory of the committed snapshot at `index`."""

    def list(self) -> builtins.list[int]:
        """Indexes of the committed snapshots, newest first."""

    def create(
        self,
        index: int,
        term: int,
        voters: Sequence[str],
        learners: Sequence[str] = (),
        *,
        created_at: float,
        user_meta: Mapping[str, Any] | None = None,
        addresses: Sequence[tuple[str, str, str, str]] = (),
    ) -> PendingSnapshot:
        """Start writing a snapshot of the state up to `index`."""

    def adopt(self, source: str | os.PathLike[str], *, verify: bool = True) -> SnapshotMeta:
        """Move a complete downloaded snapshot directory in, as a committed snapshot."""

    def read_meta(self, index: int) -> SnapshotMeta: ...

    def open(self, index: int, *, verify: bool = True) -> StoredSnapshot:
        """Open a committed snapshot (holding a reference until closed)."""

    def check_older(self, newest: int, verify: bool, quarantined: builtins.list[Quarantined]) -> None: ...

    def ref(self, index: int) -> None:
        """Protect a committed snapshot from retention."""

    def unref(self, index: int) -> None: ...

    def reference(self, index: int) -> contextlib.AbstractContextManager[Path]: ...

    def refcount(self, index: int) -> int: ...

    def quarantine(self, index: int, reason: str) -> Path:
        """Move a snapshot that failed verification aside (never delete it)."""


class SnapshotTriggers(Protocol):
    """When `SnapshotManager.due()` asks for a snapshot; 0 disables a trigger. `raft.options.SnapshotOptions`
    is the one declaration of these (with their defaults and controller.conf keys: statemachineSnapshotThreshold,
    jRaftSnapshotIntervalSecs); this package may not import it, so it names only what it reads."""

    @property
    def threshold_entries(self) -> int:
        """Entries applied since the last snapshot that trigger one."""

    @property
    def threshold_log_bytes(self) -> int:
        """Command bytes applied since the last snapshot that trigger one."""

    @property
    def interval_s(self) -> float:
        """Seconds between time-triggered snapshots (the first jittered)."""

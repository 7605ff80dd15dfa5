"""SnapshotManager: when to save, one save at a time off the apply thread, and which snapshot to load.

RIP-59's manager, split so that every decision is testable without a node:

* Triggers: entries applied since the last snapshot (`statemachineSnapshotThreshold`), command bytes
  applied since then, a period (`jRaftSnapshotIntervalSecs`, first firing jittered so replicas started
  together do not save together), and on demand. Times are passed in by the caller (monotonic seconds);
  this module reads no clock.
* Saving: `save()` runs the state machine's `fill(writer)` on the calling (apply) thread, which only
  encodes a point-in-time image, then compresses, checksums, writes, fsyncs and commits on the manager's
  own thread. A second save while one runs is refused (SnapshotBusyError).
* Loading (`load()`): newest first. A snapshot that fails verification or decoding is quarantined and the
  next older one is tried; one the caller cannot use (the log does not continue from it) is skipped and
  kept. RIP-59's rule decides whether a snapshot is worth loading over what is already applied: compare
  the term first, then the index.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from snapshot.errors import SnapshotError, SnapshotNotFoundError
from snapshot.format import SnapshotMeta
from snapshot.protocols import SnapshotStorage, SnapshotTriggers
from snapshot.rw import SnapshotWriter
from snapshot.storage import Quarantined, StoredSnapshot

log = logging.getLogger(__name__)


class SnapshotBusyError(SnapshotError):
    """A snapshot is already being saved (JRaft answers EBUSY)."""


def should_load(snap_term: int, snap_index: int, applied_term: int, applied_index: int) -> bool:
    """RIP-59: load a snapshot only if it is ahead of the applied state, comparing the term first and then
    the index. An equal (term, index) is already the state: loading it again would be wasted work."""
    return (snap_term, snap_index) > (applied_term, applied_index)


@dataclass(slots=True)
class SaveStats:
    saves: int = 0
    failures: int = 0
    last_index: int = 0
    last_term: int = 0
    last_bytes: int = 0
    last_duration_s: float = 0.0  # fill + write + commit
    last_stall_s: float = 0.0  # the part on the apply thread (fill)
    last_saved_at: float = 0.0  # caller's monotonic clock
    stalls_s: list[float] = field(default_factory=list)  # recent apply-thread stalls, newest last


@dataclass(frozen=True, slots=True)
class Loaded:
    """What `load()` found: the snapshot opened and loaded (close it when done), or None, plus what was
    quarantined and what was skipped on the way, with reasons."""

    snapshot: StoredSnapshot | None
    quarantined: tuple[tuple[int, str], ...]
    skipped: tuple[tuple[int, str], ...]

    @property
    def meta(self) -> SnapshotMeta | None:
        return None if self.snapshot is None else self.snapshot.meta


class SnapshotManager:
    def __init__(
        self,
        storage: SnapshotStorage,
        triggers: SnapshotTriggers | None = None,
        *,
        rng: random.Random | None = None,
        name: str = "snapshot-save",
    ) -> None:
        self.storage = storage
        self.triggers = triggers
        """The node's SnapshotOptions (anything with its three trigger fields); None: only on demand."""
        self._rng = rng or random.Random()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._saving: Future[SnapshotMeta] | None = None
        self.stats = SaveStats()
        self.base_index = 0  # index of the latest snapshot (saved, loaded or installed)
        self.applied_since = 0
        self.bytes_since = 0
        self._due_at: float | None = None

    # --- triggers ---------------------------------------------------------------------------------------

    def start_clock(self, now: float) -> None:
        """Arm the periodic trigger: the first firing is jittered uniformly in [interval/2, interval)."""
        if self.triggers is not None and self.triggers.interval_s > 0:
            self._due_at = now + self.triggers.interval_s * self._rng.uniform(0.5, 1.0)

    def on_applied(self, entries: int, nbytes: int) -> None:
        self.applied_since += entries
        self.bytes_since += nbytes

    def reset_base(self, index: int) -> None:
        """A snapshot at `index` now holds the state (loaded at start or installed from the leader)."""
        self.base_index = max(self.base_index, index)
        self.applied_since = self.bytes_since = 0

    def due(self, now: float) -> str | None:
        """Why a snapshot should be taken now, or None (also None while one is being saved)."""
        t = self.triggers
        if self.saving or t is None:
            return None
        if t.threshold_entries and self.applied_since >= t.threshold_entries:
            return f"{self.applied_since} entries applied since the last snapshot"
        if t.threshold_log_bytes and self.bytes_since >= t.threshold_log_bytes:
            return f"{self.bytes_since} bytes applied since the last snapshot"
        if self._due_at is not None and now >= self._due_at:
            if self.applied_since > 0:
                return f"the {t.interval_s:g} s snapshot interval elapsed"
            self._due_at = now + t.interval_s  # nothing new: wait for the next period
        return None

    @property
    def saving(self) -> bool:
        with self._lock:
            return self._saving is not None

    # --- saving -----------------------------------------------------------------------------------------

    def save(
        self,
        index: int,
        term: int,
        voters: tuple[str, ...],
        learners: tuple[str, ...],
        fill: Callable[[SnapshotWriter], None],
        *,
        now: float,
        created_at: float,
        user_meta: dict[str, object] | None = None,
        addresses: tuple[tuple[str, str, str, str], ...] = (),
    ) -> Future[SnapshotMeta]:
        """Save the state at (index, term): `fill(writer)` now, on this thread; the rest on the manager's
        thread. The returned future completes with the committed meta (or the error). The trigger
        counters restart from here, so entries applied during the write count towards the next one."""
        with self._lock:
            if self._saving is not None:
                raise SnapshotBusyError("a snapshot is already being saved")
            fut: Future[SnapshotMeta] = Future()
            self._saving = fut
        t0 = time.perf_counter()
        try:
            pending = self.storage.create(
                index, term, voters, learners, created_at=created_at, user_meta=user_meta, addresses=addresses
            )
            try:
                writer = pending.writer()
                fill(writer)
            except BaseException:
                pending.abort()
                raise
        except BaseException:
            with self._lock:
                self._saving = None
            self.stats.failures += 1
            raise
        stall = time.perf_counter() - t0
        self.applied_since = self.bytes_since = 0
        if self.triggers is not None and self.triggers.interval_s > 0:
            self._due_at = now + self.triggers.interval_s

        def write() -> SnapshotMeta:
            try:
                if not writer.finished:
                    writer.finish()
                meta = pending.commit()
            except BaseException:
                pending.abort()
                raise
            st = self.stats
            st.saves += 1
            st.last_index, st.last_term, st.last_bytes = index, term, sum(f.size for f in meta.files)
            st.last_duration_s = time.perf_counter() - t0
            st.last_stall_s = stall
            st.last_saved_at = now
            st.stalls_s = [*st.stalls_s[-99:], stall]
            self.base_index = max(self.base_index, index)
            return meta

        def run() -> None:
            try:
                result = write()
            except BaseException as e:  # noqa: BLE001 - handed to the future's owner
                self.stats.failures += 1
                with self._lock:
                    self._saving = None
                fut.set_exception(e)
            else:
                with self._lock:
                    self._saving = None
                fut.set_result(result)

        self._executor.submit(run)
        return fut

    # --- loading ----------------------------------------------------------------------------------------

    def load(
        self,
        loader: Callable[[StoredSnapshot], None],
        *,
        usable: Callable[[SnapshotMeta], str | None] | None = None,
        applied: tuple[int, int] = (0, 0),
    ) -> Loaded:
        """Open and load the newest snapshot that verifies, that `usable(meta)` accepts (None = usable,
        else the reason not) and that is ahead of `applied` = (term, index) by RIP-59's rule.

        A snapshot whose files or sections fail verification, or that `loader` rejects with a
        SnapshotError, is quarantined (and the error logged); the next older one is tried. `loader` must
        replace the state completely or raise."""
        quarantined: list[tuple[int, str]] = []
        skipped: list[tuple[int, str]] = []

        def quarantine(index: int, e: SnapshotError) -> None:
            quarantined.append((index, str(e)))
            self.storage.quarantine(index, str(e))

        for index in self.storage.list():
            try:
                meta = self.storage.read_meta(index)
            except SnapshotNotFoundError:
                continue
            except SnapshotError as e:
                quarantine(index, e)
                continue
            if not should_load(meta.last_included_term, index, *applied):
                skipped.append((index, f"not ahead of the applied state (term {applied[0]}, index {applied[1]})"))
                break  # older ones are even further behind
            why = usable(meta) if usable is not None else None
            if why is not None:
                skipped.append((index, why))
                continue
            try:
                snap = self.storage.open(index, verify=True)
            except SnapshotNotFoundError:
                continue
            except SnapshotError as e:
                quarantine(index, e)
                continue
            try:
                loader(snap)
            except SnapshotError as e:
                snap.close()
                quarantine(index, e)
                continue
            except BaseException:
                snap.close()
                raise
            self.base_index = index  # the state is now exactly this snapshot
            self.applied_since = self.bytes_since = 0
            older: list[Quarantined] = []  # the fallbacks of this one: damage found now, not when needed
            self.storage.check_older(index, True, older)
            quarantined += [(q.index, q.reason) for q in older]
            return Loaded(snap, tuple(quarantined), tuple(skipped))
        return Loaded(None, tuple(quarantined), tuple(skipped))

    def close(self) -> None:
        """Wait for a running save to finish, then stop the save thread."""
        self._executor.shutdown(wait=True)

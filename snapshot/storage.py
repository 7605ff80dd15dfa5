"""FileSnapshotStorage: snapshot directories on disk, committed atomically, verified on open, kept N deep.

Layout (docs/snapshot-format.md):

    <root>/snapshot_<index:020d>/data                     the sectioned data file (format.py)
    <root>/snapshot_<index:020d>/__raft_snapshot_meta     index, term, peers, size + CRC32C per file
    <root>/temp/snapshot_<index:020d>/                    a snapshot being written (removed on open)
    <root>/snapshot_<index:020d>.corrupt-<n>/             quarantined: failed verification, kept for humans
    <root>/snapshot_<index:020d>.deleting/                being reaped (removed on open)

Commit = fsync every file, write and fsync the meta, fsync the temp snapshot dir, rename it into the root,
fsync the root (and temp/). A crash at any point leaves the earlier snapshots intact plus, at worst, a temp
dir, or the new snapshot complete. Retention keeps `max_reserved` newest snapshots plus any snapshot that
is referenced (open for loading, or being sent to a follower).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from google_crc32c import extend as crc32c_extend

from raft.leaf import failpoint
from raft.leaf.durable import ensure_dir, fsync_dir, write_file
from raft.leaf.snapmeta import ConfState
from snapshot.errors import SnapshotError, SnapshotExistsError, SnapshotFormatError, SnapshotNotFoundError
from snapshot.format import (
    CODEC_LZ4,
    META_FILE,
    META_HEAD_SIZE,
    FileMeta,
    SectionNames,
    SnapshotMeta,
    check_file_name,
    decode_meta,
    encode_meta,
)
from snapshot.rw import SnapshotReader, SnapshotWriter

log = logging.getLogger(__name__)

DATA_FILE = "data"
TEMP_DIR = "temp"
SNAPSHOT_PREFIX = "snapshot_"
# A snapshot directory's name: its index, and `.corrupt-<n>` when quarantined (group 2). The offline readers
# (rmqctl, the audit) find snapshots by it too.
SNAPSHOT_NAME = re.compile(SNAPSHOT_PREFIX + r"(\d{20})(\.corrupt-\d+)?")
_DELETING = ".deleting"
_READ_CHUNK = 8 << 20

# Test hook: the steps of a save, in order. Setting `FileSnapshotStorage._fail_at` to one of them makes the
# save raise SimulatedCrash there, leaving the disk exactly as a process killed at that point would.
CRASH_POINTS = (
    "before_fsync",  # files written (maybe not yet durable), no meta
    "before_meta",  # files fsynced, no meta
    "before_dir_fsync",  # meta written and fsynced
    "before_rename",  # temp dir fsynced
    "after_rename",  # renamed, the root not yet fsynced
    "before_reap",  # committed; older snapshots not yet reaped
    "during_reap",  # an old snapshot renamed to .deleting, not yet removed
)


class SimulatedCrash(BaseException):
    """Raised by the `_fail_at` test hook. A BaseException, so no cleanup path catches it."""


def snapshot_dir_name(index: int) -> str:
    return f"{SNAPSHOT_PREFIX}{index:020d}"


def _crc_and_sync(path: Path) -> tuple[int, int]:
    """(size, CRC32C) of a file as it is on disk, and fsync it, in one pass."""
    fd = os.open(path, os.O_RDONLY)
    try:
        crc = size = 0
        while chunk := os.read(fd, _READ_CHUNK):
            crc = crc32c_extend(crc, chunk)
            size += len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    return size, crc


def _sync(path: Path) -> int:
    """fsync a file; returns its size."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _file_crc(path: Path) -> int:
    with open(path, "rb", buffering=0) as f:
        crc = 0
        while chunk := f.read(_READ_CHUNK):
            crc = crc32c_extend(crc, chunk)
    return crc


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A snapshot that failed to load: where it went (None in read-only mode) and why."""

    index: int
    moved_to: Path | None
    reason: str


class LoadResult(NamedTuple):
    """`load_newest()`: the snapshot that loaded (meta and reader; both None if none did) and every
    snapshot that failed on the way, newest first."""

    meta: SnapshotMeta | None
    reader: StoredSnapshot | None
    quarantined: builtins.list[Quarantined]


class StoredSnapshot(SnapshotReader):
    """A committed snapshot, opened: a SnapshotReader over its `data` file plus its `meta`.

    Holds a reference in the storage until `close()`, so retention never deletes it while it is read.
    """

    def __init__(self, storage: FileSnapshotStorage, index: int, meta: SnapshotMeta, known_types: SectionNames | None):
        self.storage: FileSnapshotStorage | None = None  # set last: close() must not unref what it did not ref
        self.index = index
        self.meta = meta
        self.dir = storage.directory / snapshot_dir_name(index)
        super().__init__(self.dir / DATA_FILE, known_types=known_types)
        self.storage = storage

    def file_path(self, name: str) -> Path:
        """Path of a file listed in the meta (for sending it to a follower)."""
        self.meta.file(name)
        return self.dir / name

    def close(self) -> None:
        super().close()
        storage, self.storage = self.storage, None
        if storage is not None:
            storage.unref(self.index)

    def __enter__(self) -> StoredSnapshot:
        return self


class PendingSnapshot:
    """A snapshot being written in `<root>/temp/snapshot_<index>/`. Write files through `writer()` (the
    sectioned data file) or put them into `path` yourself and `add_file()` them; then `commit()`.
    As a context manager it aborts (removes the temp dir) unless committed."""

    def __init__(
        self,
        storage: FileSnapshotStorage,
        index: int,
        term: int,
        voters: Sequence[str],
        learners: Sequence[str],
        created_at: float,
        user_meta: Mapping[str, Any] | None,
        addresses: Sequence[tuple[str, str, str, str]] = (),
    ) -> None:
        self.storage = storage
        self.index = index
        self.term = term
        self.voters = tuple(voters)
        self.learners = tuple(learners)
        self.addresses = tuple(addresses)
        self.conf = ConfState(self.voters, self.learners, self.addresses)  # ValueError: no configuration
        self.created_at = created_at
        self.user_meta: dict[str, Any] = dict(user_meta or {})
        self.path = storage.directory / TEMP_DIR / snapshot_dir_name(index)
        self._files: dict[str, SnapshotWriter | None] = {}
        self.meta: SnapshotMeta | None = None  # set by commit()
        self._done = False

    def writer(
        self,
        name: str = DATA_FILE,
        *,
        codec: int = CODEC_LZ4,
        level: int = 0,
        known_types: SectionNames | None = None,
    ) -> SnapshotWriter:
        """A SnapshotWriter for file `name` (`known_types` defaults to the storage's registry). Its
        `finish()` must have returned before `commit()`."""
        if known_types is None:
            known_types = self.storage.known_types
        w = SnapshotWriter(self.path / self._register(name), codec=codec, level=level, known_types=known_types)
        self._files[name] = w
        return w

    def add_file(self, name: str) -> None:
        """Include a file the caller wrote into `path` (e.g. one copied from the leader)."""
        self._register(name)
        self._files[name] = None

    def _register(self, name: str) -> str:
        if self._done:
            raise SnapshotError(f"{self.path}: snapshot already committed or aborted")
        bad = check_file_name(name)
        if bad:
            raise ValueError(bad)
        if name in self._files:
            raise ValueError(f"{self.path}: file {name!r} is already part of the snapshot")
        return name

    def commit(self) -> SnapshotMeta:
        """Make the snapshot durable and visible as `snapshot_<index>`, then apply retention.

        On an error before the rename the temp dir is removed and the error re-raised; the storage is as
        it was. Runs on whichever thread calls it (normally the writer thread, right after finish())."""
        if self._done:
            raise SnapshotError(f"{self.path}: snapshot already committed or aborted")
        st = self.storage
        try:
            if DATA_FILE not in self._files:
                raise SnapshotError(f"{self.path}: no {DATA_FILE!r} file in the snapshot")
            for name, w in self._files.items():
                if w is not None and not w.finished:
                    raise SnapshotError(f"{self.path}: the writer of {name!r} has not finished")
            extra = sorted(set(os.listdir(self.path)) - set(self._files))
            if extra:
                raise SnapshotError(f"{self.path}: files not added to the snapshot: {extra}")
            st._step("before_fsync")
            files = []
            for name in self._files:
                size, crc = _crc_and_sync(self.path / name)
                files.append(FileMeta(name, size, crc))
            meta = SnapshotMeta(self.index, self.term, self.conf, tuple(files), self.created_at, dict(self.user_meta))
            st._step("before_meta")
            write_file(self.path / META_FILE, encode_meta(meta), exclusive=True)
            st._step("before_dir_fsync")
            fsync_dir(self.path)
            st._step("before_rename")
            with st._lock:
                target = st.directory / snapshot_dir_name(self.index)
                if target.exists():
                    raise SnapshotExistsError(f"{target} already exists; snapshots are never replaced")
                os.rename(self.path, target)
        except Exception:
            self.abort()
            raise
        self._done = True
        with st._lock:
            st._pending.discard(self.index)
        st._step("after_rename")
        fsync_dir(st.directory)
        fsync_dir(self.path.parent)
        self.meta = meta
        log.info("committed snapshot %d (term %d, %d files) in %s", self.index, self.term, len(files), target)
        st._step("before_reap")
        st.reap()
        return meta

    def abort(self) -> None:
        """Throw the pending snapshot away (idempotent)."""
        if self._done:
            return
        self._done = True
        for w in self._files.values():
            if w is not None:
                w.abort()
        shutil.rmtree(self.path, ignore_errors=True)
        with self.storage._lock:
            self.storage._pending.discard(self.index)

    def __enter__(self) -> PendingSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class FileSnapshotStorage:
    """The snapshot directories under `directory` (JRaft's LocalSnapshotStorage, hardened).

    Opening (unless `read_only`) creates the directory, removes leftover temp and half-deleted dirs, and
    applies retention. `known_types` is the section registry handed to every reader. Thread-safe: the
    writer thread commits while the node thread refs, opens and unrefs.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_reserved: int = 3,
        *,
        known_types: SectionNames | None = None,
        read_only: bool = False,
    ) -> None:
        if max_reserved < 1:
            raise ValueError(f"max_reserved must be at least 1, got {max_reserved}")
        self.directory = Path(directory).absolute()
        self.max_reserved = max_reserved
        self.known_types = known_types
        self.read_only = read_only
        self._lock = threading.RLock()
        self._refs: dict[int, int] = {}
        self._pending: set[int] = set()
        self._fail_at: str | None = None  # test hook, see CRASH_POINTS
        if not read_only:
            ensure_dir(self.directory)
            self._remove_leftovers()
            self.reap()

    # --- paths and listing ------------------------------------------------------------------------------

    def path(self, index: int) -> Path:
        return self.directory / snapshot_dir_name(index)

    def list(self) -> builtins.list[int]:
        """Indexes of the committed snapshots, newest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [int(m.group(1)) for n in names if (m := SNAPSHOT_NAME.fullmatch(n)) and m.group(2) is None]
        return sorted((i for i in found if (self.directory / snapshot_dir_name(i)).is_dir()), reverse=True)

    def quarantined(self) -> builtins.list[Path]:
        return sorted(p for p in self.directory.glob(f"{SNAPSHOT_PREFIX}*.corrupt-*") if p.is_dir())

    # --- writing ------------------------------------------------------------------------------------------

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
        """Start a snapshot of the state up to `index` (whose entry has `term`) in a fresh temp dir.
        `created_at` comes from the caller's clock; this package reads none."""
        self._writable()
        if index < 0 or term < 0:
            raise ValueError(f"index and term must be non-negative, got {index}, {term}")
        for ids in (voters, learners):
            if isinstance(ids, str) or not all(isinstance(x, str) for x in ids):
                raise TypeError(f"voters and learners must be sequences of strings, got {ids!r:.100}")
        with self._lock:
            if self.path(index).exists():
                raise SnapshotExistsError(f"{self.path(index)} already exists")
            if index in self._pending:
                raise SnapshotExistsError(f"a snapshot at index {index} is already being written")
            pending = PendingSnapshot(self, index, term, voters, learners, created_at, user_meta, addresses)
            ensure_dir(pending.path.parent)
            shutil.rmtree(pending.path, ignore_errors=True)
            pending.path.mkdir()
            self._pending.add(index)
        return pending

    def adopt(self, source: str | os.PathLike[str], *, verify: bool = True) -> SnapshotMeta:
        """Make a complete snapshot directory written elsewhere (an InstallSnapshot download: the leader's
        files plus its meta) a committed snapshot of this storage, atomically.

        Checks the meta and every file's size (and CRC with `verify`), fsyncs them, renames `source` into
        the root and fsyncs it, then applies retention. `source` must be on the same file system. If the
        snapshot already exists here, `source` is removed and the existing one is kept (equal index means
        equal state)."""
        self._writable()
        src = Path(source)
        meta_path = src / META_FILE
        try:
            meta = decode_meta(meta_path.read_bytes(), str(meta_path))
        except FileNotFoundError:
            raise SnapshotFormatError(meta_path, 0, "missing meta file") from None
        listed = {f.name for f in meta.files}
        if DATA_FILE not in listed:
            raise SnapshotFormatError(meta_path, META_HEAD_SIZE, f"the meta lists no {DATA_FILE!r} file")
        extra = sorted(set(os.listdir(src)) - listed - {META_FILE})
        if extra:
            raise SnapshotError(f"{src}: files not listed in the meta: {extra}")
        for f in meta.files:
            size, crc = _crc_and_sync(src / f.name) if verify else (_sync(src / f.name), f.crc32c)
            if size != f.size or crc != f.crc32c:
                reason = f"size {size} / CRC {crc:#010x}, the meta says {f.size} / {f.crc32c:#010x}"
                raise SnapshotFormatError(src / f.name, 0, reason)
        fsync_dir(src)
        index = meta.last_included_index
        with self._lock:
            target = self.path(index)
            if target.exists():
                shutil.rmtree(src)
                log.info("snapshot %d already present; dropped the copy in %s", index, src)
                return self.read_meta(index)
            os.rename(src, target)
            fsync_dir(self.directory)
            fsync_dir(src.parent)
        log.info(
            "adopted snapshot %d (term %d, %d files) from %s", index, meta.last_included_term, len(meta.files), src
        )
        self.reap()
        return meta

    # --- reading ------------------------------------------------------------------------------------------

    def read_meta(self, index: int) -> SnapshotMeta:
        """The verified meta of a committed snapshot (its files are not checked)."""
        path = self.path(index) / META_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if not self.path(index).is_dir():
                raise SnapshotNotFoundError(f"no snapshot {index} in {self.directory}") from None
            raise SnapshotFormatError(path, 0, "missing meta file") from None
        meta = decode_meta(data, str(path))
        if meta.last_included_index != index:
            reason = f"the meta says index {meta.last_included_index}, the directory name says {index}"
            raise SnapshotFormatError(path, META_HEAD_SIZE, reason)
        return meta

    def open(self, index: int, *, verify: bool = True) -> StoredSnapshot:
        """Open a committed snapshot; close the result when done (it holds a reference).

        Always checks the meta (magic, version, CRC), the data file's header, table and layout, and that
        every listed file exists with the listed size. With `verify`, also every file's CRC32C against the
        meta; a data file that fails it is then scanned section by section to name the damaged section.
        """
        self.ref(index)
        snap: StoredSnapshot | None = None
        try:
            meta = self.read_meta(index)
            sdir = self.path(index)
            if DATA_FILE not in {f.name for f in meta.files}:
                raise SnapshotFormatError(sdir / META_FILE, META_HEAD_SIZE, f"the meta lists no {DATA_FILE!r} file")
            snap = StoredSnapshot(self, index, meta, self.known_types)  # header, table, layout of `data`
            for f in meta.files:
                try:
                    size = (sdir / f.name).stat().st_size
                except FileNotFoundError:
                    raise SnapshotFormatError(sdir / f.name, 0, "missing file (listed in the meta)") from None
                if size != f.size:
                    what = "truncated file" if size < f.size else "trailing garbage"
                    reason = f"{what}: {size} bytes, the meta says {f.size}"
                    raise SnapshotFormatError(sdir / f.name, min(size, f.size), reason)
            if verify:
                for f in meta.files:
                    crc = _file_crc(sdir / f.name)
                    if crc != f.crc32c:
                        if f.name == DATA_FILE:
                            snap.verify()  # raises the precise error if a section is damaged
                        reason = f"bad file CRC over bytes [0, {f.size}): the meta says {f.crc32c:#010x}, computed {crc:#010x}"
                        raise SnapshotFormatError(sdir / f.name, 0, reason)
        except BaseException:
            if snap is not None:
                snap.close()
            else:
                self.unref(index)
            raise
        return snap

    def load_newest(self, verify: bool = True, *, loader: Callable[[StoredSnapshot], None] | None = None) -> LoadResult:
        """Open the newest snapshot that verifies (and, with `loader`, that the loader accepts).

        Each one that fails with a SnapshotError is quarantined (renamed, never deleted; only reported in
        read-only mode) and the next older one is tried. `loader(snapshot)` typically runs
        `load_managers(snapshot, managers)`; it must leave the state machine fully replaced or raise, and
        only SnapshotError from it counts as "this snapshot is bad" (bugs propagate).
        """
        quarantined: builtins.list[Quarantined] = []
        for index in self.list():
            try:
                snap = self.open(index, verify=verify)
            except SnapshotNotFoundError:
                continue  # reaped meanwhile
            except SnapshotError as e:
                quarantined.append(self._reject(index, str(e)))
                continue
            if loader is not None:
                try:
                    loader(snap)
                except SnapshotError as e:
                    snap.close()
                    quarantined.append(self._reject(index, str(e)))
                    continue
                except BaseException:
                    snap.close()
                    raise
            self.check_older(index, verify, quarantined)
            return LoadResult(snap.meta, snap, quarantined)
        return LoadResult(None, None, quarantined)

    def check_older(self, newest: int, verify: bool, quarantined: builtins.list[Quarantined]) -> None:
        """Verify the retained snapshots older than the loaded one now, not when the newest fails later and one
        of them is the fallback: a damaged one is quarantined (and reported) like the newest would be."""
        for index in self.list():
            if index >= newest:
                continue
            try:
                self.open(index, verify=verify).close()
            except SnapshotNotFoundError:
                continue
            except SnapshotError as e:
                quarantined.append(self._reject(index, str(e)))

    def _reject(self, index: int, reason: str) -> Quarantined:
        if self.read_only:
            log.error("snapshot %d does not load (read-only, left in place): %s", index, reason)
            return Quarantined(index, None, reason)
        return Quarantined(index, self.quarantine(index, reason), reason)

    # --- references, retention, quarantine ----------------------------------------------------------------

    def ref(self, index: int) -> None:
        """Protect a committed snapshot from retention (e.g. while it is sent to a follower)."""
        with self._lock:
            if not self.path(index).is_dir():
                raise SnapshotNotFoundError(f"no snapshot {index} in {self.directory}")
            self._refs[index] = self._refs.get(index, 0) + 1

    def unref(self, index: int) -> None:
        """Drop one reference; a snapshot beyond retention is deleted when its last reference goes."""
        with self._lock:
            n = self._refs.get(index, 0)
            if n <= 0:
                raise SnapshotError(f"snapshot {index} is not referenced")
            if n == 1:
                del self._refs[index]
                if not self.read_only:
                    self.reap()
            else:
                self._refs[index] = n - 1

    @contextlib.contextmanager
    def reference(self, index: int) -> Iterator[Path]:
        """`with storage.reference(i) as path:` the snapshot directory stays until the block ends."""
        self.ref(index)
        try:
            yield self.path(index)
        finally:
            self.unref(index)

    def refcount(self, index: int) -> int:
        with self._lock:
            return self._refs.get(index, 0)

    def reap(self) -> builtins.list[int]:
        """Delete the snapshots beyond the `max_reserved` newest that nobody references; return them."""
        self._writable()
        deleted = []
        with self._lock:
            for index in self.list()[self.max_reserved :]:
                if self._refs.get(index):
                    continue
                self._delete(index)
                deleted.append(index)
        return deleted

    def _delete(self, index: int) -> None:
        # Rename first: a crash halfway through rmtree must not leave a half-deleted snapshot_<index>.
        src = self.path(index)
        doomed = src.with_name(src.name + _DELETING)
        shutil.rmtree(doomed, ignore_errors=True)
        os.rename(src, doomed)
        fsync_dir(self.directory)
        self._step("during_reap")
        shutil.rmtree(doomed)
        log.info("deleted snapshot %d (retention keeps %d)", index, self.max_reserved)

    def quarantine(self, index: int, reason: str) -> Path:
        """Move a snapshot that failed verification to `snapshot_<index>.corrupt-<n>` (never delete it)."""
        self._writable()
        with self._lock:
            src = self.path(index)
            if not src.is_dir():
                raise SnapshotNotFoundError(f"no snapshot {index} in {self.directory}")
            n = 1
            while (dst := src.with_name(f"{src.name}.corrupt-{n}")).exists():
                n += 1
            os.rename(src, dst)
            fsync_dir(self.directory)
        log.error("quarantined snapshot %d as %s: %s", index, dst, reason)
        return dst

    # --- internals ----------------------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.read_only:
            raise SnapshotError(f"{self.directory}: storage opened read-only")

    def _remove_leftovers(self) -> None:
        removed = False
        temp = self.directory / TEMP_DIR
        if temp.is_dir():
            for p in temp.iterdir():
                log.warning("removing unfinished snapshot %s (a save or copy was interrupted)", p)
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                removed = True
            if removed:
                fsync_dir(temp)
        for p in self.directory.glob(f"{SNAPSHOT_PREFIX}*{_DELETING}"):
            log.warning("finishing the deletion of %s", p)
            shutil.rmtree(p)
            removed = True
        if removed:
            fsync_dir(self.directory)

    def _step(self, point: str) -> None:
        failpoint.hit("snapshot." + point)
        if self._fail_at == point:
            raise SimulatedCrash(point)

"""What a path on the offline verbs' command line points at, the lock check, and `--copy`.

A node's data directory holds `log/` (WAL), `meta/` (term and vote), `snapshot/` (snapshot_<N> dirs) and
`LOCK`. The verbs accept the data directory itself or a part of it (the snapshot root, one snapshot_<N>
directory, the log directory) and find the data directory around it, because the lock lives there.

A locked directory belongs to a running node: reading it races with appends, truncation and snapshot
retention, so the verbs refuse it (exit 2) unless `--copy`, which copies just the files the verb needs to a
temporary directory (in an order that keeps the copy consistent, see `_copy_log`) and reads those. Every
path the user sees, in output and in errors, is mapped back from the copy to the original.

Nothing here writes into the source directory: no SegmentLog (its recovery truncates torn tails), no
writable FileSnapshotStorage (it removes temp dirs and reaps).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from cli.datadir import LOCK_FILE, probe
from cli.rmqctl import BadUsage, CorruptInput, Failed
from raft.storage.layout import LOG_DIR, META_DIR, SNAPSHOT_DIR
from raft.storage.meta import META_FILE as RAFT_META_FILE
from raft.storage.meta import MetaCorruptionError
from raft.storage.segment import SEGMENT_NAME, WAL_META_FILE, LogCorruptionError
from raft.storage.walscan import list_segments
from snapshot.errors import SnapshotError, SnapshotFormatError
from snapshot.format import META_FILE as SNAPSHOT_META_FILE
from snapshot.format import decode_meta
from snapshot.storage import SNAPSHOT_NAME, FileSnapshotStorage, snapshot_dir_name
from statemachine.sections import SECTION_NAMES


@dataclass(frozen=True)
class Source:
    """A command-line path, classified. `read` is what to open: `given` itself, or its counterpart in a
    --copy; `mirror` = (prefix read, prefix shown) maps paths back for the user."""

    given: Path
    kind: str  # "datadir" | "snaproot" | "snapdir" | "logdir"
    data_dir: Path | None  # the directory holding LOCK, when the path is (in) a node's data dir
    read: Path
    mirror: tuple[Path, Path] | None = None

    def show(self, path: str | os.PathLike[str]) -> str:
        text = os.fspath(path)
        if self.mirror is not None:
            text = text.replace(str(self.mirror[0]), str(self.mirror[1]))
        return text

    def snapshot_root(self) -> Path | None:
        if self.kind == "datadir":
            return self.read / SNAPSHOT_DIR
        if self.kind == "snaproot":
            return self.read
        if self.kind == "snapdir":
            return self.read.parent
        return self.read.parent / SNAPSHOT_DIR if self.data_dir is not None else None

    def log_dir(self) -> Path | None:
        if self.kind == "datadir":
            return self.read / LOG_DIR
        if self.kind == "logdir":
            return self.read
        return None

    def meta_file(self) -> Path | None:
        if self.kind == "datadir":
            return self.read / META_DIR / RAFT_META_FILE
        if self.kind == "logdir":  # raft_meta may share the log directory (docs/log-format.md)
            own = self.read / RAFT_META_FILE
            return own if own.exists() or self.data_dir is None else self.read.parent / META_DIR / RAFT_META_FILE
        return None

    def snapshot_indexes(self) -> list[int]:
        """The snapshots in scope, newest first: one for a snapshot_<N> dir, else all in the root."""
        if self.kind == "snapdir":
            return [snapshot_index(self.read)]
        root = self.snapshot_root()
        return storage(root).list() if root is not None else []


def _is_data_dir(p: Path) -> bool:
    return (p / LOCK_FILE).exists() or any((p / d).is_dir() for d in (LOG_DIR, META_DIR, SNAPSHOT_DIR))


def _is_log_dir(p: Path) -> bool:
    return (p / WAL_META_FILE).exists() or any(SEGMENT_NAME.match(n) for n in os.listdir(p))


def snapshot_index(d: Path) -> int:
    m = SNAPSHOT_NAME.fullmatch(d.name)
    if m:
        return int(m.group(1))
    return decode_meta((d / SNAPSHOT_META_FILE).read_bytes(), str(d / SNAPSHOT_META_FILE)).last_included_index


def classify(path: str | os.PathLike[str]) -> Source:
    p = Path(path).absolute()
    if not p.is_dir():
        raise BadUsage(f"{p}: not a directory (expected a data dir, its snapshot/ or log/ dir, or a snapshot_<N> dir)")
    if _is_data_dir(p) and not (p / SNAPSHOT_META_FILE).exists():
        return Source(p, "datadir", p, p)
    parent = p.parent
    if (p / SNAPSHOT_META_FILE).exists() or SNAPSHOT_NAME.fullmatch(p.name):
        owner = parent.parent if parent.name == SNAPSHOT_DIR and _is_data_dir(parent.parent) else None
        return Source(p, "snapdir", owner, p)
    if _is_log_dir(p):
        return Source(p, "logdir", parent if p.name == LOG_DIR and _is_data_dir(parent) else None, p)
    if p.name == SNAPSHOT_DIR or any(SNAPSHOT_NAME.fullmatch(n) for n in os.listdir(p)):
        return Source(p, "snaproot", parent if p.name == SNAPSHOT_DIR and _is_data_dir(parent) else None, p)
    inside = sorted(n for n in os.listdir(p) if (p / n).is_dir() and _is_data_dir(p / n))
    hint = f"; it holds the data dirs {', '.join(inside)}: pass one, e.g. {p / inside[0]}" if inside else ""
    raise BadUsage(f"{p}: not a data dir, snapshot root, snapshot_<N> dir or log dir{hint}")


def storage(root: Path) -> FileSnapshotStorage:
    """Read-only (creates, removes and renames nothing); the section registry makes an unknown section an
    error, as dropping a table silently would make replicas diverge."""
    return FileSnapshotStorage(root, read_only=True, known_types=SECTION_NAMES)


@contextlib.contextmanager
def open_source(path: str | os.PathLike[str], *, copy: bool, parts: tuple[str, ...]) -> Iterator[Source]:
    """Classify `path`, refuse it if a running node holds its data dir (unless `copy`), and yield the
    Source to read. `parts` (of log, meta, snapshot) limits what --copy copies. Corruption found while
    reading becomes CorruptInput naming the user's file, not the copy's."""
    src = classify(path)
    if src.data_dir is not None and not copy:
        locked, pid = probe(src.data_dir)
        if locked:
            who = f"process {pid}" if pid is not None else "another process"
            raise BadUsage(
                f"{src.data_dir}: data directory is locked by {who} (a running node); "
                "stop the node, or pass --copy to read a copy of its files"
            )
    with tempfile.TemporaryDirectory(prefix="rmqctl-") as tmp:
        src = _stage(src, Path(tmp), copy, parts)
        try:
            yield src
        except (SnapshotFormatError, LogCorruptionError, MetaCorruptionError) as e:
            raise CorruptInput.of(e, src.show) from e
        except SnapshotError as e:
            raise Failed(src.show(str(e))) from e


def _stage(src: Source, tmp: Path, copy: bool, parts: tuple[str, ...]) -> Source:
    """The Source to read: the original, a copy under `tmp`, or (for a quarantined snapshot_<N>.corrupt-<k>
    dir, which FileSnapshotStorage cannot open by name) a canonical name under `tmp` pointing at it."""
    if src.kind == "snapdir" and src.given.name != snapshot_dir_name(snapshot_index(src.given)):
        target = tmp / SNAPSHOT_DIR / snapshot_dir_name(snapshot_index(src.given))
        target.parent.mkdir()
        if copy:
            _copy_tree(src.given, target)
        else:
            target.symlink_to(src.given, target_is_directory=True)
        return replace(src, read=target, mirror=(target, src.given))
    if not copy:
        return src
    # The copy mirrors the tree from the data dir down (or from the snapshot root / the path itself).
    anchor = src.data_dir or (src.given.parent if src.kind == "snapdir" else src.given)
    mirror_root = tmp / "copy"
    read = mirror_root / src.given.relative_to(anchor)
    if src.kind == "snapdir":
        _copy_tree(src.given, read)
    elif src.kind == "snaproot":
        _copy_snapshots(src.given, read)
    elif src.kind == "logdir":
        _copy_log(src.given, read)
        if src.data_dir is not None and META_DIR in parts:
            _copy_files(src.data_dir / META_DIR, mirror_root / META_DIR, [RAFT_META_FILE])
        if src.data_dir is not None and SNAPSHOT_DIR in parts:
            _copy_snapshots(src.data_dir / SNAPSHOT_DIR, mirror_root / SNAPSHOT_DIR)
    else:
        if LOG_DIR in parts:
            _copy_log(src.given / LOG_DIR, read / LOG_DIR)
        if META_DIR in parts:
            _copy_files(src.given / META_DIR, read / META_DIR, [RAFT_META_FILE])
        if SNAPSHOT_DIR in parts:
            _copy_snapshots(src.given / SNAPSHOT_DIR, read / SNAPSHOT_DIR)
    read.mkdir(parents=True, exist_ok=True)
    return replace(src, read=read, mirror=(mirror_root, anchor))


def _copy_files(src: Path, dst: Path, names: list[str]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        with contextlib.suppress(FileNotFoundError):  # absent, or removed while we copy
            shutil.copyfile(src / name, dst / name)


def _copy_log(src: Path, dst: Path) -> None:
    """Segments first, in seg_id order, then wal_meta. The node writes wal_meta *before* it unlinks
    segments, so a meta copied last is never older than the segments copied: a segment deleted meanwhile is
    one the meta already skips (copying the meta first could leave a hole). The active segment may be
    copied mid-append: that is a torn tail, which reading handles like a crash."""
    if not src.is_dir():
        return
    names = [s.name for s in list_segments(((n, 0) for n in os.listdir(src)), None).segments]  # seg_id order
    _copy_files(src, dst, [*names, RAFT_META_FILE, WAL_META_FILE])


def _copy_snapshots(src: Path, dst: Path) -> None:
    """Every snapshot_<N> (and quarantined) dir. Committed snapshots never change, but retention may
    remove one while we copy: such a half copy is dropped, as if it had gone a moment earlier."""
    dst.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for name in sorted(os.listdir(src)):
        if SNAPSHOT_NAME.fullmatch(name) and (src / name).is_dir():
            try:
                _copy_tree(src / name, dst / name)
            except (FileNotFoundError, shutil.Error):
                shutil.rmtree(dst / name, ignore_errors=True)


def _copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)

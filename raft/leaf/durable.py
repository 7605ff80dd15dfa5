"""Durable file primitives shared by the snapshot store and the raft log: fsync a directory, create
directories durably, write a file fully and fsync it, replace a file atomically.

A leaf module (raft/leaf/__init__.py): standard library only, so `snapshot/` and `raft/storage/` share it
without either importing the other."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from raft.leaf import failpoint


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make creations, renames and unlinks inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(directory: str | os.PathLike[str]) -> Path:
    """Create `directory` (and parents) if missing, fsyncing each parent whose entries changed."""
    path = Path(directory).absolute()
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir()
        fsync_dir(d.parent)
    return path


def write_file(path: str | os.PathLike[str], data: bytes, *, exclusive: bool = False) -> None:
    """Write `data` as the whole content of `path` and fsync it (O_EXCL when `exclusive`)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(directory: str | os.PathLike[str], name: str, data: bytes) -> None:
    """Durably replace directory/name with data (temp file, fsync, rename, fsync directory)."""
    tmp = os.path.join(directory, name + ".tmp")
    write_file(tmp, data)
    failpoint.hit("file.before_rename")
    os.replace(tmp, os.path.join(directory, name))
    failpoint.hit("file.before_dir_fsync")
    fsync_dir(directory)

"""One process per data directory: an advisory `flock` on `<data_dir>/LOCK`.

Two nodes writing the same WAL would interleave records and corrupt it, and an offline tool reading a log
that a node is truncating sees a moving target. The lock is held for the life of the process (the kernel
drops it when the process dies, even on SIGKILL, so a crash never leaves a stale lock). The file holds the
holder's pid, for the error message only.
"""

from __future__ import annotations

import fcntl
import os

from raft.status import RaftBaseError

LOCK_FILE = "LOCK"


class DataDirLockedError(RaftBaseError, RuntimeError):
    """Another process holds the data directory's lock."""

    def __init__(self, data_dir: str, pid: str) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{data_dir}: data directory is locked by {who} (a running node?); {LOCK_FILE} holds its pid")
        self.data_dir = data_dir
        self.pid = pid


class DataDirLock:
    """Holds the lock until `release()` (or process exit)."""

    def __init__(self, data_dir: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, LOCK_FILE)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise DataDirLockedError(data_dir, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def is_locked(data_dir: str) -> bool:
    """Whether some process holds `data_dir`'s lock (a directory without a LOCK file is not locked)."""
    path = os.path.join(data_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False

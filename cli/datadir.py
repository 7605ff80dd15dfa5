"""One process per data directory, seen from the command line: `lock_data_dir` for a process that runs a
node on a directory, `is_locked`/`probe` for the offline `rmqctl` verbs, which refuse a directory a
running node holds (unless they read a copy).

The lock itself is `raft.storage.dirlock` (an advisory `flock` on `<data_dir>/LOCK`, holding the pid for
messages), which `Node.start` takes; this module only adapts it, so there is one lock protocol. `flock`
locks belong to an open file description: a second lock on the same directory fails even inside the same
process, so a daemon whose Node locks its data dir must not call `lock_data_dir` on it as well.
"""

from __future__ import annotations

import os

from raft.storage.dirlock import LOCK_FILE, DataDirLock, DataDirLockedError, is_locked

__all__ = ["LOCK_FILE", "DataDirLock", "DataDirLockedError", "is_locked", "lock_data_dir", "probe"]

_PID_BYTES = 32  # the file is only ever "<pid>\n"


def lock_data_dir(data_dir: str | os.PathLike[str]) -> DataDirLock:
    """Take `<data_dir>/LOCK` (creating the directory on a first start) and write our pid into it; the
    handle's `release()` (or process exit, even SIGKILL) drops it. Raises DataDirLockedError naming the
    directory and the holder's pid when another holder has it."""
    return DataDirLock(os.fspath(data_dir))


def probe(data_dir: str | os.PathLike[str]) -> tuple[bool, int | None]:
    """(locked, holder pid or None). Never creates or writes a file: the directory may be a read-only
    mount, or not ours. The pid is read after the check, for the message only."""
    if not is_locked(os.fspath(data_dir)):
        return False, None
    try:
        with open(os.path.join(data_dir, LOCK_FILE), "rb") as f:
            text = f.read(_PID_BYTES).decode("ascii", "replace").strip()
    except OSError:
        return True, None
    return True, int(text) if text.isdigit() else None

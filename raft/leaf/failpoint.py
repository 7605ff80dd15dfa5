"""Failpoints: named places in the storage and replication code where a test can crash, slow down or fail
the process on purpose (SQLite's crash tests, etcd's gofail). Catalogue and syntax: docs/reliability.md.

Off by default. The environment variable CONTROLLERD_FAILPOINTS is read once, when this module is first
imported; unset or empty, `hit()` is one function call that tests an empty dict and returns. Syntax:

    CONTROLLERD_FAILPOINTS="wal.fsync=delay(200);snapshot.before_rename=crash@2;wal.append=error(ENOSPC)@3+"

    action   crash          SIGKILL this process (nothing flushed, nothing cleaned up: kill -9)
             delay(MS)      sleep MS milliseconds in the calling thread, then go on
             error(ERRNO)   raise OSError(ERRNO) (EIO, ENOSPC, ...) as the failing system call would
    @N       fire on the Nth hit of the point only (1-based); @N+ on the Nth and every later hit;
             no @: on every hit

A leaf module (raft/leaf/__init__.py): standard library only, so the WAL, the snapshot store and the node
all arm the same points without importing one another.
Tests that run in-process use `configure()` and `reset()`.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import threading
import time
from dataclasses import dataclass

ENV = "CONTROLLERD_FAILPOINTS"

# Every point the code has, in the order a write meets them; `configure` refuses names not listed here.
POINTS = (
    "wal.append.before_write",  # a batch is about to be written into the active segment
    "wal.append.before_fsync",  # written, not yet fdatasync'ed
    "wal.append.after_fsync",  # durable, the in-memory index and the caller not yet told
    "wal.fsync",  # the fdatasync itself: error(EIO) is fsyncgate, delay(MS) a slow disk
    "wal.roll.before_header",  # a new segment file exists, empty
    "wal.roll.before_dir_fsync",  # its header is written and fsynced, the directory entry not yet
    "wal.meta.before_write",  # wal_meta (first_index, min_seg_id) is about to be replaced
    "wal.truncate_prefix.before_unlink",  # wal_meta says the new first index, old segments still there
    "wal.reset.before_unlink",  # a reset (snapshot installed) recorded, the old segments still there
    "meta.save",  # raft_meta (term, vote) is about to be replaced
    "file.before_rename",  # any atomic replace: the .tmp file is written and fsynced, not renamed
    "file.before_dir_fsync",  # renamed, the directory not yet fsynced
    "snapshot.before_fsync",  # snapshot save steps (snapshot/storage.py CRASH_POINTS)
    "snapshot.before_meta",
    "snapshot.before_dir_fsync",
    "snapshot.before_rename",
    "snapshot.after_rename",
    "snapshot.before_reap",
    "snapshot.during_reap",  # retention: an old snapshot renamed to .deleting, not yet removed
    "install.chunk",  # a follower wrote one downloaded snapshot chunk
    "install.before_adopt",  # every file downloaded and checked, not yet renamed into the storage
    "install.after_adopt",  # adopted, the core not yet told (the log not yet reset)
    "membership.propose",  # a leader is about to propose a configuration change
    "membership.apply",  # a configuration change entry is committed, about to be applied
)

_SPEC = re.compile(r"^\s*([a-z_.]+)\s*=\s*(crash|delay\((\d+)\)|error\(([A-Z0-9]+)\))(?:@(\d+)(\+?))?\s*$")


@dataclass(slots=True)
class _Point:
    action: str  # crash | delay | error
    arg: int  # delay ms or errno
    first: int  # fire from this hit on (1-based); 1 with `every` for "always"
    every: bool  # keep firing after `first`
    hits: int = 0


_active: dict[str, _Point] = {}
_lock = threading.Lock()


def parse(spec: str) -> dict[str, _Point]:
    """The points of a CONTROLLERD_FAILPOINTS value; ValueError naming the bad term."""
    points: dict[str, _Point] = {}
    for term in filter(None, (t.strip() for t in spec.split(";"))):
        m = _SPEC.match(term)
        if not m:
            raise ValueError(f"{ENV}: cannot parse {term!r} (expected name=crash|delay(MS)|error(ERRNO)[@N[+]])")
        name, action, ms, err, nth, plus = m.groups()
        if name not in POINTS:
            raise ValueError(f"{ENV}: unknown failpoint {name!r}; known: {', '.join(POINTS)}")
        if err is not None and not isinstance(getattr(errno, err, None), int):
            raise ValueError(f"{ENV}: {err!r} in {term!r} is not an errno name")
        kind = action.split("(")[0]
        arg = int(ms) if ms is not None else getattr(errno, err) if err is not None else 0
        if nth is not None and int(nth) < 1:
            raise ValueError(f"{ENV}: hit counts start at 1 in {term!r}")
        points[name] = _Point(kind, arg, int(nth or 1), nth is None or plus == "+")
    return points


def configure(spec: str) -> None:
    """Replace the armed points (tests in this process); an empty spec disarms all."""
    points = parse(spec)
    with _lock:
        _active.clear()
        _active.update(points)


def reset() -> None:
    configure("")


def armed() -> list[str]:
    return sorted(_active)


def hit(name: str) -> None:
    """The hook: does nothing unless `name` is armed."""
    if _active:
        _fire(name)


def _fire(name: str) -> None:
    with _lock:
        p = _active.get(name)
        if p is None:
            return
        p.hits += 1
        if p.hits < p.first or (p.hits > p.first and not p.every):
            return
    if p.action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # SIGKILL is delivered before this returns; never go on past a crash point
    elif p.action == "delay":
        time.sleep(p.arg / 1000)
    else:
        raise OSError(p.arg, f"{os.strerror(p.arg)} (failpoint {name})")


configure(os.environ.get(ENV, ""))

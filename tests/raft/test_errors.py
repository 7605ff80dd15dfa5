"""Every error the raft package raises derives from RaftBaseError, so callers (the service's one mapping from
Raft errors to answers) catch them in one clause; the historic bases stay, so older `except` clauses hold."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import raft
from raft.status import RaftBaseError, RaftException

# Owned by the storage rewrite in flight (raft/storage/wal.py, meta.py): they join the base with it.


def raft_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(raft.__path__, "raft."):
        if info.name.startswith("raft.testing"):
            continue  # test harnesses (InvariantViolation is an AssertionError on purpose)
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Exception) and cls.__module__ == info.name:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_every_raft_error_derives_from_the_base() -> None:
    errors = raft_errors()
    assert "raft.status.RaftException" in errors and "raft.transport.codec.CodecError" in errors
    outside = sorted(name for name, cls in errors.items() if not issubclass(cls, RaftBaseError))
    assert outside == [], outside


def test_the_historic_bases_still_catch_them() -> None:
    from raft.core.confchange import ConfChangeError
    from raft.node.statemachine import SnapshotUnsupported
    from raft.storage.dirlock import DataDirLockedError
    from raft.transport.codec import CodecError

    assert issubclass(ConfChangeError, ValueError) and issubclass(CodecError, ValueError)
    assert issubclass(DataDirLockedError, RuntimeError) and issubclass(SnapshotUnsupported, RuntimeError)
    assert issubclass(RaftException, RaftBaseError)

"""Errors of the raft package: every one derives from `RaftBaseError` (as snapshot's derive from
SnapshotError), so a caller catches the package's failures in one clause. `RaftException` carries a code,
in the spirit of JRaft's RaftError (braft errno)."""

from __future__ import annotations

import enum


class RaftError(enum.IntEnum):
    OK = 0
    EPERM = 1  # not the leader
    EINVAL = 2  # bad argument
    EBUSY = 3  # overloaded, or a conflicting operation is in progress
    EAGAIN = 4  # try again (e.g. no entry of this term committed yet)
    ECANCELED = 5  # the node stopped or the operation was cancelled
    ELEADERCHANGED = 6  # leadership changed while the request was pending
    ETIMEDOUT = 7
    EIO = 8  # storage failure: the node stops
    ESTALE = 9


class RaftBaseError(Exception):
    """Base class of every error raised by the `raft` package."""


class RaftException(RaftBaseError):
    """A refused or failed Raft operation, with its code and the leader it knows of (may be "")."""

    def __init__(self, code: RaftError, message: str = "", leader: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.leader = leader

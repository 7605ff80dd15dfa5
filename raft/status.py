"""Errors as values with codes, in the spirit of JRaft's RaftError (braft errno)."""

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


class RaftException(Exception):
    def __init__(self, code: RaftError, message: str = "", leader: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.leader = leader

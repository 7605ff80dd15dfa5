"""The disk guard: proposals and entries from a leader wait while the log's file system is nearly full
(LogStorageOptions.min_free_bytes), so the WAL never meets ENOSPC, an I/O error that would stop the node."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from raft.core import Message, MsgType
from raft.status import RaftError, RaftException

log = logging.getLogger("raft.node")


class DiskGuard:
    def __init__(self, data_dir: str, min_free_bytes: int, clock: Callable[[], float]) -> None:
        self.data_dir = data_dir
        self.need = min_free_bytes
        self._clock = clock
        self._free, self._checked_at = 0, float("-inf")  # the cached statvfs
        self._paused = False  # entries from the leader refused for want of disk space (refuse)

    def short(self) -> str | None:
        """Why the log's file system is too full to write, or None; statvfs at most every 100 ms."""
        if not self.need:
            return None
        now = self._clock()
        if now >= self._checked_at + 0.1:
            st = os.statvfs(self.data_dir)
            self._free, self._checked_at = st.f_bavail * st.f_frsize, now
        if self._free < self.need:
            return f"disk nearly full: {self._free} bytes free under {self.data_dir}, writes need {self.need}"
        return None

    def check(self) -> None:
        """Refuse a proposal while the disk is nearly full."""
        short = self.short()
        if short is not None:
            raise RaftException(RaftError.EBUSY, f"{short}; free space and writes resume by themselves")

    def refuse(self, m: Message) -> bool:
        """While the disk is nearly full, entries and snapshots from a leader are not taken: the message is
        dropped as if the network had lost it, so the node stays alive, keeps its term and leader from
        heartbeats (no election), answers reads, and the leader resends at heartbeat pace; once space is
        back the next append goes through (or is rejected with a hint and backed up) and it catches up.
        While the reserve exceeds what a batch writes, the WAL never meets ENOSPC."""
        if not (m.type == MsgType.SNAP or (m.type == MsgType.APP and m.entries)):
            return False
        short = self.short()
        if (short is not None) != self._paused:
            self._paused = short is not None
            if short is not None:
                log.warning("%s: not taking entries from leader %s until space is freed", short, m.frm)
            else:
                log.info("disk space is back under %s: taking entries from the leader again", self.data_dir)
        return short is not None

"""The pure Raft core: no IO, no clock, no asyncio. See core.py."""

from raft.core.confchange import ConfChange, ConfChangeOp
from raft.core.core import CANDIDATE, FOLLOWER, LEADER, PRE_CANDIDATE, CoreConfig, CoreStatus, RaftCore
from raft.core.messages import ConfState, Entry, EntryType, HardState, Message, MsgType, SnapshotMeta
from raft.core.ready import ReadState, Ready

__all__ = [
    "CANDIDATE", "FOLLOWER", "LEADER", "PRE_CANDIDATE", "ConfChange", "ConfChangeOp", "ConfState",
    "CoreConfig", "CoreStatus", "Entry", "EntryType", "HardState", "Message", "MsgType", "RaftCore",
    "ReadState", "Ready", "SnapshotMeta",
]

"""The pure Raft core: no IO, no clock, no asyncio. See core.py."""

from raft.core.confchange import ConfChange, ConfChangeOp
from raft.core.core import CoreConfig, CoreStatus, PeerProgress, RaftCore, Role
from raft.core.messages import ConfState, Entry, EntryType, HardState, Message, MsgType, SnapshotMeta
from raft.core.ready import ReadState, Ready

__all__ = [
    "ConfChange",
    "ConfChangeOp",
    "ConfState",
    "CoreConfig",
    "CoreStatus",
    "Entry",
    "EntryType",
    "HardState",
    "Message",
    "MsgType",
    "PeerProgress",
    "RaftCore",
    "ReadState",
    "Ready",
    "Role",
    "SnapshotMeta",
]

"""The asyncio driver around the pure core, with a JRaft-shaped API."""

from raft.node.factory import core_config
from raft.node.node import Node
from raft.node.statemachine import BaseStateMachine, SnapshotUnsupported, StateMachine
from raft.node.status import MemberAddresses, NodeStatus, SnapshotDownloads, SnapshotSending, SnapshotStatus

__all__ = [
    "BaseStateMachine",
    "MemberAddresses",
    "Node",
    "NodeStatus",
    "SnapshotDownloads",
    "SnapshotSending",
    "SnapshotStatus",
    "SnapshotUnsupported",
    "StateMachine",
    "core_config",
]

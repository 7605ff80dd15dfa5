"""The asyncio driver around the pure core, with a JRaft-shaped API."""

from raft.node.factory import NodeParts, PartsFactory, core_config, open_data_dir
from raft.node.node import Node
from raft.node.statemachine import BaseStateMachine, SnapshotUnsupported, StateMachine
from raft.node.status import MemberAddresses, NodeStatus, SnapshotDownloads, SnapshotSending, SnapshotStatus

__all__ = [
    "BaseStateMachine",
    "MemberAddresses",
    "Node",
    "NodeParts",
    "NodeStatus",
    "PartsFactory",
    "SnapshotDownloads",
    "SnapshotSending",
    "SnapshotStatus",
    "SnapshotUnsupported",
    "StateMachine",
    "core_config",
    "open_data_dir",
]

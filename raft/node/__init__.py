"""The asyncio driver around the pure core, with a JRaft-shaped API."""

from raft.node.node import Node, core_config
from raft.node.statemachine import BaseStateMachine, SnapshotUnsupported, StateMachine

__all__ = ["BaseStateMachine", "Node", "SnapshotUnsupported", "StateMachine", "core_config"]

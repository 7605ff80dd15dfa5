"""An in-process group of real `Node`s: one event loop, in-memory transport (a TransportHub) and in-memory log
and meta store, snapshot stores in a temporary directory. Node-level tests use it where they need no real
ports; it is `Node`'s `open_parts` (a `raft.node.factory.PartsFactory`).

Each node's log and meta store outlive a stop, as its disk would: `Node(options, fsm, open_parts=group.parts)`
again (a restart) finds what the previous one persisted. `group.hub` cuts and heals links.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from raft.node.factory import NodeParts, OnMessages
from raft.node.statemachine import StateMachine
from raft.options import NodeOptions
from raft.storage.layout import DOWNLOAD_DIR, SNAPSHOT_DIR
from raft.storage.memory import MemoryLogStorage, MemoryMetaStorage
from raft.transport import InMemoryTransport, NodeTransport, TransportHub
from raft.transport.tcp import Address
from snapshot.storage import SnapshotStorage


class InProcessGroup:
    def __init__(self) -> None:
        self.hub = TransportHub()
        self.logs: dict[str, MemoryLogStorage] = {}
        self.metas: dict[str, MemoryMetaStorage] = {}

    def parts(self, o: NodeOptions, fsm: StateMachine) -> NodeParts:
        """The parts of node `o.node_id`: its log and meta store (kept across restarts), a snapshot store
        under `o.data_dir`, and an InMemoryTransport on the hub."""
        lg = self.logs.setdefault(o.node_id, MemoryLogStorage())
        meta = self.metas.setdefault(o.node_id, MemoryMetaStorage())
        known = getattr(fsm, "section_names", None)
        snapshots = SnapshotStorage(os.path.join(o.data_dir, SNAPSHOT_DIR), o.snapshot.max_reserved, known_types=known)

        def transport(on_messages: OnMessages, peers: Mapping[str, Address]) -> NodeTransport:
            return InMemoryTransport(o.node_id, self.hub, on_messages, peers=peers)

        return NodeParts(lg, meta, snapshots, os.path.join(o.data_dir, DOWNLOAD_DIR), transport)

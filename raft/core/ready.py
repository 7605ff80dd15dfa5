"""The core's output: one batch of work for the driver."""

from __future__ import annotations

from dataclasses import dataclass, field

from raft.core.messages import Entry, HardState, Message, SnapshotMeta
from raft.status import RaftError


@dataclass(frozen=True, slots=True)
class ReadState:
    """A linearizable read `ctx` may be answered once the state machine has applied `index`."""

    ctx: object
    index: int


@dataclass(slots=True)
class Ready:
    """Work for the driver, in this order:

    1. persist `hard_state` (if set), `entries` (which may replace a stored suffix) and install
       `snapshot` (if set) -- durably, in that order;
    2. `messages` may be sent at once, even before step 1 finishes (the leader writes its own log in
       parallel with replication, Raft thesis §10.2.1): the core puts a message there only while the term
       and vote it is stamped with are reported durable; `persisted_messages` only after step 1 of this
       Ready and of every earlier one;
    3. apply `committed` in order; serve `read_states` once applied reaches their index; fail
       `dropped_reads`;
    4. call `advance(ready)`; when step 1 is durable, `on_hard_state_persisted(hard_state)` (if set) and
       `on_persisted(last index, its term)` (if entries).
    """

    hard_state: HardState | None = None
    entries: list[Entry] = field(default_factory=list)
    snapshot: SnapshotMeta | None = None
    committed: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    persisted_messages: list[Message] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    dropped_reads: list[tuple[object, RaftError]] = field(default_factory=list)
    leader: str = ""
    role: str = ""
    term: int = 0

    def must_persist(self) -> bool:
        return self.hard_state is not None or bool(self.entries) or self.snapshot is not None

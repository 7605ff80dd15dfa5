"""Data directories for the rmqctl offline tests, written by the real storage code (no binary fixtures):
the WAL through SegmentLog, term/vote through FileMetaStorage, snapshots through FileSnapshotStorage and the
ControllerStateMachine's own save path, in the layout a Node uses (`log/`, `meta/`, `snapshot/`).

Everything is deterministic: command times come from the state machine test harness's clock, snapshot
creation times are fixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raft.core.confchange import encode_conf
from raft.core.messages import ConfState, Entry, EntryType, HardState
from raft.options import LogStorageOptions
from raft.storage import FileMetaStorage, SegmentLog
from snapshot.storage import FileSnapshotStorage
from statemachine import ControllerStateMachine
from statemachine import commands as cmd
from statemachine.sections import SECTION_NAMES
from tests.statemachine.harness import IPS, Ctl

VOTERS = ("n1", "n2", "n3")
CREATED_AT = 1_700_000_000.0  # 2023-11-14T22:13:20Z
TERM_2_VOTE_N1 = HardState(2, "n1")


def controller_commands() -> list[bytes]:
    """A broker set of two (registration, heartbeats, election, SyncStateSet), a third broker joining, KV
    puts and a replicated config change: 20 commands, each one that RocketMQ would send."""
    ctl = Ctl()
    ctl.group(2)  # 10 commands
    ctl.advance(1000)
    ctl.run(cmd.kv_put(ctl.now, "ns", "k1", "v1"))
    ctl.config(enableElectUncleanMaster=True)
    ctl.advance(1000)
    ctl.hb(1)
    ctl.register_new(IPS[2])  # 3 commands
    ctl.hb(3)
    ctl.run(cmd.kv_put(ctl.now, "ns", "k2", "v2"))
    ctl.run(cmd.kv_put(ctl.now, "other", "a", "b"))
    ctl.info()
    assert len(ctl.log) == 20
    return ctl.log


def log_entries() -> list[Entry]:
    """Term 1: a NOOP, the CONF entry of the initial voters, 10 commands. Term 2: a NOOP, 10 commands.
    Indexes 1..23; the NOOP of term 2 is index 13."""
    commands = controller_commands()
    entries = [Entry(1, 1, EntryType.NOOP), Entry(1, 2, EntryType.CONF, encode_conf(ConfState(VOTERS)))]
    entries += [Entry(1, 3 + k, EntryType.NORMAL, c) for k, c in enumerate(commands[:10])]
    entries.append(Entry(2, 13, EntryType.NOOP))
    entries += [Entry(2, 14 + k, EntryType.NORMAL, c) for k, c in enumerate(commands[10:])]
    return entries


@dataclass
class Fixture:
    root: Path
    entries: list[Entry]
    snapshots: list[int]

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def snapshot_root(self) -> Path:
        return self.root / "snapshot"

    def snapshot_dir(self, index: int) -> Path:
        return self.snapshot_root / f"snapshot_{index:020d}"

    def state_at(self, index: int) -> ControllerStateMachine:
        sm = ControllerStateMachine()
        for e in self.entries[:index]:
            if e.type == EntryType.NORMAL:
                sm.apply(e.data)
        return sm


def write_snapshot(
    root: Path, sm: ControllerStateMachine, index: int, term: int, voters: tuple[str, ...] = VOTERS
) -> Path:
    """A snapshot of `sm` at (index, term) under the snapshot root `root`, as the node's save path makes it."""
    st = FileSnapshotStorage(root, max_reserved=100, known_types=SECTION_NAMES)
    pending = st.create(index, term, voters, (), created_at=CREATED_AT)
    writer = pending.writer()
    sm.on_snapshot_save(writer)
    writer.finish()
    pending.commit()
    return st.path(index)


def build(
    root: Path,
    *,
    snapshots: tuple[int, ...] = (),
    compact_to: int | None = None,
    segment_bytes: int | None = None,
    hard_state: HardState = TERM_2_VOTE_N1,
) -> Fixture:
    """A data dir with the 23 entries of `log_entries()` (batches of 4; a small `segment_bytes` spreads them
    over several segments), a snapshot at each index of `snapshots`, and the log prefix below
    `compact_to` truncated away (as a node does after a snapshot)."""
    entries = log_entries()
    fx = Fixture(root, entries, sorted(snapshots, reverse=True))
    opts = LogStorageOptions(segment_bytes=segment_bytes) if segment_bytes else LogStorageOptions()
    with SegmentLog(root / "log", opts) as log:
        for k in range(0, len(entries), 4):
            log.append(entries[k : k + 4])
        if compact_to is not None:
            log.truncate_prefix(compact_to)
    FileMetaStorage(root / "meta").save(hard_state)
    for index in snapshots:
        write_snapshot(fx.snapshot_root, fx.state_at(index), index, entries[index - 1].term)
    return fx

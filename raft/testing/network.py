"""A tiny synchronous harness for scenario tests of the core: persistence is instant (or deferred until
`sync()` for chosen nodes), messages sit in a queue until `deliver()`, and links can be cut. Reads like
the Raft paper's figures."""

from __future__ import annotations

import random
from collections.abc import Callable

from raft.core import ConfState, CoreConfig, Entry, EntryType, HardState, Message, RaftCore, Ready, Role, SnapshotMeta


class Network:
    def __init__(self, ids: list[str], voters: list[str] | None = None, **cfg: object) -> None:
        self.conf = ConfState(tuple(voters or ids), tuple(i for i in ids if voters and i not in voters))
        self.cfg = cfg
        self.cores: dict[str, RaftCore] = {}
        self.durable: dict[str, tuple[HardState, list[Entry], SnapshotMeta | None]] = {}
        self.applied: dict[str, list[Entry]] = {i: [] for i in ids}
        self.queue: list[Message] = []
        self.cut: set[frozenset[str]] = set()
        self.down: set[str] = set()
        self.filter: Callable[[Message], bool] | None = None  # return False to drop
        self.read_states: dict[str, list[tuple[object, int]]] = {i: [] for i in ids}
        self.dropped_reads: dict[str, list[object]] = {i: [] for i in ids}
        self.clock = 0.0  # one monotonic clock (ms) for every node; each tick advances it by tick_ms
        self.tick_ms = float(cfg.get("tick_ms", 50.0))  # type: ignore[arg-type]
        self.unsynced: dict[str, list[Ready]] = {}  # nodes whose writes wait for sync()
        for i in ids:
            self.durable[i] = (HardState(), [], None)
            self.start(i)

    def start(self, i: str) -> RaftCore:
        hs, entries, snap = self.durable[i]
        cfg = CoreConfig(id=i, **self.cfg)  # type: ignore[arg-type]
        core = RaftCore(cfg, self.conf, hs, snap, list(entries), random.Random(hash(i) & 0xFFFF))
        self.cores[i] = core
        self.down.discard(i)
        return core

    def crash(self, i: str) -> None:
        """Stop node i; its writes not yet synced are lost."""
        self.down.add(i)
        if i in self.unsynced:
            self.unsynced[i] = []

    def isolate(self, i: str) -> None:
        for j in self.cores:
            if j != i:
                self.cut.add(frozenset((i, j)))

    def heal(self) -> None:
        self.cut.clear()

    def process(self, i: str) -> None:
        """Run node i's Readies until it has nothing more to do. Writes are durable at once, unless
        `defer_writes(i)` was called: then they (and `persisted_messages`) wait for `sync(i)`, like the
        node's log writer, while `messages` go out at once."""
        core = self.cores[i]
        while core.has_ready():
            rd: Ready = core.ready()
            self.queue.extend(rd.messages)
            self.applied[i].extend(rd.committed)
            self.read_states[i].extend((r.ctx, r.index) for r in rd.read_states)
            self.dropped_reads[i].extend(ctx for ctx, _ in rd.dropped_reads)
            core.advance(rd)
            if i in self.unsynced:
                self.unsynced[i].append(rd)
            else:
                self._write(i, rd)

    def defer_writes(self, i: str) -> None:
        self.unsynced[i] = []

    def sync(self, i: str) -> None:
        """fsync: node i's deferred writes become durable and their waiting messages leave."""
        pending, self.unsynced[i] = self.unsynced[i], []
        for rd in pending:
            self._write(i, rd)

    def _write(self, i: str, rd: Ready) -> None:
        hs, entries, snap = self.durable[i]
        if rd.hard_state is not None:
            hs = rd.hard_state
        if rd.snapshot is not None:
            snap, entries = rd.snapshot, []
        if rd.entries:
            first = rd.entries[0].index
            entries = [e for e in entries if e.index < first] + list(rd.entries)
        self.durable[i] = (hs, entries, snap)
        self.queue.extend(rd.persisted_messages)
        core = self.cores[i]
        if rd.hard_state is not None:
            core.on_hard_state_persisted(rd.hard_state)
        if rd.entries:
            core.on_persisted(rd.entries[-1].index, rd.entries[-1].term)

    def send_pending(self) -> list[Message]:
        for i in self.cores:
            if i not in self.down:
                self.process(i)
        out, self.queue = self.queue, []
        return out

    def deliver(self, max_rounds: int = 1000) -> None:
        """Deliver messages until the network is quiet."""
        for _ in range(max_rounds):
            msgs = self.send_pending()
            if not msgs:
                return
            for m in msgs:
                if m.to in self.down or frozenset((m.frm, m.to)) in self.cut:
                    continue
                if self.filter is not None and not self.filter(m):
                    continue
                self.cores[m.to].step(m)
        raise AssertionError("network did not quiesce")

    def tick(self, i: str, n: int = 1) -> None:
        for _ in range(n):
            self.clock += self.tick_ms
            self.cores[i].tick(self.clock)

    def tick_all(self, n: int = 1) -> None:
        for _ in range(n):
            self.clock += self.tick_ms
            for i, c in self.cores.items():
                if i not in self.down:
                    c.tick(self.clock)
            self.deliver()

    def heartbeat(self, i: str) -> None:
        """Tick leader `i` alone through one heartbeat interval and deliver. A leader sends no append just to
        carry a new commit index: followers learn it from the next append or, when idle, this heartbeat."""
        self.tick(i, self.cores[i].cfg.heartbeat_tick)
        self.deliver()

    def started_long_ago(self) -> None:
        """Every node has been up for more than an election timeout (no lease-read boot lockout left)."""
        for c in self.cores.values():
            c.boot_lockout = False

    def elect(self, i: str) -> RaftCore:
        core = self.cores[i]
        core.campaign()
        self.deliver()
        assert core.role == Role.LEADER, f"{i} did not win: {core.role}"
        return core

    def propose(self, i: str, *datas: bytes) -> int:
        idx, _ = self.cores[i].propose(list(datas))
        self.deliver()
        return idx

    def normal_applied(self, i: str) -> list[bytes]:
        return [e.data for e in self.applied[i] if e.type == EntryType.NORMAL]

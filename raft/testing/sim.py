"""A deterministic, seeded simulation of a Raft cluster around the pure core.

Every source of nondeterminism (message loss, delay, duplication and reordering, partitions, crashes
with or without losing unsynced writes, snapshots, leadership transfers, membership changes) is drawn
from one `random.Random(seed)`, so a failing seed replays exactly. Safety invariants are checked after
every step; at the end the faults stop and the cluster must converge with every acknowledged write.

Disk model: a Ready's writes go to a per-node "page cache" queue first; an explicit sync event makes
them durable, releases the messages that wait for durability, and reports `on_persisted` to the core.
A crash either keeps the queue (kill -9: the OS still writes it) or drops a random suffix of it
(power loss).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from raft.core import (
    LEADER,
    ConfChange,
    ConfChangeOp,
    ConfState,
    CoreConfig,
    Entry,
    EntryType,
    HardState,
    Message,
    MsgType,
    RaftCore,
    Ready,
    SnapshotMeta,
)
from raft.status import RaftException


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimOptions:
    nodes: int = 3  # initial voters
    spare_nodes: int = 0  # extra nodes that membership changes may add
    steps: int = 1500
    drop: float = 0.05
    duplicate: float = 0.03
    max_delay: int = 6  # in steps
    crash: float = 0.004
    lose_unsynced: float = 0.5  # fraction of crashes that are power losses
    partition: float = 0.004
    snapshot: float = 0.01
    transfer: float = 0.003
    conf_change: float = 0.0
    lease_read: bool = False
    settle_steps: int = 4000


@dataclass
class _Durable:
    hard: HardState = HardState()
    entries: list[Entry] = field(default_factory=list)
    snap: SnapshotMeta = SnapshotMeta()
    snap_app: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass
class _Pending:
    hard: HardState | None
    entries: list[Entry]
    snap: SnapshotMeta | None
    snap_app: list[tuple[int, bytes]] | None
    msgs: list[Message]
    last: tuple[int, int]


class SimNode:
    def __init__(self, sim: Simulation, node_id: str) -> None:
        self.sim = sim
        self.id = node_id
        self.durable = _Durable()
        self.alive = False
        self.core: RaftCore
        self.app: list[tuple[int, bytes]] = []
        self.pending: list[_Pending] = []
        self.last_commit = 0
        self.was_leader_term = -1
        self.reads: list[tuple[object, int]] = []  # ReadStates waiting for apply

    def start(self) -> None:
        d = self.durable
        cfg = CoreConfig(
            id=self.id,
            election_tick=10,
            heartbeat_tick=1,
            lease_read=self.sim.opts.lease_read,
            max_inflight=self.sim.rng.choice([1, 4, 64]),
            max_entries_per_msg=self.sim.rng.choice([1, 3, 100]),
        )
        snapshot = d.snap if d.snap.index > 0 else None
        self.core = RaftCore(
            cfg, self.sim.bootstrap, d.hard, snapshot, list(d.entries), random.Random(self.sim.rng.random())
        )
        self.app = list(d.snap_app)
        self.sim.chain_rebuild(self)
        self.pending = []
        self.last_commit = self.core.log.committed
        self.reads = []
        self.alive = True

    def crash(self, lose_unsynced: bool) -> None:
        if lose_unsynced:
            keep = self.sim.rng.randrange(len(self.pending) + 1)
            for p in self.pending[:keep]:
                self._write(p)
        else:
            for p in self.pending:
                self._write(p)
        self.pending = []
        self.alive = False
        for ctx, _ in self.reads:
            self.sim.reads_open.discard(ctx)  # type: ignore[arg-type]

    def sync(self) -> None:
        """fsync: everything queued becomes durable; waiting messages go out."""
        pend, self.pending = self.pending, []
        for p in pend:
            self._write(p)
        for p in pend:
            self.sim.send_all(p.msgs)
            if p.hard is not None:
                self.core.on_hard_state_persisted(p.hard)
            self.core.on_persisted(*p.last)

    def _write(self, p: _Pending) -> None:
        d = self.durable
        if p.hard is not None:
            d.hard = p.hard
        if p.snap is not None:
            d.snap = p.snap
            d.snap_app = list(p.snap_app or [])
            d.entries = []
        if p.entries:
            first = p.entries[0].index
            d.entries = [e for e in d.entries if e.index < first] + list(p.entries)

    def handle_ready(self) -> None:
        core = self.core
        rd: Ready = core.ready()
        self.sim.check_new_entries(self, rd)
        if rd.messages and (rd.hard_state is not None or any(p.hard is not None for p in self.pending)):
            raise AssertionError(f"{self.id} sends {rd.messages[0]} before its term and vote are durable")
        self.sim.send_all(rd.messages)
        snap_app = None
        if rd.snapshot is not None:
            snap_app = list(self.sim.snap_store[(rd.snapshot.index, rd.snapshot.term)])
            self.app = list(snap_app)
            self.sim.chain_restore(self, rd.snapshot)
        last = (core.log.last_index(), core.log.last_term())
        if rd.must_persist() or rd.persisted_messages:
            self.pending.append(_Pending(rd.hard_state, rd.entries, rd.snapshot, snap_app, rd.persisted_messages, last))
        for e in rd.committed:
            self.sim.check_apply(self, e)
            if e.type == EntryType.NORMAL:
                self.app.append((e.index, e.data))
        self.reads.extend((rs.ctx, rs.index) for rs in rd.read_states)
        for ctx, _code in rd.dropped_reads:
            self.sim.reads_open.discard(ctx)  # type: ignore[arg-type]
        core.advance(rd)
        applied = core.log.applied
        if self.reads:
            ready_now = [r for r in self.reads if r[1] <= applied]
            self.reads = [r for r in self.reads if r[1] > applied]
            for ctx, _ in ready_now:
                self.sim.check_read(self, ctx)


class Simulation:
    def __init__(self, seed: int, opts: SimOptions | None = None) -> None:
        self.seed = seed
        self.opts = opts or SimOptions()
        self.rng = random.Random(seed)
        ids = [f"n{i + 1}" for i in range(self.opts.nodes + self.opts.spare_nodes)]
        self.bootstrap = ConfState(tuple(ids[: self.opts.nodes]), ())
        self.nodes = {i: SimNode(self, i) for i in ids}
        self.net: list[tuple[int, int, Message]] = []  # (deliver_at, tiebreak, msg)
        self.step_no = 0
        self.partition: dict[str, int] = {}  # node -> side; empty means healed
        self.faults = True
        # invariant bookkeeping
        self.leader_of_term: dict[int, str] = {}
        self.chain: dict[str, dict[int, int]] = {i: {0: 0} for i in ids}
        self.chain_global: dict[tuple[int, int], int] = {(0, 0): 0}
        self.committed: dict[int, tuple[int, int]] = {}  # index -> (term, chain)
        self.applied: dict[int, tuple[int, bytes]] = {}
        self.proposed: dict[tuple[int, int], bytes] = {}
        self.acked: dict[int, bytes] = {}
        self.snap_store: dict[tuple[int, int], list[tuple[int, bytes]]] = {}
        self.read_issue: dict[int, int] = {}  # read ctx -> number of acked writes at issue time
        self.reads_open: set[int] = set()
        self.reads_done = 0
        self.counter = 0
        self.log_lines: list[str] = []
        for n in self.nodes.values():
            n.start()

    # ------------------------------------------------------------------ network

    def send_all(self, msgs: list[Message]) -> None:
        rng = self.rng
        for m in msgs:
            if self.faults and rng.random() < self.opts.drop:
                self._dropped(m)
                continue
            copies = 2 if self.faults and rng.random() < self.opts.duplicate else 1
            for _ in range(copies):
                delay = rng.randint(1, self.opts.max_delay) if self.faults else 1
                self.net.append((self.step_no + delay, rng.randrange(1 << 30), m))

    def _dropped(self, m: Message) -> None:
        if m.type == MsgType.SNAP:
            sender = self.nodes[m.frm]
            if sender.alive:
                sender.core.report_snapshot(m.to, False)

    def _deliver_due(self) -> None:
        due = [x for x in self.net if x[0] <= self.step_no]
        if not due:
            return
        self.net = [x for x in self.net if x[0] > self.step_no]
        self.rng.shuffle(due)  # reordering among messages due at once
        for _, _, m in due:
            dst = self.nodes.get(m.to)
            src = self.nodes[m.frm]
            if dst is None or not dst.alive:
                self._dropped(m)
                continue
            if self.partition and self.partition.get(m.frm) != self.partition.get(m.to):
                self._dropped(m)
                continue
            dst.core.step(m)
            if m.type == MsgType.SNAP and src.alive:
                src.core.report_snapshot(m.to, True)
            self._drain()

    # ------------------------------------------------------------------ events

    def run(self) -> None:
        try:
            for _ in range(self.opts.steps):
                self.step()
            self.settle()
        except AssertionError as exc:
            raise InvariantViolation(f"seed {self.seed} failed at step {self.step_no}: {exc}") from exc

    def step(self) -> None:
        self.step_no += 1
        rng = self.rng
        o = self.opts
        if self.faults:
            r = rng.random()
            if r < o.crash:
                self._crash_one()
            elif r < o.crash + o.partition:
                self._partition()
            elif r < o.crash + o.partition + o.snapshot:
                self._snapshot_one()
            elif r < o.crash + o.partition + o.snapshot + o.transfer:
                self._transfer()
            elif r < o.crash + o.partition + o.snapshot + o.transfer + o.conf_change:
                self._conf_change()
            for n in self.nodes.values():
                if not n.alive and rng.random() < 0.05:
                    n.start()
                    self._log(f"restart {n.id}")
        if self.step_no % 2 == 0:
            for n in self.nodes.values():  # all clocks advance together: lease reads need bounded drift
                if n.alive:
                    n.core.tick()
        if self.faults and rng.random() < 0.5:
            self._propose()
        if rng.random() < 0.1:
            self._read()
        for n in self.nodes.values():
            if n.alive and n.pending and (not self.faults or rng.random() < 0.5):
                n.sync()
        self._drain()
        self._deliver_due()
        self._drain()
        self.check()

    def _drain(self) -> None:
        progress = True
        while progress:
            progress = False
            for n in self.nodes.values():
                if n.alive and n.core.has_ready():
                    n.handle_ready()
                    progress = True

    def _leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.alive and n.core.role == LEADER]
        return max(leaders, key=lambda n: n.core.term) if leaders else None

    def _propose(self) -> None:
        ld = self._leader()
        if ld is None:
            return
        self.counter += 1
        data = f"v{self.counter}".encode()
        try:
            idx, term = ld.core.propose([data])
        except RaftException:
            return
        self.proposed[(idx, term)] = data

    def _read(self) -> None:
        ld = self._leader()
        if ld is None:
            return
        self.counter += 1
        ctx = self.counter
        self.read_issue[ctx] = max(self.acked) if self.acked else 0
        self.reads_open.add(ctx)
        ld.core.read_index(ctx)

    def _crash_one(self) -> None:
        alive = [n for n in self.nodes.values() if n.alive]
        if len(alive) <= 1:
            return
        n = self.rng.choice(alive)
        lose = self.rng.random() < self.opts.lose_unsynced
        self._log(f"crash {n.id} lose_unsynced={lose}")
        n.crash(lose)

    def _partition(self) -> None:
        if self.partition:
            self.partition = {}
            self._log("heal")
            return
        ids = list(self.nodes)
        self.partition = {i: self.rng.randrange(2) for i in ids}
        self._log(f"partition {self.partition}")

    def _snapshot_one(self) -> None:
        alive = [n for n in self.nodes.values() if n.alive]
        if not alive:
            return
        self.snapshot_node(self.rng.choice(alive), self.rng.choice([0, 2, 10]))

    def snapshot_node(self, n: SimNode, margin: int) -> None:
        """Node n snapshots its applied state and compacts its log, keeping `margin` entries."""
        core = n.core
        idx = core.log.applied
        if idx <= core.snapshot.index:
            return
        meta = SnapshotMeta(idx, core.log.term(idx) or 0, core.log.conf_at(idx))
        state = [a for a in n.app if a[0] <= idx]
        self.snap_store[(meta.index, meta.term)] = state
        n.durable.snap, n.durable.snap_app = meta, list(state)
        keep_from = max(idx + 1 - margin, core.log.first_index())
        n.durable.entries = [e for e in n.durable.entries if e.index >= keep_from]
        if n.durable.entries and n.durable.entries[0].index > idx + 1:
            n.durable.entries = []
        core.compact(meta, keep_from)
        self._log(f"snapshot {n.id} at {idx} keep_from {keep_from}")

    def wipe(self, node_id: str) -> None:
        """Node crashes and comes back with an empty log and no snapshot (its disk was replaced); its
        term and vote survive (kept elsewhere), so this never lets it vote twice in a term."""
        n = self.nodes[node_id]
        if n.alive:
            n.crash(False)
        n.durable = _Durable(hard=n.durable.hard)
        self._log(f"wipe {node_id}")
        n.start()

    def _transfer(self) -> None:
        ld = self._leader()
        if ld is None:
            return
        targets = [v for v in ld.core.conf.voters if v != ld.id]
        if not targets:
            return
        t = self.rng.choice(targets)
        try:
            ld.core.transfer_leader(t)
            self._log(f"transfer {ld.id} -> {t}")
        except RaftException:
            pass

    def _conf_change(self) -> None:
        ld = self._leader()
        if ld is None:
            return
        conf = ld.core.conf
        others = [i for i in self.nodes if i not in conf.members()]
        choices: list[ConfChange] = [ConfChange(ConfChangeOp.ADD_LEARNER, i) for i in others]
        choices += [ConfChange(ConfChangeOp.ADD_VOTER, i) for i in conf.learners]
        if len(conf.voters) > 3:
            choices += [ConfChange(ConfChangeOp.REMOVE, i) for i in conf.voters]
        choices += [ConfChange(ConfChangeOp.REMOVE, i) for i in conf.learners]
        if not choices:
            return
        ch = self.rng.choice(choices)
        try:
            ld.core.propose_conf_change(ch)
            self._log(f"conf change {ch.op.name} {ch.node}")
        except (RaftException, ValueError):
            pass

    def _log(self, line: str) -> None:
        self.log_lines.append(f"{self.step_no}: {line}")

    # ------------------------------------------------------------------ invariants

    def check_new_entries(self, n: SimNode, rd: Ready) -> None:
        """Log matching: two logs that hold an entry with the same index and term hold the same
        entries up to it. Checked with a hash chain over (term, data) per index."""
        if not rd.entries:
            return
        chain = self.chain[n.id]
        first = rd.entries[0].index
        prev = chain.get(first - 1)
        if prev is None:
            raise AssertionError(f"{n.id}: no chain for index {first - 1}")
        for k in [k for k in chain if k >= first]:
            del chain[k]
        for e in rd.entries:
            prev = hash((prev, e.term, e.type, e.data))
            chain[e.index] = prev
            known = self.chain_global.setdefault((e.index, e.term), prev)
            if known != prev:
                raise AssertionError(f"log matching violated at index {e.index} term {e.term} on {n.id}")

    def chain_rebuild(self, n: SimNode) -> None:
        """After a restart the node's log is what was durable: rebuild its hash chain from that."""
        snap = n.durable.snap
        h = self.chain_global[(snap.index, snap.term)]
        chain = {snap.index: h}
        for e in n.durable.entries:
            if e.index <= snap.index:
                continue
            h = hash((h, e.term, e.type, e.data))
            chain[e.index] = h
            if self.chain_global.setdefault((e.index, e.term), h) != h:
                raise AssertionError(f"log matching violated at {e.index}@{e.term} in {n.id}'s durable log")
        self.chain[n.id] = chain

    def chain_restore(self, n: SimNode, snap: SnapshotMeta) -> None:
        h = self.chain_global.get((snap.index, snap.term))
        if h is None:
            raise AssertionError(f"snapshot {snap} was never in any log")
        self.chain[n.id] = {snap.index: h}

    def check_apply(self, n: SimNode, e: Entry) -> None:
        seen = self.applied.setdefault(e.index, (e.term, e.data))
        if seen != (e.term, e.data):
            raise AssertionError(f"{n.id} applied {e.index}@{e.term} {e.data!r} but another node applied {seen}")
        if n.core.role == LEADER and self.proposed.get((e.index, e.term)) == e.data:
            self.acked[e.index] = e.data

    def check_read(self, n: SimNode, ctx: object) -> None:
        """A linearizable read sees every write acknowledged before it was issued."""
        assert isinstance(ctx, int)
        need = self.read_issue[ctx]
        if n.core.log.applied < need:
            raise AssertionError(f"stale read {ctx} on {n.id}: acked write at {need} not visible")
        self.reads_open.discard(ctx)
        self.reads_done += 1

    def check(self) -> None:
        for n in self.nodes.values():
            if not n.alive:
                continue
            core = n.core
            if core.role == LEADER:
                prev = self.leader_of_term.setdefault(core.term, n.id)
                if prev != n.id:
                    raise AssertionError(f"two leaders in term {core.term}: {prev} and {n.id}")
                if n.was_leader_term != core.term:
                    n.was_leader_term = core.term
                    self._check_leader_completeness(n)
            commit = core.log.committed
            if commit < n.last_commit:
                raise AssertionError(f"{n.id} commit went back from {n.last_commit} to {commit}")
            if commit > n.last_commit:
                chain = self.chain[n.id]
                for i in range(max(n.last_commit + 1, core.log.offset), commit + 1):
                    rec = (core.log.term(i) or 0, chain.get(i, 0))
                    if rec[1] == 0:
                        continue
                    seen = self.committed.setdefault(i, rec)
                    if seen != rec:
                        raise AssertionError(f"{n.id} committed {i} as {rec}, earlier committed as {seen}")
                n.last_commit = commit

    def _check_leader_completeness(self, n: SimNode) -> None:
        lg = n.core.log
        for i, (term, h) in self.committed.items():
            if i <= lg.offset:
                continue
            if lg.term(i) != term or self.chain[n.id].get(i) != h:
                raise AssertionError(f"leader {n.id} of term {n.core.term} lacks committed entry {i}@{term}")

    # ------------------------------------------------------------------ the end

    def settle(self) -> None:
        """Stop the faults, heal, restart everyone; the cluster must converge and keep every ack."""
        self.faults = False
        self.partition = {}
        for n in self.nodes.values():
            if not n.alive:
                n.start()
        for _ in range(self.opts.settle_steps):
            self.step()
            if self._converged():
                break
        else:
            states = {i: (n.core.role, n.core.term, n.core.log.committed, n.core.log.applied) for i, n in self.nodes.items()}
            raise AssertionError(f"no convergence after settling: {states}")
        ld = self._leader()
        assert ld is not None
        applied = dict(ld.app)
        for idx, data in self.acked.items():
            if applied.get(idx) != data:
                raise AssertionError(f"acknowledged write {data!r} at {idx} lost")

    def _converged(self) -> bool:
        ld = self._leader()
        if ld is None or ld.core.log.committed != ld.core.log.last_index():
            return False
        if ld.core.log.term(ld.core.log.committed) != ld.core.term:
            return False
        target = ld.core.log.committed
        members = ld.core.conf.members()
        return all(self.nodes[m].core.log.applied == target for m in members)


def run_seed(seed: int, opts: SimOptions | None = None) -> Simulation:
    sim = Simulation(seed, opts)
    sim.run()
    return sim

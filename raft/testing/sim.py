"""A deterministic, seeded simulation of a Raft cluster around the pure core.

Every source of nondeterminism (message loss, delay, duplication and reordering, partitions, crashes
with or without losing unsynced writes, pauses, clocks running at different rates, snapshots, leadership
transfers, membership changes) is drawn from one `random.Random(seed)`, so a failing seed replays exactly.
Safety invariants (election safety, log matching, leader completeness, state-machine safety, linearizable
reads) are checked after every step; at the end the faults stop and the cluster must converge with every
acknowledged write.

Disk model: a Ready's writes go to a per-node "page cache" queue first; an explicit sync event makes
them durable, releases the messages that wait for durability, and reports `on_persisted` to the core.
A crash either keeps the queue (kill -9: the OS still writes it) or keeps only a random prefix of its
persistence steps, in the order the LogWriter takes them (snapshot install, hard state, entries), so a
power loss can fall between any two of them.

Time: the simulation advances a real time; each node has its own monotonic clock running at its own
rate (within `clock_drift` of real time) and ticks when its clock passes the next tick, dropping the
ticks it missed (as the Node's timer does, e.g. after a pause). A paused node (SIGSTOP) neither ticks
nor receives nor persists; its clock runs on.

Reads go to any node that believes it leads, not only the newest leader, and proposals too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from raft.core import (
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
    Role,
    SnapshotMeta,
)
from raft.status import RaftException


class InvariantViolation(AssertionError):
    pass


STEP_MS = 25.0  # real time per simulation step
TICK_MS = 50.0  # every node's tick on its own clock
ELECTION_TICK = 10


@dataclass
class SimOptions:
    nodes: int = 3  # initial voters
    learners: int = 0  # initial learners (bootstrap configuration)
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
    clock_drift: float = 0.0  # each node's clock rate is drawn from [1 - d, 1 + d] (the core's bound is d too)
    pause: float = 0.0  # chance per step of pausing a node (the leader half the time) for up to 6 elections
    wipe: float = 0.0  # chance per step of a follower losing its disk (term and vote kept), when that is safe
    rollback: float = 0.0  # chance per step of a follower's disk going back to an older copy, when that is safe
    plan: tuple[str, ...] = ()  # membership goals reached one after another, see Simulation._plan_step
    plan_rate: float = 0.05  # chance per step of the next change towards the current goal
    script: str = ""  # "figure8": run the Raft paper's Figure 8 schedule first
    tick_lease: bool = False  # negative control: nodes measure the lease in ticks (the old, unsafe lease)
    sync_rate: float = 0.5  # chance per step that a node's queued writes become durable (while faults run)
    stall_new_leader: float = 0.0  # chance that a new leader's disk stalls a few steps, then it loses power
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
        d = sim.opts.clock_drift
        self.rate = sim.rng.uniform(1 - d, 1 + d)  # this node's clock against real time
        self.clock = sim.rng.uniform(0, 1e6)  # monotonic clocks of different machines share no origin
        self.next_tick = self.clock + TICK_MS
        self.ticks = 0
        self.paused_until = 0  # step at which a pause ends
        self.max_entries = 0  # a script's override of max_entries_per_msg
        self.stalled_until = 0  # step until which this node's disk does not complete writes
        self.backups: list[tuple[int, SnapshotMeta, list[Entry]]] = []  # (step, snapshot, log) copies of its disk

    def paused(self) -> bool:
        return self.paused_until > self.sim.step_no

    def now(self) -> float:
        """What this node passes the core as its monotonic clock."""
        return self.ticks * TICK_MS if self.sim.opts.tick_lease else self.clock

    def advance_clock(self) -> None:
        """Real time moved by one step: the clock runs at this node's rate; one tick when it passes the next
        one, the ticks it missed (while paused or slow to be scheduled) are dropped."""
        self.clock += self.rate * STEP_MS
        if not self.alive or self.paused() or self.clock < self.next_tick:
            return
        self.next_tick += TICK_MS
        if self.next_tick <= self.clock:
            self.next_tick = self.clock + TICK_MS
        self.ticks += 1
        self.core.tick(self.now())

    def start(self) -> None:
        d = self.durable
        cfg = CoreConfig(
            id=self.id,
            election_tick=ELECTION_TICK,
            heartbeat_tick=1,
            lease_read=self.sim.opts.lease_read,
            tick_ms=TICK_MS,
            max_clock_drift=self.sim.opts.clock_drift,
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
        self.paused_until = 0
        if self.max_entries:
            self.core.cfg = replace(self.core.cfg, max_entries_per_msg=self.max_entries)
        self.core.campaign_if_sole_voter()

    def crash(self, lose_unsynced: bool, keep: int | None = None) -> None:
        """kill -9 keeps everything handed to the OS; a power loss keeps a random prefix of the persistence
        steps (or the first `keep`), so it can fall between any two of them (also inside one Ready)."""
        steps = [(p, part) for p in self.pending for part in ("snap", "hard", "entries") if _has(p, part)]
        if keep is None:
            keep = self.sim.rng.randrange(len(steps) + 1) if lose_unsynced else len(steps)
        for p, part in steps[:keep]:
            self._write(p, part)
        for p, part in steps[keep:]:
            if part == "entries":
                self.sim.forget_unseen(self, p.entries)
        self.pending = []
        self.alive = False
        self.paused_until = 0
        for ctx, _ in self.reads:
            self.sim.reads_open.discard(ctx)

    def sync(self) -> None:
        """fsync: everything queued becomes durable; waiting messages go out."""
        pend, self.pending = self.pending, []
        for p in pend:
            for part in ("snap", "hard", "entries"):
                self._write(p, part)
        for p in pend:
            self.sim.send_all(p.msgs)
            if p.hard is not None:
                self.core.on_hard_state_persisted(p.hard)
            self.core.on_persisted(*p.last)

    def _write(self, p: _Pending, part: str) -> None:
        d = self.durable
        if part == "hard" and p.hard is not None:
            d.hard = p.hard
        if part == "snap" and p.snap is not None:
            d.snap = p.snap
            d.snap_app = list(p.snap_app or [])
            d.entries = []
        if part == "entries" and p.entries:
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
            self.sim.reads_open.discard(ctx)
        core.advance(rd)
        applied = core.log.applied
        if self.reads:
            ready_now = [r for r in self.reads if r[1] <= applied]
            self.reads = [r for r in self.reads if r[1] > applied]
            for ctx, _ in ready_now:
                self.sim.check_read(self, ctx)


def _has(p: _Pending, part: str) -> bool:
    return {"snap": p.snap is not None, "hard": p.hard is not None, "entries": bool(p.entries)}[part]


class Simulation:
    def __init__(self, seed: int, opts: SimOptions | None = None) -> None:
        self.seed = seed
        self.opts = opts or SimOptions()
        self.rng = random.Random(seed)
        # Connection-loss signals (RaftCore.peer_lost) draw from their own stream, so that the schedules of the
        # existing seeds stay what they were.
        self.conn_rng = random.Random(seed ^ 0x5EED_C0DE)
        o = self.opts
        ids = [f"n{i + 1}" for i in range(o.nodes + o.learners + o.spare_nodes)]
        self.bootstrap = ConfState(tuple(ids[: o.nodes]), tuple(ids[o.nodes : o.nodes + o.learners]))
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
        self.plan_at = 0  # index of the current goal in opts.plan
        self.plan_done: list[str] = []  # goals reached (a test checks that plans are carried out)
        self.drop_if: Callable[[Message], bool] | None = None  # scripted message loss (Figure 8)
        self.script_reached = ""  # the last stage a script reached
        self.at: dict[int, Callable[[], None]] = {}  # faults scheduled for a step
        self.exposed: set[tuple[int, int]] = set()  # (index, term) of entries that ever left their node
        for n in self.nodes.values():
            n.start()

    # ------------------------------------------------------------------ network

    def send_all(self, msgs: list[Message]) -> None:
        rng = self.rng
        for m in msgs:
            if m.type == MsgType.APP:
                self.exposed.update((e.index, e.term) for e in m.entries)
            if self.drop_if is not None and self.drop_if(m):
                self._dropped(m)
                continue
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
        now = self.step_no
        if any(n.paused() for n in self.nodes.values()):
            # A paused node's inbound messages wait in its socket buffers until it resumes.
            due = [x for x in self.net if x[0] <= now and not self._held(x[2])]
            if due:
                self.net = [x for x in self.net if x[0] > now or self._held(x[2])]
        else:
            due = [x for x in self.net if x[0] <= now]
            if due:
                self.net = [x for x in self.net if x[0] > now]
        if not due:
            return
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
                self._drain_node(src)
            self._drain_node(dst)  # only the nodes touched can have work (their output goes to the network)

    # ------------------------------------------------------------------ events

    def _held(self, m: Message) -> bool:
        dst = self.nodes.get(m.to)
        return dst is not None and dst.alive and dst.paused()

    def run(self) -> None:
        try:
            if self.opts.script == "figure8":
                self.figure8()
            for _ in range(self.opts.steps):
                self.step()
            self.settle()
        except AssertionError as exc:
            raise InvariantViolation(f"seed {self.seed} failed at step {self.step_no}: {exc}") from exc

    def step(self, plan: bool = True) -> None:
        self.step_no += 1
        rng = self.rng
        o = self.opts
        if self.faults:
            r = rng.random()
            faults = (
                (o.crash, self._crash_one),
                (o.partition, self._partition),
                (o.snapshot, self._snapshot_one),
                (o.transfer, self._transfer),
                (o.conf_change, self._conf_change),
                (o.pause, self._pause_one),
                (o.wipe, self._wipe_one),
                (o.rollback, self._rollback_one),
            )
            for p, fault in faults:
                if r < p:
                    fault()
                    break
                r -= p
            if o.rollback and self.step_no % 40 == 0:
                for n in self.nodes.values():  # keep a few old copies of every disk for rollbacks
                    n.backups = [*n.backups[-2:], (self.step_no, n.durable.snap, list(n.durable.entries))]
            if self.conn_rng.random() < 0.003:  # a connection reset while both ends live: a false alarm
                m = self.conn_rng.choice([n for n in self.nodes.values()])
                if m.alive and m.core.leader:
                    self._log(f"connection from {m.core.leader} to {m.id} reset")
                    m.core.peer_lost(m.core.leader)
            scheduled = self.at.pop(self.step_no, None)
            if scheduled is not None:
                scheduled()
            for n in self.nodes.values():
                if not n.alive and rng.random() < 0.05:
                    n.start()
                    self._log(f"restart {n.id}")
        for n in self.nodes.values():
            n.advance_clock()
            if n.paused_until == self.step_no and n.alive and n.core.role == Role.LEADER and rng.random() < 0.5:
                self._read(n)  # a client's read waited in the socket of a paused leader: first thing it sees
        if plan and o.plan and self.plan_at < len(o.plan) and rng.random() < o.plan_rate:
            self._plan_step()
        if self.faults and rng.random() < 0.5:
            self._propose()
        if rng.random() < 0.1:
            self._read()
        for n in self.nodes.values():
            if n.stalled_until > self.step_no:
                continue
            if n.alive and not n.paused() and n.pending and (not self.faults or rng.random() < o.sync_rate):
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
                if n.alive and not n.paused() and n.core.has_ready():
                    n.handle_ready()
                    progress = True

    def _drain_node(self, n: SimNode) -> None:
        while n.alive and not n.paused() and n.core.has_ready():
            n.handle_ready()

    def _leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.alive and n.core.role == Role.LEADER]
        return max(leaders, key=lambda n: n.core.term) if leaders else None

    def _any_leader(self) -> SimNode | None:
        """A random node that believes it leads (a client cannot tell a deposed leader from the newest)."""
        leaders = [n for n in self.nodes.values() if n.alive and not n.paused() and n.core.role == Role.LEADER]
        return self.rng.choice(leaders) if leaders else None

    def _propose(self) -> None:
        ld = self._any_leader()
        if ld is None:
            return
        self.counter += 1
        data = f"v{self.counter}".encode()
        try:
            idx, term = ld.core.propose([data])
        except RaftException:
            return
        self.proposed[(idx, term)] = data

    def _read(self, to: SimNode | None = None) -> None:
        ld = to or self._any_leader()
        if ld is None:
            return
        self.counter += 1
        ctx = self.counter
        self.read_issue[ctx] = max(self.acked) if self.acked else 0
        self.reads_open.add(ctx)
        ld.core.read_index(ctx, ld.now())

    def _crash_one(self) -> None:
        alive = [n for n in self.nodes.values() if n.alive]
        if len(alive) <= 1:
            return
        # Half the crashes hit a node with writes in flight: between its persistence steps.
        writing = [n for n in alive if n.pending]
        n = self.rng.choice(writing if writing and self.rng.random() < 0.5 else alive)
        lose = self.rng.random() < self.opts.lose_unsynced
        self._log(f"crash {n.id} lose_unsynced={lose}")
        n.crash(lose)
        for m in self.nodes.values():  # the crashed node's connections close: most peers notice at once
            if m.alive and m is not n and self.conn_rng.random() < 0.7:
                m.core.peer_lost(n.id)

    # ------------------------------------------------------------------ scripts

    def figure8(self) -> None:
        """The Raft paper's Figure 8, with five voters, driven through partitions, crashes and forced elections
        (faults off meanwhile). (a) n1 leads and replicates X at index k to n2 only. (b) n1 crashes; n5 wins the
        next term with n3 and n4 and appends its no-op at k, which reaches no one. (c) n5 crashes; n1 restarts
        and wins a later term; it replicates X (an entry of an older term) to n3 and n4, so a majority holds
        it, but its own no-op reaches no one: X must not count as committed. (d) n1 crashes; n5 restarts and
        wins (its last term is newer than X's) and overwrites k everywhere. A commit rule without the
        current-term check commits X in (c), and (d) then changes a committed entry."""
        n1, n2, n3, n4, n5 = (self.nodes[f"n{i}"] for i in range(1, 6))
        self.faults = False

        def until(cond: Callable[[], bool], who: SimNode | None = None, limit: int = 60) -> bool:
            for _ in range(limit):
                if cond():
                    return True
                if who is not None and who.alive and who.core.role not in (Role.LEADER, Role.CANDIDATE):
                    who.core.campaign(transfer=True)  # a forced election: no PreVote, no lockout
                self.step(plan=False)
            return cond()

        def groups(*gs: list[SimNode]) -> None:
            self.partition = {n.id: k for k, g in enumerate(gs) for n in g}
            self._log(f"script partition {[[n.id for n in g] for g in gs]}")

        def leads(n: SimNode) -> bool:
            return n.alive and n.core.role == Role.LEADER and n.core.log.term(n.core.log.committed) == n.core.term

        def durable(n: SimNode, index: int, term: int) -> bool:
            return any(e.index == index and e.term == term for e in n.durable.entries)

        if not until(lambda: leads(n1), n1):
            return
        self.script_reached = "a"
        groups([n1, n2], [n3, n4, n5])
        k, tx = n1.core.propose([b"figure8-X"])
        self.proposed[(k, tx)] = b"figure8-X"
        if not until(lambda: durable(n2, k, tx)):
            return
        n1.crash(False)
        self._log("script crash n1")
        groups([n2], [n3, n4, n5])
        if not until(lambda: n5.core.role == Role.LEADER, n5):
            return
        groups([n2], [n3, n4], [n5])  # n5's no-op at k goes nowhere
        self.step(plan=False)
        n5.crash(False)
        self._log("script crash n5")
        self.script_reached = "b"
        n1.max_entries = 1  # one entry per append, so that X can travel without n1's no-op behind it
        n1.start()
        groups([n1, n2, n3, n4], [n5])

        def only_up_to_k(m: Message) -> bool:
            dst = self.nodes[m.to].core
            return (
                m.type == MsgType.APP
                and m.frm == n1.id
                and any(e.index > k for e in m.entries)
                and dst.log.match_term(m.index, m.log_term)
            )

        self.drop_if = only_up_to_k
        if not until(lambda: n1.core.role == Role.LEADER and durable(n3, k, tx) and durable(n4, k, tx), n1):
            self.drop_if = None
            return
        for _ in range(4):  # time for n1 to learn the matches (and, with a broken commit rule, to commit X)
            self.step(plan=False)
        self.script_reached = "c"
        n1.crash(False)
        self._log("script crash n1")
        self.drop_if = None
        n1.max_entries = 0
        n5.start()
        groups([n2, n3, n4, n5], [n1])
        if until(lambda: leads(n5), n5):
            self.script_reached = "d"
        self.partition = {}
        self.faults = True

    def _pause_one(self) -> None:
        """SIGSTOP a node (the leader half the time) for half an election timeout up to six of them."""
        alive = [n for n in self.nodes.values() if n.alive and not n.paused()]
        ld = self._leader()
        if not alive:
            return
        n = ld if ld is not None and ld in alive and self.rng.random() < 0.5 else self.rng.choice(alive)
        e = int(ELECTION_TICK * TICK_MS / STEP_MS)  # one election timeout in steps
        # Mostly long enough for the others to elect a new leader and commit without it.
        lo, hi = (3 * e, 6 * e) if self.rng.random() < 0.7 else (e // 2, 2 * e)
        n.paused_until = self.step_no + self.rng.randint(lo, hi)
        self._log(f"pause {n.id} until step {n.paused_until}")

    def _wipe_one(self) -> None:
        """A follower's disk is replaced by an empty one (term and vote kept elsewhere)."""
        v = self._disk_loss_victim()
        if v is not None:
            self.wipe(v.id)

    def _rollback_one(self) -> None:
        """A follower's disk is replaced by an older copy of itself (a restored backup; term and vote kept):
        its log goes back to what it held then, possibly an old leader's entries that were overwritten since."""
        v = self._disk_loss_victim()
        if v is None:
            return
        copies = [c for c in v.backups if c[1] == v.durable.snap and c[2] != v.durable.entries]
        if not copies:
            return
        taken, _, entries = self.rng.choice(copies)
        v.crash(False)
        v.durable.entries = list(entries)
        self._log(f"rollback {v.id} to its log of step {taken}")
        v.start()

    def _disk_loss_victim(self) -> SimNode | None:
        """A follower that may lose what its disk holds: only when every other voter holds every committed
        entry and everything the victim acknowledged, durably. Losing a copy a commit counted on could lose
        the entry for good, which no protocol survives."""
        ld = self._leader()
        if ld is None:
            return None
        voters = ld.core.conf.voters
        victims = [i for i in voters if i != ld.id and self.nodes[i].alive]
        if not victims:
            return None
        v = self.rng.choice(victims)
        need = {i: t for i, (t, _) in self.committed.items()} | {e.index: e.term for e in self.nodes[v].durable.entries}
        for i in voters:
            d = self.nodes[i].durable
            held = {e.index: e.term for e in d.entries}
            if i != v and any(idx > d.snap.index and held.get(idx) != t for idx, t in need.items()):
                return None
        return self.nodes[v]

    def _stall_then_power_loss(self, n: SimNode) -> None:
        """The new leader's disk stalls (its term, vote and first entries stay in the cache) while it works on,
        then the power fails and everything unsynced is lost: it restarts in its old term."""
        n.stalled_until = self.step_no + self.rng.randint(6, 16)
        incarnation = n.core

        def power_loss() -> None:
            if n.alive and n.core is incarnation:
                self._log(f"stalled {n.id} loses power")
                n.crash(True, keep=0)

        self.at[n.stalled_until] = power_loss
        self._log(f"disk of new leader {n.id} stalls until step {n.stalled_until}")

    def _isolate(self, node_id: str) -> None:
        self.partition = {i: int(i == node_id) for i in self.nodes}
        self._log(f"isolate {node_id}")

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

    # ------------------------------------------------------------------ membership plans

    def _plan_step(self) -> None:
        """Move one change towards the current goal of opts.plan, through the core API (node ids only):
        "voters=N" adds learners (spare nodes first), promotes them, or removes random voters (the leader
        too) until N voters; "remove-leader" has the leader propose its own removal; "add-two" adds two
        non-members as learners back to back and promotes both back to back."""
        ld = self._leader()
        if ld is None or ld.paused():
            return
        goal = self.opts.plan[self.plan_at]
        conf = ld.core.conf
        outsiders = [i for i in self.nodes if i not in conf.members()]
        if goal.startswith("voters="):
            want = int(goal.split("=")[1])
            if len(conf.voters) == want and not conf.learners:
                self._goal_reached(goal)
                return
            if len(conf.voters) > want:
                ch = ConfChange(ConfChangeOp.REMOVE, self.rng.choice(conf.voters))
            elif conf.learners:
                ch = ConfChange(ConfChangeOp.ADD_VOTER, self.rng.choice(conf.learners))
            elif outsiders:
                ch = ConfChange(ConfChangeOp.ADD_LEARNER, self.rng.choice(outsiders))
            else:
                self._goal_reached(goal)
                return
            self._propose_change(ld, ch)
        elif goal == "remove-leader":
            if len(conf.voters) > 1 and self._propose_change(ld, ConfChange(ConfChangeOp.REMOVE, ld.id)):
                self._goal_reached(goal)
                if len(conf.voters) == 2 or self.rng.random() < 0.5:
                    self._cut_when_others_have_it(ld.id, self.step_no + 12)
        elif goal == "add-two":
            # Two changes in a row: each proposed as soon as the previous one is applied on the leader.
            if len(outsiders) >= 2 and not conf.learners:
                for i in outsiders[:2]:
                    self._propose_change(ld, ConfChange(ConfChangeOp.ADD_LEARNER, i))
                    self._drain_until_applied(ld)
            elif conf.learners:
                for i in conf.learners:
                    self._propose_change(ld, ConfChange(ConfChangeOp.ADD_VOTER, i))
                    self._drain_until_applied(ld)
                if not ld.core.conf.learners and ld.core.role == Role.LEADER:
                    self._goal_reached(goal)
            else:
                self._goal_reached(goal)

    def _drain_until_applied(self, ld: SimNode, limit: int = 60) -> None:
        """Run steps (faults included) until the leader applied its pending change or stopped leading."""
        for _ in range(limit):
            if not ld.alive or ld.core.role != Role.LEADER or ld.core.pending_conf_index <= ld.core.log.applied:
                return
            self.step(plan=False)

    def _cut_when_others_have_it(self, node_id: str, until: int) -> None:
        """Isolate node_id as soon as another node's log holds its removal (it may not have heard the ack), and
        half the time SIGSTOP it too: on resume, before any tick, a client's read may be the first thing it
        sees, while the others may have elected a leader and committed without it (issue 12, bug 2)."""
        if any(n.alive and n.id != node_id and node_id not in n.core.conf.members() for n in self.nodes.values()):
            self._isolate(node_id)
            if self.rng.random() < 0.5:
                e = int(ELECTION_TICK * TICK_MS / STEP_MS)  # one election timeout in steps
                self.nodes[node_id].paused_until = self.step_no + self.rng.randint(3 * e, 6 * e)
                self._log(f"pause {node_id} until step {self.nodes[node_id].paused_until}")
        elif self.step_no < until:
            self.at[self.step_no + 1] = lambda: self._cut_when_others_have_it(node_id, until)

    def _goal_reached(self, goal: str) -> None:
        self._log(f"plan goal {goal} reached")
        self.plan_done.append(goal)
        self.plan_at += 1

    def _propose_change(self, ld: SimNode, ch: ConfChange) -> bool:
        try:
            ld.core.propose_conf_change(ch)
        except (RaftException, ValueError):
            return False
        self._log(f"conf change {ch.op.name} {ch.node} by {ld.id}")
        return True

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

    def forget_unseen(self, n: SimNode, lost: list[Entry]) -> None:
        """A crash lost entries that never became durable and never left n: nobody can ever have seen them,
        so a later entry at the same index and term (a lone voter that lost its unsynced term and won it
        again) does not break log matching. Entries that did leave stay recorded."""
        mine = self.chain[n.id]
        for e in lost:
            key = (e.index, e.term)
            h = self.chain_global.get(key)
            if key in self.exposed or h is None or mine.get(e.index) != h:
                continue
            if not any(self.chain[o].get(e.index) == h for o in self.nodes if o != n.id):
                del self.chain_global[key]

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
        if n.core.role == Role.LEADER and self.proposed.get((e.index, e.term)) == e.data:
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
            if core.role == Role.LEADER:
                prev = self.leader_of_term.setdefault(core.term, n.id)
                if prev != n.id:
                    raise AssertionError(f"two leaders in term {core.term}: {prev} and {n.id}")
                if n.was_leader_term != core.term:
                    n.was_leader_term = core.term
                    self._check_leader_completeness(n)
                    if self.faults and self.rng.random() < self.opts.stall_new_leader:
                        self._stall_then_power_loss(n)
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
            states = {
                i: (n.core.role, n.core.term, n.core.log.committed, n.core.log.applied) for i, n in self.nodes.items()
            }
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

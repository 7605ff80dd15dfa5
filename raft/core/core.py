"""RaftCore: the consensus algorithm as a pure, deterministic state machine (etcd-raft's RawNode shape).

The driver feeds it time (`tick(now)`: a tick of its timer and its monotonic clock), messages (`step`) and
requests (`propose`, `read_index`, `transfer_leader`, `propose_conf_change`), takes a `Ready` of work to do,
performs it, and acknowledges with `advance(ready)` and `on_persisted(index, term)`. The core never reads a
clock or touches a socket, a file or an event loop; randomness comes from the `rng` it is given, so a seeded
schedule replays exactly.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from raft.core import quorum
from raft.core.confchange import ConfChange, apply_change, encode_conf
from raft.core.log import RaftLog
from raft.core.messages import ConfState, Entry, EntryType, HardState, Message, MsgType, SnapshotMeta
from raft.core.progress import Progress, ProgressState
from raft.core.quorum import VoteResult
from raft.core.ready import ReadState, Ready
from raft.status import RaftError, RaftException


class Role(enum.StrEnum):
    """A node's role. The value is what status documents, metrics and logs print."""

    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre_candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"
    LEARNER = "learner"  # a member's role in the membership view only: a learner's own core is a follower


# Messages a leader (or pre-candidate) may send before its own Ready is durable, provided its term and
# vote already are (see `ready`): they promise nothing about local entries that a crash could take back.
# Answers to votes and appends (and, as in etcd, to pre-votes) wait for persistence.
_SEND_NOW = frozenset({MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP, MsgType.TIMEOUT_NOW, MsgType.PRE_VOTE})


@dataclass(frozen=True)
class CoreConfig:
    """Tunables of the pure core, in ticks and counts. `raft.options.RaftOptions` maps milliseconds onto these."""

    id: str
    election_tick: int = 20  # 1000 ms at 50 ms per tick (JRaft/RocketMQ electionTimeoutMs)
    heartbeat_tick: int = 2  # 100 ms (electionTimeoutMs / electionHeartbeatFactor)
    pre_vote: bool = True
    check_quorum: bool = True
    lease_ratio: float = 0.9  # JRaft leaderLeaseTimeRatio: lease = 0.9 x election timeout (before the drift bound)
    lease_read: bool = False  # answer ReadIndex from the lease (True) or with a quorum round (False)
    tick_ms: float = 50.0  # length of one tick on the driver's clock, the unit of the `now` it passes
    max_clock_drift: float = 0.01  # bound on how far any node's clock rate strays from real time (0.01 = 1 %)
    max_inflight: int = 256  # JRaft maxReplicatorInflightMsgs
    max_entries_per_msg: int = 1024  # JRaft maxEntriesSize
    max_bytes_per_msg: int = 512 * 1024  # JRaft maxBodySize
    max_uncommitted: int = 100_000  # proposals beyond this many uncommitted entries get EBUSY

    def __post_init__(self) -> None:
        if self.heartbeat_tick < 1 or self.election_tick <= self.heartbeat_tick:
            raise ValueError("need 1 <= heartbeat_tick < election_tick")
        if self.lease_read and not self.check_quorum:
            raise ValueError(
                "lease_read needs check_quorum: without it followers grant votes while a leader holds its lease"
            )
        if not 0 < self.lease_ratio < 1:
            raise ValueError(f"lease_ratio must be in (0, 1), got {self.lease_ratio}")
        if not 0 <= self.max_clock_drift < 1:
            raise ValueError(f"max_clock_drift must be in [0, 1), got {self.max_clock_drift}")
        if self.tick_ms <= 0:
            raise ValueError(f"tick_ms must be positive, got {self.tick_ms}")

    def lease_ms(self) -> float:
        """How long a quorum-confirmed heartbeat round keeps the lease, on the leader's clock (docs/raft.md).

        A follower refuses votes until `election_tick` of its ticks passed since it last heard from the leader;
        a heartbeat lands anywhere between two ticks, so that is at least (election_tick - 1) ticks of its clock,
        and ticks never come faster than its clock (missed ones are dropped). With every clock's rate within
        [1 - d, 1 + d] of real time, the lease on the leader's clock must end before that lockout on the
        fastest follower's clock: lease <= (election_tick - 1) x tick x (1 - d) / (1 + d)."""
        ratio = min(self.lease_ratio, (self.election_tick - 1) / self.election_tick)
        d = self.max_clock_drift
        return self.election_tick * self.tick_ms * ratio * (1 - d) / (1 + d)


@dataclass
class _PendingRead:
    ctx: object
    index: int
    seq: int


@dataclass(frozen=True, slots=True)
class PeerProgress:
    """The leader's view of one member's replication."""

    match: int
    next: int
    lag: int  # last_index - match
    state: ProgressState
    learner: bool
    contact_ticks: int  # ticks since it last answered (0 for the leader itself; -1: never this term)


@dataclass(frozen=True, slots=True)
class CoreStatus:
    id: str
    role: Role
    term: int
    leader: str
    vote: str
    commit: int
    applied: int
    first_index: int
    last_index: int
    conf: ConfState
    progress: Mapping[str, PeerProgress] = field(default_factory=dict)  # on the leader only, by member id
    lead_transferee: str = ""

    @property
    def voters(self) -> tuple[str, ...]:
        return self.conf.voters

    @property
    def learners(self) -> tuple[str, ...]:
        return self.conf.learners


class RaftCore:
    def __init__(
        self,
        config: CoreConfig,
        conf: ConfState,
        hard_state: HardState | None = None,
        snapshot: SnapshotMeta | None = None,
        entries: list[Entry] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`conf` is the bootstrap configuration, used when no snapshot carries one. `entries` are the
        durable log entries after the snapshot (earlier ones, kept as a margin, are ignored)."""
        self.cfg = config
        self.id = config.id
        self.rng = rng or random.Random(0)
        snap = snapshot or SnapshotMeta(0, 0, conf)
        self.snapshot = snap  # the latest snapshot known to exist locally (for InstallSnapshot)
        kept = [e for e in (entries or []) if e.index > snap.index]
        if kept and kept[0].index != snap.index + 1:
            raise ValueError(
                f"log starts at {kept[0].index} but the snapshot ends at {snap.index}: entries are missing"
            )
        self.log = RaftLog(snap.index, snap.term, kept, snap.conf if snapshot else conf)
        hard_state = hard_state or HardState()
        self.term = hard_state.term
        self.vote = hard_state.vote
        self.leader = ""
        self.role = Role.FOLLOWER
        self.prs: dict[str, Progress] = {}
        self.votes: dict[str, bool] = {}
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = 0
        self.leader_lost = False  # peer_lost() dropped the leader; hearing from one restores the normal timeout
        self.lead_transferee = ""
        self.transfer_elapsed = 0
        self.pending_conf_index = 0
        self.now = 0  # ticks since start: the core's logical time (timeouts count ticks)
        self.clock: float | None = None  # the driver's monotonic clock in ms, as last passed in; None: never
        self._reset_randomized_timeout()
        # read index state
        self.read_seq = 0
        self.read_sent_at: dict[int, float] = {}  # heartbeat round -> clock when sent, for rounds that may lease
        self.pending_reads: list[_PendingRead] = []
        self.waiting_reads: list[object] = []  # not yet given a round (no commit in term yet, or batching)
        self.read_states: list[ReadState] = []
        self.dropped_reads: list[tuple[object, RaftError]] = []
        self.lease_until: float | None = None  # on self.clock; None: no lease
        # A node that just started does not know whether some leader holds a lease that relies on this node's
        # lockout (it may have acknowledged a heartbeat just before it crashed): with lease reads it refuses
        # (pre)votes for one election timeout after starting, as if it had just heard from a leader.
        self.boot_lockout = config.lease_read
        # ready bookkeeping
        self.msgs: list[Message] = []
        self.msgs_after: list[Message] = []
        self.prev_hard = HardState(self.term, self.vote)
        self.durable_hard = self.prev_hard  # the latest hard state the driver reported durable
        self.pending_install: SnapshotMeta | None = None
        # Set by the host (Node.suspend_candidacy): this node never campaigns, so it can never be elected (a
        # member whose applied state diverged, the controller's CORRUPT alarm). It still votes and replicates.
        self.suspended = False
        # (our last index, the commit the leader says we acknowledged): set when a heartbeat shows that this
        # node's disk lost entries it had acknowledged; the driver reports it and clears it.
        self.lost_acknowledged: tuple[int, int] | None = None

    @property
    def conf(self) -> ConfState:
        """The configuration in effect: the latest one in the log, committed or not."""
        return self.log.conf()

    # ------------------------------------------------------------------ driver API

    def tick(self, now: float | None = None) -> None:
        """One tick of the driver's timer. `now` is the driver's monotonic clock in ms (the unit of
        `tick_ms`); without it the node has no clock and never holds a lease (reads take a quorum round)."""
        self.now += 1
        self.observe_clock(now)
        if self.role == Role.LEADER:
            self._tick_leader()
        else:
            self.election_elapsed += 1
            if self.election_elapsed >= self.cfg.election_tick:
                self.boot_lockout = False
            if self.election_elapsed >= self.randomized_timeout and self._promotable():
                self.election_elapsed = 0
                self.campaign(transfer=False)

    def campaign_if_sole_voter(self) -> bool:
        """At start (JRaft's rule): a node that is the only voter of its configuration needs no one's vote, so
        it campaigns at once instead of waiting out an election timeout. Not with lease reads, whose boot
        lockout makes a starting node wait one timeout for any lease that might rely on it."""
        if self.role != Role.FOLLOWER or not self._sole_voter() or self.boot_lockout or not self._promotable():
            return False
        self.campaign()
        return True

    def peer_lost(self, peer: str) -> None:
        """The driver saw the connection from `peer` close under it (its process died, or the network reset
        it). When `peer` is this follower's leader, the follower stops waiting out a full election timeout:
        it forgets the leader (so it no longer refuses pre-votes on the leader's behalf) and campaigns after
        a short delay staggered by its rank among the other voters (stride heartbeat_tick + 1 ticks, plus
        0-1 tick of jitter), so that the survivors do not split the vote. If the leader is in fact alive its
        next append or heartbeat restores it and the normal timeout, and a pre-vote sent meanwhile is refused
        by every follower still hearing from it: a false alarm costs at most a refused pre-vote. Off with lease
        reads: a leader's lease relies on every follower's full lockout."""
        if self.cfg.lease_read or self.role != Role.FOLLOWER or not peer or peer != self.leader:
            return
        self.leader = ""
        self.leader_lost = True
        others = sorted(v for v in self.conf.voters if v != peer)
        rank = others.index(self.id) if self.id in others else len(others)
        delay = 1 + rank * (self.cfg.heartbeat_tick + 1) + self.rng.randrange(2)
        self.randomized_timeout = min(self.randomized_timeout, self.election_elapsed + delay)

    def _heard_from_leader(self, leader: str) -> None:
        self.election_elapsed = 0
        self.leader = leader
        if self.leader_lost:  # a false alarm (or a new leader): back to the normal randomized timeout
            self.leader_lost = False
            self._reset_randomized_timeout()

    def campaign(self, transfer: bool = False) -> None:
        """Start an election now (PreVote first unless this is a leadership transfer)."""
        if not self._promotable() or self.role == Role.LEADER:
            return
        if self.cfg.pre_vote and not transfer:
            self._become_pre_candidate()
            self._request_votes(MsgType.PRE_VOTE, self.term + 1, force=False)
        else:
            self._become_candidate()
            self._request_votes(MsgType.VOTE, self.term, force=transfer)

    def propose(self, datas: list[bytes], entry_type: int = EntryType.NORMAL) -> tuple[int, int]:
        """Append commands on the leader. Returns (first index, term); raises RaftException if refused."""
        if self.role != Role.LEADER:
            raise RaftException(RaftError.EPERM, f"not leader (leader is {self.leader or 'unknown'})")
        if self.lead_transferee:
            raise RaftException(RaftError.EBUSY, f"leadership is being transferred to {self.lead_transferee}")
        if self.log.last_index() - self.log.committed + len(datas) > self.cfg.max_uncommitted:
            raise RaftException(RaftError.EBUSY, "too many uncommitted entries")
        first = self.log.last_index() + 1
        term = self.term
        self._append([Entry(term, first + k, entry_type, d) for k, d in enumerate(datas)])
        self._broadcast_append()
        return first, term

    def propose_conf_change(self, change: ConfChange) -> tuple[int, int]:
        if self.role != Role.LEADER:
            raise RaftException(RaftError.EPERM, "not leader")
        if self.pending_conf_index > self.log.applied:
            raise RaftException(RaftError.EBUSY, "a configuration change is already in progress")
        new_conf = apply_change(self.conf, change)  # validates
        index, term = self.propose([encode_conf(new_conf)], EntryType.CONF)
        self.pending_conf_index = index
        self._sync_progress()
        self._broadcast_append()
        return index, term

    def read_index(self, ctx: object, now: float | None = None) -> None:
        """Ask for a linearizable read point. The answer arrives as a ReadState in a later Ready (or in
        `dropped_reads` if this node cannot serve it). With `lease_read`, a leader whose lease holds at
        `now` (the driver's monotonic clock, read when the request arrived) answers without a round; the
        lease is only ever judged at the time a read arrives, never on a clock reading from earlier."""
        if self.role != Role.LEADER:
            self.dropped_reads.append((ctx, RaftError.EPERM))
            return
        self.observe_clock(now)
        if self.cfg.lease_read and now is not None and self._reads_startable() and self.lease_valid(now):
            self.read_states.append(ReadState(ctx, self.log.committed))
            return
        self.waiting_reads.append(ctx)

    def observe_clock(self, now: float | None) -> None:
        """The driver's monotonic clock reads `now`. A clock that went backwards (a jump, a reset) voids the
        lease and every heartbeat round sent before: their send times are on a scale that no longer holds."""
        if now is None:
            return
        if self.clock is not None and now < self.clock:
            self.lease_until = None
            self.read_sent_at = {}
        self.clock = now

    def transfer_leader(self, target: str) -> None:
        if self.role != Role.LEADER:
            raise RaftException(RaftError.EPERM, "not leader")
        if target == self.id:
            raise RaftException(RaftError.EINVAL, "already leader")
        if target not in self.conf.voters:
            raise RaftException(RaftError.EINVAL, f"{target} is not a voter")
        self.lead_transferee = target
        self.transfer_elapsed = 0
        # The target will win with forced votes that ignore the voters' lockout: the lease ends now, and no
        # heartbeat round sent before or during the transfer may renew it, even if the transfer is abandoned.
        self.lease_until = None
        self.read_sent_at = {}
        if self.prs[target].match == self.log.last_index():
            self._send(Message(MsgType.TIMEOUT_NOW, self.id, target, self.term))
        else:
            self._send_append(target)

    def report_snapshot(self, peer: str, success: bool) -> None:
        """The driver finished (or gave up) sending a snapshot to peer."""
        pr = self.prs.get(peer)
        if self.role != Role.LEADER or pr is None or pr.state is not ProgressState.SNAPSHOT:
            return
        if not success:
            pr.pending_snapshot = 0
        pr.become_probe()
        pr.probe_sent = True  # wait for the follower's answer (or a heartbeat) before probing again

    def report_unreachable(self, peer: str) -> None:
        pr = self.prs.get(peer)
        if self.role == Role.LEADER and pr is not None and pr.state is ProgressState.REPLICATE:
            pr.become_probe()

    def compact(self, snapshot: SnapshotMeta, keep_from: int) -> None:
        """A snapshot at snapshot.index now exists locally. Forget entries below keep_from (at most
        snapshot.index + 1): the margin kept lets slightly lagging followers catch up from the log."""
        if snapshot.index > self.log.applied:
            raise AssertionError(f"snapshot {snapshot.index} beyond applied {self.log.applied}")
        if snapshot.index > self.snapshot.index:
            self.snapshot = snapshot
        self.log.compact(min(keep_from - 1, snapshot.index))

    def on_persisted(self, index: int, term: int) -> None:
        """The driver made the log durable up to (index, term)."""
        self.log.stable_to(index, term)
        if self.role == Role.LEADER and self.id in self.prs:
            if self.prs[self.id].maybe_update(self.log.stable):
                self._maybe_commit()

    def on_hard_state_persisted(self, hs: HardState) -> None:
        """The driver made hard state `hs` durable (with everything handed out before it)."""
        self.durable_hard = hs

    def has_ready(self) -> bool:
        lg = self.log
        return bool(
            self.msgs
            or self.msgs_after
            or lg.handed < lg.last_index()
            or min(lg.committed, lg.stable) > lg.applied
            or self.pending_install
            or self.read_states
            or self.dropped_reads
            or (self.waiting_reads and self._reads_startable())
            or self.term != self.prev_hard.term
            or self.vote != self.prev_hard.vote
        )

    def ready(self) -> Ready:
        if self.waiting_reads and self._reads_startable():
            self._start_read_round()
        hs = HardState(self.term, self.vote)
        if self.msgs and hs != self.durable_hard:
            self._hold_messages()
        return Ready(
            hard_state=hs if hs != self.prev_hard else None,
            entries=self.log.unstable(),
            snapshot=self.pending_install,
            committed=self.log.applicable() if self.pending_install is None else [],
            messages=self.msgs,
            persisted_messages=self.msgs_after,
            read_states=self.read_states,
            dropped_reads=self.dropped_reads,
            leader=self.leader,
            role=self.role,
            term=self.term,
        )

    def _hold_messages(self) -> None:
        """etcd's rule: nothing leaves before the term and vote it is stamped with are durable. A lone voter
        wins in one call; had its appends left before the meta fsync, a crash and restart would let it win
        the same term again and write other entries at the same indexes."""
        self.msgs_after = self.msgs + self.msgs_after
        self.msgs = []

    def advance(self, rd: Ready) -> None:
        if rd.hard_state is not None:
            self.prev_hard = rd.hard_state
        if rd.entries:
            self.log.handed = max(self.log.handed, rd.entries[-1].index)
        if rd.snapshot is not None and rd.snapshot is self.pending_install:
            self.pending_install = None
        if rd.committed:
            self.log.applied = rd.committed[-1].index
            if (
                self.role == Role.LEADER
                and self.id not in self.conf.voters
                and self.log.applied >= self.log.conf_index()
            ):
                # Our removal is committed: step down; the remaining voters elect a leader.
                self._become_follower(self.term, "")
        if rd.messages is self.msgs:
            self.msgs = []
        if rd.persisted_messages is self.msgs_after:
            self.msgs_after = []
        if rd.read_states is self.read_states:
            self.read_states = []
        if rd.dropped_reads is self.dropped_reads:
            self.dropped_reads = []

    def status(self) -> CoreStatus:
        progress: dict[str, PeerProgress] = {}
        if self.role == Role.LEADER:
            last = self.log.last_index()
            for pid, pr in sorted(self.prs.items()):
                contact = 0 if pid == self.id else (self.now - pr.last_contact if pr.last_contact >= 0 else -1)
                progress[pid] = PeerProgress(pr.match, pr.next, last - pr.match, pr.state, pr.is_learner, contact)
        return CoreStatus(
            id=self.id,
            role=self.role,
            term=self.term,
            leader=self.leader,
            vote=self.vote,
            commit=self.log.committed,
            applied=self.log.applied,
            first_index=self.log.first_index(),
            last_index=self.log.last_index(),
            conf=self.conf,
            progress=progress,
            lead_transferee=self.lead_transferee,
        )

    def lease_valid(self, now: float | None = None) -> bool:
        """The leader lease holds at `now` (the driver's monotonic clock, ms; None: at the last clock reading)."""
        self.observe_clock(now)
        return (
            self.role == Role.LEADER
            and self.lease_until is not None
            and self.clock is not None
            and self.clock < self.lease_until
        )

    # ------------------------------------------------------------------ step

    def step(self, m: Message) -> None:
        if m.term > self.term:
            if m.type in (MsgType.VOTE, MsgType.PRE_VOTE) and self._in_lease() and not m.force:
                return  # a leader is alive: a disruptive (pre)candidate is ignored, term unchanged
            if m.type == MsgType.PRE_VOTE:
                pass  # pre-votes never change our term
            elif m.type == MsgType.PRE_VOTE_RESP and not m.reject:
                pass  # granted pre-votes carry the future term; the candidate bumps it itself
            elif m.type in (MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP):
                self._become_follower(m.term, m.frm)
            else:
                self._become_follower(m.term, "")
        elif m.term < self.term:
            if m.type in (MsgType.APP, MsgType.HEARTBEAT) and (self.cfg.check_quorum or self.cfg.pre_vote):
                # A stale leader (e.g. healed from a partition) learns our term and steps down.
                self._send(Message(MsgType.APP_RESP, self.id, m.frm, self.term))
            elif m.type == MsgType.PRE_VOTE:
                self._send(Message(MsgType.PRE_VOTE_RESP, self.id, m.frm, self.term, reject=True))
            return

        t = m.type
        if t == MsgType.VOTE or t == MsgType.PRE_VOTE:
            self._handle_vote(m)
        elif self.role == Role.LEADER:
            self._step_leader(m)
        elif self.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
            self._step_candidate(m)
        else:
            self._step_follower(m)

    def _handle_vote(self, m: Message) -> None:
        can_vote = (
            self.vote == m.frm
            or (self.vote == "" and self.leader == "")
            or (m.type == MsgType.PRE_VOTE and m.term > self.term)
        )
        resp = MsgType.VOTE_RESP if m.type == MsgType.VOTE else MsgType.PRE_VOTE_RESP
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            # A granted pre-vote answers in the candidate's future term so it is not mistaken for stale.
            self._send(Message(resp, self.id, m.frm, m.term))
            if m.type == MsgType.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
        else:
            self._send(Message(resp, self.id, m.frm, self.term, reject=True))

    def _step_leader(self, m: Message) -> None:
        pr = self.prs.get(m.frm)
        if pr is None:
            return
        t = m.type
        if t == MsgType.APP_RESP:
            pr.recent_active = True
            pr.last_contact = self.now
            if m.reject:
                hint = m.reject_hint
                if m.hint_term > 0:
                    hint = self.log.find_conflict_by_term(m.reject_hint, m.hint_term)
                if pr.maybe_decrease(m.index, hint):
                    if pr.state is ProgressState.REPLICATE:
                        pr.become_probe()
                    self._send_append(m.frm)
                return
            if pr.maybe_update(m.index):
                if pr.state is ProgressState.PROBE:
                    pr.become_replicate()
                elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
                    pr.become_probe()
                    pr.become_replicate()
                self._maybe_commit()
                self._send_entries_while_room(m.frm)
                if m.frm == self.lead_transferee and pr.match == self.log.last_index():
                    self._send(Message(MsgType.TIMEOUT_NOW, self.id, m.frm, self.term))
        elif t == MsgType.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.last_contact = self.now
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and pr.is_paused():
                pr.inflights.popleft()  # all in flight may be lost: let one more append through
            if m.seq > pr.read_ack:
                pr.read_ack = m.seq
                self._advance_reads()
            if m.reject and m.reject_hint < pr.match:
                pr.lost_entries(m.reject_hint)
            if pr.match < self.log.last_index():
                self._send_append(m.frm)

    def _step_candidate(self, m: Message) -> None:
        t = m.type
        if t in (MsgType.APP, MsgType.HEARTBEAT, MsgType.SNAP):
            self._become_follower(m.term, m.frm)
            self._step_follower(m)
        elif (t == MsgType.VOTE_RESP and self.role == Role.CANDIDATE) or (
            t == MsgType.PRE_VOTE_RESP and self.role == Role.PRE_CANDIDATE
        ):
            self.votes[m.frm] = not m.reject
            result = quorum.vote_result(self.conf.voters, self.votes)
            if result is VoteResult.WON:
                if self.role == Role.PRE_CANDIDATE:
                    self._become_candidate()
                    self._request_votes(MsgType.VOTE, self.term, force=False)
                else:
                    self._become_leader()
            elif result is VoteResult.LOST:
                self._become_follower(self.term, "")

    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t == MsgType.APP:
            self._heard_from_leader(m.frm)
            self._handle_append(m)
        elif t == MsgType.HEARTBEAT:
            self._heard_from_leader(m.frm)
            lg = self.log
            last = lg.last_index()
            if m.commit <= lg.committed or (m.commit <= last and lg.match_term(m.commit, m.log_term)):
                lg.commit_to(m.commit)
                self._send(Message(MsgType.HEARTBEAT_RESP, self.id, m.frm, self.term, seq=m.seq))
            elif m.commit > last or m.log_term:
                # The leader's commit here is at most what we acknowledged, yet we lack it, or hold another
                # entry there: our disk lost acknowledged entries (wiped, or replaced by a stale copy). Say
                # where our log surely agrees (its end, or our commit) so the leader probes from there instead
                # of believing our old match.
                hint = last if m.commit > last else lg.committed
                self.lost_acknowledged = (last, m.commit)
                self._send(
                    Message(MsgType.HEARTBEAT_RESP, self.id, m.frm, self.term, seq=m.seq, reject=True, reject_hint=hint)
                )
            else:
                # The leader no longer knows the term at its commit (compacted): no commit from this heartbeat.
                self._send(Message(MsgType.HEARTBEAT_RESP, self.id, m.frm, self.term, seq=m.seq))
        elif t == MsgType.SNAP:
            self._heard_from_leader(m.frm)
            self._handle_snapshot(m)
        elif t == MsgType.TIMEOUT_NOW:
            self.campaign(transfer=True)

    # ------------------------------------------------------------------ replication

    def _handle_append(self, m: Message) -> None:
        lg = self.log
        if m.index < lg.committed:
            self._send(Message(MsgType.APP_RESP, self.id, m.frm, self.term, index=lg.committed))
            return
        if lg.match_term(m.index, m.log_term):
            ents = m.entries
            last_new = m.index + len(ents)
            conflict = lg.find_conflict(ents)
            if conflict:
                lg.append(ents[conflict - ents[0].index :])
            lg.commit_to(min(m.commit, last_new))
            self._send(Message(MsgType.APP_RESP, self.id, m.frm, self.term, index=last_new))
            return
        # Reject, with a hint so the leader can skip a whole term of mismatching entries at once.
        hint_index = min(m.index, lg.last_index())
        hint_index = lg.find_conflict_by_term(hint_index, m.log_term)
        hint_term = lg.term(hint_index) or 0
        self._send(
            Message(
                MsgType.APP_RESP,
                self.id,
                m.frm,
                self.term,
                index=m.index,
                reject=True,
                reject_hint=hint_index,
                hint_term=hint_term,
            )
        )

    def _handle_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        assert snap is not None
        lg = self.log
        if snap.index <= lg.committed:
            self._send(Message(MsgType.APP_RESP, self.id, m.frm, self.term, index=lg.committed))
            return
        if lg.match_term(snap.index, snap.term):
            lg.commit_to(snap.index)  # we already hold the snapshot's entries: just fast-forward
        else:
            lg.restore(snap.index, snap.term, snap.conf)
            self.snapshot = snap
            self.pending_install = snap
        self._send(Message(MsgType.APP_RESP, self.id, m.frm, self.term, index=lg.last_index()))

    def _append(self, entries: list[Entry]) -> None:
        self.log.append(entries)

    def _send_append(self, to: str, send_if_empty: bool = True) -> bool:
        pr = self.prs[to]
        if pr.is_paused():
            return False
        lg = self.log
        prev = pr.next - 1
        prev_term = lg.term(prev)
        if prev_term is None:
            return self._send_snapshot(to, pr)
        last = lg.last_index()
        ents = (
            lg.slice(pr.next, last + 1, self.cfg.max_entries_per_msg, self.cfg.max_bytes_per_msg)
            if pr.next <= last
            else []
        )
        if not ents and not send_if_empty:
            return False
        sent_last = ents[-1].index if ents else prev
        self._send(Message(MsgType.APP, self.id, to, self.term, prev_term, prev, ents, lg.committed))
        pr.sent(sent_last)
        return True

    def _send_snapshot(self, to: str, pr: Progress) -> bool:
        if not pr.recent_active:
            return False  # do not start a transfer to a node we have not heard from
        snap = self.snapshot
        pr.become_snapshot(snap.index)
        self._send(Message(MsgType.SNAP, self.id, to, self.term, snapshot=snap))
        return True

    def _send_entries_while_room(self, to: str) -> None:
        pr = self.prs[to]
        last = self.log.last_index()
        while pr.next <= last and not pr.is_paused():
            if not self._send_append(to, send_if_empty=False):
                break

    def _broadcast_append(self) -> None:
        for pid in self.prs:
            if pid != self.id:
                self._send_entries_while_room(pid)

    def _broadcast_commit(self) -> None:
        """After a commit, what each replicating follower has not been sent yet. A new commit index alone sends
        nothing: followers learn it from the next append or heartbeat."""
        for pid, pr in self.prs.items():
            if pid != self.id and pr.state is ProgressState.REPLICATE:
                self._send_entries_while_room(pid)

    def _maybe_commit(self) -> bool:
        idx = quorum.committed_index(self.conf.voters, {p: pr.match for p, pr in self.prs.items()})
        # Raft §5.4.2: only entries of the current term are committed by counting replicas.
        if idx > self.log.committed and self.log.term(idx) == self.term:
            self.log.commit_to(idx)
            self._broadcast_commit()
            return True
        return False

    # ------------------------------------------------------------------ roles

    def _sole_voter(self) -> bool:
        # Not len(voters) == 1: a leader that has appended its own removal from {a, b} sees {b}.
        return self.conf.voters == (self.id,)

    def _promotable(self) -> bool:
        """A voter of the latest configuration campaigns; so does one that the latest configuration removes
        while that removal is not known to be committed (thesis §4.2.2): otherwise a leader that appended its
        own removal and lost leadership before it committed could deadlock the group, its newer log refusing
        every other candidate. Either way the votes are counted in the latest configuration, never its own."""
        if self.pending_install is not None or self.suspended:
            return False
        return self.id in self.conf.voters or (
            self.log.conf_index() > self.log.committed and self.id in self.log.conf_at(self.log.committed).voters
        )

    def _in_lease(self) -> bool:
        """A follower that heard from a live leader within the election timeout refuses (pre)votes
        (CheckQuorum's lease); this is also what makes leader lease reads safe. With lease reads a node that
        just started counts as having heard from a leader at start (`boot_lockout`)."""
        return (
            self.cfg.check_quorum
            and (self.leader != "" or self.boot_lockout)
            and self.election_elapsed < self.cfg.election_tick
        )

    def _reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = ""
        self.leader = ""
        self.leader_lost = False
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self._reset_randomized_timeout()
        self.votes = {}
        self.lead_transferee = ""
        self.lease_until = None
        for r in self.pending_reads:
            self.dropped_reads.append((r.ctx, RaftError.ELEADERCHANGED))
        for ctx in self.waiting_reads:
            self.dropped_reads.append((ctx, RaftError.ELEADERCHANGED))
        self.pending_reads = []
        self.waiting_reads = []
        self.read_sent_at = {}
        self.prs = {}

    def _reset_randomized_timeout(self) -> None:
        # JRaft: a random timeout in [T, 2T) so that candidates rarely split the vote.
        self.randomized_timeout = self.cfg.election_tick + self.rng.randrange(self.cfg.election_tick)

    def _become_follower(self, term: int, leader: str) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader = leader

    def _become_pre_candidate(self) -> None:
        # A pre-candidate keeps its term and vote; it only asks whether it could win.
        self.role = Role.PRE_CANDIDATE
        self.votes = {self.id: True}
        self.leader = ""

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.role = Role.CANDIDATE
        self.vote = self.id
        self.votes = {self.id: True}

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader = self.id
        last = self.log.last_index()
        members = self.conf.members()
        for pid in members if self.id in members else (*members, self.id):  # a leader outside its config tracks itself
            pr = Progress(last + 1, self.cfg.max_inflight, pid in self.conf.learners)
            if pid == self.id:
                pr.match = self.log.stable
                pr.become_replicate()
                pr.next = last + 1
                pr.recent_active = True
            self.prs[pid] = pr
        # Conf changes wait until everything of earlier terms is applied (the single-server change fix).
        self.pending_conf_index = last + 1
        self._append([Entry(self.term, last + 1, EntryType.NOOP, b"")])
        self._broadcast_append()

    def _request_votes(self, kind: MsgType, term: int, force: bool) -> None:
        if quorum.vote_result(self.conf.voters, self.votes) is VoteResult.WON:
            # A single-voter cluster wins at once.
            if kind == MsgType.PRE_VOTE:
                self._become_candidate()
                self._request_votes(MsgType.VOTE, self.term, force)
            else:
                self._become_leader()
            return
        for pid in self.conf.voters:
            if pid != self.id:
                self._send(Message(kind, self.id, pid, term, self.log.last_term(), self.log.last_index(), force=force))

    def _tick_leader(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.cfg.election_tick:
            self.election_elapsed = 0
            if self.cfg.check_quorum:
                active = {p for p, pr in self.prs.items() if pr.recent_active or p == self.id}
                if quorum.vote_result(self.conf.voters, {p: True for p in active}) is not VoteResult.WON:
                    self._become_follower(self.term, "")
                    return
                for p, pr in self.prs.items():
                    if p != self.id:
                        pr.recent_active = False
        if self.lead_transferee:
            self.transfer_elapsed += 1
            if self.transfer_elapsed >= self.cfg.election_tick:
                self.lead_transferee = ""  # the transfer timed out: resume normal service
        if self.heartbeat_elapsed >= self.cfg.heartbeat_tick:
            self.heartbeat_elapsed = 0
            self._broadcast_heartbeat()

    def _broadcast_heartbeat(self) -> None:
        self.read_seq += 1
        seq = self.read_seq
        if self.clock is not None and not self.lead_transferee:
            self.read_sent_at[seq] = self.clock  # rounds sent during a transfer never lease (see transfer_leader)
        for pid, pr in self.prs.items():
            if pid != self.id:
                commit = min(pr.match, self.log.committed)
                commit_term = self.log.term(commit) or 0  # lets the follower check its entry at commit
                self._send(Message(MsgType.HEARTBEAT, self.id, pid, self.term, commit_term, commit=commit, seq=seq))
        if self._sole_voter():
            self._advance_reads()

    # ------------------------------------------------------------------ reads

    def _reads_startable(self) -> bool:
        return self.role != Role.LEADER or self.log.term(self.log.committed) == self.term

    def _start_read_round(self) -> None:
        if self.role != Role.LEADER:
            for ctx in self.waiting_reads:
                self.dropped_reads.append((ctx, RaftError.EPERM))
            self.waiting_reads = []
            return
        if self.log.term(self.log.committed) != self.term:
            return  # JRaft/etcd: no reads until the leader's first entry of this term has committed
        commit = self.log.committed
        if self._sole_voter():
            self.read_states.extend(ReadState(ctx, commit) for ctx in self.waiting_reads)
            self.waiting_reads = []
            return
        self._broadcast_heartbeat()
        seq = self.read_seq
        self.pending_reads.extend(_PendingRead(ctx, commit, seq) for ctx in self.waiting_reads)
        self.waiting_reads = []

    def _advance_reads(self) -> None:
        """Release reads whose heartbeat round a quorum answered, and extend the lease."""
        acks = {p: pr.read_ack for p, pr in self.prs.items()}
        acks[self.id] = self.read_seq
        confirmed = quorum.committed_index(self.conf.voters, acks)
        if confirmed <= 0:
            return
        sent = self.read_sent_at.get(confirmed)
        if sent is not None and self.cfg.lease_read and not self.lead_transferee:
            # The lease runs from when the confirmed round was sent, not from when answers came back.
            until = sent + self.cfg.lease_ms()
            self.lease_until = until if self.lease_until is None else max(self.lease_until, until)
        for s in [s for s in self.read_sent_at if s <= confirmed]:
            del self.read_sent_at[s]
        if self.pending_reads and self.pending_reads[0].seq <= confirmed:
            done = [r for r in self.pending_reads if r.seq <= confirmed]
            self.pending_reads = [r for r in self.pending_reads if r.seq > confirmed]
            self.read_states.extend(ReadState(r.ctx, r.index) for r in done)

    # ------------------------------------------------------------------ membership

    def _sync_progress(self) -> None:
        """Track exactly the members of the latest configuration (called on the leader after it
        appends a CONF entry)."""
        conf = self.conf
        last = self.log.last_index()
        for pid in conf.members():
            if pid not in self.prs:
                self.prs[pid] = Progress(last + 1, self.cfg.max_inflight, pid in conf.learners)
                self._send_append(pid)  # probe the newcomer at once rather than at the next heartbeat
            else:
                self.prs[pid].is_learner = pid in conf.learners
        for pid in [p for p in self.prs if p not in conf.members() and p != self.id]:
            del self.prs[pid]
        if self.lead_transferee and self.lead_transferee not in conf.voters:
            self.lead_transferee = ""
        self._maybe_commit()

    # ------------------------------------------------------------------ output

    def _send(self, m: Message) -> None:
        if m.type in _SEND_NOW or (m.type == MsgType.HEARTBEAT_RESP and not m.reject):
            # A heartbeat's answer acknowledges no entry (only the term, held while not durable): it leaves at
            # once, so that a follower's fsync slower than the election timeout costs no leadership. A reject
            # carries our last index as a hint and waits, like an append's answer.
            self.msgs.append(m)
        else:
            self.msgs_after.append(m)

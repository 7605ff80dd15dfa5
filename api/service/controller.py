"""ControllerService: one controller node (Raft node + controller state machine) and the duties of its leader.

This is the layer between the front ends (api/http/, the HTTP routes) and the Raft node, and the embeddable
Python API (see `api.server.ControllerServer` for the node plus its HTTP endpoints). Front ends call this
and `self.admin` (admin.py: transfer, peers, snapshots), never the node:

* writes: `write(build)` stamps the leader's clock into the command (`build(now_ms) -> bytes`), proposes
  it, and answers the state machine's `Result` once the entry is applied here;
* reads: `read(build)` waits for a ReadIndex barrier (a quorum-confirmed commit index, applied here), then
  runs the read command against the local state. Reads never enter the log: the result is the same as
  jRaft's read-through-the-log, without a log entry per read (docs/statemachine.md);
* the leader's timer proposes the inactive-broker scan (1015) with its own clock, and, once it leads,
  proposes the replicated config keys its properties file sets (statemachine/config.py);
* `stop()` hands leadership to the most caught-up voter before the node stops (rolling restarts).

Errors are values the front ends map onto their answers (errors.py): `NotLeaderError` (2007, nothing was
proposed), `UnavailableError` (HTTP 503: the outcome is unknown or the node cannot serve), `RefusedError`,
`CommandArgumentError`. `outcome()` is the one mapping from Raft errors to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from api.service import alarms
from api.service.admin import AdminOperations
from api.service.errors import CommandArgumentError, NotLeaderError, UnavailableError, checked, outcome_of
from api.service.history import History
from api.service.requests import Request, command_fields
from raft.core import PeerProgress, Role
from raft.latency import LatencyHistogram
from raft.node import Node, NodeStatus, PartsFactory, open_data_dir
from raft.options import NodeOptions, setting
from raft.status import RaftBaseError
from statemachine import codes as C
from statemachine import commands, features
from statemachine.commands import CommandError
from statemachine.config import ConfigValue
from statemachine.liveness import LiveRow
from statemachine.machine import HEARTBEAT_OK, READ_ONLY_CODES, AppliedEntry, ControllerStateMachine
from statemachine.result import Result
from statemachine.values import JSONObject

LOOP_PROBE_S = 0.05  # the event-loop lag probe's period (controllerd_event_loop_lag_seconds)
HEARTBEATS_LEVEL = features.GATED[C.BROKER_HEARTBEATS]  # the group's level from which heartbeats are batched
log = logging.getLogger("controllerd")

# The commands `read` may run against local state: they never change it (nor the state machine's clock).
READ_CODES = READ_ONLY_CODES
CHECKPOINTS_KEPT = 8
# Bytes 2..4 of every ALARM entry: msgpack uint16 1200 after the array header and the version (commands.encode).
_ALARM_CODE = commands.encode(C.ALARM, 0, False, "", "", "")[2:5]


def state_hash(sm: ControllerStateMachine) -> str:
    """SHA-256 of the applied state's canonical section bytes (equal state, equal bytes: docs/statemachine.md),
    hex, first 16 digits."""
    return hash_sections(sm.section_parts())


def hash_sections(parts: Mapping[int, list[bytes]]) -> str:
    """state_hash of `ControllerStateMachine.section_parts()`: for each section by type, u16 type, u64 body
    length (big-endian) and the body. Safe on another thread (the parts are bytes); the hash itself runs
    without the GIL."""
    h = hashlib.sha256()
    for t, pieces in sorted(parts.items()):
        body = b"".join(pieces)
        h.update(t.to_bytes(2, "big") + len(body).to_bytes(8, "big"))
        h.update(body)
    return h.hexdigest()[:16]


SCAN_OUTCOMES = ("not_leader", "nothing_to_do", "no_change", "expired", "failed")
"""A scan tick's outcome: this node does not lead; the guard or the table says there is nothing to judge; a
1015 was proposed and expired nothing; it expired brokers; proposing it failed (docs/operations.md)."""


@dataclass
class ServiceOptions:
    """What a controller node needs beyond its Raft options. `cli.config.to_service_options` maps a RocketMQ
    controller.conf onto this; embedders fill it directly. The group and the peers' HTTP and remoting
    addresses are the node's (`node.group_id`, `node.http_addresses`, `node.remoting_addresses`): set once
    there, read here through the properties below."""

    node: NodeOptions
    scan_interval_ms: int = setting(
        "scanNotActiveBrokerInterval",
        "int",
        5000,
        minimum=1,
        type_doc="int >= 1 (ms)",
        doc="Period of the leader's inactive-broker scan.",
    )
    scan_wait_ms: int = setting(
        "jRaftScanWaitTimeoutMs",
        "int",
        1000,
        minimum=1,
        doc="RocketMQ's guard on the inactive-broker scan: a new leader scans only once it has received a broker "
        "heartbeat and this long has passed since, so that a restarted or failed-over group does not expire every "
        "broker before they heartbeat again. Until then a dead master stays `master, alive=false` (operations.md). "
        "Beyond this guard, a new leader's scans judge no broker on heartbeats from before its takeover "
        '(statemachine.md, "A new leader\'s scans").',
    )
    """No scan until this long after the first heartbeat."""
    store_quota_bytes: int = setting(
        "controllerStoreQuotaBytes",
        "long",
        2 * 1024**3,
        minimum=0,
        default_doc="`2147483648` (2 GiB, etcd's default quota)",
        doc="When the files under `controllerStorePath` pass this many bytes, this node raises the NOSPACE alarm: "
        "the leader then refuses writes that grow the state until an operator frees space and disarms it "
        '(`rmqctl alarm disarm`; docs/operations.md, "NOSPACE"). 0: no quota. Ours (etcd\'s `--quota-backend-bytes`).',
    )
    alarm_free_disk_mb: int = setting(
        "controllerAlarmFreeDiskMB",
        "int",
        64,
        minimum=0,
        doc="When the file system of `controllerStorePath` has less free space than this many MiB, this node "
        "raises the NOSPACE alarm (above `controllerMinFreeDiskMB`, where writes stop by themselves). 0: off. Ours.",
    )
    alarm_check_interval_ms: int = setting(
        "controllerAlarmCheckIntervalMs",
        "int",
        5000,
        minimum=100,
        type_doc="int >= 100 (ms)",
        doc="How often each node checks its store against `controllerStoreQuotaBytes` and `controllerAlarmFreeDiskMB`. Ours.",
    )
    corrupt_check_entries: int = setting(
        "controllerCorruptCheckEntries",
        "int",
        10_000,
        minimum=1,
        doc="Every member hashes its applied state after each index that is a multiple of this (the same index "
        'everywhere), keeping the last 8 (docs/operations.md, "CORRUPT"). Ours (etcd\'s corruption check).',
    )
    corrupt_check_interval_ms: int = setting(
        "controllerCorruptCheckIntervalMs",
        "int",
        60_000,
        minimum=100,
        type_doc="int >= 100 (ms)",
        doc="How often the leader compares the members' hashes (and once right after it takes leadership); a member "
        "whose hash differs from the majority's at the same index gets the CORRUPT alarm. Ours.",
    )
    feature_level_auto: bool = setting(
        "controllerFeatureLevelAuto",
        "bool",
        True,
        doc="Whether the leader raises the group's feature level by itself once every member reads a higher one "
        "(checked every `controllerFeatureCheckIntervalMs` and before the first alarm), as etcd raises its "
        "cluster version. false: only `rmqctl raft features upgrade` raises it, which keeps a rolling upgrade's "
        'way back to the previous release open until the operator finalizes (docs/operations.md, "Upgrades and '
        "versions\"). Ours (KRaft's `metadata.version`).",
    )
    feature_check_interval_ms: int = setting(
        "controllerFeatureCheckIntervalMs",
        "int",
        30_000,
        minimum=100,
        type_doc="int >= 100 (ms)",
        doc="How often the leader asks the members which feature level they read (with "
        "`controllerFeatureLevelAuto`). Ours.",
    )
    first_scan_delay_ms: int = 2000  # RocketMQ's first scan runs 2 s after start
    request_timeout_s: float = 3.0  # commit (or ReadIndex) wait before answering 503
    file_config: Mapping[str, ConfigValue] = field(default_factory=dict)  # replicated keys the properties file sets
    ready_apply_lag: int = 1000  # /readyz: applied must be within this many entries of commit
    transfer_on_stop_s: float = 5.0  # how long stop() waits for a leadership transfer
    unsafe_local_reads: bool = False
    """Fault injection only (the Jepsen suite's negative control, env CONTROLLERD_UNSAFE_LOCAL_READS=1): every
    node answers reads from its own applied state, with no ReadIndex barrier and in any role, as etcd 0.4
    did. Stale reads become possible; the suite must then find them."""

    @property
    def group_id(self) -> str:
        return self.node.group_id

    @property
    def http_addresses(self) -> Mapping[str, str]:
        """raft id -> "host:port" of its HTTP API (controllerHttpAddr)."""
        return self.node.http_addresses

    @property
    def remoting_addresses(self) -> Mapping[str, str]:
        """raft id -> its RocketMQ remoting address (jRaftControllerRPCAddr)."""
        return self.node.remoting_addresses


class _Machine(ControllerStateMachine):
    """The controller state machine, telling the service about leadership (informational callbacks) and
    every applied entry but heartbeats (the event history)."""

    def __init__(self, service: ControllerService) -> None:
        super().__init__()
        self._service = service
        # (index, hash of the applied state right after it) at every multiple of corrupt_check_entries.
        self.checkpoints: deque[tuple[int, str]] = deque(maxlen=CHECKPOINTS_KEPT)
        # Hashes the checkpoints' parts, in index order, so that the apply thread only takes the parts; the
        # checkpoints being hashed, oldest first, until `collect` moves them to `checkpoints`.
        self.hasher: ThreadPoolExecutor | None = None
        self.hashing: deque[tuple[int, asyncio.Future[str]]] = deque()

    def on_apply(self, entries: Iterable[AppliedEntry]) -> list[Result]:
        apply, record, beat = self.apply, self._service.history.on_applied, HEARTBEAT_OK
        every = self._service.opts.corrupt_check_entries
        out = []
        for e in entries:
            try:
                r = apply(e.data)
            except features.FeatureLevelError as err:  # the node stops: name the entry
                raise features.FeatureLevelError(f"entry {e.index}: {err}") from None
            if r is not beat:
                record(e.index, e.data, r, self.live.clock)
                if e.data[2:5] == _ALARM_CODE:  # an ALARM entry: the service re-reads this member's alarms
                    self._service.alarms_applied()
            if e.index % every == 0:
                self._checkpoint(e.index)
            out.append(r)
        return out

    def _checkpoint(self, index: int) -> None:
        """Take the state's parts at `index` now (bytes kept or cached: no encoding), hash them on the hashing
        thread (the join and SHA-256: ~1.2 ms with 10,000 brokers, most of it without the GIL), and record the
        checkpoint on this loop once hashed. Encoding and hashing here stalled every node's apply for ~12 ms
        at each checkpoint of a loaded 3-node group on 2 cores (docs/performance.md, "The checkpoint and
        snapshot stall, taken apart")."""
        parts = self.section_parts()
        if self.hasher is None:
            self.hasher = ThreadPoolExecutor(1, thread_name_prefix=f"checkpoint-hash-{self._service.id}")
        f = asyncio.wrap_future(self.hasher.submit(hash_sections, parts))
        self.hashing.append((index, f))
        f.add_done_callback(lambda _: self.collect())

    def collect(self) -> None:
        """Move the hashed checkpoints to `checkpoints`, in index order. Called when a hash is done and by the
        readers, which cannot rely on that callback: a future is done one loop step before its callbacks run."""
        while self.hashing and self.hashing[0][1].done():
            index, f = self.hashing.popleft()
            if f.cancelled():
                continue
            if f.exception() is None:
                self.checkpoints.append((index, f.result()))
            else:
                log.error("checkpoint hash at index %d failed: %r", index, f.exception())

    def close(self) -> None:
        if self.hasher is not None:
            self.hasher.shutdown(wait=True)

    def on_leader_start(self, term: int) -> None:
        super().on_leader_start(term)
        self._service._leader_started(term)

    def on_leader_stop(self, term: int) -> None:
        super().on_leader_stop(term)
        self._service._leader_stopped(term)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Peer:
    """One member of the group as this node sees it (`ControllerService.peers`)."""

    id: str
    role: Role  # LEADER, LEARNER or FOLLOWER
    voter: bool
    raft_address: str
    http_address: str | None  # None when unknown
    remoting_address: str | None
    progress: PeerProgress | None  # the leader's view of its replication; None on a follower
    last_contact_ms: int | None  # since it last answered the leader; None when unknown or not this term


class CommitTimeout(Exception):
    """Set on a proposal's future whose commit did not come within the request timeout."""


class Deadlines:
    """The commit timeouts of the proposals in flight. Every proposal waits the same time, so deadlines come
    in arrival order: a FIFO and one timer replace a timer (and asyncio.timeout's bookkeeping) per request,
    which cost about 5% of a busy leader's CPU. An expired future gets CommitTimeout; the node skips
    waiters that are already done."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._queue: deque[tuple[float, asyncio.Future[object]]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, fut: asyncio.Future[object]) -> None:
        loop = fut.get_loop()
        deadline = loop.time() + self.timeout_s
        self._queue.append((deadline, fut))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        q = self._queue
        while q and q[0][0] <= now:
            _, fut = q.popleft()
            if not fut.done():
                fut.set_exception(CommitTimeout())
        while q and q[0][1].done():  # answered long ago: no timer needed for them
            q.popleft()
        self._timer = loop.call_at(q[0][0], self._expire, loop) if q else None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()

    def __len__(self) -> int:
        return len(self._queue)


class ControllerService:
    """One controller node. `await start()`, serve, `await stop()`. All methods run on the node's loop."""

    def __init__(
        self, options: ServiceOptions, clock: Callable[[], int] = wall_ms, open_parts: PartsFactory = open_data_dir
    ) -> None:
        """`open_parts` builds the node's log, meta store, snapshot store and transport (raft/node/factory.py):
        the data directory's, or a test's in-process group (raft/testing/group.py)."""
        self.opts = options
        self.history = History(options.node.node_id, options.node.data_dir, self.display_name)
        self.sm = _Machine(self)
        self.node = Node(options.node, self.sm, open_parts)
        self.node.change_listeners.append(self._raft_changed)
        self.id = options.node.node_id
        self.clock = clock
        self.started = False
        self.stopping = False
        self._stop_called = False
        self.first_heartbeat_ms: int | None = None  # since this node became leader
        # This node's clock when it took leadership (on_leader_start: its term's first entry applied, so every
        # heartbeat its predecessors committed is applied); None while it does not lead. Every scan it
        # proposes carries it as aliveSinceMillis (docs/statemachine.md, "A new leader's scans").
        self.leader_since_ms: int | None = None
        self.scans = 0
        # Scan ticks by outcome (SCAN_OUTCOMES) and when the last one ran (this node's clock): a scan timer
        # that stops ticking is an alert (deploy/prometheus), not a surprise.
        self.scan_runs: dict[str, int] = dict.fromkeys(SCAN_OUTCOMES, 0)
        self.scan_last_run_ms: int | None = None
        self.leader_changes = 0  # times this node saw the known leader change to a (new) node
        self._last_leader = ""
        self.listeners: list[Callable[[str, Result], None]] = []  # (request type, result) of proposals
        self._tasks: set[asyncio.Task[object]] = set()
        self._scan_task: asyncio.Task[None] | None = None
        self._deadlines = Deadlines(options.request_timeout_s)
        self.admin = AdminOperations(self)
        self._alarm_task: asyncio.Task[None] | None = None
        self._corrupt_task: asyncio.Task[None] | None = None
        # How the leader reads a member's checkpoint hashes (installed by the HTTP front end); None: unknown.
        self.peer_hashes: Callable[[str], Awaitable[list[tuple[int, str]] | None]] | None = None
        # How a follower raises an alarm: asks the leader (installed by the HTTP front end, api/http/app.py).
        self.alarm_forwarder: Callable[[str, str, str], Awaitable[Result]] | None = None
        self.alarm_checks: dict[str, int] = {"ok": 0, "nospace": 0, "failed": 0}
        # How the leader asks a member the highest feature level it reads (installed by the HTTP front end):
        # 0 for a member of a release without feature levels, None when it does not answer.
        self.peer_features: Callable[[str], Awaitable[int | None]] | None = None
        self._feature_task: asyncio.Task[None] | None = None
        # This loop turn's broker heartbeats, proposed together as one 1202 entry when the turn's callbacks
        # are done (`_flush_heartbeats`); `_beat_waiters` says who waits for each.
        self._beats: list[list[str | int]] = []
        # How late the event loop ran a LOOP_PROBE_S timer, every time (controllerd_event_loop_lag_seconds): the
        # longest the loop went without turning, sampled LOOP_PROBE_S apart. Every heartbeat that arrives during
        # such a stall waits it out, whatever the code it then runs.
        self.loop_lag = LatencyHistogram()
        self._lag_task: asyncio.Task[None] | None = None
        # Per heartbeat of `_beats`, who waits for its entry: a future (`propose`), or a callback the front end
        # gave (`propose_heartbeat`), called with the entry's own future when it is done.
        self._beat_waiters: list[asyncio.Future[Result] | Callable[[asyncio.Future[Result]], None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the snapshot, replay the log, join the group; returns before a leader is known."""
        self.history.load()  # before the replay: what it recorded before a restart is not recorded twice
        await self.node.start()
        self.started = True
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name=f"scan-{self.id}")
        self._alarm_task = asyncio.get_running_loop().create_task(self._alarm_loop(), name=f"alarms-{self.id}")
        self._corrupt_task = asyncio.get_running_loop().create_task(self._corrupt_loop(), name=f"corrupt-{self.id}")
        self._feature_task = asyncio.get_running_loop().create_task(self._feature_loop(), name=f"features-{self.id}")
        self._lag_task = asyncio.get_running_loop().create_task(self._loop_lag_probe(), name=f"loop-lag-{self.id}")
        self._alarm_effects()  # a member found corrupt before a restart stays out of elections
        log.info("controller node %s started (group %s)", self.id, self.opts.group_id)
        if self.opts.unsafe_local_reads:
            log.warning(
                "UNSAFE: reads are answered from local state without ReadIndex (fault injection, "
                "CONTROLLERD_UNSAFE_LOCAL_READS=1): stale reads are possible"
            )

    async def wait_failed(self) -> BaseException:
        """Resolves with the fatal error that stopped the node (storage failure, state machine exception)."""
        return await self.node.wait_failed()

    async def stop(self, transfer: bool = True) -> None:
        """Hand leadership over (when leading and `transfer`), then stop the node: pending requests fail with
        503, the log writer flushes, files close."""
        if self._stop_called:
            return
        self._stop_called = True
        if transfer and self.started and self.node.is_leader():
            await self.hand_over()  # still serving meanwhile: requests get 2007 once the transfer is done
        self.stopping = True
        if self._scan_task is not None:
            self._scan_task.cancel()
        if self._alarm_task is not None:
            self._alarm_task.cancel()
        for task in (self._corrupt_task, self._feature_task, self._lag_task):
            if task is not None:
                task.cancel()
        for t in list(self._tasks):
            t.cancel()
        await self.node.stop()
        self.sm.close()
        self._deadlines.close()
        await self.history.flush()
        log.info("controller node %s stopped", self.id)

    async def hand_over(self) -> None:
        """Hand leadership to the most caught-up voter (when there is one); a failure is logged, not raised."""
        target = self.admin.best_transferee()
        if target is None:
            return
        try:
            await self.node.transfer_leadership(target, self.opts.transfer_on_stop_s)
            log.info("leadership handed to %s before stopping", target)
        except (RaftBaseError, TimeoutError) as e:
            log.warning("leadership transfer to %s before stopping failed: %s", target, e)

    def election_ticks(self) -> float:
        """An election timeout in core ticks: a peer silent for longer is no transfer target."""
        return self.opts.node.raft.election_timeout_ms / self.tick_ms()

    # ------------------------------------------------------------------ requests

    def now_ms(self) -> int:
        return self.clock()

    def leader(self) -> tuple[str, str | None]:
        """(leader raft id or "", its HTTP address if known)."""
        lid = self.node.leader_id() if self.started else ""
        return lid, self.http_address(lid) if lid else None

    def http_address(self, peer: str) -> str | None:
        """A member's HTTP address: from the log (members added later carry theirs), else the config file."""
        return self.node.http_address(peer) if self.started else self.opts.http_addresses.get(peer)

    def http_addresses(self) -> dict[str, str]:
        """id -> HTTP address of every member and configured peer whose address is known."""
        if not self.started:
            return dict(self.opts.http_addresses)
        return {p: a[1] for p, a in self.node.member_addresses().items() if a[1]}

    def is_leader(self) -> bool:
        return self.started and self.node.is_leader()

    def require_leader(self) -> None:
        """NotLeaderError naming the leader unless this node leads."""
        if not self.node.is_leader():
            raise NotLeaderError(*self.leader())

    def remoting_address(self, peer: str) -> str | None:
        """A member's RocketMQ remoting address: from the log (members added later carry theirs), else the
        config file (its jRaftControllerRPCAddr entry)."""
        return self.node.remoting_address(peer) if self.started else self.opts.remoting_addresses.get(peer)

    def _check_serving(self) -> None:
        if not self.started or self.stopping:
            raise UnavailableError("the node is starting or stopping")
        self.require_leader()

    async def submit(self, request: Request) -> Result:
        """One RocketMQ request from any front end: the one door to consensus for requests
        (api/service/requests.py). Answered without consensus when the request says so (`refusal`); a broker
        heartbeat starts the scan guard's clock (`heartbeat_received`); then a read (ReadIndex) or a write,
        its command built with the leader's time (`request.command(now)`, a refused argument a
        CommandArgumentError before anything is proposed)."""
        if request.READ:
            refusal = request.refusal()
            return refusal if refusal is not None else await self.read(checked(request.command))
        return await self.result_of(self.propose(request), request.REQUEST_TYPE)

    def propose(self, request: Request) -> Result | asyncio.Future[Result]:
        """`submit` of a write without the wait: a Result when it is answered without consensus (its refusal,
        an alarm's), else the proposal's future, whose outcome `settled` reads once it is done (a front end may
        wait with a callback instead of a task: the remoting listener's heartbeats). Raises what `submit`
        raises before anything is proposed."""
        refusal = request.refusal()
        if refusal is not None:
            return refusal
        if request.HEARTBEAT:
            self.heartbeat_received()
            if self._batching():
                return self._propose_heartbeat(request)
        return self._propose(checked(request.command), request.REQUEST_TYPE)

    def propose_heartbeat(self, item: list[str | int], done: Callable[[asyncio.Future[Result]], None]) -> bool:
        """A broker heartbeat a front end decoded straight into its checked 1202 item (the remoting listener's
        fast path, api/remoting/headers.heartbeat_item), batched as `propose` batches it; `done(entry)` is called
        with the future of the entry that carried it once that is done (read it with `settled`), in the order the
        heartbeats came, with no future or loop callback of its own per heartbeat. False, and nothing done, when
        heartbeats are not batched now (feature level below 2, an alarm raised): the front end then takes
        `propose` with the typed request. Raises what `propose` raises before anything is queued."""
        if not self._batching():
            return False
        self.heartbeat_received()
        self._check_serving()
        self._queue_heartbeat(item, done)
        return True

    def _batching(self) -> bool:
        """Whether heartbeats are batched now: from feature level 2, and not while an alarm is raised (an alarm
        refuses heartbeats one by one, through `_propose`)."""
        return self.sm.features.level >= HEARTBEATS_LEVEL and not self.sm.alarms.table

    def _propose_heartbeat(self, request: Request) -> asyncio.Future[Result]:
        """A broker heartbeat, added to this loop turn's (one entry for all of them, `_flush_heartbeats`, so
        that the per-entry Raft work on every node is paid once per turn, not once per heartbeat). Its future
        gets the entry's outcome. An alarm refuses heartbeats one by one: then `_propose` takes each."""
        self._check_serving()
        try:
            item = commands.heartbeat_item(command_fields(request))
        except CommandError as e:
            raise CommandArgumentError(str(e), e.field) from e
        fut: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue_heartbeat(item, fut)
        return fut

    def _queue_heartbeat(
        self, item: list[str | int], waiter: asyncio.Future[Result] | Callable[[asyncio.Future[Result]], None]
    ) -> None:
        if not self._beats:
            asyncio.get_running_loop().call_soon(self._flush_heartbeats)
        self._beats.append(item)
        self._beat_waiters.append(waiter)

    def _flush_heartbeats(self) -> None:
        """Propose the heartbeats added since the last flush, at the leader's now: one 1018 for one, one 1202
        for several. Called when the loop turn that added the first of them is done, and before any other
        proposal or read, so that a connection's heartbeat is never ordered after its next request."""
        items, waiters = self._beats, self._beat_waiters
        if not items:
            return
        self._beats, self._beat_waiters = [], []
        try:
            self._check_serving()
            now = self.now_ms()
            entry = self.node.apply(commands.heartbeats(now, items))
        except Exception as e:  # noqa: BLE001  every waiter gets what a lone proposal would have raised
            entry = asyncio.get_running_loop().create_future()
            entry.set_exception(e)
            settle_heartbeats(entry, waiters)
            return
        self._deadlines.watch(entry)
        entry.add_done_callback(functools.partial(settle_heartbeats, waiters=waiters))

    async def write(self, build: Callable[[int], bytes], request_type: str = "") -> Result:
        """Propose `build(leader's now)`; the applied Result. NotLeaderError before proposing on a follower;
        UnavailableError when the commit does not come within the request timeout (outcome unknown)."""
        return await self.result_of(self._propose(build, request_type), request_type)

    async def result_of(self, proposed: Result | asyncio.Future[Result], request_type: str) -> Result:
        """What `propose` gave, waited for: the Result, or the error `settled` raises."""
        if isinstance(proposed, Result):
            return proposed
        with contextlib.suppress(Exception):
            await proposed  # its result or error is read by `settled`; a cancelled wait raises here
        return self.settled(proposed, request_type)

    def _propose(self, build: Callable[[int], bytes], request_type: str) -> Result | asyncio.Future[Result]:
        self._check_serving()
        if self._beats:  # this turn's heartbeats first: each connection's requests commit in the order sent
            self._flush_heartbeats()
        data = build(self.now_ms())
        if self.sm.alarms.table:
            refused = alarms.refusal(self.sm, data)
            if refused is not None:
                for listener in self.listeners:
                    listener(request_type, refused)
                return refused
        try:
            fut = self.node.apply(data)
        except RaftBaseError as e:
            raise self.outcome(e) from None
        self._deadlines.watch(fut)
        return fut

    def settled(self, fut: asyncio.Future[Result], request_type: str) -> Result:
        """The outcome of a done proposal future: its Result (the listeners told), or UnavailableError when
        the commit did not come within the request timeout (outcome unknown), or the Raft error's meaning.
        Raises CancelledError for a cancelled one."""
        try:
            result = fut.result()
        except CommitTimeout:
            raise UnavailableError(f"not committed within {self.opts.request_timeout_s:g}s; outcome unknown") from None
        except RaftBaseError as e:
            raise self.outcome(e) from None
        for listener in self.listeners:
            listener(request_type, result)
        return result

    async def read(self, build: Callable[[int], bytes]) -> Result:
        """Linearizable read: a ReadIndex barrier, then the read command against the applied state."""

        def answer(now: int) -> Result:
            data = build(now)
            code = commands.decode(data).code
            if code not in READ_CODES:
                raise ValueError(f"{C.code_name(code)} is not a read")
            return self.sm.apply(data)

        return await self.read_state(answer)

    async def read_state(self, answer: Callable[[int], Result]) -> Result:
        """Linearizable read of the applied state: a ReadIndex barrier, then `answer(now)` (a read that is no
        RocketMQ command, e.g. every broker set of a cluster, whose names are only known after the barrier)."""
        if self._beats:
            self._flush_heartbeats()
        if self.started and self.corrupt():
            raise UnavailableError(
                "CORRUPT alarm: this member's applied state differs from the group's; it serves no reads until an "
                "operator rebuilds it and disarms the alarm (rmqctl alarm list)"
            )
        if not self.opts.unsafe_local_reads:
            self._check_serving()
        elif not self.started or self.stopping:
            raise UnavailableError("the node is starting or stopping")
        if self.opts.unsafe_local_reads:
            return answer(self.now_ms())  # whatever this replica has applied: possibly stale
        try:
            async with asyncio.timeout(self.opts.request_timeout_s):
                await self.node.read_index()
        except TimeoutError:
            raise UnavailableError(f"read barrier not confirmed within {self.opts.request_timeout_s:g}s") from None
        except RaftBaseError as e:
            raise self.outcome(e, read=True) from None
        return answer(self.now_ms())

    async def broker_sets(self, cluster: str | None) -> Result:
        """Every broker set (or those of `cluster`) as 1006 answers them, a linearizable read."""
        return await self.read_state(lambda now: self.sm.manager.broker_sets(cluster, now))

    def replicated_config(self) -> dict[str, ConfigValue]:
        """The replicated controller config as this node applied it (local, like RocketMQ's 1010)."""
        return self.sm.config_values()

    def outcome(self, e: RaftBaseError, *, read: bool = False, admin: bool = False) -> Exception:
        """What a Raft error from this node means for a request (errors.outcome_of, the one mapping)."""
        return outcome_of(e, self._leader_named, read=read, admin=admin)

    def _leader_named(self, hint: str) -> tuple[str, str | None]:
        lid = hint or self.node.leader_id()
        return lid, self.http_address(lid) if lid else None

    # ------------------------------------------------------------------ views (metrics, logs, the UI)
    # What the rest of api/ may know of the node and the state machine: they ask here, never reach
    # `service.node` or `service.sm` (tests/test_layers.py).

    def log_context(self) -> tuple[Role | str, int, int]:
        """(role, term, applied index) stamped on log records; the role is "starting" before the node runs."""
        core = self.node.core
        if core is None:
            return "starting", 0, self.node.applied_index
        return core.role, core.term, self.node.applied_index

    def cluster_of(self, broker_name: str) -> str | None:
        """The cluster of a broker set the applied state knows, else None."""
        info = self.sm.replicas.sets.get(broker_name)
        return info.cluster_name if info is not None else None

    def broker_set_names(self) -> list[tuple[str, str]]:
        """(cluster, broker set) of every broker set the applied state knows."""
        return [(info.cluster_name, info.broker_name) for info in self.sm.replicas.sets.values()]

    def broker_set_masters(self, now_ms: int) -> list[tuple[str, str, bool]]:
        """(cluster, broker set, whether its master is set and alive at `now_ms`) of every known broker set."""
        out = []
        for name, info in self.sm.replicas.sets.items():
            state = self.sm.sync.sets.get(name)
            master = state.master_broker_id if state is not None else None
            alive = master is not None and self.sm.live.is_alive(info.cluster_name, name, master, now_ms)
            out.append((info.cluster_name, name, alive))
        return out

    def heartbeat_rows(self) -> list[LiveRow]:
        """The applied heartbeat table's rows (statemachine.liveness: cluster, name, id, address, last
        heartbeat, timeout, epoch, max offset, confirm offset, priority). Read only."""
        return list(self.sm.live.table.values())

    def applied_clock_ms(self) -> int:
        """The time of the last applied command (the state machine's clock)."""
        return self.sm.clock_ms

    def broker_set_table(self, now_ms: int) -> JSONObject:
        """1006's replicasInfoTable of every broker set, from the applied state at `now_ms` (no barrier)."""
        table: JSONObject = (self.sm.manager.broker_sets(None, now_ms).body or {}).get("replicasInfoTable") or {}
        return table

    def heartbeat_received(self) -> None:
        """The leader got a broker heartbeat (starts the scan guard's clock)."""
        if self.first_heartbeat_ms is None and self.node.is_leader():
            self.first_heartbeat_ms = self.now_ms()

    # ------------------------------------------------------------------ leader duties

    def _leader_started(self, term: int) -> None:
        self.first_heartbeat_ms = None
        self.leader_since_ms = self.now_ms()
        log.info("leading term %d", term, extra={"term": term})
        self._spawn(self._propose_file_config(), "file-config")

    def _leader_stopped(self, term: int) -> None:
        self.first_heartbeat_ms = None
        self.leader_since_ms = None
        log.info("stopped leading term %d", term, extra={"term": term})

    def _spawn(self, coro: Coroutine[object, object, object], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"{name}-{self.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propose_file_config(self) -> None:
        """Replicate the decision-affecting keys the properties file sets, when the log has never set them
        (a later 1009 through the API wins over the file, on every node)."""
        pending = {k: v for k, v in self.opts.file_config.items() if k not in self.sm.config.explicit}
        if not pending:
            return
        try:
            r = await self.write(
                lambda now: commands.update_controller_config(now, pending), "UPDATE_CONTROLLER_CONFIG"
            )
            log.info("replicated the file's controller config %s: %s", pending, r.code_name)
        except (NotLeaderError, UnavailableError) as e:
            log.warning("could not replicate the file's controller config %s: %s", pending, e)

    def scan_due(self, now: int) -> bool:
        """RocketMQ's guard: only the leader scans, only after it saw a heartbeat and jRaftScanWaitTimeoutMs
        passed since (so a restarted group does not expire every broker before they heartbeat again). And
        only when the scan would change anything with this leader's takeover time as its floor: no broker is
        judged on heartbeats from before it (they went to the old leader, or nowhere)."""
        since = self.leader_since_ms
        if not self.node.is_leader() or self.first_heartbeat_ms is None or since is None:
            return False
        return now - self.first_heartbeat_ms >= self.opts.scan_wait_ms and self.sm.scan_needed(now, min(since, now))

    async def scan_once(self) -> Result | None:
        """One tick of the scan timer: propose 1015 at the leader's now, with its takeover time as
        aliveSinceMillis, when it would change anything. The floor never exceeds the scan's own time (a clock
        stepped back since the takeover): every replica, and the audit's split replay, then honours it.
        Counts the tick in `scan_runs` by its outcome."""
        now = self.now_ms()
        self.scan_last_run_ms = now
        since = self.leader_since_ms
        if since is None or not self.node.is_leader():
            self.scan_runs["not_leader"] += 1
            return None
        if not self.scan_due(now):
            self.scan_runs["nothing_to_do"] += 1
            return None
        self.scans += 1
        try:
            r = await self.write(
                lambda now: commands.check_not_active_broker(now, min(since, now)), "CHECK_NOT_ACTIVE_BROKER"
            )
        except Exception:
            self.scan_runs["failed"] += 1
            raise
        body = r.body or {}
        self.scan_runs["expired" if r.code == C.SUCCESS and body.get("inactiveBrokers") else "no_change"] += 1
        if body.get("inactiveBrokers") or body.get("elections"):
            log.info(
                "inactive-broker scan: expired %s, elections %s", body.get("inactiveBrokers"), body.get("elections")
            )
        return r

    async def _scan_loop(self) -> None:
        await asyncio.sleep(self.opts.first_scan_delay_ms / 1000)
        while True:
            try:
                await self.scan_once()
            except (NotLeaderError, UnavailableError) as e:
                log.debug("scan skipped: %s", e)
            await asyncio.sleep(self.opts.scan_interval_ms / 1000)

    # ------------------------------------------------------------------ alarms

    def corrupt(self) -> bool:
        """Whether the applied alarms say this member's state diverged (CORRUPT raised for it)."""
        return (alarms.CORRUPT, self.id) in self.sm.alarms.table

    def alarms_applied(self) -> None:
        """An ALARM entry was applied (the state machine calls this, on the node's loop): this member's part."""
        if self.started:
            self._alarm_effects()

    def _alarm_effects(self) -> None:
        """CORRUPT raised for this member: it may never be elected, and a leader hands over; disarmed: it may."""
        corrupt = self.corrupt()
        self.node.suspend_candidacy(corrupt)
        if corrupt:
            log.error("CORRUPT: this member's applied state diverged; it will not campaign or serve reads")
            if self.node.is_leader():
                self._spawn(self.hand_over(), "corrupt-hand-over")

    async def checkpoint_hashes(self) -> list[tuple[int, str]]:
        """(index, hash of the applied state right after it) of the last checkpoints, oldest first: every
        checkpoint applied so far, once its hash is ready."""
        sm = self.sm
        if sm.hashing:
            await asyncio.wait([sm.hashing[-1][1]])  # the newest: one thread hashes them in order
        sm.collect()
        return list(sm.checkpoints)

    async def check_corruption(self) -> list[str]:
        """On the leader: compare every member's checkpoint hashes at the newest index most of them have, and
        raise CORRUPT for each member whose hash differs from the majority's. The members raised for."""
        if not self.is_leader() or self.peer_hashes is None:
            return []
        rings: dict[str, dict[int, str]] = {self.id: dict(await self.checkpoint_hashes())}
        st = self.node_status()
        for peer in sorted({*st.voters, *st.learners} - {self.id}):
            got = await self.peer_hashes(peer)
            if got is not None:
                rings[peer] = dict(got)
        for index in sorted(rings[self.id], reverse=True):
            at = {m: ring[index] for m, ring in rings.items() if index in ring}
            if len(at) * 2 <= len(st.voters):
                continue  # too few members have this checkpoint yet: an older one
            (majority, n), *_ = Counter(at.values()).most_common()
            if n * 2 <= len(at):
                log.error("CORRUPT check at index %d: no majority among %s", index, at)
                return []
            if n == len(at):
                log.info("corruption check: %d members agree at index %d (%s)", n, index, majority)
            raised = []
            for member, h in sorted(at.items()):
                if h != majority and (alarms.CORRUPT, member) not in self.sm.alarms.table:
                    why = f"applied state hash {h} at index {index}; {n} of {len(at)} members have {majority}"
                    log.error("CORRUPT: %s: %s", member, why)
                    await self.raise_alarm(alarms.CORRUPT, why, member)
                    raised.append(member)
            return raised
        return []

    async def _corrupt_loop(self) -> None:
        await asyncio.sleep(self.opts.first_scan_delay_ms / 1000)  # once soon after start, then periodically
        while True:
            try:
                await self.check_corruption()
            except (NotLeaderError, UnavailableError) as e:
                log.warning("corruption check: %s", e)
            await asyncio.sleep(self.opts.corrupt_check_interval_ms / 1000)

    def raised_alarms(self, alarm: str) -> list[tuple[str, int, str]]:
        """(member, raisedAtMillis, detail) of every member that raised `alarm`, in the applied state."""
        return self.sm.alarms.raised(alarm)

    def alarm_list(self) -> JSONObject:
        """The raised alarms of this node's applied state (statemachine.alarms.AlarmTable.to_json)."""
        return self.sm.alarms.to_json()

    async def raise_alarm(self, alarm: str, detail: str, member: str | None = None) -> Result:
        """Raise `alarm` for `member` (default: this node): proposed on the leader; a follower asks the leader
        through `alarm_forwarder` (NotLeaderError without one). Alarms need feature level 1: below it the leader
        first raises the level when every member reads it (`controllerFeatureLevelAuto`), else the answer says
        which members hold it back and nothing is proposed."""
        member = member or self.id
        if not self.is_leader() and self.alarm_forwarder is not None and self.started:
            return await self.alarm_forwarder(alarm, member, detail)
        need = features.GATED[C.ALARM]
        if self.sm.features.level < need:
            if not self.opts.feature_level_auto:
                return self._below_level(
                    C.ALARM, need, "controllerFeatureLevelAuto=false: rmqctl raft features upgrade"
                )
            r = await self.raise_feature_level(need)
            if r.code != C.SUCCESS:
                return self._below_level(C.ALARM, need, r.remark or "")
        return await self.write(lambda now: commands.alarm(now, True, alarm, member, detail), "CONTROLLER_ALARM")

    def _below_level(self, code: int, need: int, why: str) -> Result:
        remark = (
            f"{C.REQUEST_NAMES[code]} not proposed: it needs feature level {need} and the group is at "
            f"{self.sm.features.level} ({why})"
        )
        log.warning("%s", remark)
        return Result(C.CONTROLLER_INVALID_REQUEST, remark)

    # ------------------------------------------------------------------ feature level

    async def member_levels(self) -> dict[str, int | None]:
        """The highest feature level each member (voters and learners) reads: this node's MAX_LEVEL, the others'
        through `peer_features` (0: a release without feature levels; None: no answer, or no way to ask)."""
        st = self.node_status()
        out: dict[str, int | None] = {}
        for peer in sorted({*st.voters, *st.learners}):
            if peer == self.id:
                out[peer] = features.MAX_LEVEL
            else:
                out[peer] = await self.peer_features(peer) if self.peer_features is not None else None
        return out

    def feature_status(self) -> JSONObject:
        """This node's part: the group's level as applied here, the highest it reads, and what each level adds."""
        return {
            "nodeId": self.id,
            "level": self.sm.features.level,
            "maxLevel": features.MAX_LEVEL,
            "levels": {str(k): v for k, v in features.LEVELS.items()},
        }

    async def raise_feature_level(self, level: int | None = None, *, highest_readable: bool = False) -> Result:
        """On the leader: raise the group's feature level to `level` (default: the highest this release reads;
        with `highest_readable`, the highest every member that answered reads, nothing when that is no higher),
        once every member answers that it reads it. Refused (CONTROLLER_INVALID_REQUEST, naming the members
        and their levels) when one does not answer or reads less; SUCCESS without a proposal when the group is
        already there. NotLeaderError elsewhere."""
        self.require_leader()
        levels = await self.member_levels()
        current = self.sm.features.level
        if highest_readable:
            known = [v for v in levels.values() if v is not None]
            if not known or min(known) <= current:
                return Result(C.SUCCESS, body={"level": current, "raised": False, "members": levels})
            level = min(known)
        silent = [m for m, v in levels.items() if v is None]
        if silent:
            return Result(C.CONTROLLER_INVALID_REQUEST, f"no feature level from {', '.join(silent)}: not raised")
        readable = min(v for v in levels.values() if v is not None)
        target = features.MAX_LEVEL if level is None else level
        if target > readable:
            below = ", ".join(f"{m} reads {v}" for m, v in levels.items() if v is not None and v < target)
            return Result(C.CONTROLLER_INVALID_REQUEST, f"feature level {target} not raised: {below}")
        if target <= current:
            return Result(C.SUCCESS, body={"level": current, "raised": False, "members": levels})
        r = await self.write(lambda now: commands.feature_level(now, target), "CONTROLLER_FEATURE_LEVEL")
        if r.code == C.SUCCESS:
            log.info("feature level raised from %d to %d (members: %s)", current, target, levels)
            r = Result(C.SUCCESS, body={"level": self.sm.features.level, "raised": True, "members": levels})
        return r

    async def _loop_lag_probe(self) -> None:
        """Observe, every LOOP_PROBE_S, how much later than asked the loop woke this task (`loop_lag`)."""
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(LOOP_PROBE_S)
            self.loop_lag.observe(max(0.0, loop.time() - t0 - LOOP_PROBE_S))

    async def _feature_loop(self) -> None:
        await asyncio.sleep(self.opts.first_scan_delay_ms / 1000)  # once soon after start, then periodically
        while True:
            if self.opts.feature_level_auto and self.is_leader() and self.sm.features.level < features.MAX_LEVEL:
                try:
                    r = await self.raise_feature_level(highest_readable=True)
                    if r.code != C.SUCCESS:
                        log.info("feature level stays %d: %s", self.sm.features.level, r.remark)
                except (NotLeaderError, UnavailableError) as e:
                    log.debug("feature level check: %s", e)
            await asyncio.sleep(self.opts.feature_check_interval_ms / 1000)

    async def disarm_alarm(self, alarm: str = "") -> Result:
        """Disarm `alarm` on every member ("": every alarm). On the leader (else NotLeaderError)."""
        return await self.write(lambda now: commands.alarm(now, False, alarm, ""), "CONTROLLER_ALARM")

    async def check_store(self) -> str | None:
        """One NOSPACE check of this node's store (module api.service.alarms): raises the alarm when the store
        is past its limits and the applied state does not have it yet; the reason, None when within limits."""
        o = self.opts
        reason = alarms.nospace_reason(o.node.data_dir, o.store_quota_bytes, o.alarm_free_disk_mb << 20)
        if reason is None:
            self.alarm_checks["ok"] += 1
            return None
        self.alarm_checks["nospace"] += 1
        if (alarms.NOSPACE, self.id) not in self.sm.alarms.table:
            log.warning("NOSPACE: %s; raising the alarm", reason)
            r = await self.raise_alarm(alarms.NOSPACE, reason)
            if r.code != C.SUCCESS:
                self.alarm_checks["failed"] += 1
                log.warning("NOSPACE: raising the alarm failed: %s %s", r.code_name, r.remark)
        return reason

    async def _alarm_loop(self) -> None:
        while True:
            await asyncio.sleep(self.opts.alarm_check_interval_ms / 1000)
            try:
                await self.check_store()
            except (NotLeaderError, UnavailableError, OSError) as e:
                self.alarm_checks["failed"] += 1
                log.warning("alarm check: %s", e)

    # ------------------------------------------------------------------ status

    def configured_peers(self) -> list[str]:
        """The raft ids this node was configured with (jRaftInitConf), in their order."""
        return list(self.opts.node.peers)

    def node_name(self, peer: str) -> str | None:
        """How `controllerd local-cluster` names a node: n1, n2, ... by its position in jRaftInitConf (the
        configured peers, in order); None for a member this node was not configured with (added later). An id
        that is no host:port (an embedder's own name) is its own name."""
        if ":" not in peer:
            return peer
        peers = self.configured_peers()
        return f"n{peers.index(peer) + 1}" if peer in peers else None

    def display_name(self, peer: str) -> str:
        return self.node_name(peer) or peer

    def node_names(self) -> dict[str, str]:
        """id -> name of every configured peer and member that has one."""
        ids = {*self.configured_peers(), *(self.node_status().voters if self.started else ())}
        return {p: n for p in sorted(ids) if (n := self.node_name(p)) is not None}

    def _raft_changed(self) -> None:
        """Node.change_listeners: the known leader changed or a membership entry was applied."""
        try:
            st = self.node.status()
            if st.leader and st.leader != self._last_leader:
                self.leader_changes += 1
            self._last_leader = st.leader or ""
            self.history.on_raft(st.leader, st.term, tuple(st.voters), tuple(st.learners))
        except Exception:  # noqa: BLE001 - the history must never stop the node
            log.exception("event history: recording a raft change failed")

    def tick_ms(self) -> float:
        return self.opts.node.raft.tick()

    def node_status(self) -> NodeStatus:
        """The Raft node's status (raft.node.Node.status)."""
        return self.node.status()

    def peers(self, st: NodeStatus | None = None) -> list[Peer]:
        """Every member (voters and learners, ascending by id) as this node sees them in `st` (default: now):
        role, addresses, and on the leader its replication progress and last contact."""
        st = st or self.node.status()
        tick = self.tick_ms()
        rows = []
        for p in sorted({*st.voters, *st.learners}):
            pr = st.progress.get(p)
            role = Role.LEADER if p == st.leader else (Role.LEARNER if p in st.learners else Role.FOLLOWER)
            contact = None if pr is None or pr.contact_ticks < 0 else round(pr.contact_ticks * tick)
            addrs = st.addresses[p]
            rows.append(Peer(p, role, p in st.voters, addrs.raft, addrs.http, self.remoting_address(p), pr, contact))
        return rows

    def metadata(self, remoting: bool = False) -> JSONObject:
        """1005 CONTROLLER_GET_METADATA_INFO header, as JRaftController answers it (local, no consensus). The
        addresses are the HTTP ones, or with `remoting` the jRaftControllerRPCAddr ones a broker connects to."""
        lid, laddr = self.leader()
        st = self.node.status()
        if remoting:
            laddr = self.remoting_address(lid) if lid else None
            peers = [self.remoting_address(p) or p for p in st.voters]
        else:
            peers = [st.addresses[p].http or p for p in st.voters]
        return {
            "group": self.opts.group_id,
            "controllerLeaderId": lid or None,
            "controllerLeaderAddress": laddr,
            "isLeader": self.node.is_leader(),
            "peers": "".join(f"{a};" for a in peers),
        }

    def readiness(self) -> list[tuple[str, bool, str]]:
        """(check, ok, detail) for /readyz, etcd-style."""
        if not self.started:
            return [("started", False, "the node has not started")]
        st = self.node.status()
        lag = st.commit - st.applied
        checks = [
            ("started", not self.stopping, "stopping" if self.stopping else "ok"),
            ("snapshot_loaded", True, f"snapshot {st.snapshot.index}"),
            ("log_replayed", st.applied >= min(st.commit, st.snapshot.index), f"applied {st.applied}"),
            ("leader_known", bool(st.leader), f"leader {st.leader or 'unknown'}"),
            ("apply_caught_up", lag <= self.opts.ready_apply_lag, f"{lag} entries behind commit"),
            ("no_error", st.error is None, st.error or "ok"),
        ]
        return checks


def settle_heartbeats(
    entry: asyncio.Future[Result], waiters: list[asyncio.Future[Result] | Callable[[asyncio.Future[Result]], None]]
) -> None:
    """The done entry of a turn's heartbeats, handed to each waiter in turn: its outcome set on a future (one
    cancelled by its waiter stays so), or a callback called with the entry. A callback that raises is a bug in
    its front end: logged, and the heartbeats after it are still answered."""
    cancelled = entry.cancelled()
    error = None if cancelled else entry.exception()
    for w in waiters:
        if not isinstance(w, asyncio.Future):
            try:
                w(entry)
            except Exception:  # noqa: BLE001
                log.exception("a heartbeat's front end failed on its entry's outcome")
            continue
        if w.done():
            continue
        if cancelled:
            w.cancel()
        elif error is not None:
            w.set_exception(error)
        else:
            w.set_result(entry.result())

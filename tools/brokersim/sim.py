"""Simulated RocketMQ 5 broker replica groups in controller mode (ReplicasManager + AutoSwitchHAService).

Each `SimBroker` runs, on one asyncio loop, what a controller-mode broker does against the controller:
- registration (three steps, identity persisted: cli.rmqctl.brokerproto), then a heartbeat every
  `heartbeat_interval_s` with its epoch and max offset;
- every `sync_metadata_period_s`: replica-info; no master: elect itself (broker trigger); a higher
  masterEpoch naming it: it becomes master (a new epoch entry at its log's end); naming another: it becomes
  a slave, and truncates its log to the consistent point with the new master before copying (RIP-44);
- as the master, every `check_sync_state_set_period_s`: drop from the SyncStateSet a slave that has not
  caught up for `ha_max_time_slave_not_catchup_ms`, add one whose ack reached the confirm offset
  (alter-sync-state-set). While a change is in flight acks wait for the old and the new set together.

Replication is in-process: a slave copies its master's log (offsets and epoch entries) every `ha_interval_s`.
A producer per group writes to the master; with `all_ack_in_sync_state_set` a write is acknowledged once
every member of the SyncStateSet has it (the confirm offset). `BrokerGroup.lost()` lists the acknowledged
writes the current master does not hold: the failover tests assert it is empty.

Faults: `kill()` (tasks cancelled; the log and identity stay, as on disk; `start()` again restarts it),
`pause()`/`resume()` (no heartbeat, no replication, no writes), `lag(True)` (a slave stops copying).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from cli.rmqctl import Failed
from cli.rmqctl import brokerproto as proto
from cli.rmqctl.client import Reply
from statemachine import codes as C
from tools.brokersim.client import AsyncControllerClient, LeaderFollowingClient, RemotingControllerClient
from tools.brokersim.store import CommitLog, Identity, consistent_offset, load_identity, save_identity


@dataclass
class SimConfig:
    cluster: str = "DefaultCluster"
    heartbeat_interval_s: float = 1.0  # brokerHeartbeatInterval
    heartbeat_timeout_ms: int = 10_000  # controllerHeartBeatTimeoutMills
    sync_metadata_period_s: float = 1.0  # syncBrokerMetadataPeriod (RocketMQ: 5 s)
    check_sync_state_set_period_s: float = 1.0  # checkSyncStateSetPeriod (RocketMQ: 5 s)
    ha_max_time_slave_not_catchup_ms: int = 15_000  # haMaxTimeSlaveNotCatchup
    ha_interval_s: float = 0.1
    produce_interval_s: float = 0.1
    message_bytes: int = 1024
    all_ack_in_sync_state_set: bool = True  # allAckInSyncStateSet
    request_timeout_s: float = 2.0
    ack_timeout_s: float = 3.0  # a write not acknowledged by then failed (the producer's send timeout)


REGISTER_TRIES = 5  # ReplicasManager.startBasicService: register() up to 5 times in a row


def now_ms() -> float:
    return time.monotonic() * 1000


@dataclass
class Write:
    start: int
    end: int
    epoch: int
    broker: SimBroker
    sent_ms: float


class SimBroker:
    def __init__(self, group: BrokerGroup, address: str, directory: str | None) -> None:
        self.group, self.sim = group, group.sim
        self.cfg = group.sim.cfg
        self.name, self.address, self.dir = group.name, address, directory
        self.id: int | None = None
        self.log = CommitLog.load(os.path.join(directory, "epochs")) if directory else CommitLog()
        self.state = "stopped"  # running | paused | killed | stopped
        self.lagging = False
        self.beats = 0  # heartbeats the controller answered with SUCCESS (never reset: the summary counts them)
        self._tasks: list[asyncio.Task[None]] = []
        self._reset()

    def _reset(self) -> None:
        """What a broker knows only in memory: gone when it is killed."""
        self.role = "none"  # master | slave | none
        self.master_id: int | None = None
        self.master_epoch = 0
        self.sync_set: list[int] = []
        self.sync_set_epoch = 0
        self.ack_set: set[int] = set()
        self.slave_acked: dict[int, int] = {}
        self.caught_up_ms: dict[int, float] = {}
        self.following: tuple[int, int] | None = None
        self._last_elect_code: int | None = None

    def __repr__(self) -> str:
        return f"{self.name}/{self.id}"

    def say(self, event: str, message: str, **fields: Any) -> None:
        self.sim.emit(
            {
                "event": event,
                "brokerName": self.name,
                "brokerId": self.id,
                "address": self.address,
                "message": message,
                **fields,
            }
        )

    # ------------------------------------------------------------------ lifecycle and faults

    def start(self) -> None:
        self._reset()
        self.state = "running"
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._control_loop(), name=f"control-{self.address}"),
            loop.create_task(self._ha_loop(), name=f"ha-{self.address}"),
        ]

    def kill(self) -> None:
        for t in self._tasks:
            t.cancel()
        self._tasks = []
        was = self.role
        self._reset()
        self.state = "killed"
        self.say("killed", f"killed (was {was}); its log ends at {self.log.end}")

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self.state = "stopped"
        self.log.save()  # a master's own writes are not saved one by one: its end, for the next start

    def pause(self) -> None:
        self.state = "paused"
        self.say("paused", "paused: no heartbeat, no replication, no writes")

    def resume(self) -> None:
        self.state = "running"
        self.say("resumed", "resumed")

    def lag(self, on: bool) -> None:
        self.lagging = on
        self.say("lag", "stops copying from its master" if on else "copies from its master again")

    @property
    def serving(self) -> bool:
        return self.state == "running"

    # ------------------------------------------------------------------ the controller loop

    async def send(self, step: proto.Step) -> Reply | None:
        return await self.sim.client.send(step)

    async def _control_loop(self) -> None:
        # Brokers start at different times: a random phase spreads many brokers' periods over the interval.
        await asyncio.sleep(random.uniform(0, self.cfg.heartbeat_interval_s))
        while not await self._register():
            await asyncio.sleep(self.cfg.sync_metadata_period_s)
        next_sync = next_check = 0.0
        while True:
            if self.serving:
                await self._heartbeat()
                now = time.monotonic()
                if now >= next_sync:
                    next_sync = now + self.cfg.sync_metadata_period_s
                    await self._sync_metadata()
                if self.role == "master" and now >= next_check:
                    next_check = now + self.cfg.check_sync_state_set_period_s
                    await self._check_sync_state_set()
            await asyncio.sleep(self.cfg.heartbeat_interval_s)

    def _identity_path(self) -> str | None:
        return os.path.join(self.dir, "identity") if self.dir else None

    async def _register(self) -> bool:
        """RocketMQ's ReplicasManager.register(), tried up to REGISTER_TRIES times in a row as its
        startBasicService does, then again every period. Brokers of a set that start together ask
        next-broker-id before any of them applied its answer, so they are told the same id: the first to
        apply it gets it, the others are answered 2014 CONTROLLER_BROKER_ID_INVALID. That is an expected race,
        not a failure: as RocketMQ does, the broker deletes its temp id file and starts over at once with
        next-broker-id (which now skips the taken id), said only at debug level. A 2014 for an id it had
        already applied (its identity file says applied=true: another broker holds its id) is a conflict, and
        said as a refusal like every other failure."""
        path = self._identity_path()
        for attempt in range(1, REGISTER_TRIES + 1):
            ident = load_identity(path) if path else None
            if ident is None and self.id is not None:  # not persisted (no data dir): kept in memory
                ident = Identity(self.id, proto.check_code(self.address, int(time.time() * 1000)), True)
            fresh = ident is None or not ident.applied  # an id from next-broker-id or the temp file, not its own yet
            code = ident.check_code if ident else proto.check_code(self.address, int(time.time() * 1000))
            steps = proto.registration(
                self.cfg.cluster,
                self.name,
                self.address,
                ident.broker_id if ident else None,
                code,
                applied=ident.applied if ident else True,
            )
            applying: list[int] = []  # the id of the apply-broker-id sent, if any

            async def post(
                step_path: str, body: dict[str, Any], code: str = code, applying: list[int] = applying
            ) -> Reply:
                if step_path == "apply-broker-id":
                    applying.append(body["appliedBrokerId"])
                    if path:  # RocketMQ's temp file: the id it is about to apply
                        save_identity(path, Identity(body["appliedBrokerId"], code, False))
                reply = await self.send((step_path, body))
                if reply is None:
                    raise Failed(f"{step_path}: no controller served it ({self.sim.client.last_problem})")
                return reply

            try:
                self.id, reply = await proto.arun_steps(steps, post)
            except Failed as e:
                pending = load_identity(path) if path else None
                if pending is not None and not pending.applied:
                    os.unlink(path)  # type: ignore[arg-type]  # the id it tried is taken: start again from next-broker-id
                if fresh and applying and e.code == C.CONTROLLER_BROKER_ID_INVALID and attempt < REGISTER_TRIES:
                    self.say(
                        "id-taken",
                        f"id {applying[-1]} went to another broker of {self.name} first (they asked next-broker-id "
                        "at the same time; 2014 CONTROLLER_BROKER_ID_INVALID): starts over with next-broker-id",
                        level="debug",
                        code=e.code,
                    )
                    continue
                self.say("refused", f"registration failed: {e}; tries again in {self.cfg.sync_metadata_period_s:g}s")
                return False
            if path:
                save_identity(path, Identity(self.id, code, True))
            master = reply.header.get("masterBrokerId")
            self.say("registered", f"registered as id {self.id} (master: {master if master is not None else 'none'})")
            await self._heartbeat()
            return True
        return False  # not reached: the last attempt returns above

    async def _heartbeat(self) -> None:
        reply = await self.send(
            proto.heartbeat(
                self.cfg.cluster,
                self.name,
                self.address,
                self.id,
                self.cfg.heartbeat_timeout_ms,
                epoch=max(self.log.last_epoch, 0),
                max_offset=self.log.end,
                confirm_offset=self.confirm_offset() if self.role == "master" else None,
            )
        )
        if reply is not None and reply.ok:
            self.beats += 1

    async def _sync_metadata(self) -> None:
        info = await self.send(proto.replica_info(self.name))
        if info is None:
            return
        if info.code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            await self._register()
            return
        if not info.ok:
            return
        master, epoch, sync_set, set_epoch = proto.master_of(info)
        if master is None:
            r = await self.send(proto.elect_self(self.cfg.cluster, self.name, self.id))
            if r is not None:
                if r.code != self._last_elect_code:  # a refusal that repeats every period is said once
                    self.say("elect", self._elect_outcome(r, sync_set), code=r.code)
                self._last_elect_code = r.code
                if r.ok:
                    await self._sync_metadata()
            return
        if epoch > self.master_epoch:
            if master == self.id:
                self._change_to_master(epoch, sync_set, set_epoch)
            else:
                self._change_to_slave(master, epoch)
        elif self.role == "master" and set_epoch is not None and set_epoch > self.sync_set_epoch:
            self.sync_set, self.sync_set_epoch, self.ack_set = sync_set, set_epoch, set(sync_set)

    def _elect_outcome(self, r: Reply, sync_set: list[int]) -> str:
        """The line an elect-master answer is said with. The two refusals a broker meets in normal operation
        are information, not failures, and read so:
        - 2012 CONTROLLER_ELECT_MASTER_FAILED: the controller elects only from the SyncStateSet (its members
          hold every acknowledged write; unclean election is off) and counts none of them alive. After a
          restart of the whole demo this is the usual case: stopping the brokers closed their connections,
          the controller took each close for a dead broker (RocketMQ's onChannelClose) and moved mastership
          to the last one left, so the SyncStateSet is that one broker until it heartbeats again; a member's
          own elect-master can also arrive before its first heartbeat was applied (a real broker's heartbeat
          is oneway). The broker asks again every period, as RocketMQ's retries its start every 5 s;
        - 2011 CONTROLLER_MASTER_STILL_EXIST: another broker of the set was elected in between."""
        period = f"{self.cfg.sync_metadata_period_s:g}s"
        if r.code == C.CONTROLLER_ELECT_MASTER_FAILED:
            members = sorted(sync_set)
            if self.id in members:
                return (
                    f"no master yet: the controller counts no member of the SyncStateSet {members} alive yet "
                    f"(its heartbeats are not in yet); asks again every {period} (2012 {r.code_name})"
                )
            return (
                f"no master yet: only a member of the SyncStateSet {members} may be elected and none of it "
                f"heartbeats yet; asks again every {period} (2012 {r.code_name})"
            )
        if r.code == C.CONTROLLER_MASTER_STILL_EXIST:
            return f"master {r.header.get('masterBrokerId')} was elected meanwhile (2011 {r.code_name})"
        return f"elect-master {self.id}: {r.code} {r.code_name}"

    def _change_to_master(self, epoch: int, sync_set: list[int], set_epoch: int) -> None:
        self.role, self.master_id, self.master_epoch = "master", self.id, epoch
        self.sync_set, self.sync_set_epoch, self.ack_set = sync_set, set_epoch, set(sync_set)
        self.slave_acked, self.following = {}, None
        self.caught_up_ms = {b: now_ms() for b in sync_set}
        self.log.begin_epoch(epoch)
        self.say(
            "role",
            f"master at epoch {epoch}, log end {self.log.end}, SyncStateSet {sorted(sync_set)}",
            role="master",
            masterEpoch=epoch,
        )

    def _change_to_slave(self, master: int, epoch: int) -> None:
        self.role, self.master_id, self.master_epoch = "slave", master, epoch
        self.following = None  # truncate against the new master before copying
        self.say("role", f"slave of {master} at epoch {epoch}", role="slave", masterEpoch=epoch)

    # ------------------------------------------------------------------ the master's side of HA

    def confirm_offset(self) -> int:
        """What every member of the (possibly changing) SyncStateSet has: the acknowledged end."""
        if not self.cfg.all_ack_in_sync_state_set:
            return self.log.end
        acked = [self.log.end] + [self.slave_acked.get(b, 0) for b in self.ack_set if b != self.id]
        return min(acked)

    def on_slave_ack(self, broker_id: int, offset: int) -> None:
        """A slave's ack: caught up when it has all the master has (checked for the shrink). One outside the
        SyncStateSet whose ack reached the confirm offset (it has every acknowledged write) joins the set the
        acks wait for at once, before the controller is asked (RocketMQ's maybeExpandInSyncStateSet): from
        then on no write is acknowledged without it, so the controller may count it in sync."""
        self.slave_acked[broker_id] = offset
        if offset >= self.log.end:
            self.caught_up_ms[broker_id] = now_ms()
        if broker_id not in self.ack_set and offset >= self.confirm_offset():
            self.ack_set.add(broker_id)

    async def _check_sync_state_set(self) -> None:
        assert self.id is not None  # only a registered master checks its set
        now = now_ms()
        current = set(self.sync_set)
        wanted = {self.id} | {
            b for b in current if now - self.caught_up_ms.get(b, -1e18) <= self.cfg.ha_max_time_slave_not_catchup_ms
        }
        wanted |= {
            b
            for b in self.ack_set - current
            if now - self.caught_up_ms.get(b, -1e18) <= self.cfg.ha_max_time_slave_not_catchup_ms
        }
        if wanted == current:
            return
        self.ack_set |= wanted  # acks wait for both sets until the controller answered
        new = sorted(b for b in wanted if b is not None)
        r = await self.send(proto.alter_sync_state_set(self.name, self.id, self.master_epoch, new, self.sync_set_epoch))
        if r is None:
            return  # outcome unknown: keep waiting for both; replica-info tells later
        if r.ok:
            self.sync_set, self.sync_set_epoch = new, r.header.get("newSyncStateSetEpoch", self.sync_set_epoch + 1)
            self.ack_set = set(new)
        else:
            self.ack_set = current
        self.say(
            "sync-state-set",
            f"SyncStateSet {sorted(current)} -> {new}: {r.code} {r.code_name}",
            code=r.code,
            syncStateSet=new,
        )

    # ------------------------------------------------------------------ the slave's side of HA

    async def _ha_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.ha_interval_s)
            if self.serving and self.role == "slave" and not self.lagging:
                self._replicate()

    def _replicate(self) -> None:
        m = self.group.by_id(self.master_id)
        if m is None or not m.serving or m.role != "master" or m.master_epoch != self.master_epoch:
            return  # no connection to the master it was told of (dead, paused, or not master yet)
        if self.following != (self.master_id, self.master_epoch):
            point = consistent_offset(self.log, m.log)
            if point < self.log.end:
                self.say(
                    "truncate",
                    f"truncated its log from {self.log.end} to {point} (RIP-44 consistent point "
                    f"with master {m.id} at epoch {self.master_epoch})",
                    fromOffset=self.log.end,
                    toOffset=point,
                )
                self.log.truncate(point)
            self.following = (self.master_id, self.master_epoch)  # type: ignore[assignment]
        self.log.copy_from(m.log, m.log.end)
        assert self.id is not None
        m.on_slave_ack(self.id, self.log.end)


class BrokerGroup:
    """One broker set (brokerName): its replicas and the producer writing to its master."""

    def __init__(self, sim: Simulator, name: str, addresses: list[str], data: str | None) -> None:
        self.sim, self.name = sim, name
        self.brokers: list[SimBroker] = []
        for a in addresses:
            d = os.path.join(data, name, a.replace(":", "_")) if data else None
            if d:
                os.makedirs(d, exist_ok=True)
            self.brokers.append(SimBroker(self, a, d))
        self.acked: list[tuple[int, int, int]] = []  # (start, end, epoch) of every acknowledged write
        self.failed_writes = 0
        self._pending: deque[Write] = deque()
        self._task: asyncio.Task[None] | None = None

    def by_id(self, broker_id: int | None) -> SimBroker | None:
        return next((b for b in self.brokers if b.id == broker_id and broker_id is not None), None)

    def master(self) -> SimBroker | None:
        """The serving broker that believes it is master at the highest epoch (where a producer writes)."""
        masters = [b for b in self.brokers if b.serving and b.role == "master"]
        return max(masters, key=lambda b: b.master_epoch, default=None)

    def start(self) -> None:
        for b in self.brokers:
            b.start()
        self._task = asyncio.get_running_loop().create_task(self._produce(), name=f"producer-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for b in self.brokers:
            await b.stop()

    async def _produce(self) -> None:
        while True:
            await asyncio.sleep(self.sim.cfg.produce_interval_s)
            self.produce_one()

    def produce_one(self) -> Write | None:
        """The producer's send: one write to the master, if there is one that has begun its epoch (then
        acknowledged at once when the confirm offset allows it, else later by `_settle`)."""
        self._settle()
        m = self.master()
        if m is None or not m.log.epochs or m.log.last_epoch != m.master_epoch:
            return None
        start, end = m.log.append(self.sim.cfg.message_bytes)
        w = Write(start, end, m.master_epoch, m, now_ms())
        self._pending.append(w)
        self._settle()
        return w

    def _settle(self) -> None:
        """Acknowledge the writes whose master's confirm offset passed them; fail those that timed out."""
        keep: deque[Write] = deque()
        for w in self._pending:
            b = w.broker
            intact = b.log.epoch_at(w.start) == w.epoch and b.log.end >= w.end
            if (
                intact
                and b.serving
                and b.role == "master"
                and b.master_epoch == w.epoch
                and b.confirm_offset() >= w.end
            ):
                self.acked.append((w.start, w.end, w.epoch))
            elif not intact or now_ms() - w.sent_ms > self.sim.cfg.ack_timeout_s * 1000:
                self.failed_writes += 1
            else:
                keep.append(w)
        self._pending = keep

    def acked_end(self) -> int:
        return max((e for _, e, _ in self.acked), default=0)

    def lost(self, holder: SimBroker | None = None) -> list[tuple[int, int, int]]:
        """Acknowledged writes that `holder` (default: the current master) does not have."""
        holder = holder or self.master()
        if holder is None:
            return list(self.acked)
        log = holder.log
        return [
            (s, e, ep) for s, e, ep in self.acked if log.end < e or log.epoch_at(s) != ep or log.epoch_at(e - 1) != ep
        ]


@dataclass
class Simulator:
    """`groups` broker sets of `replicas` brokers each, named broker-a, broker-b, ..., at 127.0.0.1 ports
    base_port + 10 * group + replica (nothing listens there: the address is what they register)."""

    addresses: list[str]
    groups: int = 2
    replicas: int = 3
    cfg: SimConfig = field(default_factory=SimConfig)
    data: str | None = None
    base_port: int = 10911
    token: str | None = None
    on_event: Callable[[dict[str, Any]], None] | None = None
    transport: httpx.AsyncBaseTransport | None = None  # tests: an in-process controller (httpx.ASGITransport)
    remoting: bool = False  # the addresses are jRaftControllerRPCAddr entries: speak RocketMQ remoting

    def __post_init__(self) -> None:
        self.client: LeaderFollowingClient
        if self.remoting:
            self.client = RemotingControllerClient(self.addresses, self.cfg.request_timeout_s)
        else:
            self.client = AsyncControllerClient(
                self.addresses,
                self.cfg.request_timeout_s,
                self.token,
                max_connections=min(256, 8 + 2 * self.groups * self.replicas),
                transport=self.transport,
            )
        self.sets: dict[str, BrokerGroup] = {}
        for g in range(self.groups):
            name = f"broker-{_letters(g)}"
            addrs = [f"127.0.0.1:{self.base_port + 10 * g + i}" for i in range(self.replicas)]
            self.sets[name] = BrokerGroup(self, name, addrs, self.data)
        self.events: deque[dict[str, Any]] = deque(maxlen=10_000)

    def emit(self, event: dict[str, Any]) -> None:
        event = {"t": time.time(), **event}
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def beats(self) -> dict[str, int]:
        """{address: heartbeats answered so far} of every broker."""
        return {b.address: b.beats for g in self.sets.values() for b in g.brokers}

    def summary(self, beats_before: dict[str, int], window_s: float) -> str:
        """One line on every set: how many brokers had a heartbeat answered since `beats_before` (an earlier
        `beats()`), the masters, the acknowledged writes and how many of them the current masters lack."""
        now = self.beats()
        beating = sum(1 for a, n in now.items() if n > beats_before.get(a, 0))
        answered = sum(n - beats_before.get(a, 0) for a, n in now.items())
        masters = {name: g.master() for name, g in self.sets.items()}
        if len(masters) <= 4:
            who = ", ".join(
                f"{name} master {m.id} (epoch {m.master_epoch})" if m else f"{name} no master"
                for name, m in masters.items()
            )
        else:
            who = f"{sum(m is not None for m in masters.values())} of {len(masters)} sets have a master"
        acked = sum(len(g.acked) for g in self.sets.values())
        lost = sum(len(g.lost(m)) for name, g in self.sets.items() if (m := masters[name]) is not None)
        return (
            f"heartbeats: {beating} of {len(now)} brokers answered in the last {window_s:.0f}s ({answered} heartbeats); "
            f"{who}; {acked} writes acknowledged, {lost} lost"
        )

    async def start(self) -> None:
        for g in self.sets.values():
            g.start()

    async def stop(self) -> None:
        for g in self.sets.values():
            await g.stop()
        await self.client.aclose()


def _letters(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa: RocketMQ's broker-a, broker-b naming."""
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(ord("a") + r) + out
    return out


class SimThread:
    """A Simulator on its own event loop in a daemon thread, for synchronous callers (tests, the CLI's chaos).
    `call(fn)` runs `fn(sim)` on the loop and returns its result."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="brokersim", daemon=True)

    def start(self) -> SimThread:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.sim.start(), self.loop).result(10)
        return self

    def call(self, fn: Callable[[Simulator], Any]) -> Any:
        async def run() -> Any:
            return fn(self.sim)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.sim.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

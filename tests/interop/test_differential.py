"""Differential against RocketMQ's own controller (issue 24 item 6, docs/interop.md).

One scripted broker scenario, run once against RocketMQ's 3-node JRaftController (the jars of `make rocketmq`)
and once against our 3-node group, both started by this module and driven at the same time. Three simulated
brokers of one set speak RocketMQ remoting exactly as a broker in controller mode does (JSON headers, one
connection per controller address): they find the leader with 1005, register with 1012/1013/1003, send 904
oneway to every controller address every second, ask 1002 to be elected, report their SyncStateSet with 1001,
poll 1004; an operator asks 1006 and cleans with 1011. Each broker also listens on its registered address, so
the NOTIFY_BROKER_ROLE_CHANGED (1008) frames a controller pushes after an election are recorded too.

The scenario: register three brokers (ids, the first one elected, a second ELECT answered 2011 with the same
master), expand and shrink the SyncStateSet (and two fenced 1001s), kill the master (its heartbeats stop and
its connections close, as a dead broker's channels do: re-election through the close-channel path), let the
new master report its SyncStateSet, restart the old master (it registers again with its id and is a slave),
freeze the new master (heartbeats stop, connections stay open: re-election through the heartbeat timeout
and the inactive-broker scan, both groups configured with the same `scanNotActiveBrokerInterval` and the
brokers sending the same `heartbeatTimeoutMills`), then clean metadata with 1011 (a living broker, the whole
living set, the dead broker) and a few error probes. Three more sets, each registered as brokers do, show
the documented deviations that need no liveness: 1011 with the ids ";", 1011 with isCleanLivingBroker and an
id list, 1012 after an out-of-sequence 1013, and a first 1002 naming an unregistered id.

At every step both answers are recorded whole (code, remark, every header field, the body) with broker and
controller addresses replaced by names, and then compared: each step is one test. Where the answers differ
on purpose, DEVIATIONS names the documented deviation; a difference reported but not yet decided is in
FINDINGS (its test is an expected failure); every other difference fails. The side-by-side table
(docs/interop.md) is written to `differential.md` in the module's tmp dir, beside `differential.json` (every
answer in full, with the body text as sent), and the path is printed; `DIFFERENTIAL_TABLE=path.md` writes both
there as well (pytest keeps only its last three tmp dirs).

Waiting never sleeps: conditions (a leader, a broker seen alive in 1006, a new master in 1004, a 1008 frame)
are polled with a deadline. The only timed thing is the brokers' own heartbeat period."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from api.remoting import codec
from api.remoting import headers as H
from api.remoting.client import RemotingClient
from api.remoting.codec import FrameDecoder, RemotingCommand, loads_fastjson
from cli import rocketmq
from cli.rocketmq import Deployment
from statemachine import codes as C
from tools.cluster import ControllerdCluster

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.xdist_group("interop")]

CLUSTER = "DiffCluster"
SET = "diff-a"
HB_INTERVAL_S = 1.0  # the brokers' brokerHeartbeatInterval (RocketMQ's default)
HB_TIMEOUT_MS = 4000  # the heartbeatTimeoutMills every heartbeat carries
SCAN_MS = 1000  # scanNotActiveBrokerInterval of both groups
NOTIFY_BROKER_ROLE_CHANGED = 1008  # controller -> broker, oneway
POLL_S = 0.1
T = TypeVar("T")

# The steps, in order: (key, what is asked). Each is one test.
STEPS: tuple[tuple[str, str], ...] = (
    ("metadata-leader", "1005 to the leader"),
    ("metadata-follower", "1005 to a follower"),
    ("b1-next-id", "b1: 1012 GET_NEXT_BROKER_ID"),
    ("b1-apply-id", "b1: 1013 APPLY_BROKER_ID 1"),
    ("b1-register", "b1: 1003 REGISTER_BROKER 1"),
    ("b1-elect", "b1: 1002 ELECT_MASTER (itself)"),
    ("notify-b1-elected", "1008 pushed after b1's election"),
    ("b2-next-id", "b2: 1012"),
    ("b2-apply-id", "b2: 1013 APPLY_BROKER_ID 2"),
    ("b2-register", "b2: 1003 REGISTER_BROKER 2"),
    ("b2-elect", "b2: 1002 ELECT_MASTER (itself) while 1 is master"),
    ("b3-next-id", "b3: 1012"),
    ("b3-apply-id", "b3: 1013 APPLY_BROKER_ID 3"),
    ("b3-register", "b3: 1003 REGISTER_BROKER 3"),
    ("replica-info-registered", "1004 GET_REPLICA_INFO"),
    ("sync-state-registered", "1006 GET_SYNC_STATE_DATA"),
    ("alter-expand", "b1: 1001 [1,2,3] at SyncStateSet epoch 1"),
    ("alter-fenced-epoch", "b1: 1001 [1,2] at the stale SyncStateSet epoch 1"),
    ("alter-not-master", "b2: 1001 [1,2] claiming to be master"),
    ("alter-equal", "b1: 1001 [1,2,3] again (no change)"),
    ("alter-shrink", "b1: 1001 [1,2] at SyncStateSet epoch 2"),
    ("sync-state-altered", "1006"),
    ("heartbeat-answered", "b3: 904 as a request (not oneway) to the leader"),
    ("heartbeat-no-id", "904 without brokerId"),
    ("heartbeat-to-follower", "b3: 904 as a request to a follower"),
    ("kill-master-closed", "b1 dies: heartbeats stop, connections close; 1004 once the master changed"),
    ("notify-after-close", "1008 pushed after that election"),
    ("sync-state-after-close", "1006"),
    ("b2-alter-as-master", "b2: 1001 [2,3] as the new master"),
    ("b1-restart-register", "b1 restarts: 1003 REGISTER_BROKER 1 (its saved id)"),
    ("b1-restart-elect", "b1: 1002 ELECT_MASTER (itself) while 2 is master"),
    ("sync-state-b1-back", "1006"),
    ("freeze-master-timeout", "b2 freezes: heartbeats stop, connections stay; 1004 once the master changed"),
    ("notify-after-timeout", "1008 pushed after that election"),
    ("frozen-connection-closed", "does the leader close the expired broker's connection?"),
    ("sync-state-after-timeout", "1006"),
    ("clean-living-id", "1011 ids 1 (alive), isCleanLivingBroker false"),
    ("clean-living-set", "1011 whole set while its master lives"),
    ("clean-dead-id", "1011 ids 2 (b2, expired)"),
    ("sync-state-cleaned", "1006"),
    ("replica-info-cleaned", "1004"),
    ("next-id-after-clean", "1012"),
    ("b2-register-cleaned", "b2 restarts: 1003 REGISTER_BROKER 2 (its id was cleaned)"),
    ("replica-info-unknown", "1004 of an unknown set"),
    ("register-unknown", "1003 to an unknown set"),
    ("elect-unknown", "1002 for an unknown set"),
    ("clean-unknown", "1011 of an unknown set"),
    ("sync-state-unknown", "1006 of an unknown set"),
    ("follower-replica-info", "1004 to a follower"),
    # sets of their own, for the documented deviations that need no liveness (docs/statemachine.md)
    ("b-clean-semicolon", 'diff-b (master 1 alive): 1011 ids ";"'),
    ("b-sync-state", "1006 of diff-b"),
    ("c-clean-living-flag-id", "diff-c (master 1, ids 1, 2): 1011 ids 2, isCleanLivingBroker true"),
    ("c-sync-state", "1006 of diff-c"),
    ("c-next-id", "1012 of diff-c"),
    ("d-apply-out-of-sequence", "diff-d (id 1 registered): 1013 APPLY_BROKER_ID 3"),
    ("d-next-id", "1012 of diff-d"),
    ("d-elect-unregistered", "1002 of diff-d for the unregistered id 5 (the set's first election)"),
    ("d-replica-info", "1004 of diff-d"),
)

# Steps whose answers differ on purpose, and the documented deviation each follows (docs/interop.md says more).
_SEMICOLON = 'ids ";" count as blank here (manager.py clean_broker_data DEVIATION)'
_LIVING = "isCleanLivingBroker keeps to the listed ids here (manager.py clean_broker_data DEVIATION)"
_UNREGISTERED = "a first election of an unregistered id is refused here (manager.py elect_master DEVIATION)"
DEVIATIONS: dict[str, str] = {
    "heartbeat-to-follower": (
        "a follower answers a request-mode 904 with 2007 naming the leader where RocketMQ answers 0 and drops the "
        "heartbeat (apache/rocketmq#10812); brokers send 904 oneway (docs/remoting.md, Errors)"
    ),
    "follower-replica-info": "our 2007 names the leader (docs/remoting.md, Errors); extra fields Java ignores",
    "b-clean-semicolon": _SEMICOLON,
    "b-sync-state": _SEMICOLON,
    "c-sync-state": _LIVING,
    "c-next-id": _LIVING,
    "d-next-id": "the next id skips taken ids here (manager.py get_next_broker_id DEVIATION)",
    "d-elect-unregistered": _UNREGISTERED,
    "d-replica-info": _UNREGISTERED,
}

# Steps whose answers differ where no deviation is documented: reported (docs/interop.md), expected to fail until
# decided; a finding that no longer differs fails, so that it is taken off this list.
FINDINGS: dict[str, str] = {}


async def poll(what: str, check: Callable[[], Awaitable[T | None]], timeout: float) -> T:
    """`await check()` every POLL_S until it returns something other than None or False; that value."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value is not None and value is not False:
                return value
        except (TimeoutError, OSError, ConnectionError, ValueError, KeyError) as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s" + (f" (last error: {last!r})" if last else ""))
        await asyncio.sleep(POLL_S)


def now_ms() -> int:
    return int(time.time() * 1000)


async def connect(address: str) -> RemotingClient:
    host, port = address.rsplit(":", 1)
    return await RemotingClient.connect(host, int(port), codec.JSON)  # a Java broker's default serialization


@dataclass
class Group:
    """One controller group as brokers see it: its remoting addresses."""

    side: str
    remotings: list[str]
    rafts: list[str]
    admin: dict[str, RemotingClient] = field(default_factory=dict)  # mqadmin-like connections, by address
    leader_addr: str = ""

    async def ask(
        self, address: str, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        c = self.admin.get(address)
        if c is None or c.closed.done():
            c = self.admin[address] = await connect(address)
        return await c.request(code, ext, body)

    async def leader(self) -> str:
        """The leader's remoting address, as a broker's controller client finds it: 1005's
        controllerLeaderAddress, confirmed by that node's own 1005 (isLeader), once every node names it (a
        follower that has not heard from the new leader yet answers with no leader, on both sides)."""
        if self.leader_addr:
            return self.leader_addr

        async def find() -> str | None:
            named = set()
            for a in self.remotings:
                r = await self.ask(a, H.GET_METADATA_INFO)
                named.add(r.ext_fields.get("controllerLeaderAddress") or "")
            if len(named) != 1 or "" in named:
                return None
            leader = named.pop()
            mine = await self.ask(leader, H.GET_METADATA_INFO)
            return leader if mine.ext_fields.get("isLeader") == "true" else None

        self.leader_addr = await poll(f"{self.side}: a leader", find, 60)
        return self.leader_addr

    async def follower(self) -> str:
        leader = await self.leader()
        return next(a for a in self.remotings if a != leader)

    async def to_leader(
        self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """An operator's request to the leader (mqadmin -a LEADER); a 2007 sends it to the newly found leader."""
        for _ in range(2):
            r = await self.ask(await self.leader(), code, ext, body)
            if r.code != C.CONTROLLER_NOT_LEADER:
                return r
            self.leader_addr = ""
        return r

    async def sync_state(self, name: str = SET) -> RemotingCommand:
        return await self.to_leader(C.GET_SYNC_STATE_DATA, None, json.dumps([name]).encode())

    async def replica_info(self, name: str = SET) -> RemotingCommand:
        return await self.to_leader(C.GET_REPLICA_INFO, {"brokerName": name})

    def close(self) -> None:
        for c in self.admin.values():
            c.close()


class Broker:
    """A broker in controller mode, on the wire: one connection per controller address (a broker's
    NettyRemotingClient), heartbeats oneway to each, requests to the leader, a listener on its address."""

    def __init__(self, group: Group, label: str, name: str = SET) -> None:
        self.group = group
        self.label = label  # its name in the recorded answers: <label> for its address
        self.name = name  # brokerName
        self.id: int | None = None
        self.addr = ""
        self.conns: dict[str, RemotingClient] = {}
        self.notes: list[RemotingCommand] = []  # 1008 frames received
        self.server: asyncio.Server | None = None
        self.beating: asyncio.Task[None] | None = None
        self.master_epoch = -1  # the epoch this broker last learned (its heartbeats carry it)
        self.check_code = ""

    async def listen(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.addr = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    self.notes.append(codec.decode(frame))
        finally:
            writer.close()

    async def connect(self) -> None:
        for a in self.group.remotings:
            self.conns[a] = await connect(a)

    async def request(self, code: int, ext: dict[str, Any], body: bytes | None = None) -> RemotingCommand:
        """To the leader on this broker's own connection; a 2007 sends it to the newly found leader (a broker's
        controller client refreshes the leader on 2007 and retries)."""
        for _ in range(2):
            leader = await self.group.leader()
            r = await self.conns[leader].request(code, ext, body)
            if r.code != C.CONTROLLER_NOT_LEADER:
                return r
            self.group.leader_addr = ""
        return r

    def heartbeat_fields(self) -> dict[str, Any]:
        return {
            "clusterName": CLUSTER,
            "brokerAddr": self.addr,
            "brokerName": self.name,
            "brokerId": self.id,
            "epoch": self.master_epoch,
            "maxOffset": 0,
            "confirmOffset": 0,
            "heartbeatTimeoutMills": HB_TIMEOUT_MS,
            "electionPriority": 2**31 - 1,
        }

    async def _beat(self) -> None:
        while True:
            for c in self.conns.values():
                if c.transport is not None and not c.transport.is_closing():
                    c.request_nowait(H.BROKER_HEARTBEAT, self.heartbeat_fields(), oneway=True)
            await asyncio.sleep(HB_INTERVAL_S)  # the broker's heartbeat period, not a wait for anything

    async def start_heartbeats(self) -> None:
        """Heartbeat every second from now on; return once the controller answers this broker alive (1006)."""
        assert self.beating is None
        self.beating = asyncio.get_running_loop().create_task(self._beat())

        async def alive() -> bool:
            body = json.loads((await self.group.sync_state()).body or b"{}")
            reps = body.get("replicasInfoTable", {}).get(self.name, {})
            return any(
                r["brokerId"] == self.id and r["alive"]
                for r in reps.get("inSyncReplicas", []) + reps.get("notInSyncReplicas", [])
            )

        await poll(f"{self.group.side}: {self.label} alive in 1006", alive, 15)

    def stop_heartbeats(self) -> None:
        if self.beating is not None:
            self.beating.cancel()
            self.beating = None

    def close(self) -> None:
        """Die: no more heartbeats, every connection closed (the controller's channel to it goes inactive)."""
        self.stop_heartbeats()
        for c in self.conns.values():
            c.close()
        self.conns = {}

    def shutdown(self) -> None:
        self.close()
        if self.server is not None:
            self.server.close()

    # --- what a broker sends ---

    async def next_id(self) -> RemotingCommand:
        return await self.request(C.GET_NEXT_BROKER_ID, {"clusterName": CLUSTER, "brokerName": self.name})

    async def apply_id(self, broker_id: int) -> RemotingCommand:
        self.check_code = f"{self.addr};{now_ms()}"  # ReplicasManager.createTempMetadataFile's format
        ext = {
            "clusterName": CLUSTER,
            "brokerName": self.name,
            "appliedBrokerId": broker_id,
            "registerCheckCode": self.check_code,
        }
        r = await self.request(C.APPLY_BROKER_ID, ext)
        if r.code == C.SUCCESS:
            self.id = broker_id
        return r

    async def register(self) -> RemotingCommand:
        ext = {
            "clusterName": CLUSTER,
            "brokerName": self.name,
            "brokerId": self.id,
            "brokerAddress": self.addr,
            "invokeTime": now_ms(),
        }
        r = await self.request(C.REGISTER_BROKER, ext)
        if r.code == C.SUCCESS and "masterEpoch" in r.ext_fields:
            self.master_epoch = int(r.ext_fields["masterEpoch"])
        return r

    async def elect(self) -> RemotingCommand:
        ext = {
            "clusterName": CLUSTER,
            "brokerName": self.name,
            "brokerId": self.id,
            "designateElect": False,
            "invokeTime": now_ms(),
        }
        r = await self.request(C.ELECT_MASTER, ext)
        if r.code in (C.SUCCESS, C.CONTROLLER_MASTER_STILL_EXIST):
            self.master_epoch = int(r.ext_fields["masterEpoch"])
        return r

    async def alter(self, ids: list[int], master_id: int, master_epoch: int, set_epoch: int) -> RemotingCommand:
        ext = {
            "brokerName": self.name,
            "masterBrokerId": master_id,
            "masterEpoch": master_epoch,
            "invokeTime": now_ms(),
        }
        body = json.dumps({"syncStateSet": ids, "syncStateSetEpoch": set_epoch}).encode()
        return await self.request(C.ALTER_SYNC_STATE_SET, ext, body)


def clean_fields(ids: str | None, living: bool = False, name: str = SET) -> dict[str, Any]:
    return {
        "clusterName": CLUSTER,
        "brokerName": name,
        "brokerControllerIdsToClean": ids,
        "isCleanLivingBroker": living,
        "invokeTime": now_ms(),
    }


# --- recording --------------------------------------------------------------------------------------------


def normalize(value: Any, names: dict[str, str]) -> Any:
    """`value` with every address of `names` inside its strings replaced by its name."""
    if isinstance(value, str):
        for addr, name in names.items():
            value = value.replace(addr, name)
        return value
    if isinstance(value, list):
        return [normalize(v, names) for v in value]
    if isinstance(value, dict):
        return {normalize(k, names): normalize(v, names) for k, v in value.items()}
    return value


def parse_body(raw: bytes) -> Any:
    """The body as the object it encodes (fastjson writes bare numeric map keys, `{1:"127.0.0.1:10911"}`, and
    reads both forms, so bodies are compared as objects), or as text when it is not JSON."""
    try:
        return loads_fastjson(raw)
    except ValueError:
        return raw.decode(errors="replace")


def answer(r: RemotingCommand, names: dict[str, str]) -> dict[str, Any]:
    """A remoting answer whole: code, remark, every header field as sent (text), the body as the JSON value it
    encodes."""
    body = parse_body(r.body) if r.body else None
    return normalize(
        {
            "code": r.code,
            "codeName": C.code_name(r.code),
            "remark": r.remark,
            "header": dict(r.ext_fields),
            "body": body,
        },
        names,
    )


@dataclass
class Run:
    """One side's run of the scenario: what it answered at every step, and a few timings (not compared)."""

    group: Group
    brokers: list[Broker] = field(default_factory=list)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)  # body text as sent, language, version: not compared
    timings: dict[str, float] = field(default_factory=dict)
    error: str = ""

    def names(self) -> dict[str, str]:
        names = {b.addr: f"<{b.label}>" for b in self.brokers if b.addr}
        names |= {a: "<controller>" for a in self.group.remotings}
        names |= {a: "<controller-raft>" for a in self.group.rafts}
        return names

    def record(self, key: str, value: RemotingCommand | dict[str, Any]) -> None:
        assert key in dict(STEPS), key
        if isinstance(value, RemotingCommand):
            self.raw[key] = {
                "language": value.language,
                "version": value.version,
                "body": normalize(value.body.decode(errors="replace"), self.names()) if value.body else None,
            }
        self.steps[key] = (
            answer(value, self.names()) if isinstance(value, RemotingCommand) else normalize(value, self.names())
        )

    async def notifications(self, key: str, epoch: int, recipients: list[Broker]) -> None:
        """Record the 1008 frames of masterEpoch `epoch` every broker got, once each of `recipients` (the members
        alive at the election) got one, or after 5 s (then whoever got nothing shows an empty list)."""

        def of(b: Broker) -> list[RemotingCommand]:
            return [
                n
                for n in b.notes
                if n.code == NOTIFY_BROKER_ROLE_CHANGED and n.ext_fields.get("masterEpoch") == str(epoch)
            ]

        async def arrived() -> bool:
            return all(of(b) for b in recipients)

        try:
            await poll(f"{self.group.side}: 1008 of epoch {epoch}", arrived, 5)
        except AssertionError:
            pass  # recorded as it is: the comparison shows who got nothing
        frames = {
            f"<{b.label}>": [{"header": dict(n.ext_fields), "body": json.loads(n.body or b"null")} for n in of(b)]
            for b in self.brokers
        }
        self.record(key, {"notifications": frames})


async def new_master(group: Group, old: int, timeout: float) -> RemotingCommand:
    async def changed() -> RemotingCommand | None:
        r = await group.replica_info()
        m = r.ext_fields.get("masterBrokerId")
        return r if r.code == C.SUCCESS and m is not None and m != str(old) else None

    return await poll(f"{group.side}: a master other than {old}", changed, timeout)


async def scenario(run: Run) -> None:
    g = run.group
    b1, b2, b3 = (Broker(g, f"b{i}") for i in (1, 2, 3))
    run.brokers = [b1, b2, b3]
    for b in run.brokers:
        await b.listen()
        await b.connect()
    leader = await g.leader()
    run.record("metadata-leader", await g.ask(leader, H.GET_METADATA_INFO))
    run.record("metadata-follower", await g.ask(await g.follower(), H.GET_METADATA_INFO))

    # registration, as ReplicasManager.register: 1012, 1013, 1003, a first heartbeat, then 1002 if no master
    for b, key in ((b1, "b1"), (b2, "b2"), (b3, "b3")):
        r = await b.next_id()
        run.record(f"{key}-next-id", r)
        run.record(f"{key}-apply-id", await b.apply_id(int(r.ext_fields["nextBrokerId"])))
        run.record(f"{key}-register", await b.register())
        await b.start_heartbeats()
        if b is b1:
            run.record("b1-elect", await b1.elect())
            await run.notifications("notify-b1-elected", 1, [b1])
        elif b is b2:
            run.record("b2-elect", await b2.elect())
    run.record("replica-info-registered", await g.replica_info())
    run.record("sync-state-registered", await g.sync_state())

    # the master reports its SyncStateSet (AutoSwitchHAService's 1001s)
    run.record("alter-expand", await b1.alter([1, 2, 3], 1, 1, 1))
    run.record("alter-fenced-epoch", await b1.alter([1, 2], 1, 1, 1))
    run.record("alter-not-master", await b2.alter([1, 2], 2, 1, 2))
    run.record("alter-equal", await b1.alter([1, 2, 3], 1, 1, 2))
    run.record("alter-shrink", await b1.alter([1, 2], 1, 1, 2))
    run.record("sync-state-altered", await g.sync_state())
    run.record("heartbeat-answered", await b3.request(H.BROKER_HEARTBEAT, b3.heartbeat_fields()))
    no_id = {k: v for k, v in b3.heartbeat_fields().items() if k != "brokerId"}
    run.record("heartbeat-no-id", await b3.request(H.BROKER_HEARTBEAT, no_id))
    follower_conn = b3.conns[await g.follower()]
    run.record("heartbeat-to-follower", await follower_conn.request(H.BROKER_HEARTBEAT, b3.heartbeat_fields()))

    # the master dies: its channels close
    t0 = time.monotonic()
    b1.close()
    run.record("kill-master-closed", await new_master(g, 1, 30))
    run.timings["re-election after close (s)"] = time.monotonic() - t0
    await run.notifications("notify-after-close", 2, [b2, b3])
    run.record("sync-state-after-close", await g.sync_state())
    for b in (b2, b3):
        b.master_epoch = 2
    run.record("b2-alter-as-master", await b2.alter([2, 3], 2, 2, 4))

    # the old master restarts with its saved id (metadata file): straight to 1003, then heartbeats
    await b1.connect()
    run.record("b1-restart-register", await b1.register())
    await b1.start_heartbeats()
    run.record("b1-restart-elect", await b1.elect())
    run.record("sync-state-b1-back", await g.sync_state())

    # the new master freezes: no heartbeats, its connections stay open; the scan finds it expired
    t0 = time.monotonic()
    b2.stop_heartbeats()
    run.record("freeze-master-timeout", await new_master(g, 2, 30))
    run.timings["re-election after heartbeat timeout (s)"] = time.monotonic() - t0
    await run.notifications("notify-after-timeout", 3, [b1, b3])
    leader_conn = b2.conns[await g.leader()]
    try:
        await asyncio.wait_for(asyncio.shield(leader_conn.closed), 3)
        closed = True
    except TimeoutError:
        closed = False
    run.record("frozen-connection-closed", {"leaderClosedConnection": closed})
    run.record("sync-state-after-timeout", await g.sync_state())

    # cleaning metadata (mqadmin cleanBrokerMetadata)
    run.record("clean-living-id", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields("1")))
    run.record("clean-living-set", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields(None)))
    run.record("clean-dead-id", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields("2")))
    run.record("sync-state-cleaned", await g.sync_state())
    run.record("replica-info-cleaned", await g.replica_info())
    run.record("next-id-after-clean", await b3.next_id())
    b2.close()
    await b2.connect()
    run.record("b2-register-cleaned", await b2.register())

    # error probes
    run.record("replica-info-unknown", await g.to_leader(C.GET_REPLICA_INFO, {"brokerName": "no-such-set"}))
    unknown = {"clusterName": CLUSTER, "brokerName": "no-such-set", "brokerId": 1, "invokeTime": now_ms()}
    run.record("register-unknown", await g.to_leader(C.REGISTER_BROKER, unknown | {"brokerAddress": b3.addr}))
    run.record("elect-unknown", await g.to_leader(C.ELECT_MASTER, unknown | {"designateElect": False}))
    run.record("clean-unknown", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields(None, name="no-such-set")))
    run.record(
        "sync-state-unknown", await g.to_leader(C.GET_SYNC_STATE_DATA, None, json.dumps(["no-such-set"]).encode())
    )
    run.record("follower-replica-info", await g.ask(await g.follower(), C.GET_REPLICA_INFO, {"brokerName": SET}))

    # sets of their own for the deviations that need no liveness
    extra = {"x1": "diff-b", "x2": "diff-b", "y1": "diff-c", "y2": "diff-c", "z1": "diff-d", "z3": "diff-d"}
    x1, x2, y1, y2, z1, z3 = (Broker(g, label, name) for label, name in extra.items())
    for b in (x1, x2, y1, y2, z1, z3):
        run.brokers.append(b)
        await b.listen()
        await b.connect()
    for b in (x1, x2, y1, y2, z1):
        r = await b.next_id()
        must(r, C.SUCCESS)
        must(await b.apply_id(int(r.ext_fields["nextBrokerId"])), C.SUCCESS)
        must(await b.register(), C.SUCCESS)
    must(await x1.elect(), C.SUCCESS)
    must(await y1.elect(), C.SUCCESS)
    run.record("b-clean-semicolon", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields(";", name="diff-b")))
    run.record("b-sync-state", await g.sync_state("diff-b"))
    run.record("c-clean-living-flag-id", await g.to_leader(C.CLEAN_BROKER_DATA, clean_fields("2", True, "diff-c")))
    run.record("c-sync-state", await g.sync_state("diff-c"))
    run.record("c-next-id", await y1.next_id())
    run.record("d-apply-out-of-sequence", await z3.apply_id(3))
    run.record("d-next-id", await z1.next_id())
    elect5 = {"clusterName": CLUSTER, "brokerName": "diff-d", "brokerId": 5, "designateElect": False}
    run.record("d-elect-unregistered", await z1.request(C.ELECT_MASTER, elect5 | {"invokeTime": now_ms()}))
    run.record("d-replica-info", await g.replica_info("diff-d"))


def must(r: RemotingCommand, code: int) -> None:
    """A step of the setup that is not compared: it must succeed on both sides."""
    if r.code != code:
        raise AssertionError(f"expected {code}, got {r.code} {r.remark} {r.ext_fields}")


async def run_both(runs: list[Run], timeout: float) -> None:
    async def one(run: Run) -> None:
        try:
            await scenario(run)
        except Exception as e:  # noqa: BLE001  # recorded: the steps before it still compare
            run.error = f"{type(e).__name__}: {e}"
        finally:
            for b in run.brokers:
                b.shutdown()
            run.group.close()

    await asyncio.wait_for(asyncio.gather(*(one(r) for r in runs)), timeout)


# --- the table --------------------------------------------------------------------------------------------


def summary(a: dict[str, Any] | None) -> str:
    """One table cell: what the answer says about ids, master, epochs and SyncStateSet."""
    if a is None:
        return "(not reached)"
    if "notifications" in a:
        parts = []
        for who, frames in a["notifications"].items():
            for f in frames:
                h, body = f["header"], f["body"] or {}
                parts.append(
                    f"{who}: master {h.get('masterBrokerId')} epoch {h.get('masterEpoch')}/"
                    f"{h.get('syncStateSetEpoch')} SSS {body.get('syncStateSet')}"
                )
        return "; ".join(parts) or "none"
    if "code" not in a:
        return ", ".join(f"{k} {v}" for k, v in a.items())
    h, body = a["header"], a["body"]
    out = [f"{a['code']} {a['codeName']}"]
    for key, label in (
        ("nextBrokerId", "next id"),
        ("masterBrokerId", "master"),
        ("masterEpoch", "epoch"),
        ("syncStateSetEpoch", "SSS epoch"),
        ("newSyncStateSetEpoch", "new SSS epoch"),
        ("isLeader", "isLeader"),
    ):
        if key in h:
            out.append(f"{label} {h[key]}")
    if isinstance(body, dict):
        if "syncStateSet" in body:
            epoch = f" @{body['syncStateSetEpoch']}" if "syncStateSetEpoch" in body else ""
            out.append(f"SSS {sorted(body['syncStateSet'])}{epoch}")
        if "brokerMemberGroup" in body:
            out.append(f"members {sorted(int(k) for k in body['brokerMemberGroup'].get('brokerAddrs', {}))}")
        for name, s in body.get("replicasInfoTable", {}).items():

            def ids(rs: list[dict[str, Any]]) -> str:
                return "[" + ",".join(f"{r['brokerId']}{'' if r['alive'] else ' dead'}" for r in rs) + "]"

            out.append(
                f"{name}: master {s['masterBrokerId']} epoch {s['masterEpoch']}/{s['syncStateSetEpoch']} "
                f"in {ids(s['inSyncReplicas'])} out {ids(s['notInSyncReplicas'])}"
            )
        if "replicasInfoTable" in body and not body["replicasInfoTable"]:
            out.append("no set")
    if "controllerLeaderAddress" in h:
        out.append("names the leader")
    if a["remark"] and a["code"] != C.SUCCESS:
        out.append(f"\u201c{a['remark']}\u201d")
    return ", ".join(out)


def cell(text: str) -> str:
    """Markdown table cell text: `|` escaped, and the `<b1>` address names not taken for HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def verdict(key: str, ref: dict[str, Any] | None, ours: dict[str, Any] | None) -> str:
    if ref is None or ours is None:
        return "not reached"
    if ref == ours:
        return "same"
    if key in DEVIATIONS:
        return f"deviation: {DEVIATIONS[key]}"
    return f"finding: {FINDINGS[key]}" if key in FINDINGS else "**DIFFERENT**"


def table(runs: dict[str, Run]) -> str:
    ref, ours = runs["rocketmq"], runs["ours"]
    lines = [
        "| step | request | RocketMQ JRaftController | ours | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, what in STEPS:
        a, b = ref.steps.get(key), ours.steps.get(key)
        lines.append(
            f"| {key} | {cell(what)} | {cell(summary(a))} | {cell(summary(b) if a != b else 'same')} | {verdict(key, a, b)} |"
        )
    lines.append("")
    lines.append(
        f"RocketMQ {rocketmq.version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Timings (not compared):"
    )
    lines.append("")
    for side, run in runs.items():
        timings = ", ".join(f"{k} {v:.1f}" for k, v in run.timings.items())
        lines.append(f"- {side}: {timings}" + (f"; stopped: {run.error}" if run.error else ""))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    rocketmq.require()
    root = str(tmp_path_factory.mktemp("differential"))
    ours = ControllerdCluster(
        os.path.join(root, "ours"), election_ms=1000, extra=f"scanNotActiveBrokerInterval={SCAN_MS}\n"
    )
    with Deployment(os.path.join(root, "rmq")) as d:
        try:
            ours.start_all()
            jraft = d.jraft_controllers(election_ms=1000, scanNotActiveBrokerInterval=SCAN_MS)
            jraft.start()
            ours.wait_ready()
            result = {
                "rocketmq": Run(Group("rocketmq", jraft.remotings, jraft.rafts)),
                "ours": Run(Group("ours", ours.remotings, ours.rafts)),
            }
            asyncio.run(run_both(list(result.values()), 150))
        finally:
            ours.stop_all()
    text = table(result)
    dump = json.dumps(
        {side: {"steps": r.steps, "raw": r.raw, "timings": r.timings, "error": r.error} for side, r in result.items()},
        indent=1,
    )
    paths = [os.path.join(root, "differential.md")]
    if os.environ.get("DIFFERENTIAL_TABLE"):
        paths.append(os.environ["DIFFERENTIAL_TABLE"])
    for path in paths:
        with open(path, "w") as f:
            f.write(text)
        with open(os.path.splitext(path)[0] + ".json", "w") as f:
            f.write(dump)
    print(f"\ndifferential table: {' and '.join(paths)} (every answer: the .json beside it)")
    yield result


def test_both_ran_to_the_end(runs: dict[str, Run]) -> None:
    for side, run in runs.items():
        assert not run.error, f"{side}: {run.error}"


@pytest.mark.parametrize("key", [k for k, _ in STEPS])
def test_step(runs: dict[str, Run], key: str) -> None:
    ref, ours = runs["rocketmq"].steps.get(key), runs["ours"].steps.get(key)
    assert ref is not None, f"RocketMQ's run did not reach {key}: {runs['rocketmq'].error}"
    assert ours is not None, f"our run did not reach {key}: {runs['ours'].error}"
    if key in DEVIATIONS:
        assert ref != ours, f"{key}: listed as a deviation ({DEVIATIONS[key]}) but the answers are the same"
        return
    if key in FINDINGS:
        assert ref != ours, f"{key}: listed as a finding ({FINDINGS[key]}) but the answers are the same now"
        pytest.xfail(f"finding, reported: {FINDINGS[key]}")
    assert ours == ref, f"{key}: RocketMQ answered\n{json.dumps(ref, indent=1)}\nours\n{json.dumps(ours, indent=1)}"

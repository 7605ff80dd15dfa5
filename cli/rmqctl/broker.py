"""`rmqctl broker run`: play one RocketMQ 5 broker against the controller, at human speed.

A real broker speaks RocketMQ's remoting protocol to the controller's jRaftControllerRPCAddr (docs/remoting.md);
this verb sends what a broker sends, over the HTTP API, so that registration, heartbeats, master election
and failover can be tried by hand (the README's quickstart) without racing the 10 s heartbeat timeout:

1. register: `next-broker-id` + `apply-broker-id` (or, with `--id`, `register-broker` at once and apply the
   id only if the controller does not know it), then `register-broker`;
2. every `--interval` seconds: a `heartbeat`, then `replica-info`. With no master it asks to be elected
   (`elect-master` with its own id, as a broker does: SUCCESS, or 2011 when another master is alive);
   as the master it keeps the SyncStateSet to the replicas that are alive (`alter-sync-state-set`), as a
   master adds a slave that caught up and drops one that fell behind; nothing is replicated here;
3. Ctrl-C (or `--count` heartbeats): stops heartbeating. The controller expires it after
   `--heartbeat-timeout` ms and, if it was the master, elects another in-sync replica.

One line per event on stdout (`-o json`: one JSON object per event). A refused request is an event, not an
exit; failing to register is exit 1, no controller is exit 3 (as every online verb).
"""

from __future__ import annotations

import json
import signal
import sys
import time

import click

from cli.rmqctl import Unreachable
from cli.rmqctl import brokerproto as proto
from cli.rmqctl.client import ControllerClient, Reply
from cli.rmqctl.online import Conn, connection_options
from cli.rmqctl.output import Out, pass_out
from statemachine.values import JSON


class PlayedBroker:
    """One broker's side of the controller protocol (the requests of RocketMQ's ReplicasManager)."""

    def __init__(self, c: ControllerClient, out: Out, cluster: str, name: str, address: str, timeout_ms: int) -> None:
        self.c, self.out = c, out
        self.cluster, self.name, self.address, self.timeout_ms = cluster, name, address, timeout_ms
        self.id: int | None = None
        self.master: tuple[JSON, JSON] | None = None  # (masterBrokerId, masterEpoch) last seen
        # What its heartbeats report, as a broker's store would: the epoch it last became master at (the entry
        # a new master appends to its epoch file; None, sent as nothing (-1), before), and its store's max
        # offset, 0: nothing is stored here.
        self.epoch: int | None = None
        self.repeated: dict[str, str] = {}  # event -> its last message, for the events said once while they repeat
        self.unreachable = False  # the last round found no controller that could answer

    def say(self, event: str, message: str, *, once: bool = False, **fields: JSON) -> None:
        """One event line; with `once`, not again while the same event repeats with the same message (a
        refused election every heartbeat is said once, until the answer changes)."""
        if once:
            if self.repeated.get(event) == message:
                return
            self.repeated[event] = message
        if self.out.mode == "json":
            sys.stdout.write(
                json.dumps({"event": event, "brokerName": self.name, "brokerId": self.id, **fields}, sort_keys=True)
                + "\n"
            )
        else:
            sys.stdout.write(f"{time.strftime('%H:%M:%S')} {self.name}/{self.id}: {message}\n")
        sys.stdout.flush()

    def post(self, step: proto.Step) -> Reply:
        path, body = step
        return self.send(f"{proto.API}/{path}", body)

    def send(self, path: str, body: JSON) -> Reply:
        reply = self.c.post(path, body)
        if self.unreachable:  # the first answer after an unreachable round
            self.unreachable = False
            self.say("reachable", "the controller answers again")
        return reply

    def register(self, broker_id: int | None) -> None:
        code = proto.check_code(self.address, int(time.time() * 1000))
        steps = proto.registration(self.cluster, self.name, self.address, broker_id, code)
        if broker_id is not None:
            self.id = broker_id
        self.id, reply = proto.run_steps(steps, lambda path, body: self.post((path, body)))
        self._registered(reply)

    def _registered(self, reply: Reply) -> None:
        master = reply.header.get("masterBrokerId")
        self.say(
            "registered",
            f"registered at {self.address} (master: {master if master is not None else 'none'})",
            address=self.address,
            masterBrokerId=master,
        )

    def heartbeat_round(self) -> None:
        """`round`, through a controller group that cannot answer (a lost majority, every node down): as a
        broker, it keeps heartbeating and says so once, then once when the controller answers again."""
        try:
            self.round()
        except Unreachable as e:
            if not self.unreachable:
                self.say("unreachable", f"the controller did not answer, still heartbeating ({e})", error=str(e))
            self.unreachable = True

    def round(self) -> None:
        """One heartbeat period: heartbeat, look at the master, act as a broker would."""
        hb = self.post(
            proto.heartbeat(self.cluster, self.name, self.address, self.id, self.timeout_ms, self.epoch, max_offset=0)
        )
        if not hb.ok:
            self.say("refused", f"heartbeat answered {hb.code} {hb.code_name}: {hb.remark}", once=True, code=hb.code)
        info = self.post(proto.replica_info(self.name))
        if not info.ok:
            self.say(
                "refused",
                f"replica-info answered {info.code} {info.code_name}: {info.remark}",
                once=True,
                code=info.code,
            )
            return
        master, epoch, sync_set, set_epoch = proto.master_of(info)
        if (master, epoch) != self.master:
            if master is not None:
                self.repeated.clear()  # a later refusal is news again
            if master is None:
                text = "no master"
            else:
                text = f"master is {master} at epoch {epoch}: " + (
                    "I am the master" if master == self.id else "I am a slave"
                )
            self.say("master", text, once=master is None, masterBrokerId=master, masterEpoch=epoch)
            self.master = (master, epoch)
            if master == self.id and isinstance(epoch, int):
                self.epoch = epoch
        if master is None:
            self.elect()
        elif master == self.id:
            self.keep_sync_state_set(epoch, sync_set, set_epoch)

    def elect(self) -> None:
        reply = self.post(proto.elect_self(self.cluster, self.name, self.id))
        self.say(
            "elect",
            f"elect-master {self.id} answered {reply.code} {reply.code_name}"
            + (f": {reply.remark}" if reply.remark else ""),
            once=not reply.ok,
            code=reply.code,
            masterBrokerId=reply.header.get("masterBrokerId"),
        )

    def keep_sync_state_set(self, master_epoch: JSON, current: list[int], set_epoch: JSON) -> None:
        """As the master: the SyncStateSet is itself plus every replica that is alive."""
        data = self.send("/api/v1/admin/sync-state-data", {"brokerNames": [self.name]})
        table = ((data.body or {}).get("replicasInfoTable") or {}).get(self.name) if data.ok else None
        if table is None:
            return
        replicas = [*(table.get("inSyncReplicas") or []), *(table.get("notInSyncReplicas") or [])]
        wanted = sorted({self.id, *(r["brokerId"] for r in replicas if r.get("alive"))})
        if wanted == sorted(current):
            return
        reply = self.post(proto.alter_sync_state_set(self.name, self.id, master_epoch, wanted, set_epoch))
        self.say(
            "sync-state-set",
            f"SyncStateSet {sorted(current)} -> {wanted}: {reply.code} {reply.code_name}"
            + (f" (epoch {reply.header.get('newSyncStateSetEpoch')})" if reply.ok else f": {reply.remark}"),
            code=reply.code,
            syncStateSet=wanted,
        )


@click.group("broker")
def broker() -> None:
    """Play a RocketMQ broker over the HTTP API (real brokers speak remoting: docs/remoting.md)."""


@broker.command("run")
@click.option("-c", "--clusterName", "cluster", default="DefaultCluster", show_default=True)
@click.option("-b", "--brokerName", "name", required=True, help="The broker set (brokerName).")
@click.option(
    "--addr",
    "broker_address",
    required=True,
    metavar="HOST:PORT",
    help="The broker address it registers (nothing needs to listen there).",
)
@click.option(
    "--id",
    "broker_id",
    type=click.IntRange(min=0),
    metavar="N",
    help="Its broker id, as a broker that has one; default: ask the controller (next-broker-id).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Time between heartbeats.",
)
@click.option(
    "--heartbeat-timeout",
    "timeout_ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    metavar="MS",
    help="heartbeatTimeoutMills: how long the controller keeps it alive after a heartbeat.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many heartbeats.")
@connection_options()
@pass_out
def broker_run(
    out: Out,
    conn: Conn,
    cluster: str,
    name: str,
    broker_address: str,
    broker_id: int | None,
    interval: float,
    timeout_ms: int,
    count: int | None,
) -> None:
    """Register a broker and keep it heartbeating until Ctrl-C, electing itself master when there is none and,
    as the master, keeping its alive replicas in the SyncStateSet (see docs/rmqctl-online.md)."""

    def interrupt(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # Explicitly: started with `&` from a script, SIGINT would be ignored; SIGTERM and SIGHUP stop it too.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    with conn.client() as c:
        played = PlayedBroker(c, out, cluster, name, broker_address, timeout_ms)
        try:
            played.register(broker_id)
            rounds = 0
            while True:
                played.heartbeat_round()
                rounds += 1
                if count is not None and rounds >= count:
                    break
                c.hooks.sleep(interval)
        except KeyboardInterrupt:
            pass
        played.say(
            "stopped",
            f"stopped heartbeating; the controller expires it {timeout_ms / 1000:g}s after its last "
            "heartbeat (at its next inactive-broker scan)",
        )

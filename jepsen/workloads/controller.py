"""The `controller` workload: simulated brokers driving the controller's endpoints, checked against the
controller's invariants (docs/jepsen.md).

- generator and client: broker-sets `bs1..bs3` of brokers 1..3 (fake addresses). Each broker registers
  (`next-broker-id`, `apply-broker-id`, `register-broker`), heartbeats every second while it is up, and
  brokers go down and up now and then so that masters expire. Clients ask for elections as brokers do (with
  their own id), and alter the SyncStateSet as the master would, with the epochs they just read. A final
  `sync-state-data` read gives the final state.
- vocabulary: the broker endpoints' names; the key is the brokerName (null for `sync-state-data`).
- checker:
  Observations come from ok completions. The value of an ok op on a broker-set (the key is its
  brokerName) carries what the controller answered, with RocketMQ's field names: `masterBrokerId`,
  `masterEpoch`, `syncStateSetEpoch`, `syncStateSet` (any of them may be absent or null). For an ok
  `alter-sync-state-set` the value is the new SyncStateSet and its epoch; `masterBrokerId` and
  `masterEpoch` may be left out, they are then taken from the invoke's value (the request the controller
  accepted). An ok `sync-state-data` read (key null) maps brokerName to such an object.

  Invariants:
  1. single_master: at most one masterBrokerId per (brokerName, masterEpoch) across all responses;
  2. monotonic_epochs: masterEpoch and syncStateSetEpoch never decrease in any client's (process's) view;
  3. acknowledged_alters: every acknowledged alterSyncStateSet is visible in the final state (the ok
     `sync-state-data` read invoked last: same epoch and same set) or superseded by a later
     syncStateSetEpoch. An alter acknowledged after the final read was invoked cannot be judged: unknown.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID
from jepsen.client import MASTER_STILL_EXIST, Answer, outcome
from jepsen.history import OK, HistoryError, Key, Op
from jepsen.workloads.base import Worker, Workload, WorkloadSpec

NAME = "controller"
FS = frozenset(
    {
        "heartbeat",
        "next-broker-id",
        "apply-broker-id",
        "register-broker",
        "elect-master",
        "alter-sync-state-set",
        "replica-info",
        "sync-state-data",
    }
)
CHECKER = "controller-invariants"
COUNTS = (
    "{observations} observations of {broker_sets} broker-sets; violations: single master {single_master_violations}, "
    "monotonic epochs {monotonic_epochs_violations}, acknowledged alters {acknowledged_alters_violations} "
    "({unjudged_alters} unjudged)"
)
CLUSTER = "jepsen"
HEARTBEAT_TIMEOUT_MS = 4000
HEARTBEAT_EVERY_S = 1.0


@dataclass
class Broker:
    name: str  # brokerName (the broker-set)
    id: int
    addr: str
    registered: bool = False
    up: bool = True  # a down broker sends no heartbeats: its liveness expires
    last_heartbeat: float = 0.0
    busy: bool = False


@dataclass
class View:
    """The latest replica info some client saw for a broker-set (inputs for elect and alter requests)."""

    master: int | None = None
    master_epoch: int | None = None
    sss: list[int] = field(default_factory=list)
    sss_epoch: int | None = None


def _toggle(b: Broker) -> None:
    b.up = not b.up


def _state(header: Any, body: Any) -> dict[str, Any]:
    """The observation the controller checker reads: masterBrokerId, masterEpoch, syncStateSet, ...Epoch."""
    header, body = header or {}, body or {}
    out = {"masterBrokerId": header.get("masterBrokerId"), "masterEpoch": header.get("masterEpoch")}
    if "syncStateSetEpoch" in body:
        out["syncStateSetEpoch"] = body["syncStateSetEpoch"]
    elif header.get("syncStateSetEpoch") is not None:
        out["syncStateSetEpoch"] = header["syncStateSetEpoch"]
    if body.get("syncStateSet") is not None:
        out["syncStateSet"] = sorted(body["syncStateSet"])
    return out


class Controller(Workload):
    """Broker-sets `bs1..` with brokers 1..3 each. Brokers register (next-broker-id, apply-broker-id,
    register-broker), heartbeat every second while up, ask for elections (as brokers do: with their own id),
    and the master alters its SyncStateSet using the replica info it just read. Brokers go down and up now and
    then so that masters expire and elections happen."""

    name = "controller"
    PATH = "/api/v1/controller/"

    def __init__(self, concurrency: int, broker_sets: int = 3, replicas: int = 3) -> None:
        self.brokers = [
            Broker(f"bs{s}", b, f"10.255.{s}.{b}:10911")
            for s in range(1, broker_sets + 1)
            for b in range(1, replicas + 1)
        ]
        self.names = sorted({b.name for b in self.brokers})
        self.views: dict[str, View] = {n: View() for n in self.names}
        self._lock = threading.Lock()

    def _claim(self, pred: Callable[[Broker], bool], rng: random.Random) -> Broker | None:
        with self._lock:
            free = [b for b in self.brokers if not b.busy and pred(b)]
            if not free:
                return None
            b = rng.choice(free)
            b.busy = True
            return b

    def _call(
        self,
        worker: Worker,
        f: str,
        key: str | None,
        request: dict[str, Any],
        *,
        read: bool,
        ok_codes: frozenset[int] = frozenset({0}),
    ) -> tuple[str, Answer]:
        inv = worker.invoke(f, key, request)
        path = "/api/v1/admin/sync-state-data" if f == "sync-state-data" else self.PATH + f
        a = worker.client.call("POST", path, request)
        t = outcome(a, read=read, ok_codes=ok_codes)
        value: Any = None
        if t == OK:
            value = self._observation(f, a)
            if f in ("replica-info", "elect-master", "register-broker") and key is not None:
                self._learn(key, value)
            elif f == "sync-state-data":
                for name, obs in value.items():
                    if name in self.views:
                        self._learn(name, obs)
        worker.complete(inv, t, value, a)
        return t, a

    def _observation(self, f: str, a: Answer) -> Any:
        if f == "heartbeat" or f == "apply-broker-id":
            return None
        if f == "next-broker-id":
            return {"nextBrokerId": (a.header or {}).get("nextBrokerId")}
        if f == "sync-state-data":
            table = (a.body or {}).get("replicasInfoTable") or {}
            return {
                name: {
                    "masterBrokerId": info.get("masterBrokerId"),
                    "masterEpoch": info.get("masterEpoch"),
                    "syncStateSetEpoch": info.get("syncStateSetEpoch"),
                    "syncStateSet": sorted(r["brokerId"] for r in info.get("inSyncReplicas") or []),
                }
                for name, info in table.items()
            }
        if f == "alter-sync-state-set":
            body = a.body or {}
            return {
                "syncStateSet": sorted(body.get("syncStateSet") or []),
                "syncStateSetEpoch": body.get("syncStateSetEpoch"),
            }
        return _state(a.header, a.body)

    def _learn(self, name: str, obs: dict[str, Any]) -> None:
        with self._lock:
            v = self.views[name]
            if obs.get("masterEpoch") is not None and (v.master_epoch is None or obs["masterEpoch"] >= v.master_epoch):
                v.master, v.master_epoch = obs.get("masterBrokerId"), obs["masterEpoch"]
            if obs.get("syncStateSetEpoch") is not None and (
                v.sss_epoch is None or obs["syncStateSetEpoch"] >= v.sss_epoch
            ):
                v.sss_epoch = obs["syncStateSetEpoch"]
                if obs.get("syncStateSet") is not None:
                    v.sss = list(obs["syncStateSet"])

    def heartbeat(self, worker: Worker, b: Broker) -> None:
        b.last_heartbeat = time.monotonic()
        self._call(
            worker,
            "heartbeat",
            b.name,
            {
                "clusterName": CLUSTER,
                "brokerName": b.name,
                "brokerAddr": b.addr,
                "brokerId": b.id,
                "heartbeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
            },
            read=False,
        )

    def register(self, worker: Worker, b: Broker) -> None:
        t, a = self._call(worker, "next-broker-id", b.name, {"clusterName": CLUSTER, "brokerName": b.name}, read=True)
        if t != OK:
            return
        t, a = self._call(
            worker,
            "apply-broker-id",
            b.name,
            {
                "clusterName": CLUSTER,
                "brokerName": b.name,
                "appliedBrokerId": b.id,
                "registerCheckCode": f"{b.addr};{b.id}",
            },
            read=False,
        )
        if t != OK:
            return
        t, a = self._call(
            worker,
            "register-broker",
            b.name,
            {"clusterName": CLUSTER, "brokerName": b.name, "brokerId": b.id, "brokerAddress": b.addr},
            read=False,
        )
        if t == OK:
            b.registered = True
            self.heartbeat(worker, b)

    def _with_broker(self, pred: Callable[[Broker], bool], rng: random.Random, action: Callable[[Broker], Any]) -> bool:
        """Claim a free broker that `pred` accepts, run `action` on it and release it; False when none was free."""
        b = self._claim(pred, rng)
        if b is None:
            return False
        try:
            action(b)
        finally:
            b.busy = False
        return True

    def op(self, worker: Worker) -> None:
        rng = worker.rng
        now = time.monotonic()

        def due(b: Broker) -> bool:  # a heartbeat is due
            return b.up and b.registered and now - b.last_heartbeat >= HEARTBEAT_EVERY_S

        if self._with_broker(due, rng, lambda b: self.heartbeat(worker, b)):
            return
        if self._with_broker(lambda b: not b.registered, rng, lambda b: self.register(worker, b)):
            return
        name = rng.choice(self.names)
        r = rng.random()
        if r < 0.3:
            self._call(worker, "replica-info", name, {"brokerName": name}, read=True)
        elif r < 0.5:
            self._with_broker(lambda b: b.name == name and b.up, rng, lambda b: self.elect(worker, b))
        elif r < 0.8:
            self.alter(worker, name)
        elif r < 0.9:
            self._call(worker, "sync-state-data", None, {"brokerNames": list(self.names)}, read=True)
        else:
            # a broker going down stops heartbeating; coming back it heartbeats at once
            self._with_broker(lambda b: b.registered, rng, _toggle)

    def elect(self, worker: Worker, b: Broker) -> None:
        """An election as a broker asks for it: with its own id (2011: a master still exists, and is reported)."""
        self._call(
            worker,
            "elect-master",
            b.name,
            {"clusterName": CLUSTER, "brokerName": b.name, "brokerId": b.id},
            read=False,
            ok_codes=frozenset({0, MASTER_STILL_EXIST}),
        )

    def alter(self, worker: Worker, name: str) -> None:
        t, _ = self._call(worker, "replica-info", name, {"brokerName": name}, read=True)
        if t != OK:
            return
        with self._lock:
            v = self.views[name]
            master, epoch, sss, sss_epoch = v.master, v.master_epoch, list(v.sss), v.sss_epoch
        if master is None or epoch is None or sss_epoch is None:
            return
        ids = sorted({b.id for b in self.brokers if b.name == name and b.registered})
        others = [i for i in ids if i != master]
        if not others:
            return
        flip = worker.rng.choice(others)
        new = sorted(set(sss) ^ {flip} | {master})
        request = {
            "brokerName": name,
            "masterBrokerId": master,
            "masterEpoch": epoch,
            "syncStateSet": {"syncStateSet": new, "syncStateSetEpoch": sss_epoch},
        }
        inv = worker.invoke(
            "alter-sync-state-set",
            name,
            {"masterBrokerId": master, "masterEpoch": epoch, "syncStateSet": new, "syncStateSetEpoch": sss_epoch},
        )
        a = worker.client.call("POST", self.PATH + "alter-sync-state-set", request)
        t = outcome(a, read=False)
        value = self._observation("alter-sync-state-set", a) if t == OK else inv["value"]
        if t == OK:
            self._learn(name, {"syncStateSet": value["syncStateSet"], "syncStateSetEpoch": value["syncStateSetEpoch"]})
        worker.complete(inv, t, value, a)

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        while True:
            t, _ = self._call(worker, "sync-state-data", None, {"brokerNames": list(self.names)}, read=True)
            if t == OK:
                return {}
            if time.monotonic() >= deadline:
                return {"unread": "sync-state-data"}
            time.sleep(0.2)  # the cluster is recovering; bounded by the deadline

    def stats(self) -> dict[str, Any]:
        return {
            "broker_sets": len(self.names),
            "brokers": len(self.brokers),
            "registered": sum(b.registered for b in self.brokers),
        }


# ------------------------------------------------------------------------------------------------ checker

EPOCHS = ("masterEpoch", "syncStateSetEpoch")
_MAX_LISTED = 20


def _int_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool))


def _observation(op: Op, broker: Key, obj: Any) -> dict[str, Any]:
    line = op.complete_line or 0
    if not isinstance(obj, dict):
        raise HistoryError(line, "value", f"the state of broker-set {broker!r} must be an object, got {obj!r}")
    obs = {}
    for name in ("masterBrokerId", *EPOCHS):
        v = obj.get(name)
        if not _int_or_none(v):
            raise HistoryError(line, "value", f"{name} of broker-set {broker!r} must be an integer or null, got {v!r}")
        obs[name] = v
    sss = obj.get("syncStateSet")
    if sss is not None and not (isinstance(sss, list) and all(_int_or_none(x) and x is not None for x in sss)):
        raise HistoryError(
            line, "value", f"syncStateSet of broker-set {broker!r} must be a list of brokerIds, got {sss!r}"
        )
    obs["syncStateSet"] = None if sss is None else sorted(sss)
    return obs


def observations(op: Op) -> Iterator[tuple[Key, dict[str, Any]]]:
    """(brokerName, observed fields) pairs carried by one ok op."""
    if op.type != OK or op.result is None:
        return
    if op.f == "sync-state-data":
        if not isinstance(op.result, dict):
            raise HistoryError(op.complete_line or 0, "value", "a sync-state-data value maps brokerName to its state")
        for broker, obj in op.result.items():
            yield broker, _observation(op, broker, obj)
        return
    obs = _observation(op, op.key, op.result)
    if op.f == "alter-sync-state-set":
        if obs["syncStateSetEpoch"] is None or obs["syncStateSet"] is None:
            raise HistoryError(
                op.complete_line or 0, "value", "an ok alter-sync-state-set carries syncStateSetEpoch and syncStateSet"
            )
        request = op.value if isinstance(op.value, dict) else {}
        for name in ("masterBrokerId", "masterEpoch"):
            if obs[name] is None and _int_or_none(request.get(name)):
                obs[name] = request.get(name)
    yield op.key, obs


def check_controller(ops: Iterable[Op]) -> dict[str, Any]:
    ops = sorted(ops, key=lambda o: o.invoke_line)
    masters: dict[tuple[Key, int], dict[int, Op]] = defaultdict(dict)
    views: dict[tuple[int, Key], dict[str, tuple[int, Op]]] = defaultdict(dict)
    split_brain: list[dict[str, Any]] = []
    backwards: list[dict[str, Any]] = []
    n_obs = 0
    for op in ops:
        for broker, obs in observations(op):
            n_obs += 1
            master, epoch = obs["masterBrokerId"], obs["masterEpoch"]
            if master is not None and epoch is not None:
                seen = masters[(broker, epoch)]
                if master not in seen:
                    if seen:
                        other_id, other = next(iter(seen.items()))
                        split_brain.append(
                            {
                                "brokerName": broker,
                                "masterEpoch": epoch,
                                "masters": [other_id, master],
                                "ops": [other.to_json(), op.to_json()],
                            }
                        )
                    seen[master] = op
            view = views[(op.process, broker)]
            for name in EPOCHS:
                v = obs[name]
                if v is None:
                    continue
                if name in view and v < view[name][0]:
                    before, prev = view[name]
                    backwards.append(
                        {
                            "process": op.process,
                            "brokerName": broker,
                            "field": name,
                            "from": before,
                            "to": v,
                            "ops": [prev.to_json(), op.to_json()],
                        }
                    )
                view[name] = (v, op)
    lost, unjudged, acked = _check_alters(ops)
    verdict = INVALID if split_brain or backwards or lost else UNKNOWN if unjudged else VALID
    return {
        "verdict": verdict,
        "counts": {
            "ops": len(ops),
            "observations": n_obs,
            "broker_sets": len({b for b, _ in masters} | {b for _, b in views}),
            "masters_observed": len(masters),
            "acknowledged_alters": acked,
            "single_master_violations": len(split_brain),
            "monotonic_epochs_violations": len(backwards),
            "acknowledged_alters_violations": len(lost),
            "unjudged_alters": len(unjudged),
        },
        "single_master": split_brain[:_MAX_LISTED],
        "monotonic_epochs": backwards[:_MAX_LISTED],
        "acknowledged_alters": lost[:_MAX_LISTED],
        "unjudged_alters": unjudged[:_MAX_LISTED],
    }


def _check_alters(ops: list[Op]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(violations, alters that cannot be judged, acknowledged alters)."""
    finals = [op for op in ops if op.f == "sync-state-data" and op.type == OK and op.result is not None]
    final = max(finals, key=lambda o: (o.invoke_time, o.invoke_line)) if finals else None
    final_state = dict(observations(final)) if final is not None else {}
    lost: list[dict[str, Any]] = []
    unjudged: list[dict[str, Any]] = []
    acked = 0
    for op in ops:
        if op.f != "alter-sync-state-set" or op.type != OK:
            continue
        acked += 1
        ((_, obs),) = observations(op)
        epoch, members = obs["syncStateSetEpoch"], obs["syncStateSet"]
        entry = {"brokerName": op.key, "syncStateSetEpoch": epoch, "syncStateSet": members, "op": op.to_json()}
        if final is None or (op.complete_time or 0) > final.invoke_time:
            unjudged.append(entry | {"reason": "no sync-state-data read invoked after it was acknowledged"})
            continue
        now = final_state.get(op.key)
        if now is None or now["syncStateSetEpoch"] is None:
            lost.append(entry | {"final": None, "reason": "the broker-set is missing from the final state"})
        elif now["syncStateSetEpoch"] < epoch:
            lost.append(entry | {"final": now, "reason": "the final syncStateSetEpoch is older"})
        elif now["syncStateSetEpoch"] == epoch and now["syncStateSet"] != members:
            lost.append(entry | {"final": now, "reason": "the final state has another set under the same epoch"})
    return lost, unjudged, acked


def validate(op: Op) -> None:
    if op.key is None and op.f != "sync-state-data":
        raise HistoryError(op.invoke_line, "key", f"missing: a controller {op.f} names its brokerName as key")
    if op.type == OK and op.result is not None and not isinstance(op.result, dict):
        raise HistoryError(
            op.complete_line or 0, "value", f"a controller response must be an object, got {op.result!r}"
        )


def details(res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for v in res["single_master"][:3]:
        out.append(f"two masters of {v['brokerName']!r} at masterEpoch {v['masterEpoch']}: {v['masters']}")
    for v in res["monotonic_epochs"][:3]:
        out.append(f"process {v['process']} saw {v['field']} of {v['brokerName']!r} go from {v['from']} to {v['to']}")
    for v in res["acknowledged_alters"][:3]:
        out.append(
            f"acknowledged SyncStateSet {v['syncStateSet']} (epoch {v['syncStateSetEpoch']}) of "
            f"{v['brokerName']!r} lost: {v['reason']}"
        )
    for v in res["unjudged_alters"][:1]:
        out.append(f"cannot judge the alter of {v['brokerName']!r} on lines {v['op']['lines']}: {v['reason']}")
    return out


SPEC = WorkloadSpec(NAME, Controller, FS, validate, CHECKER, lambda ops, _: check_controller(ops), COUNTS, details)

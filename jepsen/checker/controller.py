"""The controller-invariant checker (docs/jepsen.md, the `controller` workload).

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

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID
from jepsen.history import OK, HistoryError, Key, Op

NAME = "controller-invariants"
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

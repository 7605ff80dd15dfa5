"""One replay partition ("bucket"): the project's ControllerStateMachine applies the bucket's commands in
log order, and at every snapshot index the replayed entities are compared with each node's snapshot,
value by value; the whole-log invariants are checked after every command that can change a broker-set.

The replay runs through each snapshot point rather than restarting from it: where the snapshot agrees,
this is exactly a replay from the previous snapshot; where it does not, the finding stays with that
snapshot and later ones are still judged against the log.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from statemachine import ControllerStateMachine
from statemachine import codes as C
from statemachine.inspection import decode_sections, diff_values
from tools.audit.model import NAME_AT, Buckets, Finding, js, split_state
from tools.audit.tasks import Routed, pack_slice, routed_commands

_SET_CHANGING = frozenset(NAME_AT) - {C.BROKER_HEARTBEAT}
_NEVER = 1 << 63


@dataclass
class ReplayPlan:
    """What every bucket needs, broadcast: the group, where the replay starts and ends, the snapshot points."""

    group: str
    base_index: int  # 0: from an empty state; else the snapshot whose bodies are `base_bodies`
    base_bodies: dict[int, bytes] | None
    end: int  # the last index the canonical log holds contiguously from base_index + 1
    points: list[tuple[int, list[int]]]  # (snapshot index, readable snapshots' nids), ascending
    node_names: dict[int, str]
    source_of: list[tuple[int, int, int]] = field(default_factory=list)  # canonical (lo, hi, nid), for findings
    # (nid, index) of a snapshot -> the copy with the same bytes whose slices stand for it (decoded once)
    aliases: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)


@dataclass
class ReplayOut:
    bucket: int
    applied: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    # brokerName -> [(masterEpoch, master brokerId, its address as registered, log index)]: every master the
    # replay saw the controller give, in log order (the base snapshot's masters at base_index first); the
    # brokers' epoch files are checked against it (tools/audit/epochs.py)
    elections: dict[str, list[tuple[int, int, str | None, int]]] = field(default_factory=dict)


def _restrict(sm: ControllerStateMachine, bucket: int, buckets: Buckets) -> None:
    """Keep only the bucket's entities of a loaded state (config stays everywhere: it steers elections)."""
    kind = buckets.kind(bucket)
    keep_set = (lambda n: buckets.of_set(n) == bucket) if kind == "set" else (lambda n: False)
    for name in [n for n in sm.replicas.sets if not keep_set(n)]:
        del sm.replicas.sets[name]
    for name in [n for n in sm.sync.sets if not keep_set(n)]:
        del sm.sync.sets[name]
    for key in [k for k in sm.live.table if not keep_set(k[1])]:
        del sm.live.table[key]
    for name in [n for n in sm.live.reelect if not keep_set(n)]:
        del sm.live.reelect[name]
    for ns in list(sm.kv.table):
        keys = sm.kv.table[ns]
        for k in [k for k in keys if kind != "kv" or buckets.of_kv(ns, k) != bucket]:
            del keys[k]
        if not keys:
            del sm.kv.table[ns]
    sm.load_sections(sm.encode_sections())  # through the managers' own load: derived fields recomputed


class _Invariants:
    def __init__(self, elections: dict[str, list[tuple[int, int, str | None, int]]]) -> None:
        self.epochs: dict[str, tuple[int, int]] = {}
        self.masters: dict[str, dict[int, int]] = {}
        self.elections = elections

    def record(self, sm: ControllerStateMachine, name: str, index: int) -> None:
        state = sm.sync.sets.get(name)
        if state is None or state.master_broker_id is None:
            return
        got = self.elections.setdefault(name, [])
        if got and got[-1][:2] == (state.master_epoch, state.master_broker_id):
            return
        info = sm.replicas.sets.get(name)
        address = info.address(state.master_broker_id) if info is not None else None
        got.append((state.master_epoch, state.master_broker_id, address, index))

    def check(self, sm: ControllerStateMachine, name: str, index: int, emit: Any) -> None:
        state = sm.sync.sets.get(name)
        if state is None:  # cleaned: a set registered again later starts afresh
            self.epochs.pop(name, None)
            self.masters.pop(name, None)
            return
        me, se = state.master_epoch, state.sync_state_set_epoch
        old = self.epochs.get(name)
        if old is not None and (me < old[0] or se < old[1]):
            field_ = "masterEpoch" if me < old[0] else "syncStateSetEpoch"
            emit(
                "invariant.epoch_monotonic",
                name,
                index,
                field_,
                old[0] if me < old[0] else old[1],
                me if me < old[0] else se,
                f"{field_} of {name} went from {old} to {(me, se)} at index {index}",
            )
        self.epochs[name] = (me, se)
        self.record(sm, name, index)
        master = state.master_broker_id
        if master is not None:
            seen = self.masters.setdefault(name, {})
            prev = seen.setdefault(me, master)
            if prev != master:
                emit(
                    "invariant.one_master_per_epoch",
                    name,
                    index,
                    "masterBrokerId",
                    prev,
                    master,
                    f"{name} has masters {prev} and {master} in masterEpoch {me}",
                )
            if master not in state.sync_state_set and not sm.config.enable_elect_unclean_master:
                emit(
                    "invariant.master_in_sync_state_set",
                    name,
                    index,
                    "syncStateSet",
                    sorted(state.sync_state_set),
                    master,
                    f"master {master} of {name} is not in its SyncStateSet, unclean election off",
                )
        info = sm.replicas.sets.get(name)
        if info is not None:
            codes: dict[str, int] = {}
            for bid in sorted(info.brokers):
                code = info.brokers[bid][1]
                if code in codes:
                    emit(
                        "invariant.unique_broker_ids",
                        name,
                        index,
                        "brokerIdTable",
                        codes[code],
                        bid,
                        f"registerCheckCode {code!r} holds ids {codes[code]} and {bid} in {name}",
                    )
                codes[code] = bid


def replay_bucket(
    bucket: int, pieces: Iterable[Routed], slices: Iterable[tuple[int, int, bytes]], plan: ReplayPlan, buckets: Buckets
) -> ReplayOut:
    """Apply the bucket's commands (tasks.Routed pieces) and compare at each snapshot point with
    the snapshots' slices ((nid, index, tasks.pack_slice({(section, entity): value})))."""
    out = ReplayOut(bucket)
    sm = ControllerStateMachine()
    if plan.base_bodies is not None:
        sm.load_sections(plan.base_bodies)
        _restrict(sm, bucket, buckets)
    snap: dict[tuple[int, int], bytes] = {(n, i): s for n, i, s in slices}
    points = [p for p in plan.points if plan.base_index < p[0] <= plan.end]
    inv = _Invariants(out.elections)
    for name in sorted(sm.sync.sets):  # the base snapshot's masters: the replay knows them from base_index
        inv.record(sm, name, max(plan.base_index, 0))

    def source(index: int) -> str:
        for lo, hi, nid in plan.source_of:
            if lo <= index <= hi:
                return plan.node_names[nid]
        return "*"

    def emit(check: str, name: str, index: int, field_: str, before: Any, after: Any, detail: str) -> None:
        out.findings.append(
            Finding(
                plan.group,
                source(index),
                check,
                log_index=index,
                section="syncStateSetInfoTable" if "epoch" in check or "master" in check else "replicaInfoTable",
                entity=name,
                field=field_,
                snapshot_value=js(before),
                replayed_value=js(after),
                detail=detail,
            ).row()
        )

    p = 0
    apply, heartbeat, scan = sm.apply_command, C.BROKER_HEARTBEAT, C.CHECK_NOT_ACTIVE_BROKER
    upcoming = points[0][0] if points else _NEVER
    applied = 0
    for piece in sorted(pieces, key=lambda x: x[0]):  # routed to (base_index, end] only
        for index, code, c in routed_commands(piece):
            while index > upcoming:
                _compare(out, sm, points[p], snap, plan, bucket, buckets)
                p += 1
                upcoming = points[p][0] if p < len(points) else _NEVER
            result = apply(c)  # changes no more of `c` than its time
            applied += 1
            if code == heartbeat or (code not in _SET_CHANGING and code != scan):
                continue
            names = set()
            if code in NAME_AT:
                names.add(c[NAME_AT[code]])
            body = result.body if isinstance(result.body, dict) else {}
            names.update(e["brokerName"] for e in body.get("elections", ()))
            for n in sorted(names):
                inv.check(sm, n, index, emit)
    out.applied = applied
    while p < len(points):
        _compare(out, sm, points[p], snap, plan, bucket, buckets)
        p += 1
    return out


def _compare(
    out: ReplayOut,
    sm: ControllerStateMachine,
    point: tuple[int, list[int]],
    snap: dict[tuple[int, int], bytes],
    plan: ReplayPlan,
    bucket: int,
    buckets: Buckets,
) -> None:
    index, nids = point
    replayed = split_state(decode_sections(sm.encode_sections()), buckets).get(bucket, {})
    same = pack_slice(replayed)
    for nid in nids:
        packed = snap.get(plan.aliases.get((nid, index), (nid, index)))
        if packed == same or (packed is None and not replayed):  # equal bytes: equal values, nothing to report
            continue
        mine = {} if packed is None else pickle.loads(packed)
        for key in sorted(set(mine) | set(replayed)):
            section, entity = key
            a, b = mine.get(key), replayed.get(key)
            if key not in mine or key not in replayed:
                diffs = [{"path": "", "a": a, "b": b}]
            else:
                diffs = diff_values(a, b)
            for d in diffs:
                what = (
                    "missing from the snapshot"
                    if key not in mine
                    else "not in the replay"
                    if key not in replayed
                    else f"differs at {d['path'] or 'the whole value'}"
                )
                out.findings.append(
                    Finding(
                        plan.group,
                        plan.node_names[nid],
                        "snapshot.replay",
                        snapshot_index=index,
                        log_index=index,
                        section=section,
                        entity=entity,
                        field=d["path"] or None,
                        snapshot_value=js(d["a"]),
                        replayed_value=js(d["b"]),
                        detail=f"{section} {entity}: {what}",
                    ).row()
                )

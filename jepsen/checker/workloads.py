"""Which workload each op belongs to, and the shape of its values (docs/jepsen.md, "Workloads").

- register: `read`, `write`, `cas`, `delete` on a key; values are strings or integers, a read of an
  absent key is null, a cas value is [expected-or-null, new]. An ok cas completes with `false` when its
  precondition failed (with `current`, the value it saw, when known), else `true`, its invoke's value or null.
- set: `add` of one element, `read` of the whole set (an ok read's value is a list). The key names the
  set and may be null. A key belongs to the set workload when it has an add or a read returning a list.
- controller: the broker endpoints' names; the key is the brokerName (null for `sync-state-data`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jepsen.history import OK, HistoryError, Key, Op

REGISTER, SET, CONTROLLER = "register", "set", "controller"
WORKLOADS = (REGISTER, SET, CONTROLLER)
REGISTER_FS = frozenset({"read", "write", "cas", "delete"})
SET_FS = frozenset({"add", "read"})
CONTROLLER_FS = frozenset(
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


def _scalar(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def _scalar_or_null(v: Any) -> bool:
    return v is None or _scalar(v)


def classify(ops: Iterable[Op]) -> dict[str, list[Op]]:
    """Split client ops by workload, validating each op's values. Raises HistoryError."""
    ops = list(ops)
    set_keys: set[Key] = set()
    for op in ops:
        if op.f == "add" or (op.f == "read" and op.type == OK and isinstance(op.result, list)):
            set_keys.add(op.key)
    out: dict[str, list[Op]] = {w: [] for w in WORKLOADS}
    register_writers: dict[Key, Op] = {}
    for op in ops:
        if op.f in CONTROLLER_FS:
            _check_controller(op)
            out[CONTROLLER].append(op)
        elif op.f in SET_FS and op.key in set_keys:
            _check_set(op)
            out[SET].append(op)
        elif op.f in REGISTER_FS:
            _check_register(op)
            register_writers.setdefault(op.key, op)
            out[REGISTER].append(op)
        else:
            raise HistoryError(
                op.invoke_line,
                "f",
                f"unknown operation {op.f!r} (register: {', '.join(sorted(REGISTER_FS))}; set: add, read; "
                f"controller: {', '.join(sorted(CONTROLLER_FS))})",
            )
    for key in set_keys & register_writers.keys():
        op = register_writers[key]
        raise HistoryError(op.invoke_line, "key", f"key {key!r} is used by both the set and the register workload")
    return {w: v for w, v in out.items() if v}


def _check_register(op: Op) -> None:
    if op.key is None:
        raise HistoryError(op.invoke_line, "key", f"missing: a register {op.f} names its key")
    if op.f == "write" and not _scalar(op.value):
        raise HistoryError(op.invoke_line, "value", f"a write's value must be a string or an integer, got {op.value!r}")
    if op.f == "cas":
        v = op.value
        if not (isinstance(v, list) and len(v) == 2 and (v[0] is None or _scalar(v[0])) and _scalar(v[1])):
            raise HistoryError(
                op.invoke_line,
                "value",
                f"a cas's value must be [expected or null, new] of strings or integers, got {v!r}",
            )
    if op.type != OK:
        return
    if op.f == "read" and not (op.result is None or _scalar(op.result)):
        raise HistoryError(
            op.complete_line or 0, "value", f"a read's value must be a string, integer or null, got {op.result!r}"
        )
    if op.f == "cas" and not (op.result is None or isinstance(op.result, bool) or op.result == op.value):
        raise HistoryError(
            op.complete_line or 0,
            "value",
            f"an ok cas's value must be false (not applied), true or its invoke's [expected, new], got {op.result!r}",
        )
    if op.f == "cas" and "current" in op.extra and not (op.result is False and _scalar_or_null(op.extra["current"])):
        raise HistoryError(
            op.complete_line or 0,
            "current",
            "only a cas that did not apply (value false) carries `current`, the value it saw: a string, an "
            f"integer or null, got {op.extra['current']!r}",
        )
    if op.f == "delete" and not (op.result is None or isinstance(op.result, bool)):
        raise HistoryError(
            op.complete_line or 0, "value", f"a delete's value must be true, false or null, got {op.result!r}"
        )


def _check_set(op: Op) -> None:
    if op.f == "add" and not _scalar(op.value):
        raise HistoryError(
            op.invoke_line, "value", f"an add's element must be a string or an integer, got {op.value!r}"
        )
    if op.f == "read" and op.type == OK:
        r = op.result
        if not (isinstance(r, list) and all(_scalar(e) for e in r)):
            raise HistoryError(
                op.complete_line or 0, "value", f"a set read's value must be a list of elements, got {r!r}"
            )


def _check_controller(op: Op) -> None:
    if op.key is None and op.f != "sync-state-data":
        raise HistoryError(op.invoke_line, "key", f"missing: a controller {op.f} names its brokerName as key")
    if op.type == OK and op.result is not None and not isinstance(op.result, dict):
        raise HistoryError(
            op.complete_line or 0, "value", f"a controller response must be an object, got {op.result!r}"
        )

"""The `register` workload: reads, writes and cas on KV keys, judged for linearizability (docs/jepsen.md).

- generator: 50 % reads, 25 % writes, 25 % cas on `/api/v1/kv/jepsen/k<N>`; written values are integers,
  unique in the run, sent as strings; a cas expects the latest value any client saw. The workers form groups
  of up to 5, each on one key at a time (`KeyPool`).
- client: a GET of an absent key reads null; a cas answered `succeeded: false` is an ok op with the value
  false and `current`, the value the key held when the log applied it.
- vocabulary: `read`, `write`, `cas`, `delete` on a key; values are strings or integers, a read of an absent
  key is null, a cas value is [expected-or-null, new]. An ok cas completes with `false` when its
  precondition failed (with `current`, the value it saw, when known), else `true`, its invoke's value or null.
- checker: the WGL search per key against the KV register model (jepsen.checker.linearizable).
"""

from __future__ import annotations

import threading
from typing import Any

from jepsen.checker import linearizable
from jepsen.checker.linearizable import CheckOptions, describe_op
from jepsen.client import QUERY_NOT_FOUND, outcome
from jepsen.history import INFO, OK, HistoryError, Op
from jepsen.workloads.base import (
    KEY_GROUP,
    KeyPool,
    Worker,
    Workload,
    WorkloadSpec,
    kv_path,
    parse_value,
    read_until_ok,
    scalar,
    scalar_or_null,
)

NAME = "register"
FS = frozenset({"read", "write", "cas", "delete"})
COUNTS = (
    "{keys} keys ({invalid_keys} invalid, {unknown_keys} unknown), {ops} ops, {configs} configurations, {elapsed_s} s"
)


class Register(Workload):
    name = "register"

    def __init__(self, concurrency: int) -> None:
        self.keys = KeyPool("k", slots=-(-concurrency // KEY_GROUP))  # groups of up to 5 workers per key
        self.values = iter(range(1, 1 << 62))
        self._lock = threading.Lock()
        self.last: dict[str, Any] = {}  # the latest value anyone saw per key: a cas expectation that may hold

    def _unique(self) -> int:
        with self._lock:
            return next(self.values)

    def op(self, worker: Worker) -> None:
        key = self.keys.acquire(worker.process, worker.index)
        r = worker.rng.random()
        if r < 0.5:
            self.read(worker, key)
        elif r < 0.75:
            self.write(worker, key, self._unique())
        else:
            self.cas(worker, key, self.last.get(key), self._unique())

    def read(self, worker: Worker, key: str) -> str:
        inv = worker.invoke("read", key, None)
        a = worker.client.call("GET", kv_path(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            worker.complete(inv, OK, None, a)
            return OK
        t = outcome(a, read=True)
        value = parse_value((a.body or {}).get("value")) if t == OK else None
        if t == OK:
            self.last[key] = value
        worker.complete(inv, t, value, a)
        return t

    def write(self, worker: Worker, key: str, value: int) -> None:
        inv = worker.invoke("write", key, value)
        a = worker.client.call("PUT", kv_path(key), {"value": str(value)})
        t = outcome(a, read=False)
        if t == OK:
            self.last[key] = value
        worker.complete(inv, t, value, a)

    def cas(self, worker: Worker, key: str, expect: Any, new: int) -> None:
        inv = worker.invoke("cas", key, [expect, new])
        a = worker.client.call(
            "POST", kv_path(key) + "/cas", {"expect": None if expect is None else str(expect), "value": str(new)}
        )
        t = outcome(a, read=False)
        body = a.body if isinstance(a.body, dict) else {}
        applied = body.get("succeeded")
        if t == OK and applied is False:
            # Not applied: the log ordered this cas at an instant when the key held `current`, not `expect`.
            # That is an observation (an ok op with the result false), not an op that did not happen.
            current = parse_value(body.get("value"))
            self.last[key] = current
            worker.complete(inv, OK, False, a, current=current)
            return
        if t == OK and applied is not True:  # code 0 without an answer we understand: it may have applied
            worker.complete(inv, INFO, [expect, new], a, error=f"cas: no 'succeeded' in the answer {a.env!r:.200}")
            return
        if t == OK:
            self.last[key] = new
        worker.complete(inv, t, [expect, new], a)

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        unread = read_until_ok(self.keys.all, lambda key: self.read(worker, key), deadline)
        return {"unread_keys": unread} if unread else {}

    def stats(self) -> dict[str, Any]:
        return {"keys": len(self.keys.all), "max_ops_per_key": max(self.keys.ops.values(), default=0)}


# ------------------------------------------------------------------------------------------------ checker


def validate(op: Op) -> None:
    if op.key is None:
        raise HistoryError(op.invoke_line, "key", f"missing: a register {op.f} names its key")
    if op.f == "write" and not scalar(op.value):
        raise HistoryError(op.invoke_line, "value", f"a write's value must be a string or an integer, got {op.value!r}")
    if op.f == "cas":
        v = op.value
        if not (isinstance(v, list) and len(v) == 2 and (v[0] is None or scalar(v[0])) and scalar(v[1])):
            raise HistoryError(
                op.invoke_line,
                "value",
                f"a cas's value must be [expected or null, new] of strings or integers, got {v!r}",
            )
    if op.type != OK:
        return
    if op.f == "read" and not (op.result is None or scalar(op.result)):
        raise HistoryError(
            op.complete_line or 0, "value", f"a read's value must be a string, integer or null, got {op.result!r}"
        )
    if op.f == "cas" and not (op.result is None or isinstance(op.result, bool) or op.result == op.value):
        raise HistoryError(
            op.complete_line or 0,
            "value",
            f"an ok cas's value must be false (not applied), true or its invoke's [expected, new], got {op.result!r}",
        )
    if op.f == "cas" and "current" in op.extra and not (op.result is False and scalar_or_null(op.extra["current"])):
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


def check(ops: list[Op], options: CheckOptions) -> dict[str, Any]:
    return linearizable.check_register(
        ops, budget_s=options.budget_s, shrink_budget_s=options.shrink_budget_s, max_configs=options.max_configs
    ).to_json()


def details(res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for u in res["unknown"][:3]:
        out.append(f"key {u['key']!r}: unknown ({u['reason']})")
    for f in res["failures"][:2]:
        out.extend(_failure_lines(f))
    return out


def _failure_lines(f: dict[str, Any]) -> list[str]:
    op = f["op"]
    out = [
        f"key {f['key']!r}: cannot linearize {describe_op(Op.from_json(op)).strip()}",
        f"state after the longest linearizable prefix ({f['linearized_count']} ops): {f['state']!r}",
        f"smallest failing window ({f['window_count']} ops):"
        if f.get("window_minimal", True)
        else f"failing window ({f['window_count']} ops; the shrink budget ran out, a smaller one may exist):",
    ]
    out.extend("  " + describe_op(Op.from_json(o)) for o in f["window"][:12])
    if f["window_count"] > 12:
        out.append(f"  ... {f['window_count'] - 12} more in results.json")
    return out


SPEC = WorkloadSpec(NAME, Register, FS, validate, linearizable.NAME, check, COUNTS, details)

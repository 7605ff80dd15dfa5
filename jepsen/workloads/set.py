"""The `set` workload: unique elements added to sets held in KV keys, checked for lost and stale elements
(docs/jepsen.md).

- generator: 80 % adds of a fresh element, 20 % reads, on sets `s1`, `s2`, ... (a set is retired after 500
  operations); after the heal every set is read once more.
- client: a set is one KV key holding `e1,e2,...`; an add reads it and cas-es it to itself plus the element,
  retrying on a lost race (30 times at most, then `fail`), so an add is atomic and a read returns the set as
  of one instant.
- vocabulary: `add` of one element, `read` of the whole set (an ok read's value is a list). The key names the
  set and may be null. A key belongs to the set workload when it has an add or a read returning a list.
- checker: Jepsen's `set`, with `set-full`'s stale elements. Per set (key):
  - final read: the ok read invoked last;
  - lost: elements that were acknowledged (ok add), or seen by some read, but are missing from the final
    read;
  - unexpected: elements some read returned that were never attempted, or whose add failed (a `fail` add
    surely did not happen);
  - recovered: elements whose add was indeterminate (`info`) and that are in the final read;
  - stale: elements present in the final read but missing from a read invoked after their add had been
    acknowledged. KV reads are linearizable, so a stale element is an error too.

  Valid when nothing is lost, unexpected or stale; unknown when a set has no ok read at all.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID, combine
from jepsen.client import QUERY_NOT_FOUND, outcome
from jepsen.history import FAIL, INFO, OK, HistoryError, Key, Op
from jepsen.workloads.base import KeyPool, Worker, Workload, WorkloadSpec, kv_path, read_until_ok, scalar

NAME = "set"
FS = frozenset({"add", "read"})
CHECKER = "set"
COUNTS = "{attempted} attempted, {acknowledged} acknowledged, lost {lost}, unexpected {unexpected}, stale {stale}, recovered {recovered}"
_MAX_LISTED = 100


def _elements(text: Any) -> list[int]:
    if not text:
        return []
    return [int(x) for x in str(text).split(",") if x]


class SetWorkload(Workload):
    """Sets held in KV keys `s1`, `s2`, ...: an add reads the set, then cas-es it to itself plus the element,
    retrying on a lost race. The cas makes an add atomic; a read returns the set as of one instant."""

    name = "set"
    MAX_ELEMENTS = 250
    CAS_TRIES = 30

    def __init__(self, concurrency: int) -> None:
        self.keys = KeyPool("s", slots=1, max_ops=self.MAX_ELEMENTS * 2, max_procs=10**9)
        self.elements = iter(range(1, 1 << 62))
        self._lock = threading.Lock()

    def op(self, worker: Worker) -> None:
        key = self.keys.acquire(worker.process)
        if worker.rng.random() < 0.8:
            with self._lock:
                element = next(self.elements)
            self.add(worker, key, element)
        else:
            self.read(worker, key)

    def read(self, worker: Worker, key: str) -> str:
        inv = worker.invoke("read", key, None)
        a = worker.client.call("GET", kv_path(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            worker.complete(inv, OK, [], a)
            return OK
        t = outcome(a, read=True)
        worker.complete(inv, t, _elements((a.body or {}).get("value")) if t == OK else None, a)
        return t

    def add(self, worker: Worker, key: str, element: int) -> None:
        inv = worker.invoke("add", key, element)
        a = worker.client.call("GET", kv_path(key))
        if a.status == "ok" and a.code == QUERY_NOT_FOUND:
            current: str | None = None
        elif outcome(a, read=True) == OK:
            current = (a.body or {}).get("value")
        else:
            worker.complete(inv, FAIL, element, a)  # nothing was written
            return
        for _ in range(self.CAS_TRIES):
            new = f"{current},{element}" if current else str(element)
            a = worker.client.call("POST", kv_path(key) + "/cas", {"expect": current, "value": new})
            t = outcome(a, read=False)
            if t != OK:
                worker.complete(inv, t, element, a)
                return
            if (a.body or {}).get("succeeded"):
                worker.complete(inv, OK, element, a)
                return
            current = (a.body or {}).get("value")
        worker.complete(inv, FAIL, element, a, error=f"cas lost {self.CAS_TRIES} races")

    def final(self, worker: Worker, deadline: float) -> dict[str, Any]:
        unread = read_until_ok(self.keys.all, lambda key: self.read(worker, key), deadline)
        return {"unread_sets": unread} if unread else {}

    def stats(self) -> dict[str, Any]:
        return {"sets": len(self.keys.all)}


# ------------------------------------------------------------------------------------------------ checker


def validate(op: Op) -> None:
    if op.f == "add" and not scalar(op.value):
        raise HistoryError(
            op.invoke_line, "value", f"an add's element must be a string or an integer, got {op.value!r}"
        )
    if op.f == "read" and op.type == OK:
        r = op.result
        if not (isinstance(r, list) and all(scalar(e) for e in r)):
            raise HistoryError(
                op.complete_line or 0, "value", f"a set read's value must be a list of elements, got {r!r}"
            )


def check_set(ops: Iterable[Op]) -> dict[str, Any]:
    """Every set of the history (a set is a key), judged on its own."""
    by_key: dict[Key, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    sets = [check_one(key, by_key[key]) for key in sorted(by_key, key=repr)]
    verdict = combine(s["verdict"] for s in sets)
    totals: dict[str, int] = defaultdict(int)
    for s in sets:
        for name, n in s["counts"].items():
            totals[name] += n
    return {"verdict": verdict, "counts": dict(totals), "sets": sets}


def check_one(key: Key, ops: list[Op]) -> dict[str, Any]:
    adds = [op for op in ops if op.f == "add"]
    reads = sorted((op for op in ops if op.f == "read" and op.type == OK), key=lambda o: (o.invoke_time, o.invoke_line))
    attempted = {op.value for op in adds}
    acked = {op.value for op in adds if op.type == OK}
    failed = {op.value for op in adds if op.type == FAIL} - acked
    indeterminate = {op.value for op in adds if op.type == INFO} - acked
    counts = {
        "attempted": len(attempted),
        "acknowledged": len(acked),
        "failed": len(failed),
        "indeterminate": len(indeterminate),
        "reads": len(reads),
    }
    if not reads:
        counts.update(lost=0, unexpected=0, stale=0, recovered=0)
        return {"key": key, "verdict": UNKNOWN, "reason": "no ok read of the set", "counts": counts}
    final = reads[-1]
    final_set = set(final.result)
    seen: set[Any] = set()
    for r in reads:
        seen.update(r.result)
    lost = (acked | (seen & attempted)) - failed - final_set
    unexpected = seen - (attempted - failed)
    recovered = indeterminate & final_set
    stale = _stale(adds, reads[:-1], final_set)
    counts.update(lost=len(lost), unexpected=len(unexpected), stale=len(stale), recovered=len(recovered))
    verdict = INVALID if lost or unexpected or stale else VALID
    return {
        "key": key,
        "verdict": verdict,
        "counts": counts,
        "final_read": {
            "process": final.process,
            "invoke_time": final.invoke_time,
            "complete_time": final.complete_time,
            "lines": [final.invoke_line, final.complete_line],
            "elements": len(final_set),
        },
        "lost": _listed(lost),
        "unexpected": _listed(unexpected),
        "stale": _listed(stale),
        "recovered": _listed(recovered),
    }


def _stale(adds: list[Op], reads: list[Op], final_set: set[Any]) -> set[Any]:
    """Acknowledged elements in the final read that a read invoked after the acknowledgement missed."""
    done = sorted((op.end, op.value) for op in adds if op.type == OK and op.value in final_set)
    times = [t for t, _ in done]
    stale: set[Any] = set()
    for r in reads:
        got = set(r.result)
        for _, element in done[: bisect.bisect_left(times, r.invoke_time)]:
            if element not in got:
                stale.add(element)
    return stale


def _listed(elements: set[Any]) -> list[Any]:
    return sorted(elements, key=lambda e: (isinstance(e, str), e))[:_MAX_LISTED]


def keys_of(ops: Iterable[Op]) -> set[Key]:
    """The keys that hold sets: those with an add, or a read that returned a list."""
    return {op.key for op in ops if op.f == "add" or (op.f == "read" and op.type == OK and isinstance(op.result, list))}


def details(res: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for s in res["sets"]:
        if s["verdict"] == VALID:
            continue
        if "reason" in s:
            out.append(f"set {s['key']!r}: {s['reason']}")
            continue
        for kind in ("lost", "unexpected", "stale"):
            if s[kind]:
                out.append(f"set {s['key']!r} {kind}: {', '.join(map(repr, s[kind][:10]))}")
    return out


SPEC = WorkloadSpec(NAME, SetWorkload, FS, validate, CHECKER, lambda ops, _: check_set(ops), COUNTS, details)

"""The set checker (Jepsen's `set`, with `set-full`'s stale elements).

Clients add unique elements; after healing, a final read returns the whole set. Per set (key):

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
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from jepsen.checker.wgl import INVALID, UNKNOWN, VALID, combine
from jepsen.history import FAIL, INFO, OK, Key, Op

NAME = "set"
_MAX_LISTED = 100


def check_set(ops: Iterable[Op]) -> dict[str, Any]:
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

"""Helpers for the checker tests: a shorthand for hand-made histories, and a generator of histories that
a sequential in-memory register produced under real-time overlap (linearizable by construction)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from jepsen.history import History, history_from_records, parse_record


@dataclass(frozen=True)
class HOp:
    """One op: invoked at `start`, completed with `type` at `end` (None: never completed)."""

    process: int
    f: str
    value: Any
    start: int
    end: int | None
    type: str = "ok"
    result: Any = None
    key: Any = "k"
    extra: tuple[tuple[str, Any], ...] = ()  # the completion's other fields


def w(p: int, v: Any, start: int, end: int | None, type: str = "ok", key: Any = "k") -> HOp:
    return HOp(p, "write", v, start, end, type, v, key)


def r(p: int, v: Any, start: int, end: int | None, type: str = "ok", key: Any = "k") -> HOp:
    return HOp(p, "read", None, start, end, type, v, key)


def cas(p: int, expected: Any, new: Any, start: int, end: int | None, type: str = "ok", key: Any = "k") -> HOp:
    return HOp(p, "cas", [expected, new], start, end, type, [expected, new], key)


def cas_not_applied(p: int, expected: Any, new: Any, start: int, end: int, *current: Any, key: Any = "k") -> HOp:
    """An ok cas whose precondition failed: the value false and, when given, `current` (the value it saw)."""
    extra = (("current", current[0]),) if current else ()
    return HOp(p, "cas", [expected, new], start, end, "ok", False, key, extra)


def records(*ops: HOp) -> list[dict[str, Any]]:
    """The JSON lines of `ops`, in time order (a completion before an invoke at the same time)."""
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for o in ops:
        base = {"process": o.process, "f": o.f, "key": o.key}
        rows.append((o.start, 1, base | {"type": "invoke", "value": o.value, "time": o.start}))
        if o.end is not None:
            rows.append((o.end, 0, base | {"type": o.type, "value": o.result, "time": o.end} | dict(o.extra)))
    rows.sort(key=lambda row: (row[0], row[1]))
    return [row[2] for row in rows]


def history(*ops: HOp | dict[str, Any]) -> History:
    """A History from ops and raw records (nemesis events, set ops); raw records keep their place by time."""
    dicts = records(*(o for o in ops if isinstance(o, HOp)))
    dicts += [o for o in ops if isinstance(o, dict)]
    dicts.sort(key=lambda d: d["time"])
    return to_history(dicts)


def to_history(dicts: list[dict[str, Any]]) -> History:
    return history_from_records(parse_record(d, i) for i, d in enumerate(dicts, start=1))


def register_history(
    seed: int,
    n_ops: int,
    *,
    keys: int = 1,
    concurrency: int = 5,
    info_rate: float = 0.0,
    delete_rate: float = 0.0,
) -> list[dict[str, Any]]:
    """A random register history produced by a sequential in-memory register: each op takes effect at
    one instant between its invoke and its completion, so the history is linearizable. A cas that does
    not apply completes ok with the value false and `current`, the value it saw, as the harness records it.

    A thread whose op ends `info` takes a new process number; such an op took effect before, or takes
    effect later (a zombie), or never."""
    rng = random.Random(seed)
    reg: dict[str, Any] = {}
    written: dict[str, int] = {}
    proc = list(range(concurrency))
    # per thread: None (idle) or [op dict, applied?, ok?, result]
    inflight: list[list[Any] | None] = [None] * concurrency
    zombies: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    t = 0
    invoked = 0

    def apply(op: dict[str, Any]) -> tuple[bool, Any]:
        k, f, v = op["key"], op["f"], op["value"]
        if f == "read":
            return True, reg.get(k)
        if f == "write":
            reg[k] = v
            return True, v
        if f == "delete":
            existed = reg.pop(k, None) is not None
            return True, existed
        if reg.get(k) == v[0]:
            reg[k] = v[1]
            return True, v
        return False, reg.get(k)

    while invoked < n_ops or any(x is not None for x in inflight):
        t += rng.randint(1, 10)
        if zombies and rng.random() < 0.05:
            apply(zombies.pop(rng.randrange(len(zombies))))
        i = rng.randrange(concurrency)
        cur = inflight[i]
        if cur is None:
            if invoked >= n_ops:
                continue
            invoked += 1
            k = f"k{rng.randrange(keys)}"
            roll = rng.random()
            v: Any
            if roll < 0.4:
                f, v = "read", None
            elif roll < 0.4 + delete_rate:
                f, v = "delete", None
            elif roll < 0.75:
                written[k] = written.get(k, 0) + 1
                f, v = "write", written[k]
            else:
                written[k] = written.get(k, 0) + 1
                expected = reg.get(k) if rng.random() < 0.7 else rng.choice([None, *range(1, written[k])])
                f, v = "cas", [expected, written[k]]
            op = {"process": proc[i], "f": f, "key": k, "value": v}
            out.append(op | {"type": "invoke", "time": t})
            inflight[i] = [op, False, False, None]
        elif not cur[1]:
            if rng.random() < info_rate:  # times out before taking effect: may take effect later
                if cur[0]["f"] != "read" and rng.random() < 0.5:
                    zombies.append(cur[0])
                out.append(cur[0] | {"type": "info", "time": t})
                inflight[i] = None
                proc[i] += concurrency
                continue
            ok, result = apply(cur[0])
            cur[1:] = [True, ok, result]
        else:
            op, _, ok, result = cur
            if rng.random() < info_rate:
                out.append(op | {"type": "info", "time": t})
                proc[i] += concurrency
            else:
                done = {"type": "ok", "value": result} if ok else {"type": "ok", "value": False, "current": result}
                out.append(op | done | {"time": t})
            inflight[i] = None
    return out


def pathological(n: int = 18) -> list[HOp]:
    """n concurrent writes, then two reads that no order of them explains: the search must explore
    n * 2**n configurations to say so."""
    writes = [w(i, i, i, 100) for i in range(1, n + 1)]
    return [*writes, r(100, 1, 200, 210), r(100, 2, 220, 230)]

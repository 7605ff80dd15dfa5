"""The linearizability checker for the register workload.

P-compositional: linearizability is local (Herlihy & Wing), so each key is checked on its own with the
WGL search (`wgl.py`) against the KV register model. Failed ops surely did not happen and are dropped; a
read whose outcome is unknown constrains nothing and is dropped; any other op whose outcome is unknown
may take effect at any time after its call, or never. A cas whose precondition failed is no failed op:
it happened and saw the register hold something other than what it expected (an ok cas with the result
false, as in Porcupine's etcd model, and the value it saw when the history has it).

Timed-out writes nobody ever reads are dropped before the search (models.unobserved): with unique
written values they can never matter, and each one would double the configurations to explore.

When a key is not linearizable, the checker reports the op the search could not get past, the model
state after the longest linearizable prefix, the ops concurrent with it, and the smallest failing
window: the ops returning after some time e, up to that op, which are not linearizable from any state
the ops called before e could have left (`smallest_window`). That window alone is a counterexample.

Verdicts come first: every key is judged within the check budget. Only then are counterexamples shrunk,
within a budget of their own, so a slow shrink never makes any key `unknown`. A shrink cut short keeps
the smallest failing window found so far (at worst the whole prefix, which the search proved invalid).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jepsen.checker.models import (
    CAS,
    CAS_NOT_APPLIED,
    DELETE,
    READ,
    UNRECORDED,
    WRITE,
    Action,
    Model,
    RegisterModel,
    describe_action,
    unobserved,
)
from jepsen.checker.models import FAIL as MODEL_FAIL
from jepsen.checker.wgl import INVALID, UNKNOWN, VALID, Call, SearchResult, combine, search
from jepsen.history import FAIL, INFO, OK, Key, Op

NAME = "linearizability"
DEFAULT_BUDGET_S = 60.0
DEFAULT_SHRINK_BUDGET_S = 30.0  # for all counterexamples of one check, after every verdict is known
DEFAULT_MAX_CONFIGS = 5_000_000  # about a gigabyte of cached configurations at most
_MAX_LISTED = 20  # ops listed in the prefix and concurrent parts of a counterexample
_MAX_WINDOW = 500


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """The budgets of a check. Only the linearizability search has any; every checker is handed them."""

    budget_s: float = DEFAULT_BUDGET_S  # the linearizability checker's time budget
    max_configs: int = DEFAULT_MAX_CONFIGS  # ... and its memory budget, in cached configurations
    shrink_budget_s: float = DEFAULT_SHRINK_BUDGET_S  # shrinking counterexamples, after the verdicts


def register_action(op: Op) -> Action | None:
    """The model action of a register op, or None when the op constrains nothing (failed, or a read
    with an unknown outcome). An ok cas whose result is false did not apply: it observed the register."""
    if op.type == FAIL:
        return None
    if op.f == "read":
        return None if op.type == INFO else (READ, op.result, None)
    if op.f == "write":
        return (WRITE, op.value, None)
    if op.f == "cas":
        expected, new = op.value
        if op.type == OK and op.result is False:
            return (CAS_NOT_APPLIED, expected, op.extra.get("current", UNRECORDED))
        return (CAS, expected, new)
    if op.f == "delete":
        deleted = op.result if op.type != INFO and isinstance(op.result, bool) else None
        return (DELETE, deleted, None)
    raise ValueError(f"not a register op: {op.f!r}")


@dataclass(slots=True)
class KeyResult:
    key: Key
    verdict: str
    ops: int
    configs: int = 0
    reason: str | None = None
    failure: dict[str, Any] | None = None


@dataclass(slots=True)
class LinearizabilityResult:
    verdict: str
    keys: list[KeyResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        counts = {v: sum(1 for k in self.keys if k.verdict == v) for v in (VALID, INVALID, UNKNOWN)}
        return {
            "verdict": self.verdict,
            "elapsed_s": round(self.elapsed_s, 3),
            "counts": {
                "keys": len(self.keys),
                "ops": sum(k.ops for k in self.keys),
                "configs": sum(k.configs for k in self.keys),
                "valid_keys": counts[VALID],
                "invalid_keys": counts[INVALID],
                "unknown_keys": counts[UNKNOWN],
            },
            "keys": {str(k.key): k.verdict for k in self.keys},
            "unknown": [{"key": k.key, "reason": k.reason} for k in self.keys if k.verdict == UNKNOWN],
            "failures": [k.failure for k in self.keys if k.failure is not None],
        }


def check_register(
    ops: Iterable[Op],
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    shrink_budget_s: float = DEFAULT_SHRINK_BUDGET_S,
    model: Model | None = None,
    action: Callable[[Op], Any] = register_action,
    prune: Callable[[list[Any]], list[bool]] | None = unobserved,
    max_configs: int = DEFAULT_MAX_CONFIGS,
) -> LinearizabilityResult:
    """Check every key of a register history. `budget_s` bounds the verdicts; keys not judged in time are
    `unknown`. Then `shrink_budget_s` bounds the shrinking of every invalid key's counterexample, each key
    getting an equal share of what is left. `prune` tells which actions' effects nothing observes (see
    models.unobserved): such ops are dropped when their outcome is unknown."""
    started = time.monotonic()
    deadline = started + budget_s
    model = model or RegisterModel()
    by_key: dict[Key, list[Op]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    keys = sorted(by_key, key=repr)
    judged = [check_key(key, by_key[key], model, action, prune, deadline, max_configs) for key in keys]
    to_shrink = [(out, shrink) for out, shrink in judged if shrink is not None]
    shrink_deadline = time.monotonic() + shrink_budget_s
    for n, (out, shrink) in enumerate(to_shrink):
        now = time.monotonic()
        out.failure = shrink(now + max(shrink_deadline - now, 0.0) / (len(to_shrink) - n))
    results = [out for out, _ in judged]
    return LinearizabilityResult(combine(r.verdict for r in results), results, time.monotonic() - started)


Shrink = Callable[[float], dict[str, Any]]


def check_key(
    key: Key,
    key_ops: Sequence[Op],
    model: Model,
    action: Callable[[Op], Any],
    prune: Callable[[list[Any]], list[bool]] | None,
    deadline: float,
    max_configs: int,
) -> tuple[KeyResult, Shrink | None]:
    """The verdict of one key, and when it is invalid, a function of a deadline that builds its
    counterexample (the verdict does not wait for the shrinking)."""
    kept = [(op, a) for op in key_ops if (a := action(op)) is not None]
    if prune is not None:
        droppable = prune([a for _, a in kept])
        kept = [(op, a) for (op, a), drop in zip(kept, droppable, strict=True) if not (drop and op.end == math.inf)]
    calls = [Call(op.invoke_time, op.end, a, op.end == math.inf) for op, a in kept]
    doomed = _impossible(calls, model)
    if doomed is None:
        res = search(calls, model, deadline=deadline, max_configs=max_configs)
    else:
        # Invalid for sure. A short search still gives the exact linearizable prefix and state when it is cheap;
        # when it is not (many ops of unknown outcome), the impossible op itself is the answer.
        res = search(calls, model, deadline=deadline, max_configs=min(max_configs, QUICK_SEARCH_CONFIGS))
        if res.verdict != INVALID:
            res = doomed
    out = KeyResult(key, res.verdict, len(kept), res.configs, res.reason)
    if res.verdict != INVALID:
        return out, None
    assert res.failed is not None
    ops = [op for op, _ in kept]
    return out, lambda shrink_deadline: _counterexample(key, ops, calls, res, model, shrink_deadline, max_configs)


QUICK_SEARCH_CONFIGS = 50_000
FAILS_FROM_ANY_STATE = "fails from every state the key's ops could leave"


def _impossible(calls: Sequence[Call], model: Model) -> SearchResult | None:
    """An op that happened (it returned) but fails from every state any op of the key could leave, such as a
    read of a value nobody wrote, makes the key invalid without a search. The search would prove the same,
    but for an invalid key it must exhaust every ordering first, and with many ops of unknown outcome that
    is millions of configurations. Returns the earliest-returning such op as the search would report it."""
    anywhere = model.unknown_state(c.action for c in calls)
    doomed = [i for i, c in enumerate(calls) if not c.optional and model.step(anywhere, c.action) is MODEL_FAIL]
    if not doomed:
        return None
    first = min(doomed, key=lambda i: calls[i].end)
    return SearchResult(INVALID, failed=first, prefix=[], state=anywhere, reason=FAILS_FROM_ANY_STATE)


# ---------------------------------------------------------------------------------------------------------------
# Counterexamples


def _counterexample(
    key: Key,
    ops: list[Op],
    calls: list[Call],
    res: SearchResult,
    model: Model,
    deadline: float,
    max_configs: int,
) -> dict[str, Any]:
    assert res.failed is not None
    f = ops[res.failed]
    prefix = [ops[i] for i in res.prefix]
    if res.reason == FAILS_FROM_ANY_STATE:  # the op alone is the smallest failing window
        window = Window([res.failed], None, minimal=True)
    else:
        window = smallest_window(calls, res.failed, model, deadline, max_configs)
    concurrent = [o for o in ops if o is not f and o.invoke_time <= f.end and f.invoke_time <= o.end]
    return {
        "key": key,
        "op": f.to_json(),
        "state": model.describe_state(res.state),
        "linearized": [o.to_json() for o in prefix[-_MAX_LISTED:]],
        "linearized_count": len(prefix),
        "concurrent": [o.to_json() for o in concurrent[:_MAX_LISTED]],
        "window": [ops[i].to_json() for i in window.ops[:_MAX_WINDOW]],
        "window_count": len(window.ops),
        "window_from": window.cut,
        "window_minimal": window.minimal,
    }


@dataclass(frozen=True, slots=True)
class Window:
    """A failing window: `ops` (indices into the calls) returning after `cut` (None: the whole prefix).
    `minimal` is False when the shrink budget ran out first: the window fails on its own, but a later cut
    (a smaller window) may fail too."""

    ops: list[int]
    cut: float | None
    minimal: bool


def smallest_window(calls: Sequence[Call], failed: int, model: Model, deadline: float, max_configs: int) -> Window:
    """The shortest non-linearizable window ending at the return of `calls[failed]`, the op the search of
    `calls` could not get past.

    The history is cut at that return T: later calls are dropped and ops still in flight at T become
    optional (the search proved this prefix invalid). A window after time e keeps the ops returning after
    e; those called by e become optional (in a linearization they may come before the ops that returned
    by e), and the window starts from any state the ops called by e could have left
    (`model.unknown_state`). If the history is linearizable, so is every such window: a failing window
    is a counterexample on its own. A window only fails more as e moves back, so a gallop and a bisection
    over the return times find the latest e that still fails. Past `deadline` (or `max_configs` in one
    search) it stops and answers the latest cut known to fail, or the whole prefix, as not minimal.
    """
    t_end = calls[failed].end
    cuts = sorted({c.end for c in calls if c.end < calls[failed].invoke})
    tried: dict[int, str] = {}

    def verdict(k: int) -> str:
        if k not in tried:
            if time.monotonic() >= deadline:
                return UNKNOWN
            _, window, init = cut_window(calls, t_end, cuts[k], model)
            tried[k] = search(window, model, init, deadline=deadline, max_configs=max_configs).verdict
        return tried[k]

    def found(k: int | None, minimal: bool) -> Window:
        cut = None if k is None else cuts[k]
        return Window(cut_window(calls, t_end, cut, model)[0], cut, minimal)

    hi = len(cuts)  # cuts[hi:] are known not to fail
    lo = None  # the latest cut known to fail
    step = 1
    while hi > 0:
        k = max(len(cuts) - step, 0)
        v = verdict(k)
        if v == UNKNOWN:
            return found(None, minimal=False)
        if v == INVALID:
            lo = k
            break
        hi = k
        step *= 2
    if lo is None:
        return found(None, minimal=True)
    while hi - lo > 1:  # bisect (lo, hi) for the latest failing cut
        mid = (lo + hi) // 2
        v = verdict(mid)
        if v == UNKNOWN:
            return found(lo, minimal=False)
        if v == INVALID:
            lo = mid
        else:
            hi = mid
    return found(lo, minimal=True)


def cut_window(calls: Sequence[Call], t_end: float, e: float | None, model: Model) -> tuple[list[int], list[Call], Any]:
    """The window of `calls` after time `e` (the whole history when None) cut at `t_end`: (indices into
    calls, the calls as the window sees them, the initial state; None for the model's own)."""
    chosen = []
    window = []
    earlier = []
    for i, c in enumerate(calls):
        if c.invoke > t_end:
            continue
        end = c.end if c.end <= t_end else math.inf
        if e is not None and c.invoke <= e:
            earlier.append(c.action)
        if e is not None and end <= e:
            continue
        optional = c.optional or end == math.inf or (e is not None and c.invoke <= e)
        chosen.append(i)
        window.append(c if (end, optional) == (c.end, c.optional) else Call(c.invoke, end, c.action, optional))
    return chosen, window, None if e is None else model.unknown_state(earlier)


def describe_op(op: Op) -> str:
    """One line for the text summary."""
    a = register_action(op)
    what = describe_action(a) if a is not None else f"{op.f} {op.value!r}"
    done = "..." if op.complete_time is None else op.complete_time
    return f"lines {op.lines:<11} process {op.process:<4} {what:<24} {op.type:<4} [{op.invoke_time}, {done}]"

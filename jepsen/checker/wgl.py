"""The Wing & Gong / Lowe linearizability search (WGL), as in Knossos `wgl` and Porcupine.

The history becomes a doubly linked list of call and return entries ordered by time. The search walks
it from the head: at a call it tries to linearize that op now (apply it to the model, take it and its
return out of the list, push the old state); at a return it has met an op that should have been
linearized already, so it backtracks to the most recent choice. Each (set of linearized ops, model
state) configuration is explored once: the set is a bitset held in a Python int, the pair goes into a
cache (Lowe's memoization, Porcupine's `cache`).

An op whose outcome is unknown (Jepsen's `info`) returns at +infinity: it may be linearized anywhere
after its call, or never. The search succeeds once every op with a known outcome is linearized. An
optional op with a finite return (a window cut through it, see linearizable.py) may be linearized
before its return, or skipped there: skipping is one more choice on the stack.

At equal times calls come before returns, so ops that touch at one instant count as concurrent: that
only ever admits more orders, never rejects a valid history.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jepsen.checker.models import FAIL, Model

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"

_CHECK_EVERY = 2048  # steps between two looks at the clock


@dataclass(frozen=True, slots=True)
class Call:
    """One op for the search: its call time, its return time (math.inf when the outcome is unknown), the
    model action, and whether it may never have happened (always true when `end` is infinite)."""

    invoke: float
    end: float
    action: Any
    optional: bool = False


@dataclass(slots=True)
class SearchResult:
    verdict: str
    failed: int | None = None  # the op the search could not get past (index into calls), when invalid
    prefix: list[int] = field(default_factory=list)  # the longest linearizable prefix, in linearization order
    state: Any = None  # the model state after `prefix`
    configs: int = 0  # configurations explored (cache size)
    reason: str | None = None  # why unknown


def search(
    calls: Sequence[Call],
    model: Model,
    init: Any = None,
    *,
    deadline: float = math.inf,
    max_configs: int = 5_000_000,
) -> SearchResult:
    """Is there a linearization of `calls` starting from state `init` (model.init() when None)?

    `deadline` is a time.monotonic() instant; past it, or past `max_configs` cached configurations, the
    answer is UNKNOWN, never VALID.
    """
    state = model.init() if init is None else init
    n = len(calls)
    if n == 0:
        return SearchResult(VALID, state=state)
    events = [(c.invoke, 0, i) for i, c in enumerate(calls)] + [(c.end, 1, i) for i, c in enumerate(calls)]
    events.sort()
    m = len(events)
    # Nodes 1..m are the events in order, 0 is the head, m + 1 the tail.
    tail = m + 1
    nxt = list(range(1, m + 2)) + [-1]
    prv = [-1] + list(range(0, m + 1))
    is_call = [False] * (m + 2)
    op_of = [0] * (m + 2)
    ret_of = [0] * (m + 2)  # call node -> its return node
    call_of = [0] * (m + 2)  # return node -> its call node
    optional = [0] * (m + 2)  # return nodes: 1 = may be skipped here, 2 = at +infinity (all later ones too)
    call_node = [0] * n
    for pos, (t, kind, i) in enumerate(events, start=1):
        op_of[pos] = i
        if kind == 0:
            is_call[pos] = True
            call_node[i] = pos
        else:
            ret_of[call_node[i]] = pos
            call_of[pos] = call_node[i]
            optional[pos] = 2 if t == math.inf else 1 if calls[i].optional else 0
    actions = [c.action for c in calls]
    step = model.step

    linearized = 0
    cache: set[tuple[int, Any]] = set()
    stack: list[tuple[int, Any, bool]] = []  # (call node, state before, skipped rather than linearized)
    best_node = 0
    best_prefix: list[int] = []
    best_state: Any = state
    steps = 0
    entry = nxt[0]
    while True:
        steps += 1
        if steps % _CHECK_EVERY == 0:
            if time.monotonic() > deadline:
                return _unknown(cache, best_prefix, best_state, "time budget exhausted")
            if len(cache) > max_configs:
                return _unknown(cache, best_prefix, best_state, f"more than {max_configs} configurations")
        if entry == tail or optional[entry] == 2:
            # Every op with a known outcome is linearized.
            return SearchResult(VALID, prefix=_prefix(stack, op_of), state=state, configs=len(cache))
        if is_call[entry]:  # try to linearize this op now
            node = entry
            new_state = step(state, actions[op_of[node]])
            skip = False
        elif optional[entry]:  # the return of an op that may never happen: try skipping it
            node = call_of[entry]
            new_state = state
            skip = True
        else:  # the return of an op that must have happened by now
            node = 0
            new_state = FAIL
        if node and new_state is not FAIL:
            config = (linearized | (1 << op_of[node]), new_state)
            if config not in cache:
                cache.add(config)
                stack.append((node, state, skip))
                state = new_state
                linearized = config[0]
                # lift: take the call and its return out of the list
                r = ret_of[node]
                nxt[prv[node]] = nxt[node]
                prv[nxt[node]] = prv[node]
                nxt[prv[r]] = nxt[r]
                prv[nxt[r]] = prv[r]
                entry = nxt[0]
                continue
        if node and not skip:
            entry = nxt[entry]
            continue
        # Stuck at a return: undo the latest choice. Undoing a skip leaves nothing else to try at that
        # point, so undo further.
        if not node and entry > best_node:
            best_node = entry
            best_prefix = _prefix(stack, op_of)
            best_state = state
        while True:
            if not stack:
                return SearchResult(
                    INVALID, failed=op_of[best_node], prefix=best_prefix, state=best_state, configs=len(cache)
                )
            node, state, skipped = stack.pop()
            linearized &= ~(1 << op_of[node])
            # unlift, in the reverse order of lift
            r = ret_of[node]
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[node]] = node
            prv[nxt[node]] = node
            if not skipped:
                entry = nxt[node]
                break


def combine(verdicts: Iterable[str]) -> str:
    """One verdict for many: invalid beats unknown beats valid."""
    vs = set(verdicts)
    return INVALID if INVALID in vs else UNKNOWN if UNKNOWN in vs else VALID


def _prefix(stack: list[tuple[int, Any, bool]], op_of: list[int]) -> list[int]:
    return [op_of[node] for node, _, skipped in stack if not skipped]


def _unknown(cache: set[tuple[int, Any]], prefix: list[int], state: Any, reason: str) -> SearchResult:
    return SearchResult(UNKNOWN, prefix=prefix, state=state, configs=len(cache), reason=reason)

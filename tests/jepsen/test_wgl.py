"""The WGL search against a brute-force oracle (every order of every allowed subset) on small random
histories, including unknown outcomes, ops that may be skipped before a finite return, time ties and
windows that start from an unknown state."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jepsen.checker.linearizable import cut_window, smallest_window
from jepsen.checker.models import (
    CAS,
    CAS_NOT_APPLIED,
    DELETE,
    FAIL,
    READ,
    UNRECORDED,
    WRITE,
    AnyOf,
    RegisterModel,
    unobserved,
)
from jepsen.checker.wgl import INVALID, VALID, Call, search

MODEL = RegisterModel()
VALUES = [None, 1, 2, 3]


def brute_force(calls: list[Call], init: Any = None) -> str:
    """Is there a subset (all ops whose outcome is known, any optional ones) and an order of it that the
    real-time order allows (no op placed before one that returned before it was called) and the model
    accepts?"""
    must = [i for i, c in enumerate(calls) if not c.optional]
    may = [i for i, c in enumerate(calls) if c.optional]
    for k in range(len(may) + 1):
        for extra in itertools.combinations(may, k):
            for order in itertools.permutations(must + list(extra)):
                if any(calls[b].end < calls[a].invoke for x, a in enumerate(order) for b in order[x + 1 :]):
                    continue
                state = MODEL.init() if init is None else init
                for i in order:
                    state = MODEL.step(state, calls[i].action)
                    if state is FAIL:
                        break
                else:
                    return VALID
    return INVALID


def random_calls(rng: random.Random, n: int) -> list[Call]:
    calls = []
    for _ in range(n):
        start = rng.randint(0, 12)
        end: float = start + rng.randint(0, 8)
        kind = rng.choice([READ, READ, WRITE, WRITE, CAS, DELETE, CAS_NOT_APPLIED])
        action: tuple[Any, Any, Any]
        if kind == DELETE:
            action = (DELETE, rng.choice([None, True, False]), None)
        elif kind == CAS_NOT_APPLIED:  # an ok cas whose precondition failed, with or without the value it saw
            action = (CAS_NOT_APPLIED, rng.choice(VALUES), rng.choice([*VALUES, UNRECORDED]))
        elif kind == CAS:
            action = (CAS, rng.choice(VALUES), rng.choice(VALUES[1:]))
        else:
            action = (kind, rng.choice(VALUES if kind == READ else VALUES[1:]), None)
        optional = kind not in (READ, CAS_NOT_APPLIED) and rng.random() < 0.3
        if optional and rng.random() < 0.5:
            end = math.inf
        calls.append(Call(start, end, action, optional))
    return calls


@settings(max_examples=400, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6), any_init=st.booleans())
def test_search_agrees_with_brute_force(seed: int, n: int, any_init: bool) -> None:
    rng = random.Random(seed)
    calls = random_calls(rng, n)
    init = AnyOf(frozenset(rng.sample(VALUES, rng.randint(1, 3)))) if any_init else None
    assert search(calls, MODEL, init).verdict == brute_force(calls, init), (seed, calls, init)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6))
def test_dropping_unobserved_unknown_ops_keeps_the_verdict(seed: int, n: int) -> None:
    calls = random_calls(random.Random(seed), n)
    drop = unobserved([c.action for c in calls])
    kept = [c for c, d in zip(calls, drop, strict=True) if not (d and c.end == math.inf)]
    assert search(kept, MODEL).verdict == brute_force(calls), (seed, calls)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 6))
def test_the_smallest_window_fails_on_its_own(seed: int, n: int) -> None:
    calls = random_calls(random.Random(seed), n)
    res = search(calls, MODEL)
    if res.verdict != INVALID:
        return
    assert res.failed is not None and not calls[res.failed].optional
    window = smallest_window(calls, res.failed, MODEL, math.inf, 10**6)
    assert window.minimal
    assert res.failed in window.ops
    # the search and the oracle agree, on the window exactly as it was cut
    chosen, cut_calls, init = cut_window(calls, calls[res.failed].end, window.cut, MODEL)
    assert chosen == window.ops
    assert search(cut_calls, MODEL, init).verdict == INVALID
    assert brute_force(cut_calls, init) == INVALID, (seed, calls)
    # a shrink out of budget answers the whole prefix, which fails too (and is minimal when nothing returned
    # before the failing op was called: there is no cut to try)
    whole = smallest_window(calls, res.failed, MODEL, -math.inf, 10**6)
    no_cut = all(c.end >= calls[res.failed].invoke for c in calls)
    assert (whole.cut, whole.minimal) == (None, no_cut)
    assert brute_force(cut_window(calls, calls[res.failed].end, None, MODEL)[1]) == INVALID, (seed, calls)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 6))
def test_every_window_of_a_linearizable_history_is_linearizable(seed: int, n: int) -> None:
    # what makes a failing window a counterexample on its own
    calls = random_calls(random.Random(seed), n)
    if brute_force(calls) != VALID:
        return
    for f in calls:
        if f.optional:
            continue
        for e in sorted({c.end for c in calls if c.end < f.invoke}):
            _, window, init = cut_window(calls, f.end, e, MODEL)
            assert brute_force(window, init) == VALID, (seed, calls, f, e)


def test_an_optional_op_may_be_skipped_at_its_return() -> None:
    # write 2 may or may not have happened before time 10; a read after it sees 1 or 2
    calls = [Call(0, 1, (WRITE, 1, None)), Call(2, 10, (WRITE, 2, None), optional=True)]
    for seen in (1, 2):
        assert search([*calls, Call(20, 30, (READ, seen, None))], MODEL).verdict == VALID
    # but it cannot happen after its return
    later = [Call(20, 30, (READ, 1, None)), Call(40, 50, (READ, 2, None))]
    assert search(calls + later, MODEL).verdict == INVALID


def test_the_search_reports_the_longest_prefix() -> None:
    calls = [Call(0, 10, (WRITE, 1, None)), Call(20, 30, (WRITE, 2, None)), Call(40, 50, (READ, 1, None))]
    res = search(calls, MODEL)
    assert (res.verdict, res.failed, res.prefix, res.state) == (INVALID, 2, [0, 1], 2)

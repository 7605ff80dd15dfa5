"""Sequential specifications the linearizability search checks histories against.

A model is a pure function (state, action) -> state, with `FAIL` when the action cannot happen in that
state. States must be hashable: the search memoizes (linearized ops, state) pairs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

FAIL: Any = object()  # "this action cannot happen in this state"

# Register actions are small tuples, cheap to build and to dispatch on.
READ, WRITE, CAS, DELETE, CAS_NOT_APPLIED = 0, 1, 2, 3, 4
Action = tuple[int, Any, Any]
UNRECORDED: Any = object()  # the value a not-applied cas saw, when the history does not say


class Model(Protocol):
    def init(self) -> Hashable:
        """The state before any operation."""
        ...

    def step(self, state: Any, action: Any) -> Any:
        """The state after `action`, or FAIL."""
        ...

    def unknown_state(self, earlier: Iterable[Any]) -> Hashable:
        """A state standing for every state that `earlier` actions (in any order, each taken or not) can
        leave behind. Used to check a window of a history cut at a quiet point."""
        ...

    def describe_state(self, state: Any) -> Any:
        """The state as JSON."""
        ...


@dataclass(frozen=True, slots=True)
class AnyOf:
    """The register holds one of `values` (None = absent), not yet known which."""

    values: frozenset[Any]


class RegisterModel:
    """The KV register of `/api/v1/kv/jepsen/<key>`: GET reads (None when absent), PUT writes, POST cas
    applies only if the current value equals `expect` (None meaning "only if absent"), DELETE removes.

    Actions: (READ, value_read, _), (WRITE, v, _), (CAS, expected, new), (DELETE, deleted_or_None, _),
    (CAS_NOT_APPLIED, expected, current_or_UNRECORDED). A delete's `deleted` answer, when recorded, says
    whether the key existed. A cas whose precondition failed is an observation, as in Porcupine's etcd
    model: the register did not hold `expected`; and when the answer carried the value it held
    (`current`), it held exactly that, as a read would have seen.
    """

    def init(self) -> Hashable:
        return None

    def step(self, state: Any, action: Action) -> Any:
        code, a, b = action
        if type(state) is AnyOf:
            return self._step_any(state, action)
        if code == READ:
            return state if state == a else FAIL
        if code == WRITE:
            return a
        if code == CAS:
            return b if state == a else FAIL
        if code == CAS_NOT_APPLIED:
            return FAIL if state == a or (b is not UNRECORDED and state != b) else state
        if a is not None and a != (state is not None):
            return FAIL
        return None

    def _step_any(self, state: AnyOf, action: Action) -> Any:
        code, a, b = action
        if code == READ:
            return a if a in state.values else FAIL
        if code == WRITE:
            return a
        if code == CAS:
            return b if a in state.values else FAIL
        if code == CAS_NOT_APPLIED:
            if b is not UNRECORDED:
                return b if b != a and b in state.values else FAIL
            rest = state.values - {a}
            return FAIL if not rest else next(iter(rest)) if len(rest) == 1 else AnyOf(rest)
        if a is True and not any(v is not None for v in state.values):
            return FAIL
        if a is False and None not in state.values:
            return FAIL
        return None

    def unknown_state(self, earlier: Iterable[Action]) -> Hashable:
        values: set[Any] = {None}
        for code, a, b in earlier:
            if code == WRITE:
                values.add(a)
            elif code == CAS:
                values.add(b)
        return AnyOf(frozenset(values))

    def describe_state(self, state: Any) -> Any:
        if type(state) is AnyOf:
            return {"any_of": sorted(state.values, key=repr)}
        return state


def describe_action(action: Action) -> str:
    code, a, b = action
    if code == READ:
        return f"read -> {a!r}"
    if code == WRITE:
        return f"write {a!r}"
    if code == CAS:
        return f"cas {a!r} -> {b!r}"
    if code == CAS_NOT_APPLIED:
        return f"cas {a!r} not applied" + ("" if b is UNRECORDED else f", held {b!r}")
    return "delete" if a is None else f"delete -> {'deleted' if a else 'absent'}"


def unobserved(actions: list[Action]) -> list[bool]:
    """For each action: does nothing else in the list ever observe the state it leaves?

    With unique written values, an optional write or cas whose value nobody reads or expects can be
    dropped: in any linearization the next op on the register ignores the old state (a write, or a delete
    whose answer was not recorded), so the linearization without it is valid too. A recorded `deleted`
    answer observes "some value", which keeps every non-null value observed. A cas that did not apply and
    carries the value it saw is a read of that value; one that does not carry it observes "not `expected`",
    which any other value satisfies, so nothing is dropped then. This is what keeps timed-out writes from
    making the search exponential.
    """
    seen: set[Any] = set()
    any_value = False
    for code, a, b in actions:
        if code == READ or code == CAS:
            seen.add(a)
        elif code == CAS_NOT_APPLIED:
            if b is UNRECORDED:
                return [code in (READ, CAS_NOT_APPLIED) for code, _, _ in actions]
            seen.add(b)
        elif code == DELETE and a is not None:
            if a:
                any_value = True
            else:
                seen.add(None)
    out = []
    for code, a, b in actions:
        after = a if code == WRITE else b if code == CAS else None
        if code == READ or code == CAS_NOT_APPLIED:
            out.append(True)
        else:
            out.append(after not in seen and not (any_value and after is not None))
    return out

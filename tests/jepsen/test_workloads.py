"""Which workload an op belongs to, and the shapes of their values."""

from __future__ import annotations

from typing import Any

import pytest

from jepsen.history import HistoryError
from jepsen.suite import classify
from tests.jepsen import HOp, cas, history, r, w


def kinds(*ops: HOp) -> dict[str, list[int]]:
    return {name: [o.index for o in group] for name, group in classify(history(*ops).ops).items()}


def test_workloads_are_told_apart_by_operation_and_key() -> None:
    ops = [
        w(1, 1, 0, 10),
        HOp(2, "add", 5, 0, 10, key="s"),
        HOp(3, "read", None, 20, 30, "ok", [5], key="s"),  # a read of a set key
        r(4, 1, 20, 30),  # a read of a register key
        HOp(5, "elect-master", None, 40, 50, "ok", {"masterEpoch": 1}, key="broker-a"),
        HOp(6, "read", None, 40, 50, "ok", [], key=None),  # a read returning a list is a set read
    ]
    assert kinds(*ops) == {"register": [0, 3], "set": [1, 2, 5], "controller": [4]}


@pytest.mark.parametrize(
    ("op", "field", "words"),
    [
        (HOp(1, "increment", 1, 0, 10), "f", "unknown operation 'increment'"),
        (w(1, 1, 0, 10, key=None), "key", "a register write names its key"),
        (w(1, 1.5, 0, 10), "value", "a write's value must be a string or an integer"),
        (w(1, True, 0, 10), "value", "a write's value must be a string or an integer"),
        (cas(1, 1, None, 0, 10), "value", "[expected or null, new]"),
        (HOp(1, "cas", [1], 0, 10), "value", "[expected or null, new]"),
        (r(1, {"v": 1}, 0, 10), "value", "a read's value must be a string, integer or null"),
        (HOp(1, "delete", None, 0, 10, "ok", 1), "value", "a delete's value must be true, false or null"),
        (HOp(1, "cas", [1, 2], 0, 10, "ok", 2), "value", "an ok cas's value must be false (not applied)"),
        (HOp(1, "cas", [1, 2], 0, 10, "ok", [1, 3]), "value", "an ok cas's value must be false (not applied)"),
        (HOp(1, "cas", [1, 2], 0, 10, "ok", True, extra=(("current", 1),)), "current", "only a cas that did not"),
        (HOp(1, "cas", [1, 2], 0, 10, "ok", False, extra=(("current", [1]),)), "current", "got [1]"),
        (HOp(1, "add", [1], 0, 10, key="s"), "value", "an add's element must be"),
        (HOp(1, "read", None, 0, 10, "ok", [[1]], key="s"), "value", "a set read's value must be a list"),
        (HOp(1, "heartbeat", {}, 0, 10, key=None), "key", "names its brokerName"),
        (HOp(1, "replica-info", None, 0, 10, "ok", [1], key="b"), "value", "must be an object"),
    ],
)
def test_malformed_values_name_line_and_field(op: HOp, field: str, words: str) -> None:
    with pytest.raises(HistoryError) as e:
        kinds(op)
    assert e.value.field == field
    assert e.value.line in (1, 2)
    assert words in str(e.value)


def test_a_key_cannot_be_both_a_set_and_a_register() -> None:
    ops: list[Any] = [HOp(1, "add", 1, 0, 10, key="k"), w(2, 1, 0, 10, key="k")]
    with pytest.raises(HistoryError, match="both the set and the register"):
        kinds(*ops)

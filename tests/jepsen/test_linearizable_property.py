"""Histories a sequential in-memory register produced under overlapping real-time intervals are always
linearizable, with or without the value each refused cas saw; changing one read, or the value one refused
cas saw, to a value nobody wrote never is."""

from __future__ import annotations

import random

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from jepsen.checker.linearizable import check_register
from tests.jepsen import register_history, to_history

SHAPES = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**32 - 1),
        "n_ops": st.integers(1, 300),
        "keys": st.integers(1, 3),
        "concurrency": st.integers(1, 10),
        "info_rate": st.sampled_from([0.0, 0.0, 0.05, 0.2]),
        "delete_rate": st.sampled_from([0.0, 0.05]),
    }
)


def generate(shape: dict) -> list[dict]:
    kw = {k: v for k, v in shape.items() if k not in ("seed", "n_ops")}
    return register_history(shape["seed"], shape["n_ops"], **kw)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(shape=SHAPES)
def test_histories_of_a_sequential_register_are_valid(shape: dict) -> None:
    res = check_register(to_history(generate(shape)).ops, budget_s=60)
    assert res.verdict == "valid", res.to_json()["failures"]


# Without `current` (Porcupine's form) a refusal observes only "not the expected value", which timed-out writes
# can explain, so none of them is pruned: few of them here keep the search small.
@settings(max_examples=100, derandomize=True, deadline=None)
@given(shape=SHAPES.map(lambda s: s | {"info_rate": min(s["info_rate"], 0.05)}))
def test_refusals_without_the_value_they_saw_stay_valid(shape: dict) -> None:
    records = [{k: v for k, v in d.items() if k != "current"} for d in generate(shape)]
    res = check_register(to_history(records).ops, budget_s=60)
    assert res.verdict == "valid", res.to_json()["failures"]


@settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
@given(shape=SHAPES, pick=st.integers(0, 10**6))
def test_a_refusal_that_saw_a_never_written_value_is_invalid(shape: dict, pick: int) -> None:
    records = generate(shape)
    refusals = [i for i, d in enumerate(records) if "current" in d]
    if not refusals:
        return
    i = refusals[pick % len(refusals)]
    records[i] = records[i] | {"current": "never-written"}
    res = check_register(to_history(records).ops, budget_s=60)
    assert res.verdict == "invalid"
    (failure,) = res.to_json()["failures"]
    assert failure["op"]["lines"][1] == i + 1 and failure["op"]["extra"] == {"current": "never-written"}


# No explain phase: it re-runs a failing example under sys.settrace, which slows the search ~50x and turns a
# failure into a budget-exhausted hang instead of a report.
@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
@given(shape=SHAPES, pick=st.integers(0, 10**6))
def test_a_read_of_a_never_written_value_is_invalid(shape: dict, pick: int) -> None:
    records = generate(shape)
    reads = [i for i, d in enumerate(records) if d["f"] == "read" and d["type"] == "ok"]
    if not reads:
        return
    i = reads[pick % len(reads)]
    records[i] = records[i] | {"value": "never-written"}
    res = check_register(to_history(records).ops, budget_s=60)
    assert res.verdict == "invalid"
    (failure,) = res.to_json()["failures"]
    assert failure["key"] == records[i]["key"]
    assert failure["op"]["lines"][1] == i + 1 and failure["op"]["result"] == "never-written"
    # the window ends with the bad read
    assert failure["op"] in failure["window"]


def test_a_2k_op_history_over_10_keys_with_concurrency_10_is_valid() -> None:
    records = register_history(20261121, 2000, keys=10, concurrency=10, info_rate=0.01, delete_rate=0.02)
    res = check_register(to_history(records).ops, budget_s=120)
    assert res.verdict == "valid"
    assert len(res.keys) == 10


def test_a_2k_op_history_with_one_stale_read_is_invalid_with_a_small_window() -> None:
    records = register_history(7, 2000, keys=2, concurrency=10, info_rate=0.01)
    rng = random.Random(7)
    # turn a late ok read into a read of the key's first written value: a stale read
    key = "k0"
    first = next(d["value"] for d in records if d["key"] == key and d["f"] == "write")
    late = [i for i, d in enumerate(records) if d["key"] == key and d["f"] == "read" and d["type"] == "ok"]
    i = rng.choice(late[len(late) // 2 :])
    records[i] = records[i] | {"value": first}
    res = check_register(to_history(records).ops, budget_s=120)
    assert res.verdict == "invalid"
    (failure,) = res.to_json()["failures"]
    assert failure["key"] == key
    assert failure["window_count"] < 100


def test_an_impossible_read_among_many_unknown_outcomes_is_invalid_not_unknown() -> None:
    """The shape that hung CI: one key, a fifth of the ops timed out, one read of a value nobody wrote. The
    search alone had to exhaust more than the 5,000,000-configuration budget before it could say invalid."""
    shape = {"concurrency": 3, "seed": 130, "keys": 1, "delete_rate": 0.05, "n_ops": 156, "info_rate": 0.2}
    records = generate(shape)
    reads = [i for i, d in enumerate(records) if d["f"] == "read" and d["type"] == "ok"]
    i = reads[2643 % len(reads)]
    records[i] = records[i] | {"value": "never-written"}
    res = check_register(to_history(records).ops)
    assert res.verdict == "invalid"
    (failure,) = res.to_json()["failures"]
    assert failure["op"]["result"] == "never-written" and failure["window"] == [failure["op"]]

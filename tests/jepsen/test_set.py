"""The set checker: lost, unexpected, stale and recovered elements."""

from __future__ import annotations

from typing import Any

from jepsen.workloads.set import check_set
from tests.jepsen import HOp, history


def add(p: int, e: Any, start: int, end: int | None, type: str = "ok", key: Any = None) -> HOp:
    return HOp(p, "add", e, start, end, type, e, key)


def read(p: int, elements: list[Any], start: int, end: int, key: Any = None) -> HOp:
    return HOp(p, "read", None, start, end, "ok", elements, key)


def check(*ops: HOp) -> dict[str, Any]:
    return check_set(history(*ops).ops)


def one(*ops: HOp) -> dict[str, Any]:
    res = check(*ops)
    (s,) = res["sets"]
    assert s["verdict"] == res["verdict"]
    return s


ADDS = [add(1, 1, 0, 10), add(2, 2, 5, 15), add(1, 3, 20, 30, "info"), add(3, 4, 20, 30, "fail")]


def test_every_acknowledged_element_present_is_valid() -> None:
    s = one(*ADDS, read(9, [1, 2], 100, 110))
    assert s["verdict"] == "valid"
    assert s["counts"] == {
        "attempted": 4,
        "acknowledged": 2,
        "failed": 1,
        "indeterminate": 1,
        "reads": 1,
        "lost": 0,
        "unexpected": 0,
        "stale": 0,
        "recovered": 0,
    }


def test_indeterminate_adds_that_appear_are_recovered() -> None:
    s = one(*ADDS, read(9, [1, 2, 3], 100, 110))
    assert (s["verdict"], s["recovered"]) == ("valid", [3])


def test_lost_acknowledged_element() -> None:
    s = one(*ADDS, read(9, [2], 100, 110))
    assert (s["verdict"], s["lost"], s["counts"]["lost"]) == ("invalid", [1], 1)


def test_unexpected_elements_never_attempted_or_failed() -> None:
    s = one(*ADDS, read(9, [1, 2, 4, 99], 100, 110))
    assert (s["verdict"], s["unexpected"]) == ("invalid", [4, 99])  # 4's add failed: it surely did not happen


def test_element_seen_then_gone_is_lost_even_if_its_add_was_indeterminate() -> None:
    s = one(*ADDS, read(8, [1, 2, 3], 40, 50), read(9, [1, 2], 100, 110))
    assert (s["verdict"], s["lost"]) == ("invalid", [3])


def test_stale_element_missing_from_a_read_after_its_acknowledgement() -> None:
    s = one(*ADDS, read(8, [2], 40, 50), read(9, [1, 2], 100, 110))
    assert (s["verdict"], s["stale"], s["lost"]) == ("invalid", [1], [])


def test_a_read_concurrent_with_the_add_may_miss_it() -> None:
    s = one(add(1, 1, 0, 50), read(8, [], 10, 20), read(9, [1], 100, 110))
    assert (s["verdict"], s["stale"]) == ("valid", [])


def test_the_final_read_is_the_one_invoked_last() -> None:
    s = one(add(1, 1, 0, 10), read(8, [1], 20, 300), read(9, [], 100, 200))
    assert s["lost"] == [1]
    assert (s["final_read"]["lines"], s["final_read"]["elements"]) == ([4, 5], 0)


def test_no_read_is_unknown() -> None:
    res = check(*ADDS)
    assert res["verdict"] == "unknown"
    assert res["sets"][0]["reason"] == "no ok read of the set"


def test_sets_are_checked_per_key_and_counts_add_up() -> None:
    ops = [add(1, 1, 0, 10, key="a"), add(2, 1, 0, 10, key="b"), read(3, [1], 20, 30, "a"), read(4, [], 20, 30, "b")]
    res = check(*ops)
    assert res["verdict"] == "invalid"
    assert [(s["key"], s["verdict"]) for s in res["sets"]] == [("a", "valid"), ("b", "invalid")]
    assert res["counts"]["acknowledged"] == 2 and res["counts"]["lost"] == 1


def test_string_elements() -> None:
    s = one(add(1, "e1", 0, 10), add(2, "e2", 0, 10), read(3, ["e2"], 20, 30))
    assert s["lost"] == ["e1"]

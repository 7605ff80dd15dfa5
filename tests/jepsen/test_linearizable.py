"""The linearizability checker on hand-made register histories: the classic anomalies, valid and invalid,
their counterexamples, and the time budget."""

from __future__ import annotations

from typing import Any

import pytest

from jepsen.checker import linearizable, wgl
from jepsen.checker.linearizable import LinearizabilityResult, check_register
from jepsen.history import History
from tests.jepsen import HOp, cas, cas_not_applied, history, pathological, r, register_history, w


def check(*ops: HOp | dict[str, Any], **kw: Any) -> LinearizabilityResult:
    h: History = history(*ops)
    return check_register(h.ops, **kw)


def verdict(*ops: HOp | dict[str, Any]) -> str:
    return check(*ops).verdict


def failure(*ops: HOp | dict[str, Any]) -> dict[str, Any]:
    res = check(*ops)
    assert res.verdict == "invalid"
    (f,) = res.to_json()["failures"]
    return f


def lines(ops: list[dict[str, Any]]) -> list[list[int | None]]:
    return [o["lines"] for o in ops]


# ---------------------------------------------------------------------------------------------------------------
# Sequential basics


def test_empty_and_initial_state() -> None:
    assert check_register([]).verdict == "valid"
    assert verdict(r(1, None, 0, 10)) == "valid"  # a missing key reads null
    assert verdict(r(1, 1, 0, 10)) == "invalid"


def test_sequential_write_then_read() -> None:
    assert verdict(w(1, 1, 0, 10), r(2, 1, 20, 30)) == "valid"
    assert verdict(w(1, 1, 0, 10), r(2, None, 20, 30)) == "invalid"


def test_read_of_a_value_never_written() -> None:
    f = failure(w(1, 1, 0, 10), w(1, 2, 20, 30), r(2, 99, 40, 50))
    assert f["op"]["f"] == "read" and f["op"]["result"] == 99
    assert lines([f["op"]]) == [[5, 6]]


def test_stale_read() -> None:
    # write 2 completed before the read began, yet the read returns the older 1
    f = failure(w(1, 1, 0, 10), w(1, 2, 20, 30), r(2, 1, 40, 50))
    assert f["key"] == "k"
    assert f["op"]["result"] == 1
    assert f["state"] == 2  # the state after the longest linearizable prefix
    assert [o["value"] for o in f["linearized"]] == [1, 2]
    # the smallest failing window is write 2 and the read: write 1 is not needed to see the anomaly
    assert lines(f["window"]) == [[3, 4], [5, 6]]
    assert f["window_from"] == 10


def test_lost_write() -> None:
    # write 2 was acknowledged; every later read, long after, still sees 1
    ops = [w(1, 1, 0, 10), w(2, 2, 20, 30), r(3, 1, 100, 110), r(4, 1, 200, 210), r(5, 1, 300, 310)]
    f = failure(*ops)
    assert f["op"]["lines"] == [5, 6]  # the first read that should have seen 2
    assert verdict(*ops[:2], r(3, 2, 100, 110), r(4, 2, 200, 210)) == "valid"


def test_non_monotonic_reads() -> None:
    # write 2 is still in flight: a read may see 1 or 2, but after one read saw 2 no later read may see 1
    base = [w(1, 1, 0, 10), w(2, 2, 20, 100)]
    assert verdict(*base, r(3, 1, 30, 40), r(3, 2, 50, 60)) == "valid"
    f = failure(*base, r(3, 2, 30, 40), r(4, 1, 50, 60))
    assert f["op"]["result"] == 1 and f["state"] == 2
    assert lines(f["concurrent"]) == [[3, 8]]  # write 2, still in flight


def test_cas_succeeds_only_on_the_expected_value() -> None:
    assert verdict(w(1, 1, 0, 10), cas(2, 1, 3, 20, 30), r(3, 3, 40, 50)) == "valid"
    f = failure(w(1, 1, 0, 10), cas(2, 2, 3, 20, 30))  # the register held 1, not 2
    assert f["op"]["f"] == "cas" and f["state"] == 1
    # a cas recorded as fail surely did not happen and is dropped: histories of earlier harnesses recorded a
    # refused cas so, with the value it saw in `current`, and they read as they did
    assert verdict(w(1, 1, 0, 10), cas(2, 2, 3, 20, 30, "fail"), r(3, 1, 40, 50)) == "valid"
    old = HOp(2, "cas", [2, 3], 20, 30, "fail", [2, 3], extra=(("current", 9), ("error", "cas: the value differs")))
    assert verdict(w(1, 1, 0, 10), old, r(3, 1, 40, 50)) == "valid"


def test_a_cas_that_did_not_apply_is_an_observation() -> None:
    # Writes 1 then 2 are acknowledged; a later cas expecting 2 is refused. Nothing else saw the register,
    # yet the refusal says it did not hold 2: the acknowledged write was lost or the answer was stale.
    f = failure(w(1, 1, 0, 10), w(2, 2, 20, 30), cas_not_applied(3, 2, 3, 40, 50))  # as Porcupine records it
    assert f["op"]["f"] == "cas" and f["op"]["result"] is False and f["state"] == 2
    # with the value the refusal saw (as our harness records it): a stale state, the only evidence of it
    f = failure(w(1, 1, 0, 10), w(2, 2, 20, 30), cas_not_applied(3, 7, 3, 40, 50, 1))
    assert f["op"]["extra"] == {"current": 1} and f["window_count"] == 2  # write 2, then the refusal
    assert verdict(w(1, 1, 0, 10), cas_not_applied(2, None, 3, 20, 30, None)) == "invalid"  # not absent
    # a refusal that saw the very value it expected contradicts itself
    assert verdict(w(1, 1, 0, 10), cas_not_applied(2, 1, 3, 20, 30, 1)) == "invalid"
    # and it wrote nothing: a later read of its new value is not explained by it
    assert verdict(w(1, 1, 0, 10), cas_not_applied(2, 5, 3, 20, 30, 1), r(3, 3, 40, 50)) == "invalid"


def test_a_refusal_narrows_the_counterexample_from_an_unknown_state() -> None:
    # Windows are checked from "any value the earlier ops wrote". A refusal that saw a value nobody wrote fails
    # from every such state: it alone is the window.
    f = failure(w(1, 1, 0, 10), cas_not_applied(2, 5, 3, 20, 30, 9))
    assert (f["window_count"], f["window_minimal"]) == (1, True)
    # A refusal expecting 1 says the register did not hold 1: with it, the read of 1 fails whatever came before.
    f = failure(w(1, 1, 0, 10), w(2, 2, 20, 30), cas_not_applied(3, 1, 4, 40, 50), r(4, 1, 60, 70))
    assert [o["f"] for o in f["window"]] == ["cas", "read"] and f["window_minimal"]


def test_cas_refusals_of_a_valid_history_stay_valid() -> None:
    assert verdict(w(1, 1, 0, 10), cas_not_applied(2, 2, 3, 20, 30, 1), r(3, 1, 40, 50)) == "valid"
    assert verdict(cas_not_applied(1, 5, 3, 0, 10, None), cas_not_applied(2, None, 3, 20, 30)) == "invalid"
    assert (
        verdict(cas_not_applied(1, 5, 3, 0, 10, None), w(2, 2, 20, 30), cas_not_applied(3, None, 4, 40, 50, 2))
        == "valid"
    )
    # concurrent with write 2: the refusal may come before it (saw 1) or after it (saw 2)
    for seen in (1, 2):
        assert verdict(w(1, 1, 0, 10), w(2, 2, 20, 60), cas_not_applied(3, 9, 4, 30, 50, seen)) == "valid"
    assert verdict(w(1, 1, 0, 10), w(2, 2, 20, 60), cas_not_applied(3, 1, 4, 30, 50)) == "valid"


def test_a_timed_out_write_may_explain_a_refusal() -> None:
    # The register held 1; write 5 timed out and nothing read 5; the cas expecting 1 was then refused. Only
    # write 5 explains the refusal, so it must not be dropped as unobserved.
    ops = [w(1, 1, 0, 10), w(2, 5, 20, 30, "info"), cas_not_applied(3, 1, 4, 40, 50)]
    assert verdict(*ops) == "valid"
    assert verdict(*ops[:2], cas_not_applied(3, 1, 4, 40, 50, 5)) == "valid"
    assert verdict(ops[0], cas_not_applied(3, 1, 4, 40, 50)) == "invalid"


def test_cas_expecting_absent() -> None:
    assert verdict(cas(1, None, 1, 0, 10), r(2, 1, 20, 30)) == "valid"
    assert verdict(w(1, 5, 0, 10), cas(2, None, 1, 20, 30)) == "invalid"


def test_delete() -> None:
    delete = HOp(2, "delete", None, 20, 30, "ok", True)
    assert verdict(w(1, 1, 0, 10), delete, r(3, None, 40, 50)) == "valid"
    assert verdict(w(1, 1, 0, 10), delete, r(3, 1, 40, 50)) == "invalid"
    # a delete answering "not there" while the key held 1
    assert verdict(w(1, 1, 0, 10), HOp(2, "delete", None, 20, 30, "ok", False)) == "invalid"
    # the answer unrecorded: it removed the key either way
    assert verdict(w(1, 1, 0, 10), HOp(2, "delete", None, 20, 30, "ok", None), r(3, None, 40, 50)) == "valid"


# ---------------------------------------------------------------------------------------------------------------
# Concurrency and unknown outcomes


def test_concurrent_writes_allow_both_orders() -> None:
    writes = [w(1, 1, 0, 100), w(2, 2, 10, 90)]
    assert verdict(*writes, r(3, 1, 110, 120)) == "valid"
    assert verdict(*writes, r(3, 2, 110, 120)) == "valid"
    # but one order only: once a later read saw the winner, the loser cannot come back
    assert verdict(*writes, r(3, 2, 110, 120), r(3, 1, 130, 140)) == "invalid"


def test_read_concurrent_with_a_write_sees_either_value() -> None:
    for seen in (1, 2):
        assert verdict(w(1, 1, 0, 10), w(2, 2, 20, 60), r(3, seen, 30, 40)) == "valid"


def test_ops_touching_at_one_instant_are_concurrent() -> None:
    # the read begins at the very nanosecond the write completes: either order is allowed
    assert verdict(w(1, 1, 0, 10), w(1, 2, 20, 30), r(2, 1, 30, 40)) == "valid"


def test_indeterminate_write_that_later_appears() -> None:
    # write 2 timed out (info); it may still take effect at any later time
    base = [w(1, 1, 0, 10), w(2, 2, 20, 30, "info")]
    assert verdict(*base, r(3, 2, 100, 110)) == "valid"
    assert verdict(*base, r(3, 1, 100, 110), r(3, 2, 200, 210)) == "valid"  # even after a read saw 1
    assert verdict(*base, r(3, 1, 100, 110)) == "valid"  # or never


def test_indeterminate_write_that_appears_then_disappears() -> None:
    f = failure(w(1, 1, 0, 10), w(2, 2, 20, 30, "info"), r(3, 2, 100, 110), r(3, 1, 200, 210))
    assert f["op"]["result"] == 1 and f["state"] == 2


def test_an_invoke_never_completed_counts_as_indeterminate() -> None:
    assert verdict(w(1, 1, 0, 10), w(2, 2, 20, None), r(3, 2, 100, 110)) == "valid"
    assert verdict(w(1, 1, 0, 10), w(2, 2, 20, None), r(3, 2, 100, 110), r(3, 1, 120, 130)) == "invalid"


def test_failed_write_surely_did_not_happen() -> None:
    assert verdict(w(1, 1, 0, 10), w(2, 2, 20, 30, "fail"), r(3, 1, 100, 110)) == "valid"
    assert verdict(w(1, 1, 0, 10), w(2, 2, 20, 30, "fail"), r(3, 2, 100, 110)) == "invalid"


def test_indeterminate_reads_constrain_nothing() -> None:
    assert verdict(w(1, 1, 0, 10), r(2, 7, 20, 30, "info")) == "valid"


def test_indeterminate_cas_may_apply() -> None:
    base = [w(1, 1, 0, 10), cas(2, 1, 2, 20, 30, "info")]
    assert verdict(*base, r(3, 2, 100, 110)) == "valid"
    assert verdict(*base, r(3, 1, 100, 110)) == "valid"
    # it can only apply on 1: after write 3 it can no longer explain a read of 2
    assert verdict(*base, w(3, 3, 40, 50), r(3, 3, 60, 70), r(3, 2, 100, 110)) == "invalid"


def test_many_timed_out_writes_stay_cheap() -> None:
    # 40 timed-out writes nobody reads, then an anomaly: the search must not try 2**40 subsets
    ops = [w(1, 1, 0, 10)] + [w(100 + i, 100 + i, 20 + i, 30 + i, "info") for i in range(40)]
    ops += [w(2, 2, 100, 110), r(3, 1, 120, 130)]
    res = check(*ops, budget_s=30)
    assert res.verdict == "invalid"
    assert res.keys[0].configs < 1000


# ---------------------------------------------------------------------------------------------------------------
# Keys, nemesis events, budget


def test_keys_are_checked_independently() -> None:
    ops = [w(1, 1, 0, 10, key="a"), w(2, 1, 0, 10, key="b"), r(3, 1, 20, 30, key="a"), r(4, 2, 20, 30, key="b")]
    res = check(*ops)
    assert res.verdict == "invalid"
    assert {k.key: k.verdict for k in res.keys} == {"a": "valid", "b": "invalid"}
    assert [f["key"] for f in res.to_json()["failures"]] == ["b"]


def test_nemesis_events_are_ignored() -> None:
    nemesis = {"process": "nemesis", "type": "info", "f": "start", "value": "partition-random-halves", "time": 15}
    assert verdict(w(1, 1, 0, 10), nemesis, r(2, 1, 20, 30)) == "valid"


def test_budget_exhausted_is_unknown_never_valid() -> None:
    res = check(*pathological(), budget_s=0.0)
    assert res.verdict == "unknown"
    assert res.keys[0].reason == "time budget exhausted"
    assert res.to_json()["unknown"] == [{"key": "k", "reason": "time budget exhausted"}]


def test_configuration_budget_is_unknown_too() -> None:
    res = check(*pathological(), max_configs=1000)
    assert res.verdict == "unknown"
    assert "configurations" in (res.keys[0].reason or "")


def stale_read_and_a_valid_key(n_ops: int) -> list[HOp | dict[str, Any]]:
    """Key "a": a stale read with a window to shrink; key "b", checked after it: a valid history."""
    records = [d | {"key": "b"} for d in register_history(3, n_ops, keys=1, concurrency=5)]
    return [w(900, 1, 0, 10, key="a"), w(901, 2, 20, 30, key="a"), r(902, 1, 40, 50, key="a"), *records]


def test_a_shrink_out_of_budget_still_reports_the_key_invalid() -> None:
    res = check(*stale_read_and_a_valid_key(50), shrink_budget_s=0.0)
    assert {k.key: k.verdict for k in res.keys} == {"a": "invalid", "b": "valid"}
    (f,) = res.to_json()["failures"]
    # not shrunk: the whole prefix, which the search proved invalid
    assert (f["window_minimal"], f["window_from"], f["window_count"]) == (False, None, 3)
    shrunk = check(*stale_read_and_a_valid_key(50)).to_json()["failures"][0]
    assert (shrunk["window_minimal"], shrunk["window_from"], shrunk["window_count"]) == (True, 10, 2)


class FakeTime:
    """`time` for the checker's modules: a clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_slow_shrink_never_makes_a_later_key_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime()
    monkeypatch.setattr(linearizable, "time", clock)
    monkeypatch.setattr(wgl, "time", clock)
    real_search = linearizable.search

    def search(*args: Any, **kw: Any) -> wgl.SearchResult:
        if len(args) > 2 and args[2] is not None:  # a window of a counterexample: each takes an hour
            clock.now += 3600
        return real_search(*args, **kw)

    monkeypatch.setattr(linearizable, "search", search)
    res = check(*stale_read_and_a_valid_key(1500), budget_s=60, shrink_budget_s=10)
    assert {k.key: k.verdict for k in res.keys} == {"a": "invalid", "b": "valid"}
    (f,) = res.to_json()["failures"]
    assert f["key"] == "a" and f["op"]["result"] == 1 and f["window_count"] >= 2


def test_invalid_beats_unknown() -> None:
    ops = [*pathological(), w(201, 1, 0, 10, key="b"), r(202, 2, 20, 30, key="b")]
    res = check(*ops, max_configs=1000)
    assert {k.key: k.verdict for k in res.keys} == {"k": "unknown", "b": "invalid"}
    assert res.verdict == "invalid"
